/**
 * The key encoding at the storage boundary (lib/store-keys.ts): every JSON key, with arbitrary unicode
 * and the characters NeDB and MongoDB refuse, comes back exactly as it went in, value and key order
 * alike; what is stored passes NeDB's own key check; nothing reaches Object.prototype; a value with
 * nothing to encode is handed on as it is; no nesting overflows the stack.
 */
import fc from "fast-check";
import { decodeKey, decodeKeys, encodeFilter, encodeKey, encodeKeys, encodePath, encodeSort, encodeUpdate } from "../lib/store-keys";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const nedbModel: { checkObject(doc: unknown): void } = require("@seald-io/nedb/lib/model");

type Json = null | boolean | number | string | Date | Json[] | { [key: string]: Json };

/** Keys that are trouble somewhere: for the stores, for the escape itself, for JavaScript. */
const NASTY = ["$", "$x", "$$date", "$in", ".", "a.b", "..", "%", "%%", "%25", "%2E", "%2e", "%24", "%24x", "%00", "%5F_proto__", "%5F", "__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "\0", "nul\0", "", "0", "ключ.$", "🙂.%"];
/** Strings made of the characters the escape cares about, so that `%2E`-like sequences turn up. */
const tricky = fc.string({ unit: fc.constantFrom("$", ".", "%", "2", "5", "E", "e", "4", "0", "F", "_", "\0", "a", "é", "🙂"), maxLength: 8 });
const key = fc.oneof(fc.constantFrom(...NASTY), tricky, fc.string({ unit: "binary", maxLength: 12 }));

/** Objects built from entries: `Object.fromEntries` makes `__proto__` an own key, as JSON.parse does. */
const json: fc.Arbitrary<Json> = fc.letrec<{ value: Json }>(tie => ({
	value: fc.oneof(
		{ maxDepth: 5, depthIdentifier: "json" },
		fc.constant(null),
		fc.boolean(),
		fc.integer(),
		fc.double({ noNaN: true, noDefaultInfinity: true }),
		fc.string({ unit: "binary" }),
		fc.date({ noInvalidDate: true }),
		fc.array(tie("value"), { maxLength: 4, depthIdentifier: "json" }),
		fc.array(fc.tuple(key, tie("value")), { maxLength: 6, depthIdentifier: "json" }).map(entries => Object.fromEntries(entries) as Json),
	),
})).value;

/** A document: an object at the top, as stores hold. */
const doc = fc.array(fc.tuple(key, json), { maxLength: 8 }).map(entries => Object.fromEntries(entries) as Record<string, Json>);

/** JSON text that also tells dates apart, and keeps key order: "exactly the same" means the same text. */
function text(value: unknown): string {
	return JSON.stringify(value, function (this: Record<string, unknown>, k: string, v: unknown) {
		const raw = this[k];
		return raw instanceof Date ? { date: raw.getTime() } : v;
	});
}

function deepFreeze<T>(value: T): T {
	const stack: unknown[] = [value];
	while (stack.length) {
		const v = stack.pop();
		if (v !== null && typeof v === "object" && !(v instanceof Date) && !Object.isFrozen(v)) {
			Object.freeze(v);
			for (const k of Object.keys(v)) stack.push((v as Record<string, unknown>)[k]);
		}
	}
	return value;
}

/** Every key, at any depth, of the objects in `value`. */
function allKeys(value: unknown): string[] {
	const out: string[] = [];
	const stack: unknown[] = [value];
	while (stack.length) {
		const v = stack.pop();
		if (Array.isArray(v)) stack.push(...v);
		else if (v !== null && typeof v === "object" && !(v instanceof Date)) {
			expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
			for (const k of Object.keys(v)) {
				out.push(k);
				stack.push((v as Record<string, unknown>)[k]);
			}
		}
	}
	return out;
}

function storable(k: string): boolean {
	return !k.startsWith("$") && !k.includes(".") && !k.includes("\0") && k !== "__proto__";
}

afterAll(() => {
	// nothing anywhere reached the prototype every object shares
	expect(Object.keys(Object.prototype)).toEqual([]);
	expect(({} as Record<string, unknown>).p).toBeUndefined();
});

describe("one key", () => {
	it("decodes back to exactly what was encoded, whatever the string", () => {
		fc.assert(fc.property(key, k => decodeKey(encodeKey(k)) === k), { numRuns: 5000 });
	});

	it("encodes into a name NeDB and MongoDB store as a field", () => {
		fc.assert(fc.property(key, k => storable(encodeKey(k))), { numRuns: 5000 });
	});

	it("never makes two keys one", () => {
		fc.assert(fc.property(key, key, (a, b) => a === b || encodeKey(a) !== encodeKey(b)), { numRuns: 5000 });
	});

	it("leaves a key alone when it needs no change, so existing records and indexes keep working", () => {
		fc.assert(fc.property(key, k => k.includes("%") || !storable(k) || encodeKey(k) === k), { numRuns: 5000 });
		for (const k of ["name", "pending", "grain", "ip_interfaces", "a$b", "ключ", "", "constructor", "_id"]) expect(encodeKey(k)).toBe(k);
	});

	it("writes the documented escapes", () => {
		expect(["%", ".", "$x", "a$", "\0", "__proto__", "$.%"].map(encodeKey)).toEqual(["%25", "%2E", "%24x", "a$", "%00", "%5F_proto__", "%24%2E%25"]);
		// only the escapes it writes are read back: other `%` sequences are text
		expect(["%41", "%2e", "a%24", "%5F", "%"].map(decodeKey)).toEqual(["%41", "%2e", "a%24", "%5F", "%"]);
	});
});

describe("documents", () => {
	it("come back exactly (values, key order, dates) from any JSON with any keys, stored in a form NeDB accepts", () => {
		fc.assert(
			fc.property(doc, original => {
				const before = text(original);
				const stored = encodeKeys(deepFreeze(original));
				nedbModel.checkObject(stored);
				expect(allKeys(stored).every(storable)).toBe(true);
				const back = decodeKeys(stored);
				expect(text(back)).toBe(before);
				// (not toStrictEqual: it takes an own key "constructor" for the object's type)
				expect(back).toEqual(original);
				allKeys(back);
			}),
			{ numRuns: 1000 },
		);
	});

	it("keep `__proto__` as an own key, and reach no prototype", () => {
		const original = JSON.parse('{"__proto__":{"p":1,"__proto__":{"q":2}},"a":[{"__proto__":null}]}');
		const back = decodeKeys(encodeKeys(original));
		expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
		expect(Object.hasOwn(back, "__proto__")).toBe(true);
		expect(JSON.stringify(back)).toBe('{"__proto__":{"p":1,"__proto__":{"q":2}},"a":[{"__proto__":null}]}');
		expect(back.p).toBeUndefined();
	});

	it("are handed on as they are when no key changes, and copy only the branch that does", () => {
		const plain = { _id: "h", grain: { os: "ALT", ip4_interfaces: { eth0: ["10.0.0.1"] } }, tags: [{ a: 1 }] };
		expect(encodeKeys(plain)).toBe(plain);
		expect(decodeKeys(plain)).toBe(plain);
		const mixed = { _id: "h", grain: plain.grain, tags: plain.tags, kwarg: { keep: { x: 1 }, deep: { "a.b": 1 } } };
		const stored = encodeKeys(mixed);
		expect(stored).not.toBe(mixed);
		expect(stored.grain).toBe(plain.grain);
		expect(stored.tags).toBe(plain.tags);
		expect(stored.kwarg.keep).toBe(mixed.kwarg.keep);
		expect(stored.kwarg.deep).toEqual({ "a%2Eb": 1 });
		expect(mixed.kwarg.deep).toEqual({ "a.b": 1 });
	});

	it("nest as deep as they like without overflowing the stack", () => {
		let deep: Record<string, unknown> = { "$leaf.": [1] };
		for (let i = 0; i < 200_000; i++) deep = { [i % 2 ? "a.b" : "c"]: i % 3 ? deep : [deep] };
		const stored = encodeKeys(deep);
		let back = decodeKeys(stored) as Record<string, unknown>;
		for (let i = 200_000 - 1; i >= 0; i--) {
			const next = back[i % 2 ? "a.b" : "c"];
			back = (i % 3 ? next : (next as unknown[])[0]) as Record<string, unknown>;
		}
		expect(back).toEqual({ "$leaf.": [1] });
	});
});

describe("field paths, filters and updates", () => {
	it("encode each segment of a path, never the dots between them", () => {
		expect(encodePath("pending.by")).toBe("pending.by");
		expect(encodePath("vpn_representation.otp_secret")).toBe("vpn_representation.otp_secret");
		expect(encodePath("kwarg.$x.__proto__.%")).toBe("kwarg.%24x.%5F_proto__.%25");
		const sort: Array<[string, 1 | -1]> = [["name", 1]];
		expect(encodeSort(sort)).toBe(sort);
		expect(encodeSort([["kwarg.$x", -1]])).toEqual([["kwarg.%24x", -1]]);
	});

	it("leave operators alone and encode the keys of literal values", () => {
		const filter = {
			"pending.run": "r1",
			kwarg: { "a.b": 1, x$: 2, "%": 3 },
			args: { $eq: { $x: 2 } },
			$or: [{ "x.$y": { $in: [{ "$k": 1 }, "s"] } }, { n: { $not: { $eq: { "%": 1 } } } }],
			nested: { $elemMatch: { "k.$l": { $gte: 1 } } },
			scores: { $elemMatch: { $gt: 4 } },
			tags: { $all: [{ $elemMatch: { "a.b": 1 } }] },
		};
		expect(encodeFilter(filter)).toEqual({
			"pending.run": "r1",
			kwarg: { "a%2Eb": 1, x$: 2, "%25": 3 },
			args: { $eq: { "%24x": 2 } },
			$or: [{ "x.%24y": { $in: [{ "%24k": 1 }, "s"] } }, { n: { $not: { $eq: { "%25": 1 } } } }],
			nested: { $elemMatch: { "k.%24l": { $gte: 1 } } },
			scores: { $elemMatch: { $gt: 4 } },
			tags: { $all: [{ $elemMatch: { "a.b": 1 } }] },
		});
		const plain = { _id: { $in: ["a", "b"] }, status: "up", "info.os": "ALT" };
		expect(encodeFilter(plain)).toBe(plain);
	});

	it("encode update paths by segment and the values they write throughout", () => {
		const update = {
			$set: { "pending.by": { "$x": 1, "a.b": [{ ["__proto__"]: 2 }] }, "kwarg.$y": 3 },
			$unset: { "kwarg.%": "" as const },
			$inc: { n: 1 },
			$push: { log: { $each: [{ "a.b": 1 }], $slice: -5 }, other: { "$x": 1 } },
			$addToSet: { tags: "t" },
			$pull: { subgroups: { $in: ["a"] }, items: { "k.$": 1 } },
		};
		expect(JSON.stringify(encodeUpdate(update))).toBe(
			JSON.stringify({
				$set: { "pending.by": { "%24x": 1, "a%2Eb": [{ "%5F_proto__": 2 }] }, "kwarg.%24y": 3 },
				$unset: { "kwarg.%25": "" },
				$inc: { n: 1 },
				$push: { log: { $each: [{ "a%2Eb": 1 }], $slice: -5 }, other: { "%24x": 1 } },
				$addToSet: { tags: "t" },
				$pull: { subgroups: { $in: ["a"] }, items: { "k.%24": 1 } },
			}),
		);
		const plain = { $set: { status: "up", "pending.by": { id: "x" } } };
		expect(encodeUpdate(plain)).toBe(plain);
	});
});
