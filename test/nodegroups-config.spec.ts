/**
 * The configured nodegroup definitions (NODEGROUPS) take any key as data: `constructor` and `prototype`
 * may name a nodegroup or a grain; only `__proto__` is refused, with a message naming the setting (the
 * schema's dict check would drop that grain condition silently, widening the nodegroup).
 */
import { readNodegroupDefinitions } from "../services/nodegroups/nodegroups.service";

describe("nodegroup definitions", () => {
	const read = (text: string) => readNodegroupDefinitions({ nodegroups: text, nodegroupsFile: "" });

	it("keep `constructor` and `prototype` keys, as names and as grains", () => {
		const defs = read('{"prototype":{"regex":"^web-"},"odd":{"grain":{"constructor":"x*","ctl:prototype":"y"}}}');
		expect(JSON.stringify(defs)).toBe(
			'[{"name":"prototype","info":{"regex":"^web-"}},{"name":"odd","info":{"grain":{"constructor":"x*","ctl:prototype":"y"}}}]',
		);
	});

	it("refuse `__proto__` anywhere, saying where it comes from", () => {
		expect(() => read('{"web":{"grain":{"__proto__":"x","os":"ALT"}}}')).toThrow(/NODEGROUPS.*"__proto__"/);
		expect(() => read('{"__proto__":{"regex":"^web-"}}')).toThrow(/NODEGROUPS.*"__proto__"/);
	});

	it("take a rule with `target`, and Salt's own spelling (a compound string or a list), nested N@ expanded", () => {
		expect(read('{"web":{"target":"web-*"}}')).toEqual([{ name: "web", info: { target: "web-*" } }]);
		expect(read('{"a":"web-* and G@os:Debian","b":"N@a or db-*","c":["db-01","db-02"]}')).toEqual([
			{ name: "a", info: { target: "web-* and G@os:Debian" } },
			{ name: "b", info: { target: "( web-* and G@os:Debian ) or db-*" } },
			{ name: "c", info: { target: "L@db-01,db-02" } },
		]);
		expect(() => read('{"a":"N@b","b":"N@a"}')).toThrow(/nodegroup 'a' is invalid: .*refers to itself/);
		expect(() => read('{"a":"I@role:web"}')).toThrow(/nodegroup 'a' is invalid/);
		expect(() => read('["web-*"]')).toThrow(/NODEGROUPS must be a JSON object/);
	});
});
