/**
 * The rules behind the Eve conformance fixes, one function at a time (the HTTP behaviour is in
 * test/e2e/suites/eve-conformance.ts): ETags and the conditional headers (lib/eve/etag.ts), when the
 * gateway answers 304 (services/api/api.service.ts notModified), dotted PATCH keys (lib/eve/patch.ts), Eve's
 * type names in issues (lib/eve/validation.ts) and empty `where`/`sort` in links (lib/eve/query.ts).
 */
import {
	canonical,
	documentEtag,
	ifMatchPasses,
	ifNoneMatchHits,
	parseEtagCondition,
	quoteEtag,
} from "../../lib/eve/etag";
import { mergeNested, resolveDottedKeys } from "../../lib/eve/patch";
import { compileSchema } from "../../lib/eve/validation";
import { QueryArgs, linkQuery } from "../../lib/eve/query";
import { OBJECT_ID } from "../../lib/eve/ids";
import { notModified } from "../../services/api/conditional";

describe("record ETags", () => {
	const doc = {
		name: "web",
		info: { regex: "^w", grain: { os: "ALT" } },
		_updated: new Date("2026-01-02T03:04:05Z"),
		_id: "0123456789abcdef01234567",
	};

	it("is a 40-hex SHA-1 that ignores key order and changes with any stored value, _updated included", () => {
		const etag = documentEtag(doc);
		expect(etag).toMatch(/^[0-9a-f]{40}$/);
		expect(
			documentEtag({ _id: doc._id, _updated: doc._updated, info: { grain: { os: "ALT" }, regex: "^w" }, name: "web" }),
		).toBe(etag);
		expect(documentEtag({ ...doc, info: { regex: "^w", grain: { os: "Debian" } } })).not.toBe(etag);
		expect(documentEtag({ ...doc, _updated: new Date("2026-01-02T03:04:06Z") })).not.toBe(etag);
		expect(documentEtag({ ...doc, _rev: "a1" })).not.toBe(etag);
		expect(documentEtag(doc, "admin")).not.toBe(etag);
		expect(quoteEtag(etag)).toBe(`"${etag}"`);
	});

	it("tells a date from the string of its instant, and arrays from objects", () => {
		const when = new Date("2026-01-02T03:04:05Z");
		expect(canonical({ a: when })).not.toBe(canonical({ a: when.toISOString() }));
		expect(canonical({ a: [1, 2] })).not.toBe(canonical({ a: { 0: 1, 1: 2 } }));
		expect(canonical({ b: 1, a: [null, "x"] })).toBe('{"a":[null,"x"],"b":1}');
	});
});

describe("If-Match and If-None-Match", () => {
	const etag = "a".repeat(40);

	it("reads *, quoted, weak and bare tags and lists of them; blank is no condition", () => {
		expect(parseEtagCondition(undefined)).toBeNull();
		expect(parseEtagCondition("  ")).toBeNull();
		expect(parseEtagCondition("*")).toEqual({ any: true, tags: [] });
		expect(parseEtagCondition(`"${etag}"`)).toEqual({ any: false, tags: [etag] });
		expect(parseEtagCondition(`W/"${etag}"`)).toEqual({ any: false, tags: [etag] });
		expect(parseEtagCondition(etag)).toEqual({ any: false, tags: [etag] });
		expect(parseEtagCondition(`"x", W/"y" ,"a,b"`)).toEqual({ any: false, tags: ["x", "y", "a,b"] });
	});

	it("passes If-Match for * or a listed current tag, and nothing else", () => {
		const check = (header: string) => ifMatchPasses(parseEtagCondition(header)!, etag);
		expect(check("*")).toBe(true);
		expect(check(`"${etag}"`)).toBe(true);
		expect(check(`W/"${etag}"`)).toBe(true);
		expect(check(`"other", "${etag}"`)).toBe(true);
		expect(check(`"other"`)).toBe(false);
		expect(check(`"${etag.toUpperCase()}"`)).toBe(false);
	});

	it("hits If-None-Match only for a listed current tag, never for *", () => {
		expect(ifNoneMatchHits(`"${etag}"`, `"${etag}"`)).toBe(true);
		expect(ifNoneMatchHits(`W/"${etag}"`, `"${etag}"`)).toBe(true);
		expect(ifNoneMatchHits(`"x", "${etag}"`, `"${etag}"`)).toBe(true);
		expect(ifNoneMatchHits("*", `"${etag}"`)).toBe(false);
		expect(ifNoneMatchHits(`"x"`, `"${etag}"`)).toBe(false);
		expect(ifNoneMatchHits(undefined, `"${etag}"`)).toBe(false);
	});
});

