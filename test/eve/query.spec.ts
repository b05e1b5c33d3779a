/**
 * lib/eve/query.ts: what a client may put in `where`, `sort`, `projection`, `embedded` and the paging
 * parameters, and what the links repeat (docs/api.md, "Lists and items"; docs/security.md, "Hardening").
 * Every allowlist is tested by what it refuses; every expectation is a literal written from the docs.
 */
import { EveError } from "../../lib/eve/errors";
import {
	QueryArgs,
	checkFieldPath,
	checkFilter,
	filterMentions,
	filterTouches,
	linkQuery,
	parseEmbedded,
	parsePaging,
	parseProjection,
	parseSort,
	parseWhere,
	pathsOverlap,
	queryFlag,
	rejectProtoKeys,
} from "../../lib/eve/query";

/** The 400 message a call answers; fails when it answers anything else. */
function refusal(fn: () => unknown): string {
	let caught: unknown;
	try {
		fn();
	} catch (err) {
		caught = err;
	}
	expect(caught).toBeInstanceOf(EveError);
	expect((caught as EveError).code).toBe(400);
	return (caught as EveError).message;
}

/** An object whose keys are own properties whatever they are (as JSON.parse makes them). */
const own = (entries: Array<[string, unknown]>) => Object.fromEntries(entries);

const DATE = "Sun, 22 Nov 2026 05:45:03 GMT";
const DATE_VALUE = new Date(Date.UTC(2026, 10, 22, 5, 45, 3));

describe("where: the operators allowed (docs/api.md), each with what it becomes", () => {
	it.each([
		['{"n":{"$eq":1}}', { n: { $eq: 1 } }],
		['{"n":{"$ne":1}}', { n: { $ne: 1 } }],
		['{"n":{"$gt":1}}', { n: { $gt: 1 } }],
		['{"n":{"$gte":1}}', { n: { $gte: 1 } }],
		['{"n":{"$lt":1}}', { n: { $lt: 1 } }],
		['{"n":{"$lte":1}}', { n: { $lte: 1 } }],
		['{"n":{"$in":[1,"a",null]}}', { n: { $in: [1, "a", null] } }],
		['{"n":{"$nin":[1,2]}}', { n: { $nin: [1, 2] } }],
		['{"n":{"$all":["a","b"]}}', { n: { $all: ["a", "b"] } }],
		['{"n":{"$exists":true}}', { n: { $exists: true } }],
		['{"n":{"$exists":false}}', { n: { $exists: false } }],
		['{"n":{"$exists":1}}', { n: { $exists: true } }],
		['{"n":{"$exists":0}}', { n: { $exists: false } }],
		['{"n":{"$size":0}}', { n: { $size: 0 } }],
		['{"n":{"$size":3}}', { n: { $size: 3 } }],
		['{"n":{"$not":{"$gt":1,"$lt":0}}}', { n: { $not: { $gt: 1, $lt: 0 } } }],
		['{"n":{"$elemMatch":{"$gt":1,"$lt":5}}}', { n: { $elemMatch: { $gt: 1, $lt: 5 } } }],
		[
			'{"n":{"$elemMatch":{"$eq":1,"$ne":2,"$gte":0,"$lte":9,"$in":[1],"$nin":[3],"$exists":true}}}',
			{ n: { $elemMatch: { $eq: 1, $ne: 2, $gte: 0, $lte: 9, $in: [1], $nin: [3], $exists: true } } },
		],
		['{"nested":{"$elemMatch":{"k":"x","v":{"$gt":1}}}}', { nested: { $elemMatch: { k: "x", v: { $gt: 1 } } } }],
		['{"$and":[{"a":1},{"b":{"$gt":2}}]}', { $and: [{ a: 1 }, { b: { $gt: 2 } }] }],
		['{"$or":[{"a":1}]}', { $or: [{ a: 1 }] }],
		['{"$nor":[{"a":1},{"$or":[{"b":2}]}]}', { $nor: [{ a: 1 }, { $or: [{ b: 2 }] }] }],
		[
			'{"name":"alpha","info.os":"ALT","_id":"x","a-b.c_d.0":1}',
			{ name: "alpha", "info.os": "ALT", _id: "x", "a-b.c_d.0": 1 },
		],
		['{"kwarg":{"a.b":1,"list":[{"x":null}]}}', { kwarg: { "a.b": 1, list: [{ x: null }] } }],
		['{"tags":["web","db"]}', { tags: ["web", "db"] }],
		['{"flag":true,"none":null,"n":-1.5}', { flag: true, none: null, n: -1.5 }],
	])("%s", (where, want) => {
		expect(parseWhere(where)).toEqual(want);
	});

	it("turns HTTP-dates into dates wherever a value is compared, as Eve does", () => {
		expect(parseWhere(`{"when":"${DATE}"}`)).toEqual({ when: DATE_VALUE });
		expect(parseWhere(`{"when":{"$gt":"${DATE}"}}`)).toEqual({ when: { $gt: DATE_VALUE } });
		expect(parseWhere(`{"when":{"$in":["${DATE}","x"]}}`)).toEqual({ when: { $in: [DATE_VALUE, "x"] } });
		expect(parseWhere(`{"v":{"at":["${DATE}"]}}`)).toEqual({ v: { at: [DATE_VALUE] } });
		expect(parseWhere(`{"when":{"$not":{"$lt":"${DATE}"}}}`)).toEqual({ when: { $not: { $lt: DATE_VALUE } } });
		// not an HTTP-date (or an impossible one): a string
		expect(parseWhere('{"when":"Sun, 31 Nov 2026 05:45:03 GMT"}')).toEqual({ when: "Sun, 31 Nov 2026 05:45:03 GMT" });
		expect(parseWhere('{"when":"2026-11-22"}')).toEqual({ when: "2026-11-22" });
	});

	it("returns a copy: nothing of the client's objects is handed on", () => {
		const input = { a: { $in: [1] }, b: { c: 1 }, $or: [{ d: 1 }] };
		const out = checkFilter(input);
		expect(out).toEqual(input);
		expect(out).not.toBe(input);
		expect(out.a).not.toBe(input.a);
		expect((out.a as { $in: unknown }).$in).not.toBe(input.a.$in);
		expect(out.b).not.toBe(input.b);
		expect((out.$or as unknown[])[0]).not.toBe(input.$or[0]);
	});

	it("keeps dates and other non-JSON scalars it is given as they are", () => {
		const when = new Date(0);
		expect(checkFilter({ when })).toEqual({ when: new Date(0) });
		expect(checkFilter({ when: { $lt: when } })).toEqual({ when: { $lt: new Date(0) } });
	});
});

