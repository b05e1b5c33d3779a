/**
 * Compound targets as Salt 3006 reads them (salt/matchers/compound_match.py, salt.utils.data.subdict_match),
 * evaluated on fleet-ctl's inventory: each case is what Salt selects among these hosts, and what fleet-ctl
 * refuses (with the reason) where Salt would select nothing because the expression is malformed.
 */
import {
	compileTarget,
	groupRefs,
	TargetError,
	MAX_GRAIN_PATH_PARTS,
	MAX_GRAIN_TERM_LENGTH,
	MAX_TARGET_DEPTH,
	MAX_TARGET_LENGTH,
	MAX_TARGET_STEPS_PER_HOST,
	MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE,
	MAX_TARGET_STEPS_PER_RESOLUTION,
	MAX_TARGET_TERMS,
	type TargetHost,
} from "../../lib/fleet/compound";
import { HOSTS, ctx } from "./compound-hosts";

const select = (expr: string) => HOSTS.filter(compileTarget(expr, ctx).test).map(h => h._id);
const refuse = (expr: string) => {
	try {
		compileTarget(expr, ctx);
	} catch (err) {
		expect(err).toBeInstanceOf(TargetError);
		return (err as Error).message;
	}
	throw new Error(`'${expr}' was not refused`);
};

describe("compound targets", () => {
	it.each<[string, string[]]>([
		// glob on the id (fnmatch, case-sensitive)
		["web-*", ["web-01", "web-02"]],
		["*web-0?", ["web-01", "web-02", "old-web-01"]],
		["web-0[!1]", ["web-02"]],
		["WEB-*", []],
		["mail.example.com", ["mail.example.com"]],
		// E@: from the start of the id
		["E@web-0[12]", ["web-01", "web-02"]],
		["E@.*web", ["web-01", "web-02", "old-web-01"]],
		["E@web-01$", ["web-01"]],
		// L@
		["L@web-01,db-01,ghost", ["web-01", "db-01"]],
		// G@: both sides lowercased, lists member by member, nested paths, dict keys, Python's str() of values
		["G@os:Debian", ["web-01", "db-01", "mail.example.com"]],
		["G@os:debian", ["web-01", "db-01", "mail.example.com"]],
		["G@os:Deb*", ["web-01", "db-01", "mail.example.com"]],
		["G@roles:web", ["web-01", "web-02", "old-web-01"]],
		["G@ip_interfaces:eth0:10.0.1.*", ["web-01"]],
		["G@ip_interfaces:*:10.0.1.*", ["web-01"]],
		["G@pkg:nginx", ["web-01"]],
		["G@pkg:*", ["web-01"]],
		["G@selinux:enabled:False", ["web-01"]],
		["G@selinux:enabled:true", ["web-02"]],
		["G@num_cpus:4", ["web-01"]],
		["G@disks:name:vda", ["web-01"]],
		["G@disks:0:size:20", ["web-01"]],
		["G@osrelease:2?.*", ["web-02"]],
		// a glob is the whole value; a regex from its start
		["G@os:Deb", []],
		// a term is refused only when none of its splits compiles: here the split at the second ':' does
		["P@):(:)", []],
		["P@os:deb", ["web-01", "db-01", "mail.example.com"]],
		// a delimiter of its own; a grain key holding the default one
		["G|@os:family|weird", ["mail.example.com"]],
		// P@: a regex from the start, lowercased
		["P@os:(debian|ubuntu)", ["web-01", "web-02", "db-01", "mail.example.com"]],
		["P@osrelease:1[12]$", ["web-01", "db-01"]],
		// S@: an address or a subnet among ipv4/ipv6
		["S@10.0.1.0/24", ["web-01", "web-02"]],
		["S@10.0.2.7", ["db-01"]],
		["S@fd00::/8", ["web-01"]],
		// the longest prefixes: one address
		["S@10.0.2.7/32", ["db-01"]],
		["S@fd00::5/128", ["web-01"]],
		// Python's ipaddress (Salt's ipcidr matcher): a netmask or a hostmask for IPv4, leading zeros in a prefix,
		// an address compared as str() of it (IPv6 compressed)
		["S@10.0.2.7/255.255.255.255", ["db-01"]],
		["S@10.0.0.0/255.255.0.0", ["web-01", "web-02", "db-01"]],
		["S@10.0.1.0/0.0.0.255", ["web-01", "web-02"]],
		["S@10.0.0.0/016", ["web-01", "web-02", "db-01"]],
		["S@fd00:0:0:0:0:0:0:5", ["web-01"]],
		["S@0.0.0.0/0", ["web-01", "web-02", "db-01", "old-web-01"]],
		["S@::ffff:10.0.1.0/120", []],
		["S@fd00::/8 and S@10.0.1.0/24", ["web-01"]],
		// an IPv6 address with a scope: str() of it keeps the scope (Salt compares it with the grains as it is)
		["S@FE80:0::1%eth0", ["mail.example.com"]],
		["S@fe80::1", []],
		["S@fe80::/10", ["mail.example.com"]],
		["S@fe80::%eth0/10", ["mail.example.com"]],
		["S@fd00:0:0:0:0:0:0:0/16", ["web-01"]],
		["S@0.0.0.0/0.0.0.0", ["web-01", "web-02", "db-01", "old-web-01"]],
		// N@: the nodegroup's members; F@: a fleet-ctl group by name or id
		["N@web", ["web-01", "web-02"]],
		["F@front", ["web-01", "db-01"]],
		["F@g-data", ["db-01"]],
		// operators with Python's precedence; `not` after a term is `and not`
		["web-* and not G@os:Ubuntu", ["web-01"]],
		["web-* not G@os:Ubuntu", ["web-01"]],
		["not web-*", ["db-01", "old-web-01", "mail.example.com"]],
		// `not` binds its term only: (not web-*) and G@os:Debian
		["not web-* and G@os:Debian", ["db-01", "mail.example.com"]],
		["not web-* or G@os:Ubuntu", ["web-02", "db-01", "old-web-01", "mail.example.com"]],
		["db-* or web-* and G@os:Ubuntu", ["web-02", "db-01"]],
		["( db-* or web-* ) and G@os:Debian", ["web-01", "db-01"]],
		["db-* or not G@os:Debian", ["web-02", "db-01", "old-web-01"]],
		["( not web-* ) and G@os:Debian", ["db-01", "mail.example.com"]],
		["( web-01 ) not ( db-01 )", ["web-01"]],
		// whitespace of any kind and length separates words; a word starting with an engine may hold parentheses
		["  web-01\t or\n db-01 ", ["web-01", "db-01"]],
		["E@web-(01|02)", ["web-01", "web-02"]],
		// an engine is a capital letter and '@' at the start of a word
		["xG@os:Debian", []],
		["g@os:Debian", []],
		["G@os:Debian and ( N@web or N@db ) and not S@10.0.2.0/24", ["web-01"]],
	])("%s", (expr, ids) => {
		expect(select(expr)).toEqual(ids);
	});

	it("names the ids it lists or spells out, so a preview can say which do not exist", () => {
		expect(compileTarget("L@web-01,ghost-1 or ghost-2 or web-*", ctx).named).toEqual(["web-01", "ghost-1", "ghost-2"]);
		expect(compileTarget("web-*", ctx).usesGrains).toBe(false);
		expect(compileTarget("web-* and G@os:Debian", ctx).usesGrains).toBe(true);
	});

	it.each<[string, RegExp]>([
		["", /empty/],
		["   ", /empty/],
		["and web-*", /cannot begin with 'and'/],
		["( or web-*", /'or' cannot follow '\('/],
		["( and web-*", /^'and' cannot follow '\('$/],
		[") web-*", /^the target cannot begin with '\)'$/],
		["( )", /^'\)' where a term is expected$/],
		["web-* and or db-*", /^'or' where a term is expected$/],
		["(web-*", /^'\(web-\*': parentheses must stand alone, separated by spaces \(as Salt reads them\): \( web-\* \)$/],
		["( web-* or db-*)", /^'db-\*\)': parentheses must stand alone/],
		["(a(b", /^'\(a\(b': parentheses must stand alone, separated by spaces \(as Salt reads them\): \( a\(b \)$/],
		["a)b)", /^'a\)b\)': parentheses must stand alone, separated by spaces \(as Salt reads them\): \( a\)b \)$/],
		["G@os:[Z-a]", /^'G@os:\[Z-a\]': invalid glob$/],
		["P@os", /^'P@os': P@ takes a grain path and a regex, separated by ':' \(G@os:Debian\)$/],
		["G|@os:Debian", /^'G\|@os:Debian': G@ takes a grain path and a glob, separated by '\|' \(G@os:Debian\)$/],
		[
			"P@os:(deb",
			/^'P@os:\(deb': invalid regular expression \(RE2 syntax: no backreferences or lookaround\): missing closing \): `\(deb`$/,
		],
		["I|@role|web", /pillar/],
		["T@x", /proxy engines/],
		["M@x", /proxy engines/],
		["S@fd00::/255.0.0.0", /CIDR/],
		["S@/8", /CIDR/],
		["web-* db-*", /'db-\*' follows a term without 'and' or 'or'/],
		["web-* and", /ends where a term is expected/],
		["not not web-01", /'not not'/],
		["( web-*", /not closed/],
		["web-* )", /closes nothing/],
		["(web-* or db-*)", /parentheses must stand alone/],
		["I@role:web", /pillar/],
		["J@role:^w", /pillar/],
		["R@%cluster", /range/],
		["X@anything", /unknown target engine X@/],
		["E@(web", /invalid regular expression/],
		["E@(a)\\1", /invalid regular expression/],
		["P@os:(deb", /invalid regular expression/],
		["G@os:[z-a]", /invalid glob/],
		["G@os", /grain path and a glob/],
		["S@10.0.0.0/33", /CIDR/],
		["S@fd00::/129", /CIDR/],
		["S@10.0.0.0/255.0.255.0", /CIDR/],
		["S@fd00::/ffff::", /CIDR/],
		// Salt refuses a subnet with host bits set (and selects nothing): issue 46
		[
			"S@10.0.1.5/24",
			/^'S@10.0.1.5\/24': 10.0.1.5\/24 has host bits set, which Salt refuses \(it selects nothing\): give the network's address$/,
		],
		["S@10.0.2.7/255.255.255.0", /10.0.2.7\/24 has host bits set/],
		["S@fd00::5/64", /fd00::5\/64 has host bits set/],
		["S@::ffff:10.0.1.5/120", /has host bits set/],
		// the host bits of IPv6 groups in hexadecimal, and of the groups before '::' when groups follow it
		["S@fd00::ab/64", /^'S@fd00::ab\/64': fd00::ab\/64 has host bits set/],
		["S@fd00:0:0:0:1::0/64", /^'S@fd00:0:0:0:1::0\/64': fd00:0:0:0:1::0\/64 has host bits set/],
		// a netmask is a whole IPv4 address (Python's ipaddress refuses three octets)
		["S@10.0.0.0/255.255.255", /CIDR/],
		["S@not-an-ip", /CIDR/],
		["F@nope", /no group has the id or name 'nope'/],
		["L|@a,b", /only G@, P@, I@ and J@ take a delimiter/],
		["G@", /nothing after G@/],
	])("refuses %j", (expr, why) => {
		expect(refuse(expr)).toMatch(why);
	});

	it("bounds the nesting, the length and the terms of an expression, each refusal naming its limit", () => {
		const deep = `${"( ".repeat(MAX_TARGET_DEPTH + 1)}web-01${" )".repeat(MAX_TARGET_DEPTH + 1)}`;
		expect(refuse(deep)).toBe("the target nests parentheses and 'not' deeper than the limit of 64 levels");
		expect(refuse(`${"not ( ".repeat(MAX_TARGET_DEPTH)}web-01${" )".repeat(MAX_TARGET_DEPTH)}`)).toMatch(
			/deeper than the limit of 64 levels/,
		);
		const ok = `${"( ".repeat(MAX_TARGET_DEPTH - 1)}web-01${" )".repeat(MAX_TARGET_DEPTH - 1)}`;
		expect(select(ok)).toEqual(["web-01"]);
		expect(refuse(`web-01 or ${"x ".repeat(6000)}`)).toBe(
			"the target is longer than the limit of 10000 characters (12010)",
		);
		expect(MAX_TARGET_LENGTH).toBe(10_000);
		// Terms: words other than operators; 100 are evaluated, 101 are not.
		const terms = (n: number) => Array.from({ length: n }, (_, i) => `web-${i}`).join(" or ");
		expect(select(terms(MAX_TARGET_TERMS))).toEqual([]);
		expect(MAX_TARGET_TERMS).toBe(100);
		expect(refuse(terms(MAX_TARGET_TERMS + 1))).toBe(
			"the target has more than the limit of 100 terms (an L@ list is one term: L@a,b,c)",
		);
		expect(select(`L@${Array.from({ length: 1000 }, (_, i) => `web-${i}`).join(",")},web-01`)).toEqual(["web-01"]);
	});

	it("bounds a grain term's length and its parts (separated by its delimiter, or ':' where Salt splits at it inside dicts)", () => {
		// 32 parts: evaluated; 33: refused, by either separator.
		expect(select(`G@${"a:".repeat(MAX_GRAIN_PATH_PARTS - 1)}x`)).toEqual([]);
		expect(MAX_GRAIN_PATH_PARTS).toBe(32);
		expect(refuse(`G@${"a:".repeat(MAX_GRAIN_PATH_PARTS)}x`)).toMatch(
			/^'G@a:a:.*…': a G@ term has 33 parts separated by ':', more than the limit of 32$/,
		);
		// The term is quoted whole up to 60 characters, past them its first 60 and '…'.
		const parts33 = (letters: number) => `G@${"a".repeat(letters)}${":".repeat(MAX_GRAIN_PATH_PARTS)}`;
		const why = ": a G@ term has 33 parts separated by ':', more than the limit of 32";
		expect(refuse(parts33(0))).toBe(`'G@::::::::::::::::::::::::::::::::'${why}`);
		expect(parts33(26)).toHaveLength(60);
		expect(refuse(parts33(26))).toBe(`'${parts33(26)}'${why}`);
		expect(refuse(parts33(27))).toBe(`'G@${"a".repeat(27)}${":".repeat(31)}…'${why}`);
		expect(refuse(`P|@${"a|".repeat(MAX_GRAIN_PATH_PARTS)}x`)).toMatch(
			/a P@ term has 33 parts separated by '\|', more than the limit of 32$/,
		);
		expect(refuse(`G|@os|${"a:".repeat(MAX_GRAIN_PATH_PARTS)}x`)).toMatch(
			/a G@ term has 33 parts separated by ':', more than the limit of 32$/,
		);
		// The finding of issue 43: refused at once, before any host is read.
		const started = Date.now();
		expect(refuse(`G@${"a:".repeat(4998)}b`)).toMatch(
			/: a G@ term is longer than 1000 characters \(the limit of a grain term\)$/,
		);
		expect(Date.now() - started).toBeLessThan(500);
		expect(MAX_GRAIN_TERM_LENGTH).toBe(1000);
		const longest = `G@os:${"x".repeat(MAX_GRAIN_TERM_LENGTH - 5)}`;
		expect(longest).toHaveLength(MAX_GRAIN_TERM_LENGTH);
		expect(select(longest)).toEqual([]);
		expect(refuse(`${longest}x`)).toMatch(/longer than 1000 characters/);
	});

	it("bounds the work of one host's evaluation, whatever the size of its grains, and says which host and limit", () => {
		expect(MAX_TARGET_STEPS_PER_HOST).toBe(100_000);
		// 2,000 flags: a term compares each (steps: their characters times the pattern's), 20 such terms too many.
		const big: TargetHost = {
			_id: "big-01",
			grain: { os: "Debian", flags: Array.from({ length: 2000 }, (_, i) => `flag${i}`), notes: "y".repeat(5000) },
		};
		const terms = (n: number) => Array.from({ length: n }, (_, i) => `G@flags:nope${i}`).join(" or ");
		expect(compileTarget(terms(1), ctx).test(big)).toBe(false);
		expect(compileTarget("G@flags:flag1999 and G@os:debian", ctx).test(big)).toBe(true);
		const refusal =
			"evaluating the target on 'big-01' takes more than the limit of 100000 steps per host (grains looked at, and characters of values times characters of the patterns they are compared with): use fewer or shorter patterns, or fewer '*' parts in grain paths";
		expect(() => compileTarget(terms(20), ctx).test(big)).toThrow(new TargetError(refusal));
		// A regex RE2 matches in time proportional to the value times the pattern: long ones on long values.
		expect(compileTarget("P@notes:(y|yy)*z", ctx).test(big)).toBe(false);
		expect(() => compileTarget(`P@notes:${"(y|yy)*".repeat(20)}z`, ctx).test(big)).toThrow(TargetError);
		// Every '*' part of a grain path is a pass over a level of the grains, once per later part.
		expect(() => compileTarget(`G@${"*:".repeat(20)}nope`, ctx).test(big)).toThrow(TargetError);
		// Each host has its own allowance: the small hosts are evaluated after the big one as before.
		const compiled = compileTarget("G@flags:flag7 or G@os:ubuntu", ctx);
		expect([big, ...HOSTS].filter(compiled.test).map(h => h._id)).toEqual(["big-01", "web-02"]);
	});

	it("bounds one resolution over the whole fleet: 20,000,000 steps plus 2,500 a host evaluated", () => {
		expect([MAX_TARGET_STEPS_PER_RESOLUTION, MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE]).toEqual([20_000_000, 2_500]);
		// Each host below its own limit, but together more than one resolution may take: refused part way. One host
		// costs 95,021 steps (docs/targeting.md): the path part `notes` 1, the comparison 20 + 5,000 characters times
		// the glob's width 19 (18 '*'); the first host also compiles the 36-character pattern, 720. The budget runs
		// out when 20,000,000 + 2,500 n < 95,021 n + 720: after 217 hosts, refused on the 218th.
		const costly = `G@notes:${"*y".repeat(18)}`;
		const hosts = Array.from(
			{ length: 300 },
			(_, i): TargetHost => ({ _id: `big-${i}`, grain: { notes: "y".repeat(4999) } }),
		);
		expect(hosts.filter(compileTarget(costly, ctx).test)).toHaveLength(300);
		const bounded = compileTarget(costly, ctx, true);
		let evaluated = 0;
		expect(() => {
			for (const h of hosts) if (bounded.test(h)) evaluated++;
		}).toThrow(
			new TargetError(
				"evaluating the target on the fleet takes more than the limit of 20000000 steps and 2500 a host on average for one resolution: use fewer or shorter patterns, fewer '*' parts in grain paths, or narrow it first (a host glob or a group before grain terms)",
			),
		);
		expect(evaluated).toBe(217);
		// Ordinary targets are far below the average: a fleet of them is never refused (on 50,000 hosts:
		// compound-fleet.spec.ts, ten seconds, too slow for the mutation run's unit specs).
		const fleet = Array.from({ length: 1000 }, (_, i) => ({ ...HOSTS[i % HOSTS.length], _id: `h-${i}` }));
		expect(fleet.filter(compileTarget("G@os:Debian and h-*", ctx, true).test)).toHaveLength(600);
	});

	it("compares a split whose glob or regex RE2 cannot compile as no match, as Salt does, instead of failing the evaluation", () => {
		const hosts: TargetHost[] = [
			{ _id: "h1", grain: { a: "[z-a]:x" } },
			{ _id: "h2", grain: { a: { "[z-a]": "x" } } },
			{ _id: "h3", grain: { a: { "(": "x" } } },
		];
		expect(hosts.filter(compileTarget("G@a:[z-a]:x", ctx).test).map(h => h._id)).toEqual(["h2"]);
		expect(hosts.filter(compileTarget("P@a:(:x", ctx).test).map(h => h._id)).toEqual(["h3"]);
	});

	it("answers a pattern that backtracks exponentially in other engines (RE2: linear time)", () => {
		const host: TargetHost = { _id: `${"a".repeat(5000)}!`, grain: { os: `${"a".repeat(5000)}!` } };
		expect(compileTarget("E@(a+)+$", ctx).test(host)).toBe(false);
		expect(compileTarget("P@os:(a|aa)+$", ctx).test(host)).toBe(false);
	});
});

