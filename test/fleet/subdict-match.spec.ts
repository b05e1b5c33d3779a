/**
 * lib/fleet/subdict-match.ts: the grain matching of G@/P@ agrees with a plain reading of Salt 3006's
 * salt.utils.data.subdict_match (every split, every inner match recomputed, as Salt does) on small random
 * grains and expressions, and answers in bounded time where that reading takes exponential time.
 */
import fc from "fast-check";
import { RE2JS } from "re2js";
import { globPattern } from "../../lib/fleet/compound";
import { subdictMatcher } from "../../lib/fleet/subdict-match";

/** fnmatch of a lowercased value with a lowercased glob (what both sides use to compare one value). */
const globCache = new Map<string, RE2JS | null>();
function fnmatch(value: string, pattern: string): boolean {
	if (!globCache.has(pattern)) {
		let re: RE2JS | null = null;
		try {
			re = RE2JS.compile(globPattern(pattern));
		} catch {
			re = null;
		}
		globCache.set(pattern, re);
	}
	const re = globCache.get(pattern)!;
	return re?.matches(value);
}

// ---------------------------------------------------------------- the reference: Salt's algorithm as written

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function strOf(v: unknown): string {
	switch (typeof v) {
		case "string":
			return v;
		case "number":
			return String(v);
		case "boolean":
			return v ? "True" : "False";
		default:
			return v === null || v === undefined ? "None" : JSON.stringify(v);
	}
}

/** traverse_dict_and_list, the whole path from the top each time. */
function walk(data: unknown, key: string, delimiter: string): unknown {
	let at: unknown = data;
	for (const each of key.split(delimiter)) {
		if (Array.isArray(at)) {
			if (/^-?\d+$/.test(each)) {
				const n = Number(each);
				if (n >= at.length || n < -at.length) return undefined;
				at = at[n < 0 ? at.length + n : n];
				continue;
			}
			const embedded = at.filter(isObj).find(d => Object.hasOwn(d, each));
			if (embedded === undefined) return undefined;
			at = embedded[each];
		} else if (isObj(at) && Object.hasOwn(at, each)) at = at[each];
		else return undefined;
	}
	return at;
}

function reference(data: unknown, expr: string, delimiter = ":"): boolean {
	const matchOne = (target: unknown, pattern: string) => fnmatch(strOf(target).toLowerCase(), pattern.toLowerCase());
	const dictMatch = (target: Record<string, unknown>, pattern: string): boolean => {
		const wildcard = pattern.startsWith("*:");
		if (wildcard) pattern = pattern.slice(2);
		if (pattern === "*" || Object.hasOwn(target, pattern)) return true;
		// Salt calls itself without a delimiter here: its default, ':'.
		if (reference(target, pattern)) return true;
		if (!wildcard) return false;
		return Object.keys(target).some(key => {
			const value = target[key];
			if (isObj(value)) return dictMatch(value, pattern);
			if (Array.isArray(value)) return value.some(item => matchOne(item, pattern));
			return matchOne(value, pattern);
		});
	};
	const splits = expr.split(delimiter);
	if (splits.length === 1) return false;
	for (let idx = splits.length - 1; idx > 0; idx--) {
		const key = splits.slice(0, idx).join(delimiter);
		const matchstr = key === "*" ? expr : splits.slice(idx).join(delimiter);
		const match = key === "*" ? data : walk(data, key, delimiter);
		if (match === undefined || (isObj(match) && Object.keys(match).length === 0)) continue;
		if (isObj(match)) {
			if (dictMatch(match, matchstr)) return true;
		} else if (Array.isArray(match)) {
			for (const member of match)
				if ((isObj(member) && dictMatch(member, matchstr)) || matchOne(member, matchstr)) return true;
		} else if (matchOne(match, matchstr)) return true;
	}
	return false;
}

// ---------------------------------------------------------------- the implementation under test

const compileGlob = (pattern: string) => {
	try {
		const re = RE2JS.compile(globPattern(pattern));
		return (value: string) => re.matches(value);
	} catch {
		return null;
	}
};
const matches = (data: unknown, expr: string, delimiter = ":") => subdictMatcher(expr, delimiter, compileGlob)(data);

// Few names, so that random paths often exist in random grains; `*`, `0`, `-1`, a key holding ':' and one
// holding '|' exercise the wildcard, list indexes and keys that hold a delimiter.
const KEYS = ["a", "b", "*", "0", "-1", "a:b", "b|a", "A"];
const SCALARS = ["a", "b", "x", "a:b", "A", "b|a", "True", "none", "1"];

const grains = fc.letrec<{ node: unknown }>(tie => ({
	node: fc.oneof(
		{ depthSize: "small", withCrossShrink: true },
		fc.constantFrom<unknown>(...SCALARS, 1, 0, true, false, null),
		fc.array(tie("node"), { maxLength: 3 }),
		fc.dictionary(fc.constantFrom(...KEYS), tie("node"), { maxKeys: 4 }),
	),
}));
const parts = fc.array(
	fc.constantFrom("a", "b", "*", "0", "-1", "x", "a*", "?", "[ab]", "A", "", "True", "none", "1"),
	{ minLength: 1, maxLength: 6 },
);

