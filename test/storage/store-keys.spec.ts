/**
 * The key encoding at the storage boundary (lib/storage/store-keys.ts): every JSON key, with arbitrary unicode
 * and the characters NeDB and MongoDB refuse, comes back exactly as it went in, value and key order
 * alike; what is stored passes NeDB's own key check; nothing reaches Object.prototype; a value with
 * nothing to encode is handed on as it is; no nesting overflows the stack.
 */
import fc from "fast-check";
import {
	decodeAll,
	decodeKey,
	decodeKeys,
	encodeFilter,
	encodeKey,
	encodeKeys,
	encodePath,
	encodePaths,
	encodeSort,
	encodeUpdate,
	keyNeedsEncoding,
	setOwn,
} from "../../lib/storage/store-keys";

import * as nedbModel from "../../lib/storage/nedb-internals";

type Json = null | boolean | number | string | Date | Json[] | { [key: string]: Json };

/** Keys that are trouble somewhere: for the stores, for the escape itself, for JavaScript. */
const NASTY = [
	"$",
	"$x",
	"$$date",
	"$in",
	".",
	"a.b",
	"..",
	"%",
	"%%",
	"%25",
	"%2E",
	"%2e",
	"%24",
	"%24x",
	"%00",
	"%5F_proto__",
	"%5F",
	"__proto__",
	"constructor",
	"prototype",
	"toString",
	"hasOwnProperty",
	"\0",
	"nul\0",
	"",
	"0",
	"ключ.$",
	"🙂.%",
];
/** Strings made of the characters the escape cares about, so that `%2E`-like sequences turn up. */
const tricky = fc.string({
	unit: fc.constantFrom("$", ".", "%", "2", "5", "E", "e", "4", "0", "F", "_", "\0", "a", "é", "🙂"),
	maxLength: 8,
});
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
		fc
			.array(fc.tuple(key, tie("value")), { maxLength: 6, depthIdentifier: "json" })
			.map(entries => Object.fromEntries(entries) as Json),
	),
})).value;