describe("globs, as Python's fnmatch reads them (G@ on grain values, and host ids)", () => {
	/** Whether `G@v:<glob>` selects a host whose grain `v` is `value`. */
	const globbed = (glob: string, value: string) =>
		compileTarget(`G@v:${glob}`, ctx).test({ _id: "h", grain: { v: value } });
	it.each<[string, string, boolean]>([
		// every character other than * ? [ is itself, regex syntax included
		["a.b", "a.b", true],
		["a.b", "axb", false],
		["a+b", "a+b", true],
		["a+b", "aab", false],
		["(a|b)", "(a|b)", true],
		["(a|b)", "a", false],
		["{a}", "{a}", true],
		["x{2}", "xx", false],
		["$a^", "$a^", true],
		["a\\b", "a\\b", true],
		// * and ? span any character, a newline too; the whole value
		["a*b", "a\nb", true],
		["a?b", "a\nb", true],
		["a*", "ba", false],
		["*a", "ab", false],
		// [...] a class, [!...] its complement; `]` first is in the class; `^` and `\` are themselves in one
		["[ab]x", "bx", true],
		["[!ab]x", "bx", false],
		["[!ab]x", "cx", true],
		["[]]x", "]x", true],
		["[]", "[]", true],
		["[!]]x", "ax", true],
		["[!]]x", "]x", false],
		["[^a]x", "^x", true],
		["[^a]x", "bx", false],
		["[\\]x", "\\x", true],
		// a `[` that no `]` closes is itself
		["[x", "[x", true],
		["a[", "a[", true],
	])("%s on %j: %s", (glob, value, selected) => {
		expect(globbed(glob, value)).toBe(selected);
	});

	it("applies to host ids, and names the ids without a wildcard", () => {
		expect(compileTarget("mail.example.co?", ctx).named).toEqual([]);
		expect(HOSTS.filter(compileTarget("mail.example.co?", ctx).test).map(h => h._id)).toEqual(["mail.example.com"]);
		expect(HOSTS.filter(compileTarget("mail?example.com", ctx).test).map(h => h._id)).toEqual(["mail.example.com"]);
		expect(HOSTS.filter(compileTarget("mail.example", ctx).test).map(h => h._id)).toEqual([]);
		expect(compileTarget("L@web-01,,db-01 or web-01", ctx).named).toEqual(["web-01", "db-01"]);
	});
});