describe("subdictMatcher agrees with Salt's subdict_match", () => {
	it("on random grains and ':' expressions", () => {
		fc.assert(
			fc.property(grains.node, parts, (data, p) => {
				const expr = p.join(":");
				expect(matches(data, expr)).toBe(reference(data, expr));
			}),
			{ numRuns: 3000 },
		);
	});

	it("on random grains and expressions with another delimiter (the inner matches split at ':')", () => {
		fc.assert(
			fc.property(
				grains.node,
				parts,
				fc.array(fc.constantFrom("|", ":"), { minLength: 6, maxLength: 6 }),
				(data, p, cuts) => {
					const expr = p.map((part, i) => (i ? cuts[i] : "") + part).join("");
					expect(matches(data, expr, "|")).toBe(reference(data, expr, "|"));
				},
			),
			{ numRuns: 3000 },
		);
	});

	it.each<[unknown, string, boolean]>([
		// the deepest split first, and a key that holds the delimiter
		[{ foo: { bar: "baz" } }, "foo:bar:baz", true],
		[{ foo: "bar:baz" }, "foo:bar:baz", true],
		[{ "foo:bar": "baz" }, "foo:bar:baz", false],
		[{ "foo:bar": "baz" }, "foo:bar|baz", true],
		// a dict: a key, `*`, or a wildcard over its values
		[{ pkg: { nginx: "1.22" } }, "pkg:nginx", true],
		[{ pkg: { nginx: "1.22" } }, "pkg:*", true],
		[{ pkg: {} }, "pkg:*", false],
		[{ a: { b: { c: "x" } } }, "a:*:c:x", true],
		[{ a: { b: ["x", "y"] } }, "a:*:y", true],
		[{ a: { b: "q" } }, "*:*:q", true],
		// lists: members, indexes (negative too), the dicts a list holds
		[{ roles: ["web", "db"] }, "roles:DB", true],
		[{ roles: ["web", "db"] }, "roles:-1:db", true],
		[{ roles: ["web", "db"] }, "roles:2:db", false],
		[{ disks: [{ name: "vda" }] }, "disks:name:vda", true],
		// Python's str() of values
		[{ ok: false }, "ok:false", true],
		[{ n: null }, "n:none", true],
		// Salt's inner match splits at ':' whatever the term's delimiter
		[{ a: { b: { c: "x" } } }, "a|b:c:x", true],
		[{ a: { b: "c|x" } }, "a|b|c|x", true],
		// no delimiter: nothing can match
		[{ a: "a" }, "a", false],
	])("%j %s", (data, expr, expected) => {
		const delimiter = expr.includes("|") ? "|" : ":";
		expect(matches(data, expr, delimiter)).toBe(expected);
		expect(reference(data, expr, delimiter)).toBe(expected);
	});
});

describe("subdictMatcher's cost", () => {
	/** { a: { a: … { a: "x" } } }, `depth` dicts deep. */
	const chain = (depth: number): unknown => (depth === 0 ? "x" : { a: chain(depth - 1) });

	it("answers a path of many equal parts over grains as deep, where every split leads into them (exponential in Salt's reading)", () => {
		const data = chain(16);
		const expr = `${"a:".repeat(40)}nope`;
		// Salt's reading (the reference) doubles its work with every level: 0.5 s for one host 14 levels deep here,
		// so about 2 s each for these, minutes for the 100.
		const started = performance.now();
		const test = subdictMatcher(expr, ":", compileGlob);
		for (let host = 0; host < 100; host++) expect(test(data)).toBe(false);
		expect(performance.now() - started).toBeLessThan(2000);
		expect(test({ ...(data as object), nope: 1 })).toBe(false);
		expect(subdictMatcher(`${"a:".repeat(16)}x`, ":", compileGlob)(data)).toBe(true);
	});

	it("answers wildcards over wide grains once per dict and suffix", () => {
		const wide = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}`, chain(3)]));
		const started = performance.now();
		expect(subdictMatcher(`${"*:".repeat(30)}nope`, ":", compileGlob)(wide)).toBe(false);
		expect(performance.now() - started).toBeLessThan(2000);
	});
});

describe("grains a minion holds as tuples", () => {
	// As in more-2026-11-29/cache_grains_custom.json: the master's cache shows osrelease_info as a list.
	const host = { osrelease_info: [12], saltversioninfo: [3006, 0], os: "Debian" };

	it("osrelease_info is neither indexed nor matched by member, as the minions answered (none) to G@osrelease_info:0:12", () => {
		expect(matches(host, "osrelease_info:0:12")).toBe(false);
		expect(matches(host, "osrelease_info:12")).toBe(false);
		expect(matches(host, "osrelease_info|0|12", "|")).toBe(false);
		// Its str() is what a pattern meets.
		expect(matches(host, "osrelease_info:(12,)")).toBe(true);
		expect(matches({ osrelease_info: [12, 4] }, "osrelease_info:(12, 4)")).toBe(true);
	});

	it("saltversioninfo, a list on the minion too, is indexed and matched by member (G@saltversioninfo:0:3006 answered)", () => {
		expect(matches(host, "saltversioninfo:0:3006")).toBe(true);
		expect(matches(host, "saltversioninfo:3006")).toBe(true);
		expect(matches(host, "os:Debian")).toBe(true);
	});
});
