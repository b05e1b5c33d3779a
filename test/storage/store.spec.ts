/**
 * The same checked `where` must select the same records on NeDB (embedded default) and on the MongoDB
 * path. Each case states what MongoDB's documented semantics select; the NeDB store must agree, and so
 * must the Mongo store when MONGO_URI is set (that leg runs against whatever MONGO_URI names: in CI the
 * wire-protocol emulator, which is not MongoDB).
 */
import Datastore from "@seald-io/nedb";
import { MongoClient } from "mongodb";
import fs from "node:fs";
import path from "node:path";
import { DuplicateKeyError, type Doc, type Store } from "../../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { MongoStore, type MongoCollection } from "../../lib/storage/mongo-store";
import { parseWhere } from "../../lib/eve/query";
import { tempDir, uniqueMongoUri } from "../support/harness";

const DOCS = [
	{
		_id: "a",
		name: "alpha",
		n: 1,
		tags: ["web", "db"],
		info: { os: "ALT", arch: "x86_64" },
		when: new Date("2024-01-01T00:00:00Z"),
		flag: true,
	},
	{
		_id: "b",
		name: "beta",
		n: 2,
		tags: ["web"],
		info: { os: "Debian" },
		when: new Date("2024-06-01T00:00:00Z"),
		flag: false,
	},
	{ _id: "c", name: "gamma", n: 3, tags: [], info: { os: "ALT", arch: "aarch64" }, nullable: null },
	{ _id: "d", name: "delta", n: 10, tags: ["db", "cache"], scores: [1, 5, 9] },
	{
		_id: "e",
		name: "epsilon",
		scores: [2, 3],
		nested: [
			{ k: "x", v: 1 },
			{ k: "y", v: 2 },
		],
	},
];

/** A JSON list of these strings padded to 40 entries with strings no record holds. */
function LONG(values: string[]): string {
	return JSON.stringify([...Array.from({ length: 40 }, (_, i) => `none-${i}`), ...values]);
}