describe("what a pattern costs on a host (docs/targeting.md: 20 + the value's characters times the pattern's width)", () => {
	// One grain of 5,000 characters: a comparison costs 20 + 5,001 × width, the path part 1, compiling 20 a character.
	// Within 100,000 steps: a width of 19 (95,040 + the pattern's compilation); 20 is over.
	const host: TargetHost = { _id: "wide-01", grain: { notes: "y".repeat(5000) } };
	const costs = (expr: string) => {
		try {
			compileTarget(expr, ctx).test(host);
			return "within";
		} catch (err) {
			expect(err).toBeInstanceOf(TargetError);
			return "over";
		}
	};
	it.each<[string, "within" | "over"]>([
		// a glob: one more for each * ? [
		[`G@notes:${"*".repeat(18)}`, "within"],
		[`G@notes:${"*".repeat(19)}`, "over"],
		[`G@notes:${"?".repeat(17)}*`, "within"],
		[`G@notes:${"?".repeat(18)}*`, "over"],
		[`G@notes:${"[y]".repeat(18)}*`, "over"],
		// + | { are not a glob's
		[`G@notes:*${"+|{".repeat(30)}`, "within"],
		// nor is a counted repetition: `{99}` is those four characters in a glob
		["G@notes:*{99}", "within"],
		// a regex: one more for each * + ? |, and a counted repetition's largest count
		[`P@notes:${"y+".repeat(18)}`, "within"],
		[`P@notes:${"y+".repeat(19)}`, "over"],
		[`P@notes:${"y|".repeat(19)}`, "over"],
		[`P@notes:${"y?".repeat(19)}`, "over"],
		[`P@notes:${"y*".repeat(19)}`, "over"],
		["P@notes:y{1,18}", "within"],
		["P@notes:y{1,19}", "over"],
		["P@notes:y{19,1}", "over"],
		["P@notes:y{19}", "over"],
		["P@notes:y{19,}", "over"],
		["P@notes:y{18,}", "within"],
		[`P@notes:${"[y]".repeat(40)}`, "within"],
		// the id: a glob or a regex on a 5,000-character id
		[`E@${"y+".repeat(19)}`, "within"],
	])("%s: %s", (expr, verdict) => {
		expect(costs(expr)).toBe(verdict);
	});

	it("charges host ids too", () => {
		const long: TargetHost = { _id: "y".repeat(5000) };
		expect(compileTarget("*".repeat(18), ctx).test(long)).toBe(true);
		expect(() => compileTarget("*".repeat(19), ctx).test(long)).toThrow(
			/takes more than the limit of 100000 steps per host/,
		);
		expect(compileTarget(`E@${"y+".repeat(18)}`, ctx).test(long)).toBe(true);
		expect(() => compileTarget(`E@${"y+".repeat(19)}`, ctx).test(long)).toThrow(
			/takes more than the limit of 100000 steps per host/,
		);
	});
});

