/**
 * NeDB's internals the embedded engine relies on (lib/storage/nedb-internals.ts, and the parts of a Datastore it
 * reaches into): the pinned release, and what each function does for the engine. An upgrade of NeDB that changes
 * any of them fails here, by name, before it can change an answer of the store.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Datastore from "@seald-io/nedb";
import * as nedb from "../../lib/storage/nedb-internals";

describe("NeDB's internals the embedded engine relies on", () => {
	it("are those of the release package.json pins exactly, and that release is the one installed", () => {
		const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, "../../package.json"), "utf8")) as {
			dependencies: Record<string, string>;
		};
		expect(pkg.dependencies["@seald-io/nedb"]).toBe(nedb.NEDB_VERSION);
		expect(nedb.installedNedbVersion()).toBe(nedb.NEDB_VERSION);
	});

	it("deepCopy: a copy of every object and list, dates kept, what JSON cannot hold dropped", () => {
		const when = new Date(1_700_000_000_000);
		const doc = { a: { b: [1, { c: "x" }] }, when, n: null, f: () => 1, u: undefined };
		const copy = nedb.deepCopy(doc) as Record<string, unknown>;
		expect(copy).toEqual({ a: { b: [1, { c: "x" }] }, when, n: null, f: undefined, u: undefined });
		expect(copy.a).not.toBe(doc.a);
		expect((copy.a as { b: unknown[] }).b[1]).not.toBe(doc.a.b[1]);
		expect(copy.when).toBe(when);
	});

	it("modify: a new record from an update, the old one unchanged; `_id` refused", () => {
		const old = { _id: "h1", status: "up", n: 1, tags: ["a"], grain: { os: "ALT" } };
		const next = nedb.modify(old, {
			$set: { status: "down", "grain.os": "Debian" },
			$inc: { n: 2 },
			$addToSet: { tags: "b" },
			$unset: { gone: true },
		});
		expect(next).toEqual({ _id: "h1", status: "down", n: 3, tags: ["a", "b"], grain: { os: "Debian" } });
		expect(old).toEqual({ _id: "h1", status: "up", n: 1, tags: ["a"], grain: { os: "ALT" } });
		expect(nedb.modify(old, { $push: { tags: "a" } }).tags).toEqual(["a", "a"]);
		expect(nedb.modify(old, { status: "x" } as never)).toEqual({ _id: "h1", status: "x" });
		expect(() => nedb.modify(old, { $set: { _id: "h2" } })).toThrow(/_id/);
	});

	it("getDotValue: a field, a path, an element by its position, and across a list the list of values", () => {
		const doc = { a: { b: 1 }, l: [{ x: 1 }, { x: 2 }, {}], top: "t" };
		expect(nedb.getDotValue(doc, "top")).toBe("t");
		expect(nedb.getDotValue(doc, "a.b")).toBe(1);
		expect(nedb.getDotValue(doc, "l.1.x")).toBe(2);
		expect(nedb.getDotValue(doc, "l.x")).toEqual([1, 2, undefined]);
		expect(nedb.getDotValue(doc, "a.missing.deeper")).toBeUndefined();
	});

	it("compareThings: undefined, null, numbers, strings, booleans, dates, lists, objects, in that order", () => {
		const ordered = [
			undefined,
			null,
			-1,
			0,
			2,
			"",
			"B",
			"a",
			"b",
			false,
			true,
			new Date(0),
			new Date(1),
			[1],
			[1, 2],
			[2],
			{},
			{ a: 1 },
		];
		for (let i = 0; i < ordered.length; i++) {
			for (let j = 0; j < ordered.length; j++)
				expect(Math.sign(nedb.compareThings(ordered[i], ordered[j]))).toBe(Math.sign(i - j));
		}
		expect(nedb.compareThings(new Date(5), new Date(5))).toBe(0);
	});

	it("match: the operators the filter rewrite (nedb-filter.ts) produces, lists matched element by element", () => {
		const doc = { _id: "h", status: "up", tags: ["a", "b"], n: 3, when: new Date(10), nested: { k: "v" }, empty: [] };
		const yes = [
			{ status: "up" },
			{ tags: "a" },
			{ tags: ["a", "b"] },
			{ n: { $gt: 2, $lte: 3 } },
			{ when: { $lt: new Date(11) } },
			{ status: { $in: ["down", "up"] } },
			{ tags: { $in: ["z", "b"] } },
			{ $not: { status: "down" } },
			{ $or: [{ status: "down" }, { n: 3 }] },
			{ $and: [{ status: "up" }, { n: 3 }] },
			{ missing: { $exists: false } },
			{ status: { $exists: true } },
			{ tags: { $size: 2 } },
			{ tags: { $elemMatch: { $in: ["b"] } } },
			{ status: { $regex: /^u/ } },
			{ "nested.k": "v" },
			{
				$where(this: { n: number }) {
					return this.n === 3;
				},
			},
		];
		const no = [
			{ status: "down" },
			{ tags: "c" },
			{ tags: ["b", "a"] },
			{ n: { $gt: "2" } },
			{ missing: null },
			{ empty: { $exists: true } },
			{ $not: { tags: "a" } },
		];
		for (const q of yes) expect([q, nedb.match(doc, q)]).toEqual([q, true]);
		for (const q of no) expect([q, nedb.match(doc, q)]).toEqual([q, false]);
		// A bound holds for null against a date (what the planner's quick checks leave to the matcher).
		expect(nedb.match({ d: null }, { d: { $lte: new Date(0) } })).toBe(true);
		expect(() => nedb.match(doc, { $unknown: 1 })).toThrow();
	});

	it("serialize and checkObject: dates as {$$date}, keys NeDB refuses", () => {
		expect(nedb.serialize({ _id: "h", when: new Date(42), l: [new Date(7)] })).toBe(
			'{"_id":"h","when":{"$$date":42},"l":[{"$$date":7}]}',
		);
		expect(() => nedb.checkObject({ a: { $b: 1 } })).toThrow();
		expect(() => nedb.checkObject({ "a.b": 1 })).toThrow();
		expect(() => nedb.checkObject({ a: { b: [1, { c: 2 }] } })).not.toThrow();
	});

	it("crashSafeWriteFileLinesAsync: the lines, each ended by a newline, in place of the file", async () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "nedb-internals-"));
		try {
			const file = path.join(dir, "x.db");
			fs.writeFileSync(file, "old\n");
			await nedb.crashSafeWriteFileLinesAsync(file, ['{"_id":"a"}', '{"_id":"b"}'], {
				fileMode: 0o644,
				dirMode: 0o755,
			});
			expect(fs.readFileSync(file, "utf8")).toBe('{"_id":"a"}\n{"_id":"b"}\n');
			expect(fs.existsSync(file + "~")).toBe(false);
		} finally {
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});

	it("a Datastore has the undocumented parts the store, the loader and the tree indexes use", async () => {
		const db = new Datastore({ inMemoryOnly: true }) as unknown as Record<string, any>;
		await db.loadDatabaseAsync();
		await db.insertAsync([
			{ _id: "b", v: 1 },
			{ _id: "a", v: 2 },
		]);
		// The queue: a task runs after those pushed before it.
		const order: number[] = [];
		await Promise.all([
			db.executor.pushAsync(async () => order.push(1)),
			db.executor.pushAsync(async () => order.push(2)),
		]);
		expect(order).toEqual([1, 2]);
		for (const fn of [
			"_updateIndexes",
			"_resetIndexes",
			"getAllData",
			"compactDatafileAsync",
			"emit",
			"removeIndexAsync",
			"ensureIndexAsync",
		])
			expect([fn, typeof db[fn]]).toEqual([fn, "function"]);
		for (const fn of [
			"persistNewStateAsync",
			"treatRawStreamAsync",
			"persistCachedDatabaseAsync",
			"beforeDeserialization",
			"afterSerialization",
		])
			expect([fn, typeof db.persistence[fn]]).toEqual([fn, "function"]);
		expect(typeof db.persistence.corruptAlertThreshold).toBe("number");
		expect(db.persistence.modes).toEqual({ fileMode: expect.any(Number), dirMode: expect.any(Number) });
		// `_updateIndexes` changes every index with the pairs given, and puts them all back when one refuses.
		await db.ensureIndexAsync({ fieldName: "v", unique: true });
		const [a] = db.getAllData().filter((d: { _id: string }) => d._id === "a");
		const moved = { ...a, v: 3 };
		db._updateIndexes([{ oldDoc: a, newDoc: moved }]);
		expect(db.indexes.v.getMatching(3)).toEqual([moved]);
		expect(() => db._updateIndexes([{ oldDoc: moved, newDoc: { ...moved, v: 1 } }])).toThrow(
			expect.objectContaining({ errorType: "uniqueViolated" }),
		);
		expect(db.indexes.v.getMatching(3)).toEqual([moved]);
		// The _id index's AVL tree: its root node, the node class's own methods, keys in order.
		const root = db.indexes._id.tree.tree;
		expect(typeof root.createSimilar).toBe("function");
		expect(typeof root.compareKeys).toBe("function");
		const keys: string[] = [];
		const walk = (n: { key?: string; left: unknown; right: unknown; data: unknown[] } | null) => {
			if (!n) return;
			walk(n.left as typeof n);
			keys.push(n.key as string);
			expect(n.data).toHaveLength(1);
			walk(n.right as typeof n);
		};
		walk(root);
		expect(keys).toEqual(["a", "b"]);
	});
});