/** [where (as a client sends it), ids MongoDB selects] */
const CASES: Array<[string, string[]]> = [
	['{"name":"alpha"}', ["a"]],
	['{"n":{"$gt":1,"$lte":3}}', ["b", "c"]],
	['{"n":{"$eq":2}}', ["b"]],
	['{"n":{"$ne":2}}', ["a", "c", "d", "e"]],
	['{"n":{"$in":[1,10]}}', ["a", "d"]],
	['{"n":{"$nin":[1,10]}}', ["b", "c", "e"]],
	['{"tags":"web"}', ["a", "b"]],
	['{"tags":{"$ne":"web"}}', ["c", "d", "e"]],
	['{"tags":{"$nin":["web","cache"]}}', ["c", "e"]],
	['{"tags":{"$in":["cache"]}}', ["d"]],
	['{"tags":{"$all":["web","db"]}}', ["a"]],
	['{"tags":{"$size":0}}', ["c"]],
	['{"tags":{"$size":1}}', ["b"]],
	['{"info.os":"ALT"}', ["a", "c"]],
	['{"info.arch":{"$exists":false}}', ["b", "d", "e"]],
	['{"info":{"$exists":true}}', ["a", "b", "c"]],
	['{"nullable":null}', ["a", "b", "c", "d", "e"]],
	['{"nullable":{"$ne":null}}', []],
	['{"n":null}', ["e"]],
	['{"n":{"$ne":null}}', ["a", "b", "c", "d"]],
	['{"n":{"$in":[null,2]}}', ["b", "e"]],
	['{"n":{"$nin":[null,2]}}', ["a", "c", "d"]],
	['{"flag":false}', ["b"]],
	['{"flag":{"$ne":true}}', ["b", "c", "d", "e"]],
	['{"n":{"$not":{"$gt":2}}}', ["a", "b", "e"]],
	['{"$or":[{"name":"alpha"},{"n":{"$gte":10}}]}', ["a", "d"]],
	['{"$and":[{"tags":"db"},{"n":{"$lt":5}}]}', ["a"]],
	['{"$nor":[{"tags":"web"},{"n":{"$gt":5}}]}', ["c", "e"]],
	['{"scores":{"$elemMatch":{"$gt":4,"$lt":6}}}', ["d"]],
	['{"scores":{"$elemMatch":{"$eq":3}}}', ["e"]],
	['{"nested":{"$elemMatch":{"k":"y","v":{"$gte":2}}}}', ["e"]],
	['{"nested.k":"x"}', ["e"]],
	['{"when":{"$gte":"Sat, 01 Jun 2024 00:00:00 GMT"}}', ["b"]],
	['{"when":{"$lt":"Sat, 01 Jun 2024 00:00:00 GMT"}}', ["a"]],
	['{"info":{"os":"Debian"}}', ["b"]],
	['name == "beta" or n >= 10', ["b", "d"]],
	["n > 1 and n < 10", ["b", "c"]],
	// Long lists (NeDB matches them through a Set): on a scalar field, on an array field, combined, and with a non-string.
	[`{"name":{"$in":${LONG(["beta", "delta"])}}}`, ["b", "d"]],
	[`{"tags":{"$in":${LONG(["cache"])}}}`, ["d"]],
	[`{"_id":{"$in":${LONG(["a", "c", "e"])}},"n":{"$gte":2}}`, ["c"]],
	[`{"_id":{"$in":${LONG(["a", "b", "e", "a"])}}}`, ["a", "b", "e"]],
	[`{"_id":{"$in":${LONG(["a", "b", "c"])}},"$or":[{"n":1},{"tags":{"$size":0}}]}`, ["a", "c"]],
	[`{"name":{"$nin":${LONG(["beta", "delta"])}}}`, ["a", "c", "e"]],
	[`{"n":{"$in":${JSON.stringify([...Array.from({ length: 40 }, (_, i) => 100 + i), 3])}}}`, ["c"]],
];

async function ids(store: Store, where: string): Promise<string[]> {
	return (await store.find(parseWhere(where), { sort: [["_id", 1]] })).map(d => String(d._id)).sort();
}

async function exercise(store: Store): Promise<void> {
	await store.insertMany(DOCS.map(d => ({ ...d })));
	for (const [where, expected] of CASES) {
		expect({ where, ids: await ids(store, where) }).toEqual({ where, ids: expected });
		expect({ where, count: await store.count(parseWhere(where)) }).toEqual({ where, count: expected.length });
	}
	// writes mean the same too
	await expect(store.insertMany([{ _id: "a", name: "again" }])).rejects.toBeInstanceOf(DuplicateKeyError);
	expect((await store.findOne({ _id: "a" }))?.name).toBe("alpha");
	const claimed = await store.findOneAndUpdate({ _id: "b", flag: false }, { $set: { flag: true }, $inc: { n: 1 } });
	expect(claimed).toMatchObject({ _id: "b", flag: true, n: 3 });
	expect(await store.findOneAndUpdate({ _id: "b", flag: false }, { $set: { flag: true } })).toBeNull();
	expect(await store.updateMany({ tags: "db" }, { $pull: { tags: "db" } })).toBe(2);
	expect(await ids(store, '{"tags":"db"}')).toEqual([]);
	expect(await store.removeMany({ n: { $gte: 3 } })).toBe(3);
	expect(await ids(store, "{}")).toEqual(["a", "e"]);
	const page = await store.find({}, { sort: [["name", -1]], skip: 1, limit: 1, exclude: ["tags"] });
	expect(page).toEqual([
		{
			_id: "a",
			name: "alpha",
			n: 1,
			info: { os: "ALT", arch: "x86_64" },
			when: new Date("2024-01-01T00:00:00Z"),
			flag: true,
		},
	]);
	expect(await store.find({ _id: "a" }, { only: ["name"] })).toEqual([{ _id: "a", name: "alpha" }]);
	// long id lists in writes too
	const many = Array.from({ length: 70 }, (_, i) => `m${String(i).padStart(2, "0")}`);
	await store.insertMany(many.map((_id, i) => ({ _id, n: i })));
	expect(
		await store.updateMany({ _id: { $in: [...many.slice(0, 50), "zz"] }, n: { $lt: 40 } }, { $set: { flag: true } }),
	).toBe(40);
	expect(await store.count({ _id: { $in: many }, flag: true })).toBe(40);
	expect(await store.removeMany({ _id: { $in: many.slice(20) } })).toBe(50);
	expect(await store.count({ _id: { $in: many } })).toBe(20);
}