describe("groupRefs", () => {
	it("lists the groups an expression's F@ terms name, once each, for the caller to resolve", () => {
		expect(groupRefs("F@front and ( F@g-data or F@front )  not F@x\tweb-*")).toEqual(["front", "g-data", "x"]);
		expect(groupRefs("F@ or F|@front or G@F@x or web-*")).toEqual([]);
	});
});

describe("compileTarget's edges", () => {
	it("takes an expression of exactly the limit's length, and nests exactly the limit's depth", () => {
		expect(select(`L@web-01,${"x".repeat(MAX_TARGET_LENGTH - 9)}`)).toEqual(["web-01"]);
		expect(refuse(`L@web-01,${"x".repeat(MAX_TARGET_LENGTH - 8)}`)).toBe(
			"the target is longer than the limit of 10000 characters (10001)",
		);
		expect(select(`${"( ".repeat(MAX_TARGET_DEPTH)}web-01${" )".repeat(MAX_TARGET_DEPTH)}`)).toEqual(["web-01"]);
		expect(
			select(`${"not ".repeat(1)}( ${"( ".repeat(MAX_TARGET_DEPTH - 2)}web-01${" )".repeat(MAX_TARGET_DEPTH - 1)}`),
		).toEqual(["web-02", "db-01", "old-web-01", "mail.example.com"]);
	});

	it("refuses what is not a string as empty", () => {
		expect(refuse(undefined as unknown as string)).toBe("the target is empty");
	});

	it("says which data each expression reads, and names each id once", () => {
		const reads = (expr: string) => {
			const { usesGrains, usesNodegroups } = compileTarget(expr, ctx);
			return [usesGrains, usesNodegroups];
		};
		expect([
			reads("web-*"),
			reads("S@10.0.0.0/8"),
			reads("P@os:deb"),
			reads("N@web"),
			reads("E@web or L@a,b or F@front"),
		]).toEqual([
			[false, false],
			[true, false],
			[true, false],
			[false, true],
			[false, false],
		]);
		expect(compileTarget("web-01 or L@db-01,web-01 or web-01", ctx).named).toEqual(["web-01", "db-01"]);
		// A host the master placed in no nodegroup is in none.
		expect(compileTarget("N@web", ctx).test({ _id: "web-09" })).toBe(false);
	});

	it("reads no address from grains that are not a dict of lists, and no host without grains", () => {
		const hosts: TargetHost[] = [
			{ _id: "none" },
			{ _id: "null", grain: null },
			{ _id: "list", grain: ["10.0.1.5"] },
			{ _id: "text", grain: { ipv4: "10.0.1.5", ipv6: "fd00::5" } },
			{ _id: "mixed", grain: { ipv4: [5, null, "10.0.1.5"], ipv6: [1, "fd00::5"] } },
		];
		for (const expr of ["S@10.0.1.5", "S@10.0.1.0/24", "S@fd00::5", "S@fd00::/8"])
			expect([expr, hosts.filter(compileTarget(expr, ctx).test).map(h => h._id)]).toEqual([expr, ["mixed"]]);
	});

	it("skips what Salt cannot read as an address in ipv4/ipv6 (a list, a scope left empty): its minion selects nothing from it", () => {
		// Python's ip_address refuses both, so Salt's ipcidr matcher raises on them and the minion does not run.
		const hosts: TargetHost[] = [
			{ _id: "nested", grain: { ipv4: [["10.0.1.5"]], ipv6: [["fd00::5"]] } },
			{ _id: "empty-scope", grain: { ipv6: ["fd00::5%"] } },
			{ _id: "plain", grain: { ipv4: ["10.0.1.5"], ipv6: ["fd00::5"] } },
		];
		for (const expr of ["S@10.0.1.5", "S@10.0.1.0/24", "S@fd00::5", "S@fd00::/8"])
			expect([expr, hosts.filter(compileTarget(expr, ctx).test).map(h => h._id)]).toEqual([expr, ["plain"]]);
	});

	it("refuses N@ with the reason the caller gives (no such nodegroup), and evaluates the nodegroups it knows", () => {
		const withNodegroups = {
			...ctx,
			nodegroup: (name: string) => (name === "web" ? null : `no nodegroup is named '${name}'`),
		};
		expect(() => compileTarget("N@web or N@nonexistent", withNodegroups)).toThrow(
			new TargetError("'N@nonexistent': no nodegroup is named 'nonexistent'"),
		);
		expect(HOSTS.filter(compileTarget("N@web", withNodegroups).test).map(h => h._id)).toEqual(["web-01", "web-02"]);
	});

	it("allows a resolution exactly its budget of steps, and refuses one more", () => {
		// G@notes:*** (width 4) on a value of 10,620 characters: the path part 1, the comparison 20 + 10,621 × 4, in
		// all 42,505 steps; the first host also compiles the 3-character glob (60 steps), so its value is 15 shorter.
		// 500 hosts take 500 × 42,505 = 20,000,000 + 2,500 × 501: the 501st host starts with nothing left and is
		// evaluated, the 502nd is refused. Four steps more on the first host, and the 501st is refused.
		const value = "y".repeat(10_620);
		const fleet = (first: number): TargetHost[] => [
			{ _id: "h-0", grain: { notes: "y".repeat(first) } },
			...Array.from({ length: 501 }, (_, i) => ({ _id: `h-${i + 1}`, grain: { notes: value } })),
		];
		const evaluated = (hosts: TargetHost[]) => {
			const bounded = compileTarget("G@notes:***", ctx, true);
			let n = 0;
			expect(() => {
				for (const h of hosts) if (bounded.test(h)) n++;
			}).toThrow(/on the fleet takes more than the limit of 20000000 steps/);
			return n;
		};
		expect(evaluated(fleet(10_605))).toBe(501);
		expect(evaluated(fleet(10_606))).toBe(500);
	});

	it("allows exactly 100,000 steps on a host, and refuses 100,001", () => {
		// G@notes:** on a value of n characters: the path part 1, compiling the 2-character glob 40, comparing it
		// 20 + (n + 1) × 3 (width 3): 100,000 for n = 33,312.
		const at = (n: number): TargetHost => ({ _id: `n-${n}`, grain: { notes: "y".repeat(n) } });
		expect(compileTarget("G@notes:**", ctx).test(at(33_312))).toBe(true);
		expect(() => compileTarget("G@notes:**", ctx).test(at(33_313))).toThrow(
			/on 'n-33313' takes more than the limit of 100000 steps per host/,
		);
	});
});
