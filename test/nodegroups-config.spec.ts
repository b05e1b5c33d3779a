/**
 * The configured nodegroup definitions (NODEGROUPS) take any key as data: `constructor` and `prototype`
 * may name a nodegroup or a grain; only `__proto__` is refused, with a message naming the setting (the
 * schema's dict check would drop that grain condition silently, widening the nodegroup).
 */
import { readNodegroupDefinitions } from "../services/nodegroups.service";

describe("nodegroup definitions", () => {
	const saved = { ...process.env };
	afterEach(() => {
		process.env = { ...saved };
	});
	const read = (text: string) => {
		Object.assign(process.env, { NODEGROUPS: text, NODEGROUPS_FILE: "" });
		return readNodegroupDefinitions();
	};

	it("keep `constructor` and `prototype` keys, as names and as grains", () => {
		const defs = read('{"prototype":{"regex":"^web-"},"odd":{"grain":{"constructor":"x*","ctl:prototype":"y"}}}');
		expect(JSON.stringify(defs)).toBe('[{"name":"prototype","info":{"regex":"^web-"}},{"name":"odd","info":{"grain":{"constructor":"x*","ctl:prototype":"y"}}}]');
	});

	it("refuse `__proto__` anywhere, saying where it comes from", () => {
		expect(() => read('{"web":{"grain":{"__proto__":"x","os":"ALT"}}}')).toThrow(/NODEGROUPS.*"__proto__"/);
		expect(() => read('{"__proto__":{"regex":"^web-"}}')).toThrow(/NODEGROUPS.*"__proto__"/);
	});
});