describe("where: what the allowlists refuse (400, saying why)", () => {
	it.each(["$where", "$function", "$accumulator", "$expr", "$regex", "$text", "$jsonSchema"])(
		"the banned operator %s, at the top, on a field, under $not and $elemMatch",
		op => {
			expect(refusal(() => parseWhere(`{"${op}":"1"}`))).toBe(`query operator ${op} is not allowed`);
			expect(refusal(() => parseWhere(`{"a":{"${op}":"1"}}`))).toBe(`query operator ${op} is not allowed`);
			expect(refusal(() => parseWhere(`{"a":{"$not":{"${op}":"1"}}}`))).toBe(`query operator ${op} is not allowed`);
			expect(refusal(() => parseWhere(`{"a":{"$elemMatch":{"${op}":"1"}}}`))).toBe(
				`query operator ${op} is not allowed`,
			);
			expect(refusal(() => parseWhere(`{"a":{"$elemMatch":{"k":{"${op}":"1"}}}}`))).toBe(
				`query operator ${op} is not allowed`,
			);
			expect(refusal(() => parseWhere(`{"$or":[{"a":{"${op}":"1"}}]}`))).toBe(`query operator ${op} is not allowed`);
		},
	);

	it.each([
		"$mod",
		"$type",
		"$options",
		"$comment",
		"$near",
		"$geoWithin",
		"$lookup",
		"$set",
		"$",
		"$$x",
		"$IN",
		"$eq ",
		"$bitsAllSet",
	])("the unknown operator %j, at the top and on a field", op => {
		expect(refusal(() => parseWhere(JSON.stringify({ [op]: 1 })))).toBe(`unknown or unsupported query operator ${op}`);
		expect(refusal(() => parseWhere(JSON.stringify({ a: { [op]: 1 } })))).toBe(
			`unknown or unsupported query operator ${op}`,
		);
	});

	it("names a long unknown operator by its first 60 characters", () => {
		const op = "$" + "x".repeat(70);
		expect(refusal(() => parseWhere(JSON.stringify({ a: { [op]: 1 } })))).toBe(
			`unknown or unsupported query operator $${"x".repeat(59)}…`,
		);
		expect(refusal(() => parseWhere(JSON.stringify({ a: { ["$" + "y".repeat(59)]: 1 } })))).toBe(
			`unknown or unsupported query operator $${"y".repeat(59)}`,
		);
	});

	it.each([
		"$eq",
		"$ne",
		"$gt",
		"$gte",
		"$lt",
		"$lte",
		"$in",
		"$nin",
		"$exists",
		"$not",
		"$all",
		"$size",
		"$elemMatch",
	])("the field operator %s at the top of a query", op => {
		expect(refusal(() => parseWhere(`{"${op}":[{"a":1}]}`))).toBe(
			`operator ${op} is not allowed at the top of a query`,
		);
		expect(refusal(() => parseWhere(`{"$or":[{"${op}":1}]}`))).toBe(
			`operator ${op} is not allowed at the top of a query`,
		);
	});

	it.each(["$and", "$or", "$nor"])("the logical operator %s in a field's condition, under $not or $elemMatch", op => {
		expect(refusal(() => parseWhere(`{"a":{"${op}":[{"b":1}]}}`))).toBe(`query operator ${op} is not allowed here`);
		expect(refusal(() => parseWhere(`{"a":{"$not":{"${op}":[{"b":1}]}}}`))).toBe(
			`query operator ${op} is not allowed here`,
		);
		expect(refusal(() => parseWhere(`{"a":{"$elemMatch":{"${op}":[{"b":1}]}}}`))).toBe(
			`query operator ${op} is not allowed here`,
		);
	});

	it.each(["$all", "$size", "$not", "$elemMatch"])(
		"inside $elemMatch on scalars, where only comparisons make sense: %s",
		op => {
			const arg = { $all: "[1]", $size: "1", $not: '{"$gt":1}', $elemMatch: '{"$gt":1}' }[op];
			expect(refusal(() => parseWhere(`{"tags":{"$elemMatch":{"${op}":${arg}}}}`))).toBe(
				`query operator ${op} is not allowed here`,
			);
			expect(refusal(() => parseWhere(`{"tags":{"$elemMatch":{"$gt":0,"${op}":${arg}}}}`))).toBe(
				`query operator ${op} is not allowed here`,
			);
		},
	);

	it("a logical operator without a non-empty array of queries", () => {
		expect(refusal(() => parseWhere('{"$and":[]}'))).toBe("$and needs a non-empty array of queries");
		expect(refusal(() => parseWhere('{"$or":{"a":1}}'))).toBe("$or needs a non-empty array of queries");
		expect(refusal(() => parseWhere('{"$nor":"x"}'))).toBe("$nor needs a non-empty array of queries");
		expect(refusal(() => parseWhere('{"$or":[1]}'))).toBe("`where` must be a JSON object");
		expect(refusal(() => parseWhere('{"$and":[{"a":1},[{"b":1}]]}'))).toBe("`where` must be a JSON object");
	});

	it("operator arguments of the wrong kind", () => {
		expect(refusal(() => parseWhere('{"a":{"$in":1}}'))).toBe("$in needs an array");
		expect(refusal(() => parseWhere('{"a":{"$nin":"x"}}'))).toBe("$nin needs an array");
		expect(refusal(() => parseWhere('{"a":{"$all":{"0":1}}}'))).toBe("$all needs an array");
		for (const bad of ['"yes"', "2", "-1", "null", "[]", '"true"'])
			expect(refusal(() => parseWhere(`{"a":{"$exists":${bad}}}`))).toBe("$exists needs true or false");
		for (const bad of ["-1", "1.5", '"1"', "null", "true"])
			expect(refusal(() => parseWhere(`{"a":{"$size":${bad}}}`))).toBe("$size needs a non-negative integer");
		for (const bad of ["1", '"x"', "[]", '{"b":1}', '{"$gt":1,"b":1}', "null"])
			expect(refusal(() => parseWhere(`{"a":{"$not":${bad}}}`))).toBe("$not needs an object of operators");
		for (const bad of ["{}", "[1]", "1", "null", '"x"'])
			expect(refusal(() => parseWhere(`{"a":{"$elemMatch":${bad}}}`))).toBe("$elemMatch needs a non-empty object");
	});

	it("operators mixed with fields in one condition", () => {
		expect(refusal(() => parseWhere('{"a":{"$gt":1,"b":2}}'))).toBe(
			"cannot mix operators and fields in one condition ('b')",
		);
		expect(refusal(() => parseWhere('{"a":{"b":2,"$gt":1}}'))).toBe(
			"cannot mix operators and fields in one condition ('b')",
		);
		expect(refusal(() => parseWhere('{"a":{"$elemMatch":{"k":1,"$gt":1}}}'))).toBe(
			"cannot mix operators and fields in one condition ('k')",
		);
		expect(refusal(() => parseWhere(JSON.stringify({ a: { $gt: 1, ["b".repeat(70)]: 2 } })))).toBe(
			`cannot mix operators and fields in one condition ('${"b".repeat(60)}…')`,
		);
	});

	it("a key starting with $ inside a compared value (it would read as an operator)", () => {
		expect(refusal(() => parseWhere('{"a":{"b":{"$gt":1}}}'))).toBe("operator $gt is not allowed inside a value");
		expect(refusal(() => parseWhere('{"a":[{"$x":1}]}'))).toBe("operator $x is not allowed inside a value");
		expect(refusal(() => parseWhere('{"a":{"$in":[{"$where":"1"}]}}'))).toBe(
			"operator $where is not allowed inside a value",
		);
		expect(refusal(() => parseWhere('{"a":{"$eq":{"k":{"$ne":1}}}}'))).toBe(
			"operator $ne is not allowed inside a value",
		);
		expect(refusal(() => parseWhere(JSON.stringify({ a: { b: { ["$" + "z".repeat(70)]: 1 } } })))).toBe(
			`operator $${"z".repeat(59)}… is not allowed inside a value`,
		);
	});

	it("__proto__, constructor and prototype anywhere: as a field, in a path, inside a compared value", () => {
		for (const k of ["__proto__", "constructor", "prototype"]) {
			// refused while the JSON is read
			expect(refusal(() => parseWhere(`{"${k}":1}`))).toBe(`invalid key '${k}'`);
			expect(refusal(() => parseWhere(`{"a":{"${k}":1}}`))).toBe(`invalid key '${k}'`);
			expect(refusal(() => parseWhere(`{"a":{"$in":[{"b":{"${k}":1}}]}}`))).toBe(`invalid key '${k}'`);
			// a segment of a path
			expect(refusal(() => parseWhere(`{"a.${k}.b":1}`))).toBe(`invalid field name 'a.${k}.b'`);
			expect(refusal(() => parseWhere(`{"a.${k}":1}`))).toBe(`invalid field name 'a.${k}'`);
			// a filter built from a client's data
			expect(refusal(() => checkFilter(own([[k, 1]])))).toBe(`invalid field name '${k}'`);
			expect(refusal(() => checkFilter({ a: own([[k, 1]]) }))).toBe(`invalid key '${k}' inside a value`);
			expect(refusal(() => checkFilter({ a: { $in: [own([["b", own([[k, 1]])]])] } }))).toBe(
				`invalid key '${k}' inside a value`,
			);
			// the Python-like syntax
			expect(refusal(() => parseWhere(`${k} == 1`))).toBe(`invalid field name '${k}'`);
		}
		expect(
			refusal(() =>
				checkFilter({
					a: own([
						["__proto__".padEnd(70, "x"), 1],
						["__proto__", 1],
					]),
				}),
			),
		).toBe("invalid key '__proto__' inside a value");
		expect(Object.keys(Object.prototype)).toEqual([]);
	});

	it.each([
		["a b", "invalid field name 'a b'"],
		["1a", "invalid field name '1a'"],
		["-a", "invalid field name '-a'"],
		["a..b", "invalid field name 'a..b'"],
		["a.", "invalid field name 'a.'"],
		[".a", "invalid field name '.a'"],
		["a.$b", "invalid field name 'a.$b'"],
		["a$", "invalid field name 'a$'"],
		["é", "invalid field name 'é'"],
		["", "invalid field name ''"],
		["a\u0000", "invalid field name 'a\u0000'"],
		["a\nb", "invalid field name 'a\nb'"],
	])("the field name %j", (field, why) => {
		expect(refusal(() => parseWhere(JSON.stringify({ [field]: 1 })))).toBe(why);
	});

	it("field paths up to 200 characters, named by their first 60 when refused", () => {
		const longest = "a".repeat(100) + "." + "b".repeat(99);
		expect(parseWhere(JSON.stringify({ [longest]: 1 }))).toEqual({ [longest]: 1 });
		const tooLong = longest + "c";
		expect(refusal(() => parseWhere(JSON.stringify({ [tooLong]: 1 })))).toBe(`invalid field name '${"a".repeat(60)}…'`);
		expect(refusal(() => parseWhere(JSON.stringify({ ["c".repeat(60) + " "]: 1 })))).toBe(
			`invalid field name '${"c".repeat(60)}…'`,
		);
		expect(refusal(() => parseWhere(JSON.stringify({ ["c".repeat(59) + " "]: 1 })))).toBe(
			`invalid field name '${"c".repeat(59)} '`,
		);
	});

	it("checkFieldPath names what it checks", () => {
		expect(() => checkFieldPath("a.b_c-d.e1")).not.toThrow();
		expect(refusal(() => checkFieldPath("a b"))).toBe("invalid field name 'a b'");
		expect(refusal(() => checkFieldPath("a b", "sort field"))).toBe("invalid sort field name 'a b'");
	});

	it("a `where` that is valid JSON but not an object", () => {
		for (const w of ["[1]", "[]", "1", "-1", '"x"', "true", "false", "null", "[{}]"])
			expect(refusal(() => parseWhere(w))).toBe("`where` must be a JSON object");
		expect(refusal(() => checkFilter(new Date(0)))).toBe("`where` must be a JSON object");
		expect(refusal(() => checkFilter(undefined))).toBe("`where` must be a JSON object");
	});

	it("nothing for an absent or blank `where`", () => {
		expect(parseWhere(undefined)).toEqual({});
		expect(parseWhere("")).toEqual({});
		expect(parseWhere("  \t ")).toEqual({});
		expect(parseWhere("  {} ")).toEqual({});
		expect(parseWhere(' {"a":1}\n')).toEqual({ a: 1 });
		expect(parseWhere("  a == 1 \n")).toEqual({ a: 1 });
		expect(parseWhere("\ta == 1 and b == 'x'\t")).toEqual({ $and: [{ a: 1 }, { b: "x" }] });
	});
});