/**
 * Keys NeDB and MongoDB refuse as field names, and keys the encoding must not mistake for its escapes:
 * the text is what must come back (key order included).
 */
const ODD_TEXT =
	'{"$x":1,"a.b":{"$in":[{"c.d":null}]},"__proto__":{"p":1},"%41":3,"%2E":"%24","":{"nul\\u0000":true},"constructor":{"prototype":[{"$$date":5}]},"ключ.🙂":"значение"}';
const odd = (): Doc => JSON.parse(ODD_TEXT);
const text = (v: unknown): string => JSON.stringify(v);

/** Any JSON key is stored and read back exactly: inserted, updated, matched, on every read path. */
async function exerciseKeys(store: Store): Promise<void> {
	await store.insertMany([
		{ _id: "k1", name: "one", kwarg: odd(), when: new Date("2024-01-01T00:00:00Z") },
		{ _id: "k2", name: "two", kwarg: { plain: 1 } },
	]);
	// every read path hands the keys back as they were sent
	expect(text((await store.findOne({ _id: "k1" }))?.kwarg)).toBe(ODD_TEXT);
	expect((await store.find({}, { sort: [["name", 1]] })).map(d => text(d.kwarg))).toEqual([ODD_TEXT, '{"plain":1}']);
	expect((await store.find({ name: "one" })).map(d => text(d.kwarg))).toEqual([ODD_TEXT]);
	expect(await store.find({ _id: "k1" }, { only: ["kwarg"] })).toEqual([{ _id: "k1", kwarg: odd() }]);
	const seen: string[] = [];
	await store.scan({ _id: "k1" }, ["kwarg"], d => seen.push(text(d.kwarg)));
	expect(seen).toEqual([ODD_TEXT]);
	const first = await store.findOne({ _id: "k1" });
	expect(Object.hasOwn(first?.kwarg, "__proto__")).toBe(true);
	expect(Object.getPrototypeOf(first?.kwarg)).toBe(Object.prototype);
	// a filter on a literal object holding such keys (under $eq when its own keys start with `$`, as in MongoDB), whole or in a list
	expect((await store.find({ kwarg: { $eq: odd() } })).map(d => d._id)).toEqual(["k1"]);
	expect((await store.find({ kwarg: { $in: [{ nope: 1 }, odd()] } })).map(d => d._id)).toEqual(["k1"]);
	expect((await store.find({ "kwarg.constructor": { prototype: [{ $$date: 5 }] } })).map(d => d._id)).toEqual(["k1"]);
	expect(await store.count({ "kwarg.plain": 1 })).toBe(1);
	// updates: a value with such keys under a dotted path, and a path through such a key
	const updated = await store.findOneAndUpdate(
		{ _id: "k2", name: "two" },
		{ $set: { "pending.by": odd(), "kwarg.$y": { "e.f": 2 } } },
	);
	expect(text(updated?.pending.by)).toBe(ODD_TEXT);
	expect(text(updated?.kwarg)).toBe('{"plain":1,"$y":{"e.f":2}}');
	expect(await store.updateMany({ "kwarg.$y.e%2Ef": 2 }, { $set: { hit: true } })).toBe(0);
	expect(await store.updateMany({ "pending.by.%41": 3 }, { $push: { log: { $each: [odd()] } } })).toBe(1);
	const after = await store.findOne({ _id: "k2" });
	expect(text(after?.log)).toBe(`[${ODD_TEXT}]`);
	expect(text(after?.kwarg)).toBe('{"plain":1,"$y":{"e.f":2}}');
	// k2 was read before it held such keys: lists and scans must not go by what they saw then
	expect((await store.find({}, { sort: [["name", 1]] })).map(d => text(d.log))).toEqual([undefined, `[${ODD_TEXT}]`]);
	const scanned: string[] = [];
	await store.scan({}, ["log"], d => scanned.push(`${d._id}:${text(d.log)}`));
	expect(scanned.sort()).toEqual(["k1:undefined", `k2:[${ODD_TEXT}]`]);
	expect(await store.removeMany({ "pending.by": { $eq: odd() } })).toBe(1);
	// a client's `where` may compare a dict with dotted keys (a key, not a path)
	await store.insertMany([{ _id: "k3", kwarg: { "a.b": 2, c: { "d.e": [1] } } }]);
	expect((await store.find(parseWhere('{"kwarg":{"a.b":2,"c":{"d.e":[1]}}}'))).map(d => d._id)).toEqual(["k3"]);
	expect((await store.find(parseWhere('{"kwarg":{"$in":[{"a.b":2,"c":{"d.e":[1]}}]}}'))).map(d => d._id)).toEqual([
		"k3",
	]);
	expect(({} as Doc).p).toBeUndefined();
}

