/**
 * lib/eve/json-depth.ts: JSON nested deeper than 64 levels (objects and arrays) is refused, checked on the raw
 * text before any parser (docs/security.md, "Hardening"); `where` counts parentheses too (Eve's
 * Python-like syntax).
 */
import { nestingDepth, tooDeep, MAX_JSON_DEPTH } from "../../lib/eve/json-depth";

describe("nestingDepth", () => {
	it("counts nesting outside strings, escaped quotes included", () => {
		expect(nestingDepth("")).toBe(0);
		expect(nestingDepth('"abc"')).toBe(0);
		expect(nestingDepth("[]")).toBe(1);
		expect(nestingDepth("{}")).toBe(1);
		expect(nestingDepth("[{}]")).toBe(2);
		expect(nestingDepth("{[{[]}]}")).toBe(4);
		expect(nestingDepth('{"a":[{"b":"[[[[{{"}]}')).toBe(3);
		expect(nestingDepth('["\\"[[["]')).toBe(1);
		// a backslash escapes the character after it, whatever it is: here the backslash itself
		expect(nestingDepth('["\\\\",[[]]]')).toBe(3);
		// after a string ends, brackets count again
		expect(nestingDepth('["x",["y",[]]]')).toBe(3);
	});

	it("reads bytes as it reads text", () => {
		expect(nestingDepth(Buffer.from('{"a":{"b":{}}}'))).toBe(3);
		expect(nestingDepth(Buffer.from('["\\"[[["]'))).toBe(1);
		expect(nestingDepth(new Uint8Array(Buffer.from("((a))")), Infinity, true)).toBe(2);
		expect(nestingDepth(new Uint8Array(Buffer.from("((a))")))).toBe(0);
	});

	it("counts parentheses only when asked (Eve's Python-style where)", () => {
		expect(nestingDepth("((a == 1))", Infinity, true)).toBe(2);
		expect(nestingDepth("((a == 1))")).toBe(0);
		expect(nestingDepth("([{()}])", Infinity, true)).toBe(4);
		expect(nestingDepth('("((")', Infinity, true)).toBe(1);
		expect(nestingDepth("()()()", Infinity, true)).toBe(1);
		expect(nestingDepth("(a(b(c", Infinity, true)).toBe(3);
		expect(nestingDepth("[)[)[", Infinity, false)).toBe(3);
		expect(nestingDepth("[a[b[c")).toBe(3);
	});

	it("measures siblings separately and never goes below zero on stray closers", () => {
		expect(nestingDepth("[][][]")).toBe(1);
		expect(nestingDepth("[[]][[[]]]")).toBe(3);
		expect(nestingDepth("]][[")).toBe(2);
		expect(nestingDepth("}}{{{")).toBe(3);
		expect(nestingDepth("))((", Infinity, true)).toBe(2);
		expect(nestingDepth("))((")).toBe(0);
	});

	it("stops as soon as it passes the limit, answering one more than the limit", () => {
		expect(nestingDepth("[[[[[[[[]]]]]]]]", 2)).toBe(3);
		expect(nestingDepth("[[]]", 2)).toBe(2);
		expect(nestingDepth("[[[]]]", 2)).toBe(3);
		expect(nestingDepth("((((", 1, true)).toBe(2);
	});
});

describe("tooDeep", () => {
	it(`accepts exactly ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
		expect(MAX_JSON_DEPTH).toBe(64);
		expect(tooDeep("[".repeat(64) + "]".repeat(64))).toBe(false);
		expect(tooDeep("[".repeat(65) + "]".repeat(65))).toBe(true);
		expect(tooDeep("{".repeat(65))).toBe(true);
		expect(tooDeep(Buffer.from("[".repeat(65)))).toBe(true);
		// Siblings do not add up.
		expect(tooDeep("[" + "[]".repeat(1000) + "]")).toBe(false);
	});

	it("counts parentheses only when asked", () => {
		expect(tooDeep("(".repeat(65))).toBe(false);
		expect(tooDeep("(".repeat(65), true)).toBe(true);
		expect(tooDeep("(".repeat(64), true)).toBe(false);
	});
});
