/**
 * lib/fleet/group-rules.ts: what a rule selects (regex from the start of the host id, grain paths and globs
 * as Salt matches them), rules that are refused, patterns that cannot take exponential time, and the
 * memberships a host gets from explicit, automatic and parent groups.
 */
import { GroupIndex, compileRule, grainAt, needsGrains, ruleProblems } from "../../lib/fleet/group-rules";

const host = (id: string, grain: Record<string, unknown> = {}) => ({ _id: id, grain });

describe("compileRule", () => {
	it("matches a regex from the start of the host id, as Salt's pcre matcher", () => {
		const web = compileRule({ regex: "web-\\d+" })!;
		expect(web(host("web-01.site-a"))).toBe(true);
		expect(web(host("old-web-01"))).toBe(false);
		expect(compileRule({ regex: "web-\\d+$" })!(host("web-01.site-a"))).toBe(false);
	});

	it("matches grain paths with ':' and globs, lists by any element, every condition together", () => {
		const grains = {
			os: "ALT",
			osrelease: "10.1",
			num_cpus: 8,
			virtual: "kvm",
			roles: ["web", "cache"],
			ip_interfaces: { eth0: ["10.0.0.5"] },
			ctl: { ok: true },
		};
		expect(compileRule({ grain: { os: "ALT" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { os: "alt" } })!(host("a", grains))).toBe(false);
		expect(compileRule({ grain: { osrelease: "10.*" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { osrelease: "1?.[0-9]" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { osrelease: "[!1]*" } })!(host("a", grains))).toBe(false);
		expect(compileRule({ grain: { num_cpus: "8" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { roles: "cache" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { "ip_interfaces:eth0": "10.0.*" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { "ip_interfaces:eth0:0": "10.0.0.5" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { "ctl:ok": "True" } })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { "no:such": "*" } })!(host("a", grains))).toBe(false);
		expect(compileRule({ grain: { os: "ALT", virtual: "kvm" }, regex: "^a" })!(host("a", grains))).toBe(true);
		expect(compileRule({ grain: { os: "ALT", virtual: "xen" }, regex: "^a" })!(host("a", grains))).toBe(false);
		expect(compileRule({ grain: { os: "ALT" }, regex: "^b" })!(host("a", grains))).toBe(false);
		expect(compileRule({ grain: { os: "A.T" } })!(host("a", grains))).toBe(false);
	});

	it("reads grains as Python's str() does (True, False, None, numbers) and never matches a dict or a list inside a list", () => {
		const grains = {
			ctl: { ok: true, failed: false, none: null },
			num_cpus: 8,
			ip_interfaces: { eth0: ["10.0.0.5"] },
			nested: [["a"]],
		};
		const selects = (grain: Record<string, string>) => compileRule({ grain })!(host("a", grains));
		expect([
			selects({ "ctl:ok": "True" }),
			selects({ "ctl:ok": "true" }),
			selects({ "ctl:failed": "False" }),
			selects({ "ctl:failed": "True" }),
		]).toEqual([true, false, true, false]);
		expect([
			selects({ "ctl:none": "None" }),
			selects({ "ctl:none": "*" }),
			selects({ num_cpus: "8" }),
			selects({ num_cpus: "8.0" }),
		]).toEqual([true, true, true, false]);
		expect([
			selects({ ip_interfaces: "*" }),
			selects({ nested: "*" }),
			selects({ "nested:0": "a" }),
			selects({ "no:such": "*" }),
		]).toEqual([false, false, true, false]);
	});

	it("gives no matcher for a rule without conditions (such a group selects nothing)", () => {
		expect(compileRule({})).toBeNull();
		expect(compileRule({ grain: {} })).toBeNull();
		expect(compileRule(undefined)).toBeNull();
	});

	it("matches a pattern that takes exponential time in a backtracking engine (with RegExp this test would time out)", () => {
		const evil = compileRule({ regex: "(a+)+$" })!;
		expect(evil(host(`${"a".repeat(5000)}!`))).toBe(false);
		expect(evil(host("aaaa"))).toBe(true);
	}, 5000);
});

describe("a rule's target beyond the work a host may take", () => {
	it("does not select that host (and selects the others), where a preview answers why", () => {
		const rule = compileRule({
			target: Array.from({ length: 20 }, (_, i) => `G@flags:nope${i}`).join(" or ") + " or web-*",
		})!;
		const flags = Array.from({ length: 2000 }, (_, i) => `flag${i}`);
		expect(rule(host("web-big", { flags }))).toBe(false);
		expect(rule(host("web-01", { flags: ["a"] }))).toBe(true);
		const index = new GroupIndex([{ _id: "g1", info: { target: "G@flags:nope0 or G@flags:nope1 or web-*" } }]);
		expect(index.groupsOf(host("web-02", { flags: ["a"] }))).toEqual(["g1"]);
	});
});

describe("ruleProblems", () => {
	it("refuses what RE2 cannot match safely, bad globs and empty grain path parts", () => {
		expect(ruleProblems({ regex: "^web-\\d+" })).toBeNull();
		expect(ruleProblems({ regex: "(a)\\1" })?.regex).toMatch(/invalid regular expression/);
		expect(ruleProblems({ regex: "(?=web)" })?.regex).toMatch(/invalid regular expression/);
		expect(ruleProblems({ regex: "[" })?.regex).toMatch(/missing closing \]/);
		expect(ruleProblems({ grain: { os: "[z-a]" } })).toEqual({ "grain.os": "invalid glob: [z-a]" });
		expect(ruleProblems({ grain: { "a::b": "x" } })).toEqual({ "grain.a::b": "a grain path has an empty part" });
		expect(ruleProblems({ grain: { ":a": "x", "b:": "x", "a:b": "x" } })).toEqual({
			"grain.:a": "a grain path has an empty part",
			"grain.b:": "a grain path has an empty part",
		});
	});

	it("says what is wrong as the API answers it, field by field, and nothing for no rule", () => {
		expect(ruleProblems({ regex: "[", grain: { os: "[z-a]", osrelease: "1*" }, target: "web-* db-*" })).toEqual({
			regex: "invalid regular expression (RE2 syntax: no backreferences or lookaround): missing closing ]: `[`",
			"grain.os": "invalid glob: [z-a]",
			target: "'db-*' follows a term without 'and' or 'or'",
		});
		expect(ruleProblems({ target: "F@other" })).toEqual({
			target: "'F@other': a group's rule cannot name groups; make that group a subgroup instead",
		});
		expect(ruleProblems({ target: "N@web" }, true)).toEqual({
			target: "a nodegroup's rule cannot name nodegroups (N@)",
		});
		expect(ruleProblems({ target: "web-*" }, true)).toBeNull();
		expect(ruleProblems(undefined)).toBeNull();
		expect(ruleProblems({})).toBeNull();
	});
});

describe("grainAt", () => {
	it("walks dicts by key and lists by index", () => {
		expect(grainAt({ a: { b: [1, { c: "x" }] } }, "a:b:1:c")).toBe("x");
		expect(grainAt({ a: 1 }, "a:b")).toBeUndefined();
		expect(grainAt({ a: { b: [1, { c: "x" }] } }, "a:b:-1")).toBeUndefined();
	});

	it("indexes lists by digits only, and looks into nothing but dicts and lists", () => {
		const grains = { roles: ["web", "cache"], os: "Debian", none: null, "01": "zero-one", disks: [{ name: "vda" }] };
		expect(grainAt(grains, "roles:1")).toBe("cache");
		expect(grainAt({ list: Array.from({ length: 12 }, (_, i) => `v${i}`) }, "list:10")).toBe("v10");
		expect([
			grainAt(grains, "roles:1.0"),
			grainAt(grains, "roles: 1"),
			grainAt(grains, "roles:x1"),
			grainAt(grains, "roles:2"),
		]).toEqual([undefined, undefined, undefined, undefined]);
		// A string is not indexed, null has no keys, a dict's key "01" is not the index 1, a dict in a list is not looked into.
		expect([
			grainAt(grains, "os:1"),
			grainAt(grains, "none:a"),
			grainAt(grains, "01"),
			grainAt(grains, "disks:name"),
			grainAt(grains, "disks:0:name"),
		]).toEqual([undefined, undefined, "zero-one", undefined, "vda"]);
		expect(grainAt(grains, "roles")).toEqual(["web", "cache"]);
	});
});

describe("GroupIndex", () => {
	// root -> [web, db]; web -> [shared]; db -> [shared]; auto (regex) under web; nodegroups by rule.
	const groups = [
		{ _id: "root", subgroups: ["web", "db"] },
		{ _id: "web", subgroups: ["shared", "auto"], hosts: ["w1"] },
		{ _id: "db", subgroups: ["shared"], hosts: ["d1"] },
		{ _id: "shared", hosts: ["s1"] },
		{ _id: "auto", info: { regex: "^gpu-", grain: { virtual: "physical" } } },
		{ _id: "lonely", hosts: ["l1"] },
		{ _id: "bad", info: { regex: "(a)\\1" } },
	];
	const index = new GroupIndex(groups, [
		{ name: "alt", info: { grain: { os: "ALT" } } },
		{ name: "gpu", info: { regex: "^gpu-" } },
	]);

	it("gives each host its direct groups and every group above them, once", () => {
		expect(index.groupsOf(host("s1"))).toEqual(["db", "root", "shared", "web"]);
		expect(index.groupsOf(host("w1"))).toEqual(["root", "web"]);
		expect(index.groupsOf(host("gpu-01", { virtual: "physical" }))).toEqual(["auto", "root", "web"]);
		expect(index.groupsOf(host("gpu-02", { virtual: "kvm" }))).toEqual([]);
		expect(index.groupsOf(host("l1"))).toEqual(["lonely"]);
		expect(index.groupsOf(host("nobody"))).toEqual([]);
		expect(index.usesGrains).toBe(true);
	});

	it("reads grains when a group's rule or a nodegroup's rule needs them", () => {
		expect(new GroupIndex([{ _id: "g", info: { grain: { os: "ALT" } } }]).usesGrains).toBe(true);
		expect(
			new GroupIndex([{ _id: "g", info: { regex: "^a" } }], [{ name: "n", info: { target: "G@os:ALT" } }]).usesGrains,
		).toBe(true);
		expect(
			new GroupIndex([{ _id: "g", info: { regex: "^a" } }], [{ name: "n", info: { regex: "^b" } }]).usesGrains,
		).toBe(false);
	});

	it("follows subgroups that loop back to a group once", () => {
		const looped = new GroupIndex([
			{ _id: "a", subgroups: ["b"], hosts: ["h1"] },
			{ _id: "b", subgroups: ["a"] },
		]);
		expect(looped.groupsOf(host("h1"))).toEqual(["a", "b"]);
		expect(looped.usesGrains).toBe(false);
	});

	it("gives each host the nodegroups whose rule selects it", () => {
		expect(index.nodegroupsOf(host("gpu-01", { os: "ALT" }))).toEqual(["alt", "gpu"]);
		expect(index.nodegroupsOf(host("web-01", { os: "Debian" }))).toEqual([]);
	});
});

describe("compound targets in rules (docs/targeting.md)", () => {
	const hosts = [
		{ _id: "web-01", grain: { os: "Debian" }, nodegroups: ["web"] },
		{ _id: "web-02", grain: { os: "Ubuntu" }, nodegroups: ["web"] },
		{ _id: "db-01", grain: { os: "Debian" }, nodegroups: [] },
	];

	it("selects what the expression selects, and with regex or grain only what every condition selects", () => {
		const only = compileRule({ target: "G@os:debian or N@web" })!;
		expect(hosts.filter(only).map(h => h._id)).toEqual(["web-01", "web-02", "db-01"]);
		const both = compileRule({ regex: "web-", target: "G@os:debian" })!;
		expect(hosts.filter(both).map(h => h._id)).toEqual(["web-01"]);
	});

	it("refuses groups inside a rule, nodegroups inside a nodegroup's rule, and what cannot be evaluated, on `target`", () => {
		expect(ruleProblems({ target: "F@other and web-*" })).toEqual({
			target: expect.stringMatching(/cannot name groups; make that group a subgroup/),
		});
		expect(ruleProblems({ target: "N@web" })).toBeNull();
		expect(ruleProblems({ target: "N@web" }, true)).toEqual({
			target: expect.stringMatching(/nodegroup's rule cannot name nodegroups/),
		});
		expect(ruleProblems({ target: "web-* db-*" })).toEqual({ target: expect.stringMatching(/without 'and' or 'or'/) });
		expect(ruleProblems({ target: "E@(a)\\1" })).toEqual({
			target: expect.stringMatching(/invalid regular expression/),
		});
	});

	it("reads grains only for an expression that needs them, and puts hosts in groups whose rule reads their nodegroups", () => {
		expect(needsGrains([{ target: "web-* and N@web" }])).toBe(false);
		expect(needsGrains([{ target: "web-* and S@10.0.0.0/8" }])).toBe(true);
		expect(needsGrains([undefined, { regex: "^web" }, { grain: {} }])).toBe(false);
		expect(needsGrains([undefined, { grain: { os: "Debian" } }])).toBe(true);
		expect(needsGrains([{ regex: "^web", target: "G@os:Debian" }])).toBe(true);
		// A rule that does not compile selects nothing: no grains needed for it.
		expect(needsGrains([{ target: "F@other and G@os:Debian" }])).toBe(false);
		const index = new GroupIndex(
			[{ _id: "g-web-debian", type: 1, info: { target: "N@web and G@os:Debian" } }],
			[{ name: "web", info: { regex: "web-" } }],
		);
		const host = { _id: "web-01", grain: { os: "Debian" } };
		const nodegroups = index.nodegroupsOf(host);
		expect(nodegroups).toEqual(["web"]);
		expect(index.groupsOf({ ...host, nodegroups })).toEqual(["g-web-debian"]);
		expect(index.groupsOf({ _id: "db-01", grain: { os: "Debian" }, nodegroups: [] })).toEqual([]);
	});
});