describe("where: its bounds (16 KiB, 64 levels before parsing, 12 levels and 2000 nodes after)", () => {
	it("16 KiB exactly is read; one character more is refused before anything parses it", () => {
		const exact = '{"a":"' + "x".repeat(16 * 1024 - 8) + '"}';
		expect(exact.length).toBe(16384);
		expect(parseWhere(exact)).toEqual({ a: "x".repeat(16376) });
		expect(refusal(() => parseWhere('{"a":"' + "x".repeat(16 * 1024 - 7) + '"}'))).toBe("`where` is too long");
		expect(refusal(() => parseWhere("{" + " ".repeat(16 * 1024)))).toBe("`where` is too long");
	});

	it("more than 64 levels of brackets or parentheses is refused before either parser", () => {
		expect(refusal(() => parseWhere("(".repeat(65) + "a == 1" + ")".repeat(65)))).toBe("`where` is nested too deeply");
		expect(parseWhere("(".repeat(64) + "a == 1" + ")".repeat(64))).toEqual({ a: 1 });
		expect(refusal(() => parseWhere('{"a":' + "[".repeat(64) + "]".repeat(64) + "}"))).toBe(
			"`where` is nested too deeply",
		);
		// unbalanced: the bound holds before JSON.parse would fail
		expect(refusal(() => parseWhere("[".repeat(65)))).toBe("`where` is nested too deeply");
	});

	it("12 levels of nesting are accepted, 13 refused, whatever makes them", () => {
		const arrays = (n: number) => '{"a":' + "[".repeat(n) + "1" + "]".repeat(n) + "}";
		expect(parseWhere(arrays(11))).toEqual({ a: [[[[[[[[[[[1]]]]]]]]]]] });
		expect(refusal(() => parseWhere(arrays(12)))).toBe("`where` is nested too deeply");
		const objects = (n: number) => '{"a":' + '{"b":'.repeat(n) + "1" + "}".repeat(n) + "}";
		expect(() => parseWhere(objects(11))).not.toThrow();
		expect(refusal(() => parseWhere(objects(12)))).toBe("`where` is nested too deeply");
		const ands = (n: number) => '{"$and":['.repeat(n) + '{"a":1}' + "]}".repeat(n);
		expect(() => parseWhere(ands(11))).not.toThrow();
		expect(refusal(() => parseWhere(ands(12)))).toBe("`where` is nested too deeply");
		const nots = (n: number) => '{"a":' + '{"$not":'.repeat(n) + '{"$gt":1}' + "}".repeat(n) + "}";
		expect(() => parseWhere(nots(10))).not.toThrow();
		expect(refusal(() => parseWhere(nots(11)))).toBe("`where` is nested too deeply");
		const elemMatches = (n: number) => '{"a":' + '{"$elemMatch":{"b":'.repeat(n) + "1" + "}}".repeat(n) + "}";
		expect(() => parseWhere(elemMatches(5))).not.toThrow();
		expect(refusal(() => parseWhere(elemMatches(6)))).toBe("`where` is nested too deeply");
		// values inside $in: the operator object, then each value
		// $elemMatch on scalars: the query, the field's operators, $elemMatch's operators, the value
		const scalarElemMatch = (n: number) => '{"$and":['.repeat(n) + '{"a":{"$elemMatch":{"$gt":1}}}' + "]}".repeat(n);
		expect(() => parseWhere(scalarElemMatch(9))).not.toThrow();
		expect(refusal(() => parseWhere(scalarElemMatch(10)))).toBe("`where` is nested too deeply");
		const ins = (n: number) => '{"a":{"$in":[' + "[".repeat(n) + "1" + "]".repeat(n) + "]}}";
		expect(() => parseWhere(ins(10))).not.toThrow();
		expect(refusal(() => parseWhere(ins(11)))).toBe("`where` is nested too deeply");
	});

	it("2000 nodes (each query, condition, object, array and value) are accepted, 2001 refused", () => {
		const list = (n: number) => `{"a":[${Array.from({ length: n }, () => "1").join(",")}]}`;
		// the query, the array and 1998 values
		expect((parseWhere(list(1998)).a as unknown[]).length).toBe(1998);
		expect(refusal(() => parseWhere(list(1999)))).toBe("`where` is too large");
		// the query, the field's operators and 1998 values
		const inList = (n: number) => `{"a":{"$in":[${Array.from({ length: n }, () => "1").join(",")}]}}`;
		expect((parseWhere(inList(1998)).a as { $in: unknown[] }).$in.length).toBe(1998);
		expect(refusal(() => parseWhere(inList(1999)))).toBe("`where` is too large");
		const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_";
		const name = (i: number) => LETTERS[i % 53] + LETTERS[Math.floor(i / 53)];
		const fields = (n: number) => `{${Array.from({ length: n }, (_, i) => `"${name(i)}":1`).join(",")}}`;
		expect(Object.keys(parseWhere(fields(1999))).length).toBe(1999);
		expect(refusal(() => parseWhere(fields(2000)))).toBe("`where` is too large");
		// one checker per filter: two filters of 1500 nodes each are fine
		expect(Object.keys(checkFilter(JSON.parse(fields(1499)))).length).toBe(1499);
		expect(Object.keys(checkFilter(JSON.parse(fields(1499)))).length).toBe(1499);
	});
});