describe("NeDB store", () => {
	it("selects what MongoDB would select for every allowed operator", async () => {
		const db = new Datastore({ inMemoryOnly: true });
		await db.loadDatabaseAsync();
		await exercise(new NedbStore(db as unknown as NedbDatastore));
	});

	it("stores any JSON key and reads it back exactly", async () => {
		const db = new Datastore({ inMemoryOnly: true });
		await db.loadDatabaseAsync();
		await exerciseKeys(new NedbStore(db as unknown as NedbDatastore));
	});

	it("keeps such keys in its file, and reads back records written before the encoding as they were", async () => {
		const file = path.join(tempDir("keys"), "things.db");
		// a record as an earlier version wrote it (no key needed encoding then)
		fs.writeFileSync(file, JSON.stringify({ _id: "old", info: { os: "ALT", "50%": 1 }, tags: ["a"] }) + "\n");
		const db = new Datastore({ filename: file });
		await db.loadDatabaseAsync();
		await new NedbStore(db as unknown as NedbDatastore).insertMany([{ _id: "new", kwarg: odd() }]);
		const again = new Datastore({ filename: file });
		await again.loadDatabaseAsync();
		const store = new NedbStore(again as unknown as NedbDatastore);
		expect(text((await store.findOne({ _id: "new" }))?.kwarg)).toBe(ODD_TEXT);
		expect(await store.findOne({ _id: "old" })).toEqual({ _id: "old", info: { os: "ALT", "50%": 1 }, tags: ["a"] });
		expect(await store.count({ "info.os": "ALT" })).toBe(1);
	});

	// The planner (lib/storage/nedb-plan.ts) answers through whichever index a field has: the meaning must not change.
	const EVERY_FIELD = [
		"_updated",
		"name",
		"n",
		"tags",
		"info",
		"info.os",
		"info.arch",
		"flag",
		"when",
		"scores",
		"nullable",
		"nested.k",
		"kwarg",
		"kwarg.plain",
		"pending.by",
	];
	for (const ordered of [false, true]) {
		it(`selects the same with ${ordered ? "NeDB's tree" : "bucket"} indexes on every field`, async () => {
			for (const run of [exercise, exerciseKeys]) {
				const db = new Datastore({ inMemoryOnly: true });
				await db.loadDatabaseAsync();
				const store = new NedbStore(db as unknown as NedbDatastore);
				for (const field of EVERY_FIELD) await store.ensureIndex(field, { ordered });
				await run(store);
			}
		});
	}

	it("applies a different update to each record in one write to its file, all or none, and reads them back after a restart", async () => {
		const file = path.join(tempDir("each"), "hosts.db");
		const db = new Datastore({ filename: file });
		await db.loadDatabaseAsync();
		const store = new NedbStore(db as unknown as NedbDatastore);
		await store.ensureIndex("serial", { unique: true });
		await store.insertMany(
			Array.from({ length: 50 }, (_, i) => ({ _id: `h${i}`, serial: `s${i}`, status: "up", "odd.key%": i })),
		);
		const appends = jest.spyOn(
			(db as unknown as { persistence: { persistNewStateAsync(docs: Doc[]): Promise<void> } }).persistence,
			"persistNewStateAsync",
		);
		const updates: Array<[string, { $set: Doc }]> = Array.from({ length: 50 }, (_, i) => [
			`h${i}`,
			{ $set: { last_action: `j${i}h${i}`, "info.n": i } },
		]);
		expect(await store.updateEach([...updates, ["gone", { $set: { status: "down" } }]])).toBe(50);
		// One append for the fifty new versions (one updateMany each: fifty).
		expect(appends).toHaveBeenCalledTimes(1);
		expect(appends.mock.calls[0][0]).toHaveLength(50);
		expect(await store.findOne({ _id: "h7" })).toEqual({
			_id: "h7",
			serial: "s7",
			status: "up",
			"odd.key%": 7,
			last_action: "j7h7",
			info: { n: 7 },
		});
		// A duplicate key in one of them: none is applied, in memory or in the file.
		await expect(
			store.updateEach([
				["h1", { $set: { status: "down" } }],
				["h2", { $set: { serial: "s3" } }],
			]),
		).rejects.toBeInstanceOf(DuplicateKeyError);
		expect((await store.findOne({ _id: "h1" }))?.status).toBe("up");
		expect(await store.count({ serial: "s3" })).toBe(1);
		const again = new Datastore({ filename: file });
		await again.loadDatabaseAsync();
		const reread = new NedbStore(again as unknown as NedbDatastore);
		expect((await reread.find({}, { sort: [["_id", 1]] })).map(d => [d._id, d.last_action, d.status])).toEqual(
			Array.from({ length: 50 }, (_, i) => `h${i}`)
				.sort()
				.map(id => [id, `j${id.slice(1)}${id}`, "up"]),
		);
	});

	it("drops an index an earlier version made, and nothing when there is none", async () => {
		const db = new Datastore({ inMemoryOnly: true });
		await db.loadDatabaseAsync();
		const store = new NedbStore(db as unknown as NedbDatastore);
		await store.ensureIndex("status");
		expect(Object.keys((db as unknown as { indexes: object }).indexes)).toContain("status");
		await store.dropIndex("status");
		expect(Object.keys((db as unknown as { indexes: object }).indexes)).not.toContain("status");
		await expect(store.dropIndex("status")).resolves.toBeUndefined();
	});
});

const mongoUri = process.env.MONGO_URI;
(mongoUri ? describe : describe.skip)(
	`MongoDB store (MONGO_URI)${mongoUri ? "" : " (skipped: MONGO_URI is not set)"}`,
	() => {
		let client: any;
		beforeAll(async () => {
			client = new MongoClient(uniqueMongoUri(mongoUri as string));
			await client.connect();
		});
		afterAll(() => client?.close());

		it("selects the same records as the NeDB store", async () => {
			const collection = client.db().collection(`where_${Date.now()}`);
			await exercise(new MongoStore(collection as unknown as MongoCollection));
		});

		it("stores any JSON key and reads it back exactly", async () => {
			const collection = client.db().collection(`keys_${Date.now()}`);
			await exerciseKeys(new MongoStore(collection as unknown as MongoCollection));
		});
	},
);