describe("when the gateway answers 304 (notModified)", () => {
	const ETAG = `"${"b".repeat(40)}"`;
	const item = {
		$conditional: true,
		$responseHeaders: { ETag: ETAG, "Last-Modified": "Sun, 22 Nov 2026 05:44:21 GMT" },
	};
	const list = {
		$conditional: false,
		$responseHeaders: { "Last-Modified": "Sun, 22 Nov 2026 05:44:21 GMT", "X-Total-Count": "3" },
	};
	const FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT";

	it("for an item read whose ETag If-None-Match lists, on GET and HEAD only", () => {
		expect(notModified("GET", { "if-none-match": ETAG }, item, "groups.get")).toBe(true);
		expect(notModified("HEAD", { "if-none-match": ETAG }, item, "groups.get")).toBe(true);
		expect(notModified("PATCH", { "if-none-match": ETAG }, item, "groups.patch")).toBe(false);
		expect(notModified("POST", { "if-none-match": "*" }, { $statusCode: 201 }, "groups.create")).toBe(false);
		expect(notModified("GET", { "if-none-match": "*" }, item, "groups.get")).toBe(false);
		expect(notModified("GET", { "if-none-match": ETAG }, { ...item, $conditional: false }, "groups.get")).toBe(false);
		expect(notModified("GET", { "if-none-match": ETAG }, { ...item, $statusCode: 202 }, "groups.get")).toBe(false);
	});

	it("never for a list, nor for If-Modified-Since on anything but immutable reads (media)", () => {
		expect(notModified("GET", { "if-modified-since": FUTURE }, list, "groups.list")).toBe(false);
		expect(notModified("GET", { "if-none-match": "*" }, list, "groups.list")).toBe(false);
		expect(notModified("GET", { "if-modified-since": FUTURE }, item, "groups.get")).toBe(false);
		const media = { $responseHeaders: { "Last-Modified": "Sun, 22 Nov 2026 05:44:21 GMT" } };
		expect(notModified("GET", { "if-modified-since": FUTURE }, media, "media.get")).toBe(true);
		expect(notModified("GET", { "if-modified-since": "Sun, 22 Nov 2026 05:44:21 GMT" }, media, "media.get")).toBe(true);
		expect(notModified("GET", { "if-modified-since": "Sun, 22 Nov 2026 05:44:20 GMT" }, media, "media.get")).toBe(
			false,
		);
		expect(notModified("GET", { "if-modified-since": "garbage" }, media, "media.get")).toBe(false);
		// With If-None-Match, If-Modified-Since is not looked at (RFC 9110 13.2.2).
		expect(notModified("GET", { "if-none-match": '"x"', "if-modified-since": FUTURE }, media, "media.get")).toBe(false);
	});
});