describe("where: Eve's Python-like syntax", () => {
	it.each([
		['name == "alpha"', { name: "alpha" }],
		["name == 'alpha'", { name: "alpha" }],
		['name != "alpha"', { name: { $ne: "alpha" } }],
		["n < 1", { n: { $lt: 1 } }],
		["n <= 1", { n: { $lte: 1 } }],
		["n > 1", { n: { $gt: 1 } }],
		["n >= 1", { n: { $gte: 1 } }],
		["n==-1.5e3", { n: -1500 }],
		["n == 2E-1", { n: 0.2 }],
		["n == 10", { n: 10 }],
		["n == 1.25", { n: 1.25 }],
		["n == 1e10", { n: 1e10 }],
		["n == 2.5E+12", { n: 2.5e12 }],
		["n == -0.125e-10", { n: -0.125e-10 }],
		["info.os == 'ALT'", { "info.os": "ALT" }],
		["flag == True", { flag: true }],
		["flag == False", { flag: false }],
		["v == None", { v: null }],
		['_id == ObjectId("5f0c3a1b2c3d4e5f6a7b8c9d")', { _id: "5f0c3a1b2c3d4e5f6a7b8c9d" }],
		['s == "a\\"b\\\\c"', { s: 'a"b\\c' }],
		["s == 'it\\'s'", { s: "it's" }],
		['s == "a b, (c) == d"', { s: "a b, (c) == d" }],
		["a == 1 and b == 2", { $and: [{ a: 1 }, { b: 2 }] }],
		["a == 1 and b == 2 and c == 3", { $and: [{ a: 1 }, { b: 2 }, { c: 3 }] }],
		["a == 1 or b == 2", { $or: [{ a: 1 }, { b: 2 }] }],
		["a == 1 or b == 2 and c == 3", { $or: [{ a: 1 }, { $and: [{ b: 2 }, { c: 3 }] }] }],
		["a == 1 and b == 2 or c == 3", { $or: [{ $and: [{ a: 1 }, { b: 2 }] }, { c: 3 }] }],
		["(a == 1 or b == 2) and c == 3", { $and: [{ $or: [{ a: 1 }, { b: 2 }] }, { c: 3 }] }],
		["((a == 1))", { a: 1 }],
		["a==1   and   (b!=2)", { $and: [{ a: 1 }, { b: { $ne: 2 } }] }],
	])("%s", (where, want) => {
		expect(parseWhere(where)).toEqual(want);
	});

	it("reads datetime(y, m, d[, h[, mi[, s]]]) as a UTC date", () => {
		expect(parseWhere("when > datetime(2024,1,2)")).toEqual({ when: { $gt: new Date("2024-01-02T00:00:00Z") } });
		expect(parseWhere("when > datetime(2024, 12, 31, 23)")).toEqual({
			when: { $gt: new Date("2024-12-31T23:00:00Z") },
		});
		expect(parseWhere("when > datetime(2024,1,2,3,4)")).toEqual({ when: { $gt: new Date("2024-01-02T03:04:00Z") } });
		expect(parseWhere("when == datetime(2024,1,2,3,4,5)")).toEqual({ when: new Date("2024-01-02T03:04:05Z") });
		expect(parseWhere(`when == "${DATE}"`)).toEqual({ when: DATE_VALUE });
	});

	it.each([
		"a ==",
		"== 1",
		"a 1",
		"a == 1 b",
		"a == 1 b == 2",
		"a == b",
		"a == 1 and",
		"a == 1 or",
		"and a == 1",
		"(a == 1",
		"a == 1)",
		"(a == 1))",
		"()",
		"a == #",
		"a = 1",
		"a === 1",
		"a == 1 && b == 2",
		'a == "unterminated',
		"a == datetime(2024,1)",
		"a == datetime(2024,1,2,3,4,5,6)",
		'a == datetime("2024",1,2)',
		"a == datetime(2024,1,2",
		"a == datetime 2024,1,2)",
		"a == datetime(2024 1 2)",
		'a == ObjectId("x"',
		'a == ObjectId"x")',
		"a == (1)",
		"a == foo(2024,1,2)",
		"a == True(2024,1,2)",
		"1 == 2",
		'"a" == 1',
		") == 1",
		"a x 1",
		"a , 1",
		"a and 1",
		"a == 1 x b == 2",
		"a == 1 and x b == 2",
		"1 == a",
		"a == 1,",
		"a , b",
		"x",
		"nothing here",
		"t == true",
		"t == null",
		"fals",
		"-",
		'"x',
		"{a",
		"[1,",
	])("%j is a 400, Unable to parse", where => {
		expect(refusal(() => parseWhere(where))).toBe("Unable to parse `where` clause");
	});
});