/** A document: an object at the top, as stores hold. */
const doc = fc
	.array(fc.tuple(key, json), { maxLength: 8 })
	.map(entries => Object.fromEntries(entries) as Record<string, Json>);

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
		fc.assert(
			fc.property(key, k => {
				expect(decodeKey(encodeKey(k))).toBe(k);
			}),
			{ numRuns: 5000 },
		);
	});

	it("encodes into a name NeDB and MongoDB store as a field", () => {
		fc.assert(
			fc.property(key, k => {
				expect(storable(encodeKey(k))).toBe(true);
			}),
			{ numRuns: 5000 },
		);
	});

	it("never makes two keys one", () => {
		fc.assert(
			fc.property(key, key, (a, b) => {
				if (a !== b) expect(encodeKey(a)).not.toBe(encodeKey(b));
			}),
			{ numRuns: 5000 },
		);
	});

	it("leaves a key alone when it needs no change, so existing records and indexes keep working", () => {
		fc.assert(
			fc.property(key, k => k.includes("%") || !storable(k) || encodeKey(k) === k),
			{ numRuns: 5000 },
		);
		for (const k of ["name", "pending", "grain", "ip_interfaces", "a$b", "ключ", "", "constructor", "_id"])
			expect(encodeKey(k)).toBe(k);
	});

	it("writes the documented escapes", () => {
		expect(["%", ".", "$x", "a$", "\0", "__proto__", "$.%"].map(encodeKey)).toEqual([
			"%25",
			"%2E",
			"%24x",
			"a$",
			"%00",
			"%5F_proto__",
			"%24%2E%25",
		]);
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
			$or: [{ "x.$y": { $in: [{ $k: 1 }, "s"] } }, { n: { $not: { $eq: { "%": 1 } } } }],
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
			$set: { "pending.by": { $x: 1, "a.b": [{ ["__proto__"]: 2 }] }, "kwarg.$y": 3 },
			$unset: { "kwarg.%": "" as const },
			$inc: { n: 1 },
			$push: { log: { $each: [{ "a.b": 1 }], $slice: -5 }, other: { $x: 1 } },
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

describe("keys, one by one", () => {
	it("keyNeedsEncoding: a leading $, a . % or NUL anywhere, or __proto__ itself", () => {
		for (const k of ["$", "$x", "a.b", ".", "%", "a%", "\0", "a\0b", "__proto__"])
			expect([k, keyNeedsEncoding(k)]).toEqual([k, true]);
		for (const k of [
			"",
			"name",
			"a$",
			"a$b",
			"_proto_",
			"__proto__x",
			"x__proto__",
			"constructor",
			"prototype",
			"ключ",
			"🙂",
		])
			expect([k, keyNeedsEncoding(k)]).toEqual([k, false]);
	});

	it("paths: each segment encoded, whatever makes it need it", () => {
		expect(encodePath("a\0b.c")).toBe("a%00b.c");
		expect(encodePath("__proto__.x")).toBe("%5F_proto__.x");
		expect(encodePath("x.__proto__")).toBe("x.%5F_proto__");
		expect(encodePath("a%b.$c")).toBe("a%25b.%24c");
		expect(encodePath("x__proto__.y")).toBe("x__proto__.y");
		expect(encodePath("a.b$")).toBe("a.b$");
		expect(encodePaths(["name", "kwarg.$x"])).toEqual(["name", "kwarg.%24x"]);
		const plain = ["name", "pending.by"];
		expect(encodePaths(plain)).toBe(plain);
	});

	it("setOwn sets __proto__ as an own, writable, enumerable, deletable key, and any other key as usual", () => {
		const obj: Record<string, unknown> = {};
		setOwn(obj, "__proto__", { polluted: true });
		setOwn(obj, "a", 1);
		expect(Object.getPrototypeOf(obj)).toBe(Object.prototype);
		expect(Object.getOwnPropertyDescriptor(obj, "__proto__")).toEqual({
			value: { polluted: true },
			writable: true,
			enumerable: true,
			configurable: true,
		});
		expect(Object.getOwnPropertyDescriptor(obj, "a")).toEqual({
			value: 1,
			writable: true,
			enumerable: true,
			configurable: true,
		});
		setOwn(obj, "__proto__", 2);
		expect(Object.getOwnPropertyDescriptor(obj, "__proto__")?.value).toBe(2);
		expect(delete obj.__proto__).toBe(true);
		expect(Object.keys(obj)).toEqual(["a"]);
	});
});

describe("documents, case by case", () => {
	it("values that are not containers are handed on as they are, null included", () => {
		for (const v of [null, undefined, 0, "a.b", true]) {
			expect(encodeKeys(v)).toBe(v);
			expect(decodeKeys(v)).toBe(v);
		}
		const when = new Date(0);
		expect(encodeKeys(when)).toBe(when);
	});

	it("only plain objects (and null-prototype ones) are walked: dates and class instances are left as they are, own keys and all", () => {
		const instance = Object.assign(Object.create({ kind: "K" }), { $x: 1 });
		const doc = { a: instance, when: new Date(0) };
		const stored = encodeKeys(doc);
		expect(stored).toBe(doc);
		expect(stored.a).toBe(instance);
		const bare = Object.assign(Object.create(null), { $x: 1 });
		expect(JSON.stringify(encodeKeys({ a: bare }))).toBe('{"a":{"%24x":1}}');
		expect(JSON.stringify(decodeKeys({ a: Object.assign(Object.create(null), { "%24x": 1 }) }))).toBe('{"a":{"$x":1}}');
	});

	it("look before they copy: a document whose keys all stay is handed on without listing any object's keys", () => {
		const grains = { os: "ALT", "%41": "not an escape", ip4: { eth0: ["10.0.0.1"] }, list: [{ a: 1 }, [{ b: 2 }]] };
		const small = { x: 1, "%2": 2 };
		const keys = jest.spyOn(Object, "keys");
		let results: unknown[];
		let calls: number;
		try {
			results = [decodeKeys(grains), encodeKeys({ x: [1] }), decodeKeys(small)];
		} finally {
			calls = keys.mock.calls.length;
			keys.mockRestore();
		}
		expect(calls).toBe(0);
		expect(results[0]).toBe(grains);
		expect(results[1]).toEqual({ x: [1] });
		expect(results[2]).toBe(small);
	});

	it("encode every element and key that changes, however many there are in one array or object", () => {
		const doc = {
			list: [{ $a: 1 }, "x", { $b: 2 }, { c: 3 }, { $d: 4 }],
			obj: { $e: 1, f: 2, "g.h": 3, i: { $j: 4 } },
		};
		expect(JSON.stringify(encodeKeys(doc))).toBe(
			'{"list":[{"%24a":1},"x",{"%24b":2},{"c":3},{"%24d":4}],"obj":{"%24e":1,"f":2,"g%2Eh":3,"i":{"%24j":4}}}',
		);
		expect(decodeKeys(encodeKeys(doc))).toEqual(doc);
		expect(JSON.stringify(doc)).toBe(
			'{"list":[{"$a":1},"x",{"$b":2},{"c":3},{"$d":4}],"obj":{"$e":1,"f":2,"g.h":3,"i":{"$j":4}}}',
		);
	});

	it("decodeAll decodes a database answer in place, replacing only the documents that change", () => {
		const plain = { _id: "a", n: 1 };
		const stored = { _id: "b", "%24x": { "a%2Eb": 1 } };
		const docs = [plain, stored];
		expect(decodeAll(docs)).toBe(docs);
		expect(docs[0]).toBe(plain);
		expect(docs[1]).toEqual({ _id: "b", $x: { "a.b": 1 } });
		expect(stored).toEqual({ _id: "b", "%24x": { "a%2Eb": 1 } });
		expect(decodeAll([])).toEqual([]);
	});
});

describe("filters, operator by operator", () => {
	it("every logical operator holds queries; other $-keys at the top are not ours to rewrite", () => {
		expect(
			encodeFilter({ $and: [{ "a.$b": 1 }], $or: [{ "c.$d": 1 }, "x"], $nor: [{ "e.$f": { "g.h": 1 } }] }),
		).toEqual({
			$and: [{ "a.%24b": 1 }],
			$or: [{ "c.%24d": 1 }, "x"],
			$nor: [{ "e.%24f": { "g%2Eh": 1 } }],
		});
		const raw = { $where: "this.$x", $expr: { $eq: ["$a.b", 1] }, $and: "not a list" };
		expect(encodeFilter(raw)).toBe(raw);
	});

	it("literal values, also inside $all, $eq, $elemMatch's operators and $not, have their keys encoded", () => {
		expect(encodeFilter({ tags: { $all: [{ "a.b": 1 }, "x"] } })).toEqual({ tags: { $all: [{ "a%2Eb": 1 }, "x"] } });
		expect(encodeFilter({ tags: { $all: { "a.b": 1 } } })).toEqual({ tags: { $all: { "a%2Eb": 1 } } });
		expect(encodeFilter({ list: { $elemMatch: { $eq: { "a.b": 1 } } } })).toEqual({
			list: { $elemMatch: { $eq: { "a%2Eb": 1 } } },
		});
		expect(encodeFilter({ list: { $elemMatch: { "k.$x": { $in: [{ $y: 1 }] } } } })).toEqual({
			list: { $elemMatch: { "k.%24x": { $in: [{ "%24y": 1 }] } } },
		});
		expect(encodeFilter({ list: { $elemMatch: "x" } })).toEqual({ list: { $elemMatch: "x" } });
		expect(encodeFilter({ a: null, b: { $exists: true }, c: { $size: 2 } })).toEqual({
			a: null,
			b: { $exists: true },
			c: { $size: 2 },
		});
	});

	it("are walked to 64 levels; deeper is a bug in our code, refused", () => {
		const TOO_DEEP = "a filter or update nested more than 64 levels deep cannot be stored";
		const ands = (n: number): Record<string, unknown> => (n === 0 ? { a: 1 } : { $and: [ands(n - 1)] });
		expect(() => encodeFilter(ands(64))).not.toThrow();
		expect(() => encodeFilter(ands(65))).toThrow(TOO_DEEP);
		// a field's condition is one level below its query, each $not one more
		const nots = (n: number): unknown => (n === 0 ? { $eq: 1 } : { $not: nots(n - 1) });
		expect(() => encodeFilter({ a: nots(63) })).not.toThrow();
		expect(() => encodeFilter({ a: nots(64) })).toThrow(TOO_DEEP);
		const elemMatches = (n: number): unknown => (n === 0 ? 1 : { $elemMatch: { k: elemMatches(n - 1) } });
		expect(() => encodeFilter({ a: elemMatches(32) })).not.toThrow();
		expect(() => encodeFilter({ a: elemMatches(33) })).toThrow(TOO_DEEP);
		const pull = (n: number): unknown => (n === 0 ? { $eq: 1 } : { $not: pull(n - 1) });
		expect(() => encodeUpdate({ $pull: { a: pull(63) } })).not.toThrow();
		expect(() => encodeUpdate({ $pull: { a: pull(64) } })).toThrow(TOO_DEEP);
	});
});

describe("updates, operator by operator", () => {
	it("leaves $unset's, $inc's and $currentDate's values alone and encodes $rename's target path", () => {
		const update = {
			$unset: { "a.$x": "" as const },
			$inc: { "n.$y": 1 },
			$currentDate: { "t.$z": { $type: "date" } },
			$rename: { "old.$a": "new.$b", plain: 5 },
		};
		expect(encodeUpdate(update)).toEqual({
			$unset: { "a.%24x": "" },
			$inc: { "n.%24y": 1 },
			$currentDate: { "t.%24z": { $type: "date" } },
			$rename: { "old.%24a": "new.%24b", plain: 5 },
		});
	});

	it("$push and $addToSet: $each's values are encoded, the other modifiers left as they are", () => {
		const update = {
			$push: { log: { $each: [{ "a.b": 1 }], $sort: { "x.y": 1 }, $slice: -5, $position: 0 } },
			$addToSet: { tags: { $each: [{ $k: 1 }] }, one: { $k: 2 } },
		};
		expect(encodeUpdate(update)).toEqual({
			$push: { log: { $each: [{ "a%2Eb": 1 }], $sort: { "x.y": 1 }, $slice: -5, $position: 0 } },
			$addToSet: { tags: { $each: [{ "%24k": 1 }] }, one: { "%24k": 2 } },
		});
		// not modifiers: a value to push, whose keys are encoded
		expect(encodeUpdate({ $push: { log: { $each: "x", $slice: 1 } } })).toEqual({
			$push: { log: { "%24each": "x", "%24slice": 1 } },
		});
	});

	it("$pull: a condition on the elements (operators, or a query on each element)", () => {
		expect(encodeUpdate({ $pull: { items: { $eq: { "a.b": 1 } }, docs: { "k.$x": { $gt: 1 } }, plain: "x" } })).toEqual(
			{
				$pull: { items: { $eq: { "a%2Eb": 1 } }, docs: { "k.%24x": { $gt: 1 } }, plain: "x" },
			},
		);
	});

	it("keeps an update as it is when nothing in it changes, an operator left undefined included", () => {
		const update = { $set: { a: 1 }, $unset: undefined, $inc: { n: 1 } };
		expect(encodeUpdate(update)).toBe(update);
	});
});