describe("dotted PATCH keys", () => {
	const existing = { name: "g", type: 1, info: { regex: "^a", grain: { os: "ALT", role: "web" } } };

	it("folds a dotted key into the whole new value of its field, keeping the stored siblings", () => {
		expect(resolveDottedKeys({ "info.regex": "^w-" }, existing)).toEqual({
			doc: { info: { regex: "^w-", grain: { os: "ALT", role: "web" } } },
			exact: ["info"],
		});
		expect(resolveDottedKeys({ "info.grain.os": "Debian", name: "x" }, existing)).toEqual({
			doc: { name: "x", info: { regex: "^a", grain: { os: "Debian", role: "web" } } },
			exact: ["info"],
		});
		// A dict given at a dotted path replaces what was there (MongoDB's $set of the path).
		expect(resolveDottedKeys({ "info.grain": { os: "X" } }, existing).doc).toEqual({
			info: { regex: "^a", grain: { os: "X" } },
		});
		// A plain key of the same field is merged first, then the dotted key on top.
		expect(resolveDottedKeys({ info: { grain: { arch: "x86" } }, "info.regex": "^b" }, existing).doc).toEqual({
			info: { regex: "^b", grain: { os: "ALT", role: "web", arch: "x86" } },
		});
		expect(resolveDottedKeys({ "extra.a.b": 1 }, existing).doc).toEqual({ extra: { a: { b: 1 } } });
		expect(existing.info).toEqual({ regex: "^a", grain: { os: "ALT", role: "web" } });
	});

	it("leaves bodies without dotted keys, and dotted keys inside values, as they are", () => {
		const body = { kwarg: { "a.b": 1 }, name: "n" };
		expect(resolveDottedKeys(body, existing)).toEqual({ doc: body, exact: [] });
	});

	it("reports paths that cannot be set", () => {
		expect(resolveDottedKeys({ "name.first": "x" }, existing).issues).toEqual({
			"name.first": "'name' is not a dict: a field inside it cannot be set",
		});
		expect(resolveDottedKeys({ "info.regex.x": "y" }, existing).issues).toEqual({
			"info.regex.x": "'info.regex' is not a dict: a field inside it cannot be set",
		});
		expect(resolveDottedKeys({ "info..x": 1 }, existing).issues).toHaveProperty(["info..x"]);
		expect(resolveDottedKeys({ ".x": 1 }, existing).issues).toHaveProperty([".x"]);
	});

	it("keeps __proto__ a key, never the prototype", () => {
		const out = resolveDottedKeys({ "info.__proto__": { polluted: true } }, existing).doc.info as Record<
			string,
			unknown
		>;
		expect(Object.hasOwn(out, "__proto__")).toBe(true);
		expect(({} as Record<string, unknown>).polluted).toBeUndefined();
		const merged = mergeNested({ a: 1 }, JSON.parse('{"__proto__": {"x": 1}}')) as Record<string, unknown>;
		expect(Object.hasOwn(merged, "__proto__")).toBe(true);
		expect(({} as Record<string, unknown>).x).toBeUndefined();
	});
});

describe("Eve's type names in issues", () => {
	const check = compileSchema({
		type: { type: "number", integer: true, optional: true },
		ratio: { type: "number", optional: true },
		ref: { type: "string", pattern: OBJECT_ID, optional: true },
		refs: { type: "array", items: { type: "string", pattern: OBJECT_ID }, optional: true },
		info: { type: "object", optional: true, props: { count: { type: "number", integer: true, optional: true } } },
		name: { type: "string", optional: true },
	});

	it("says integer for integer rules and objectid for 24-hex string rules, at any depth", () => {
		expect(
			check({
				type: "x",
				ratio: "y",
				ref: "nope",
				refs: ["0123456789abcdef01234567", 5, "z"],
				info: { count: "c" },
				name: 5,
			}),
		).toEqual({
			type: "must be of integer type",
			ratio: "must be of number type",
			ref: "must be of objectid type",
			refs: { "1": "must be of objectid type", "2": "must be of objectid type" },
			info: { count: "must be of integer type" },
			name: "must be of string type",
		});
		expect(check({ type: 1.5, ref: 7 })).toEqual({ type: "must be of integer type", ref: "must be of objectid type" });
		expect(check({ type: 2, ref: "0123456789abcdef01234567" })).toBeNull();
	});
});

describe("empty where and sort in links", () => {
	it("drops where= and sort= when empty, as Eve's querydef does", () => {
		const paging = { page: 2, maxResults: 10 };
		expect(
			linkQuery(
				new QueryArgs([
					["where", ""],
					["sort", ""],
					["foo", ""],
				]),
				paging,
				25,
				2,
			),
		).toBe("?max_results=10&page=2&foo=");
		expect(
			linkQuery(
				new QueryArgs([
					["where", '{"a":1}'],
					["sort", "-a"],
				]),
				paging,
				25,
				1,
			),
		).toBe('?max_results=10&where={"a":1}&sort=-a');
		expect(linkQuery(new QueryArgs([["where", ""]]), { page: 1, maxResults: 25 }, 25, 1)).toBe("");
	});
});