describe("what a filter names", () => {
	it("filterMentions: a field at the top or under logical operators, not inside values", () => {
		expect(filterMentions({ _deleted: true }, "_deleted")).toBe(true);
		expect(filterMentions({ $or: [{ a: 1 }, { $and: [{ _deleted: false }] }] }, "_deleted")).toBe(true);
		expect(filterMentions({ a: { _deleted: 1 } }, "_deleted")).toBe(false);
		expect(filterMentions({ a: 1 }, "_deleted")).toBe(false);
		expect(filterMentions({ a: 1, _deleted: true }, "_deleted")).toBe(true);
		expect(filterMentions({ $and: [{ a: 1 }], _deleted: true }, "_deleted")).toBe(true);
		expect(filterMentions([{ a: 1 }, { _deleted: 1 }], "_deleted")).toBe(true);
		expect(filterMentions([{ a: 1 }], "_deleted")).toBe(false);
		expect(filterMentions("_deleted", "_deleted")).toBe(false);
		expect(filterMentions(null, "_deleted")).toBe(false);
	});

	it("pathsOverlap: the same path, or one inside the other, by whole segments", () => {
		expect(pathsOverlap("a", "a")).toBe(true);
		expect(pathsOverlap("a.b", "a")).toBe(true);
		expect(pathsOverlap("a", "a.b")).toBe(true);
		expect(pathsOverlap("ab", "a")).toBe(false);
		expect(pathsOverlap("a", "ab")).toBe(false);
		expect(pathsOverlap("a.bc", "a.b")).toBe(false);
		expect(pathsOverlap("a.b", "a.bc")).toBe(false);
		expect(pathsOverlap("b.a", "a")).toBe(false);
	});

	it("filterTouches: the first field of the filter that is, holds or is inside a secret path", () => {
		const secrets = ["vpn_representation.otp_secret", "vpn_representation.auth_token"];
		expect(filterTouches({ "vpn_representation.otp_secret": "x" }, secrets)).toBe("vpn_representation.otp_secret");
		expect(filterTouches({ vpn_representation: { a: 1 } }, secrets)).toBe("vpn_representation");
		expect(filterTouches({ "vpn_representation.otp_secret.x": 1 }, secrets)).toBe("vpn_representation.otp_secret.x");
		expect(filterTouches({ a: 1, $or: [{ b: 1 }, { $and: [{ "vpn_representation.auth_token": 1 }] }] }, secrets)).toBe(
			"vpn_representation.auth_token",
		);
		expect(
			filterTouches({ "vpn_representation.name": 1, other: { "vpn_representation.otp_secret": 1 } }, secrets),
		).toBeUndefined();
		expect(filterTouches({ a: 1 }, secrets)).toBeUndefined();
		expect(filterTouches([{ a: 1 }, { vpn_representation: 1 }], secrets)).toBe("vpn_representation");
		expect(filterTouches("vpn_representation", secrets)).toBeUndefined();
		expect(filterTouches({ a: 1, vpn_representation: 1, "vpn_representation.auth_token": 1 }, secrets)).toBe(
			"vpn_representation",
		);
	});
});

