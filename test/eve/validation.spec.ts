/**
 * lib/eve/validation.ts: issues are built from client keys, so a key named `__proto__` must land in the
 * issues as data and never reach Object.prototype (it did: every object in the process grew a property).
 */
import { compileSchema } from "../../lib/eve/validation";

describe("compileSchema issues", () => {
	afterEach(() => {
		delete (Object.prototype as Record<string, unknown>).polluted;
	});

	it("reports a malformed string under a `__proto__` key as an own key of the issues, polluting nothing", () => {
		const check = compileSchema({ kwarg: { type: "object", optional: true } }, { wellFormed: true });
		const issues = check(JSON.parse('{"kwarg":{"__proto__":{"polluted":"\\ud800"}}}'));
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
		expect(JSON.stringify(issues)).toBe(
			'{"kwarg":{"__proto__":{"polluted":"must be well-formed Unicode (a lone UTF-16 surrogate is not)"}}}',
		);
	});

	it("reports unknown fields named `__proto__` or `constructor` as data too", () => {
		const check = compileSchema({ name: { type: "string" } });
		const issues = check(JSON.parse('{"name":"x","constructor":1,"__proto__":{"polluted":1}}'));
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
		expect(issues).not.toBeNull();
		expect(Object.keys(issues!)).toEqual(expect.arrayContaining(["constructor"]));
	});
});

describe("compileSchema and null", () => {
	const check = compileSchema({
		name: { type: "string", optional: true },
		note: "string|optional",
		until: { type: "date", optional: true, nullable: true },
		anything: { type: "any", optional: true },
		info: {
			type: "object",
			optional: true,
			props: { regex: { type: "string", optional: true }, grain: { type: "object", optional: true, nullable: true } },
		},
		steps: {
			type: "array",
			optional: true,
			items: { type: "object", props: { cmd: { type: "string", optional: true } } },
		},
		required: { type: "string" },
	});

	it("refuses null for a field whose rule does not say nullable, at any depth, as Eve does", () => {
		expect(
			check({ required: "x", name: null, note: null, info: { regex: null }, steps: [{ cmd: "a" }, { cmd: null }] }),
		).toEqual({
			name: "null value not allowed",
			note: "null value not allowed",
			info: { regex: "null value not allowed" },
			steps: { 1: { cmd: "null value not allowed" } },
		});
		expect(check({ required: null })).toEqual({ required: "null value not allowed" });
	});

	it("takes null where the rule allows it (nullable, any)", () => {
		expect(check({ required: "x", until: null, anything: null, info: { grain: null } })).toBeNull();
	});
});