describe("sort", () => {
	it.each([
		[undefined, []],
		["", []],
		["  ", []],
		["a", [["a", 1]]],
		["-a", [["a", -1]]],
		[
			"-a,b",
			[
				["a", -1],
				["b", 1],
			],
		],
		[
			" - a , b.c ",
			[
				["a", -1],
				["b.c", 1],
			],
		],
		[
			'[("a", -1), ("b", 1)]',
			[
				["a", -1],
				["b", 1],
			],
		],
		["[('a', -1)]", [["a", -1]]],
		[' [("a", -1)] ', [["a", -1]]],
		['[["a", 1]]', [["a", 1]]],
		["[]", []],
		[
			"a,b,c,d,e,f,g,h",
			[
				["a", 1],
				["b", 1],
				["c", 1],
				["d", 1],
				["e", 1],
				["f", 1],
				["g", 1],
				["h", 1],
			],
		],
	])("%j", (raw, want) => {
		expect(parseSort(raw)).toEqual(want);
	});

	it.each([
		"-",
		",",
		"a,",
		",a",
		"a,,b",
		"- ,a",
		'[("a", 2)]',
		'[("a", "1")]',
		"[(1, 1)]",
		'[("a")]',
		'["a"]',
		"[(",
		"[('a', -1),]",
		'[("a", -1)',
		"[1]",
	])("%j is a 400, Unable to parse", raw => {
		expect(refusal(() => parseSort(raw))).toBe("Unable to parse `sort` clause");
	});

	it("names at most 8 fields", () => {
		expect(refusal(() => parseSort("a,b,c,d,e,f,g,h,i"))).toBe("`sort` names too many fields");
		expect(refusal(() => parseSort(JSON.stringify(Array.from({ length: 9 }, (_, i) => [`f${i}`, 1]))))).toBe(
			"`sort` names too many fields",
		);
	});

	it("takes plain field paths only", () => {
		expect(refusal(() => parseSort("a b"))).toBe("invalid sort field name 'a b'");
		expect(refusal(() => parseSort("$where"))).toBe("invalid sort field name '$where'");
		expect(refusal(() => parseSort("-__proto__"))).toBe("invalid sort field name '__proto__'");
		expect(refusal(() => parseSort("a,constructor.x"))).toBe("invalid sort field name 'constructor.x'");
		expect(refusal(() => parseSort('[("prototype", 1)]'))).toBe("invalid sort field name 'prototype'");
		expect(refusal(() => parseSort("--a"))).toBe("invalid sort field name '-a'");
	});
});

describe("projection and embedded", () => {
	it("projection: any 1 makes it inclusive (the 1 fields); otherwise the 0 fields are excluded", () => {
		expect(parseProjection(undefined)).toBeNull();
		expect(parseProjection("")).toBeNull();
		expect(parseProjection(" ")).toBeNull();
		expect(parseProjection("{}")).toBeNull();
		expect(parseProjection('{"a":1,"b":0,"c.d":true}')).toEqual({ mode: "include", fields: ["a", "c.d"] });
		expect(parseProjection('{"a":0,"b":false}')).toEqual({ mode: "exclude", fields: ["a", "b"] });
		expect(parseProjection('{"a":0,"b":1}')).toEqual({ mode: "include", fields: ["b"] });
	});

	it("projection: values 0 or 1, an object, plain field names", () => {
		for (const bad of ["2", '"1"', "null", "-1", "[1]", "{}", "0.5"])
			expect(refusal(() => parseProjection(`{"a":${bad}}`))).toBe("`projection` values must be 0 or 1");
		for (const bad of [
			"[1]",
			"1",
			'"a"',
			"null",
			"{",
			"a:1",
			'{"__proto__":1}',
			'{"a":{"constructor":1}}',
			'{"a":[{"b":{"prototype":1}}]}',
		])
			expect(refusal(() => parseProjection(bad))).toBe("Unable to parse `projection` clause");
		// Nested past any call stack: refused, not a crash.
		const deep = `{"a":${"[".repeat(200_000)}${"]".repeat(200_000)}}`;
		expect(refusal(() => parseProjection(deep))).toBe("Unable to parse `projection` clause");
		expect(refusal(() => parseProjection('{"a b":1}'))).toBe("invalid projection field name 'a b'");
		expect(refusal(() => parseProjection('{"a":1,"$x":1}'))).toBe("invalid projection field name '$x'");
		expect(refusal(() => parseProjection('{"a.prototype":1}'))).toBe("invalid projection field name 'a.prototype'");
	});

	it("embedded: the fields asked with 1", () => {
		expect(parseEmbedded(undefined)).toEqual([]);
		expect(parseEmbedded("")).toEqual([]);
		expect(parseEmbedded(" ")).toEqual([]);
		expect(parseEmbedded("{}")).toEqual([]);
		expect(parseEmbedded('{"group":1,"host":0,"x.y":true,"z":false}')).toEqual(["group", "x.y"]);
		for (const bad of ["2", '"1"', "null"])
			expect(refusal(() => parseEmbedded(`{"a":${bad}}`))).toBe("`embedded` values must be 0 or 1");
		for (const bad of ["[1]", "1", "x", '{"prototype":1}'])
			expect(refusal(() => parseEmbedded(bad))).toBe("Unable to parse `embedded` clause");
		expect(refusal(() => parseEmbedded('{"a b":1}'))).toBe("invalid embedded field name 'a b'");
		expect(refusal(() => parseEmbedded('{"a b":0}'))).toBe("invalid embedded field name 'a b'");
	});

	it("rejectProtoKeys refuses the prototype keys and hands every other value on", () => {
		const value = { x: 1 };
		expect(rejectProtoKeys("a", value)).toBe(value);
		expect(rejectProtoKeys("", 1)).toBe(1);
		for (const k of ["__proto__", "constructor", "prototype"])
			expect(() => rejectProtoKeys(k, 1)).toThrow(`invalid key '${k}'`);
	});
});

describe("paging (PAGINATION_DEFAULT 25, PAGINATION_LIMIT 50): garbage falls back, never fails", () => {
	const paging = (pairs: Array<[string, string]>) => parsePaging(new QueryArgs(pairs), 25, 50);

	it.each([
		[[], 1, 25],
		[[["max_results", "10"]], 1, 10],
		[[["max_results", "50"]], 1, 50],
		[[["max_results", "51"]], 1, 50],
		[[["max_results", "1000"]], 1, 50],
		[[["max_results", "1"]], 1, 1],
		[[["max_results", "0"]], 1, 25],
		[[["max_results", "-5"]], 1, 25],
		[[["max_results", "abc"]], 1, 25],
		[[["max_results", ""]], 1, 25],
		[[["max_results", "  "]], 1, 25],
		[[["max_results", "10.9"]], 1, 10],
		[[["max_results", "0.5"]], 1, 25],
		[[["max_results", "1e1"]], 1, 10],
		[[["max_results", "Infinity"]], 1, 25],
		[[["page", "3"]], 3, 25],
		[[["page", "-2"]], 2, 25],
		[[["page", "+4"]], 4, 25],
		[[["page", " 5 "]], 5, 25],
		[[["page", "0"]], 1, 25],
		[[["page", "abc"]], 1, 25],
		[[["page", "2x"]], 1, 25],
		[[["page", "2x5"]], 1, 25],
		[[["page", "5 x"]], 1, 25],
		[[["page", "1.5"]], 1, 25],
		[[["page", ""]], 1, 25],
		[[["page", "99999999999999999999"]], 1, 25],
		[
			[
				["page", "2"],
				["page", "7"],
			],
			2,
			25,
		],
		[
			[
				["max_results", "5"],
				["max_results", "7"],
				["page", "9"],
			],
			9,
			5,
		],
	] as Array<[Array<[string, string]>, number, number]>)("%j: page %d of %d", (pairs, page, maxResults) => {
		expect(paging(pairs)).toEqual({ page, maxResults });
	});

	it("a page so far out that skipping to it would overflow is clamped (and empty)", () => {
		expect(paging([["page", "9007199254740991"]])).toEqual({ page: 360287970189639, maxResults: 25 });
		expect(
			paging([
				["page", "9007199254740991"],
				["max_results", "50"],
			]),
		).toEqual({ page: 180143985094819, maxResults: 50 });
		expect(paging([["page", "360287970189639"]])).toEqual({ page: 360287970189639, maxResults: 25 });
		expect(parsePaging(new QueryArgs([["page", "9007199254740991"]]), 1, 1)).toEqual({
			page: 9007199254740991,
			maxResults: 1,
		});
	});

	it("the deployment's default and limit", () => {
		expect(parsePaging(new QueryArgs(), 10, 20)).toEqual({ page: 1, maxResults: 10 });
		expect(parsePaging(new QueryArgs([["max_results", "30"]]), 10, 20)).toEqual({ page: 1, maxResults: 20 });
	});
});

describe("links: Eve's query string", () => {
	const args = (pairs: Array<[string, string]>) => new QueryArgs(pairs);

	it("max_results (when not the default), where and sort raw, page (when > 1), then the other parameters in order", () => {
		const q = args([
			["x", "1"],
			["page", "2"],
			["projection", '{"a":1}'],
			["sort", "-a"],
			["embedded", '{"g":1}'],
			["max_results", "10"],
			["where", '{"a":1}'],
			["y", "2"],
		]);
		expect(linkQuery(q, { page: 2, maxResults: 10 }, 25, 3)).toBe(
			'?max_results=10&where={"a":1}&sort=-a&page=3&x=1&y=2',
		);
		expect(linkQuery(q, { page: 2, maxResults: 10 }, 25, 1)).toBe('?max_results=10&where={"a":1}&sort=-a&x=1&y=2');
		expect(linkQuery(q, { page: 2, maxResults: 25 }, 25, 2)).toBe('?where={"a":1}&sort=-a&page=2&x=1&y=2');
	});

	it("nothing at all: no query string", () => {
		expect(linkQuery(args([]), { page: 1, maxResults: 25 }, 25, 1)).toBe("");
		expect(
			linkQuery(
				args([
					["projection", "{}"],
					["embedded", "{}"],
					["page", "1"],
					["max_results", "25"],
				]),
				{ page: 1, maxResults: 25 },
				25,
				1,
			),
		).toBe("");
		expect(linkQuery(args([]), { page: 1, maxResults: 25 }, 25, 2)).toBe("?page=2");
		// An empty where= (or sort=) is dropped, as Eve's `if req.where` does (a differential run against Eve 2.3).
		expect(linkQuery(args([["where", ""]]), { page: 1, maxResults: 25 }, 25, 1)).toBe("");
		expect(linkQuery(args([["sort", ""]]), { page: 1, maxResults: 25 }, 25, 1)).toBe("");
		expect(linkQuery(args([["sort", "a"]]), { page: 1, maxResults: 25 }, 25, 1)).toBe("?sort=a");
		expect(linkQuery(args([["z", ""]]), { page: 1, maxResults: 25 }, 25, 1)).toBe("?z=");
	});
});

describe("query arguments", () => {
	it("keeps the pairs in order and answers the first value of a key", () => {
		const q = new QueryArgs([
			["a", "1"],
			["b", "2"],
			["a", "3"],
		]);
		expect(q.get("a")).toBe("1");
		expect(q.get("c")).toBeUndefined();
		expect(q.all("a")).toEqual(["1", "3"]);
		expect(q.all("c")).toEqual([]);
		expect(q.has("b")).toBe(true);
		expect(q.has("c")).toBe(false);
		expect(new QueryArgs().pairs).toEqual([]);
	});

	it("is made from the gateway's pairs, or from an object of parameters", () => {
		expect(
			QueryArgs.from([
				["a", 1],
				["b", null],
				["c", undefined],
				[2, "x"],
			]).pairs,
		).toEqual([
			["a", "1"],
			["b", ""],
			["c", ""],
			["2", "x"],
		]);
		expect(QueryArgs.from({ a: "x", b: { c: 1 }, d: 2, e: [1] }).pairs).toEqual([
			["a", "x"],
			["b", '{"c":1}'],
			["d", "2"],
			["e", "[1]"],
		]);
		for (const nothing of [undefined, null, "a=1", 5]) expect(QueryArgs.from(nothing).pairs).toEqual([]);
	});

	it("queryFlag: present and not 0/false/no/off", () => {
		const flag = (pairs: Array<[string, string]>) => queryFlag(new QueryArgs(pairs), "f");
		expect(flag([])).toBe(false);
		expect(flag([["g", "1"]])).toBe(false);
		for (const on of ["", "1", "true", "yes", "on", "x"]) expect(flag([["f", on]])).toBe(true);
		for (const off of ["0", "false", "no", "off", " OFF ", "False", "NO"]) expect(flag([["f", off]])).toBe(false);
	});
});
