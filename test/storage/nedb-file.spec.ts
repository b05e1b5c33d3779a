/**
 * lib/storage/nedb-file.ts: an embedded datastore loads what NeDB's own loader loads (records, dates at any
 * depth, deletions, index definitions, its corruption threshold), and its file is rewritten only when
 * that gains something: at a load when it holds superseded lines, afterwards when it grew by half.
 */
import fs from "node:fs";
import path from "node:path";
import fc from "fast-check";
import {
	manageNedbFile,
	serializeRecord,
	COMPACT_MIN_GROWTH,
	type NedbFileDatastore,
} from "../../lib/storage/nedb-file";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { tempDir } from "../support/harness";

const Datastore = require("@seald-io/nedb");
import * as model from "../../lib/storage/nedb-internals";

type Db = NedbFileDatastore & {
	loadDatabaseAsync(): Promise<void>;
	insertAsync(doc: unknown): Promise<unknown>;
	updateAsync(q: unknown, u: unknown, o?: unknown): Promise<unknown>;
	removeAsync(q: unknown, o?: unknown): Promise<number>;
	ensureIndexAsync(o: unknown): Promise<void>;
};

const stat = (file: string) => {
	const st = fs.statSync(file);
	return { ino: st.ino, mtimeMs: st.mtimeMs, size: st.size };
};
const lines = (file: string) => fs.readFileSync(file, "utf8").split("\n").filter(Boolean);
const byId = (docs: Array<Record<string, unknown>>) =>
	[...docs].sort((a, b) => String(a._id).localeCompare(String(b._id)));

/** A datastore on `file`, loaded by this module (`managed`) or by NeDB alone. */
async function open(
	file: string,
	managed: boolean,
	onCompact?: () => void,
): Promise<{ db: Db; stop(): void; checkGrowth(): Promise<boolean> }> {
	const db = new Datastore({ filename: file }) as Db;
	const m = managed ? manageNedbFile(db, onCompact) : { stop: () => undefined, checkGrowth: async () => false };
	await db.loadDatabaseAsync();
	return { db, ...m };
}

describe("the embedded datastore's file", () => {
	const doc = (i: number) => ({
		_id: `h-${String(i).padStart(3, "0")}`,
		n: i,
		_created: new Date(Date.UTC(2024, 0, 1, 0, 0, i)),
		grain: {
			os: "ALT",
			nested: { deep: [{ at: new Date(Date.UTC(2024, 5, 1, 0, 0, i)) }, "x"] },
			dollar: "$$date in text",
			empty: {},
		},
		list: [1, { when: new Date(0) }],
	});

	it("loads what NeDB loads: records with dates at any depth, the last line of an id, deletions, index definitions", async () => {
		const file = path.join(tempDir("nedb-file"), "a.db");
		const writer = await open(file, false);
		for (let i = 0; i < 30; i++) await writer.db.insertAsync(doc(i));
		await writer.db.updateAsync({ _id: "h-003" }, { $set: { n: 333, at: new Date(5) } });
		await writer.db.removeAsync({ _id: "h-004" });
		await writer.db.ensureIndexAsync({ fieldName: "n", unique: true });
		const theirs = await open(file, false);
		const ours = await open(file, true);
		expect(byId(ours.db.getAllData())).toEqual(byId(theirs.db.getAllData()));
		expect(ours.db.getAllData()).toHaveLength(29);
		const h3 = ours.db.getAllData().find(d => d._id === "h-003")!;
		expect(h3.at).toEqual(new Date(5));
		expect(((h3.grain as any).nested.deep[0].at as Date).getTime()).toBe(Date.UTC(2024, 5, 1, 0, 0, 3));
		expect((h3.list as any)[1].when).toBeInstanceOf(Date);
		// The unique index defined in the file holds after our load.
		await expect(ours.db.insertAsync({ _id: "dup", n: 333 })).rejects.toThrow(/unique/i);
		ours.stop();
	});

	it("loads one Date per instant, shared by the records and fields that hold it, and a write to one record leaves the others' as they were", async () => {
		const file = path.join(tempDir("nedb-file"), "dates.db");
		const writer = await open(file, false);
		const batch = new Date(Date.UTC(2026, 10, 27, 12, 0, 0));
		for (let i = 0; i < 3; i++)
			await writer.db.insertAsync({
				_id: `d-${i}`,
				_created: batch,
				_updated: batch,
				applied: new Date(1000 + i),
				grain: { ctl: { applied: new Date(1000 + i) } },
			});
		const ours = await open(file, true);
		const docs = byId(ours.db.getAllData());
		expect(docs.map(d => (d._created as Date).getTime())).toEqual([batch.getTime(), batch.getTime(), batch.getTime()]);
		// One object for the batch's instant, across records and fields; one per record for its own instant, in both its places.
		for (const d of docs) {
			expect(d._created).toBe(docs[0]._created);
			expect(d._updated).toBe(docs[0]._created);
			expect((d.grain as { ctl: { applied: Date } }).ctl.applied).toBe(d.applied);
		}
		expect(docs[1].applied).not.toBe(docs[0].applied);
		expect(docs.map(d => (d.applied as Date).getTime())).toEqual([1000, 1001, 1002]);
		// A write replaces the record it changes: the others keep the shared instant.
		const store = new NedbStore(ours.db as unknown as NedbDatastore);
		await store.updateMany({ _id: "d-1" }, { $set: { _updated: new Date(5) } });
		const after = byId(ours.db.getAllData());
		expect((after[1]._updated as Date).getTime()).toBe(5);
		expect([after[0]._updated, after[2]._updated].map(d => (d as Date).getTime())).toEqual([
			batch.getTime(),
			batch.getTime(),
		]);
		expect((after[1]._created as Date).getTime()).toBe(batch.getTime());
		ours.stop();
	});

	it("loads one list for equal long lists of strings (a CPU model's flags), frozen; a write to one record changes only that record", async () => {
		const file = path.join(tempDir("nedb-file"), "lists.db");
		const flags = Array.from({ length: 20 }, (_, i) => `flag_number_${i}`);
		const writer = await open(file, false);
		for (let i = 0; i < 3; i++)
			await writer.db.insertAsync({ _id: `l-${i}`, grain: { cpu_flags: [...flags], short: ["a", "b"] } });
		await writer.db.insertAsync({ _id: "l-other", grain: { cpu_flags: [...flags.slice(1), "another"] } });
		await writer.db.insertAsync({ _id: "l-mixed", grain: { cpu_flags: [...flags.slice(1), 7] } });
		const ours = await open(file, true);
		const flagsOf = (id: string) =>
			ours.db.getAllData().find(d => d._id === id)!.grain as { cpu_flags: unknown[]; short?: unknown[] };
		expect(flagsOf("l-1").cpu_flags).toBe(flagsOf("l-0").cpu_flags);
		expect(flagsOf("l-2").cpu_flags).toBe(flagsOf("l-0").cpu_flags);
		expect(flagsOf("l-0").cpu_flags).toEqual(flags);
		expect(Object.isFrozen(flagsOf("l-0").cpu_flags)).toBe(true);
		// Different content, a list that is not all strings, a short list: each its own.
		expect(flagsOf("l-other").cpu_flags).not.toBe(flagsOf("l-0").cpu_flags);
		expect(Object.isFrozen(flagsOf("l-mixed").cpu_flags)).toBe(false);
		expect(flagsOf("l-1").short).not.toBe(flagsOf("l-0").short);
		// A write changes its record alone, and is read back after a restart.
		const store = new NedbStore(ours.db as unknown as NedbDatastore);
		await store.updateMany({ _id: "l-1" }, { $push: { "grain.cpu_flags": "new_flag" } });
		expect(flagsOf("l-1").cpu_flags).toEqual([...flags, "new_flag"]);
		expect(flagsOf("l-0").cpu_flags).toEqual(flags);
		expect(flagsOf("l-2").cpu_flags).toEqual(flags);
		ours.stop();
		const again = await open(file, true);
		const reread = (id: string) =>
			(again.db.getAllData().find(d => d._id === id)!.grain as { cpu_flags: unknown[] }).cpu_flags;
		expect(reread("l-1")).toEqual([...flags, "new_flag"]);
		expect(reread("l-2")).toBe(reread("l-0"));
		again.stop();
	});

	it("shows keys stored encoded as they were sent after a load, whichever read it is; records without one are read as they are", async () => {
		const file = path.join(tempDir("nedb-file"), "keys.db");
		const sent = { _id: "k-1", kwarg: { $x: 1, "a.b": { "50%": [{ __proto__: 2, "\u0000": 3 }] } }, plain: "p%" };
		Object.defineProperty(sent.kwarg["a.b"]["50%"][0], "__proto__", {
			value: 2,
			enumerable: true,
			configurable: true,
			writable: true,
		});
		const writer = await open(file, true);
		const before = new NedbStore(writer.db as unknown as NedbDatastore);
		await before.insertMany([JSON.parse(JSON.stringify(sent)), { _id: "k-2", kwarg: { x: 1 }, plain: "%" }]);
		writer.stop();
		const reader = await open(file, true);
		const store = new NedbStore(reader.db as unknown as NedbDatastore);
		const expected = JSON.parse(JSON.stringify(sent));
		expect(JSON.stringify(await store.findOneShared({ _id: "k-1" }))).toBe(JSON.stringify(expected));
		expect(JSON.stringify(await store.findOne({ _id: "k-1" }))).toBe(JSON.stringify(expected));
		expect(JSON.stringify((await store.findPageShared({}, { limit: 5 })).docs)).toBe(
			JSON.stringify([expected, { _id: "k-2", kwarg: { x: 1 }, plain: "%" }]),
		);
		// A record with no encoded key is the store's own record (not walked or copied to be shown).
		const raw = reader.db.getAllData().find(d => d._id === "k-2");
		expect(await store.findOneShared({ _id: "k-2" })).toBe(raw);
		reader.stop();
	});

	it("rewrites the file at a load only when it holds superseded lines; a compact file is left as it is", async () => {
		const file = path.join(tempDir("nedb-file"), "b.db");
		const writer = await open(file, false);
		for (let i = 0; i < 20; i++) await writer.db.insertAsync(doc(i));
		await writer.db.updateAsync({ _id: "h-001" }, { $set: { n: 100 } });
		expect(lines(file)).toHaveLength(21);
		let compactions = 0;
		const first = await open(file, true, () => compactions++);
		expect(compactions).toBe(1);
		expect(lines(file)).toHaveLength(20);
		first.stop();
		const compact = stat(file);
		const second = await open(file, true, () => compactions++);
		expect(compactions).toBe(1);
		expect(stat(file)).toEqual(compact);
		expect(second.db.getAllData()).toHaveLength(20);
		second.stop();
	});

	it("drops lines it cannot parse (rewriting the file), and refuses a file past NeDB's corruption threshold", async () => {
		const dir = tempDir("nedb-file");
		const good = Array.from({ length: 40 }, (_, i) => JSON.stringify({ _id: `g${i}`, n: i }));
		const some = path.join(dir, "some.db");
		fs.writeFileSync(some, [...good.slice(0, 20), "{not json", "[1,2]", ...good.slice(20)].join("\n") + "\n");
		const loaded = await open(some, true);
		expect(loaded.db.getAllData()).toHaveLength(40);
		expect(lines(some)).toHaveLength(40);
		loaded.stop();
		const many = path.join(dir, "many.db");
		fs.writeFileSync(many, [...good.slice(0, 5), "{bad", "{bad", "{bad"].join("\n") + "\n");
		const db = new Datastore({ filename: many }) as Db;
		const m = manageNedbFile(db);
		await expect(db.loadDatabaseAsync()).rejects.toThrow(/37% of the data file is corrupt/);
		m.stop();
		// Nothing was lost: the refused file is as it was.
		expect(lines(many)).toHaveLength(8);
	});

	it("reads every line whatever the reads cut: records longer than a read, multi-byte characters across a cut, CRLF, no last newline", async () => {
		const dir = tempDir("nedb-file");
		// Records of several MiB (a read is 1 MiB) of two-, three- and four-byte characters: some cut falls inside one.
		const wide = (i: number, ch: string) => ({
			_id: `w${i}`,
			text: ch.repeat(700_000 + i),
			_created: { $$date: 1_000 * i },
		});
		const docs = [
			{ _id: "a", n: 1 },
			wide(1, "é"),
			{ _id: "b", n: 2, s: "ü€😀" },
			wide(2, "€"),
			wide(3, "😀"),
			{ _id: "c", n: 3 },
		];
		const text = docs.map(d => JSON.stringify(d)).join("\n");
		const lf = path.join(dir, "lf.db");
		fs.writeFileSync(lf, text); // no newline after the last line
		const ours = await open(lf, true);
		const theirs = await open(lf, false);
		expect(byId(ours.db.getAllData())).toEqual(byId(theirs.db.getAllData()));
		const w3 = ours.db.getAllData().find(d => d._id === "w3")!;
		expect(w3.text).toBe("😀".repeat(700_003));
		expect(w3._created).toEqual(new Date(3_000));
		expect(ours.db.getAllData()).toHaveLength(6);
		ours.stop();
		// The same lines ended by CRLF load the same records.
		const crlf = path.join(dir, "crlf.db");
		fs.writeFileSync(crlf, docs.map(d => JSON.stringify(d)).join("\r\n") + "\r\n");
		const fromCrlf = await open(crlf, true);
		expect(byId(fromCrlf.db.getAllData())).toEqual(byId(theirs.db.getAllData()));
		fromCrlf.stop();
	});

	it("compacts a file that grew by half since it was compact, not before", async () => {
		const file = path.join(tempDir("nedb-file"), "c.db");
		// Records large enough that their rewrites pass the minimum growth quickly.
		const big = (i: number, v: number) => ({ _id: `b${i}`, v, pad: "x".repeat(4000) });
		const writer = await open(file, false);
		for (let i = 0; i < 500; i++) await writer.db.insertAsync(big(i, 0));
		let compactions = 0;
		const store = await open(file, true, () => compactions++);
		const base = stat(file).size;
		expect(base).toBeGreaterThan(COMPACT_MIN_GROWTH);
		// A third of the records rewritten: the file grew by a third, no compaction.
		for (let i = 0; i < 170; i++) await store.db.updateAsync({ _id: `b${i}` }, { $set: { v: 1 } });
		expect(await store.checkGrowth()).toBe(false);
		expect(compactions).toBe(0);
		for (let i = 170; i < 340; i++) await store.db.updateAsync({ _id: `b${i}` }, { $set: { v: 1 } });
		expect(stat(file).size).toBeGreaterThan(base * 1.5);
		expect(await store.checkGrowth()).toBe(true);
		expect(compactions).toBe(1);
		expect(lines(file)).toHaveLength(500);
		expect(await store.checkGrowth()).toBe(false);
		store.stop();
	});

	it("writes records exactly as NeDB's serialize does, Dates at any depth included", () => {
		// Keys as NeDB takes them (no leading $, no dot); values of every JSON kind, Dates, and undefined.
		const key = fc.string({ maxLength: 6 }).filter(k => !k.startsWith("$") && !k.includes("."));
		const leaf = fc.oneof(
			fc.integer(),
			fc.double({ noNaN: true, noDefaultInfinity: true }),
			fc.string(),
			fc.boolean(),
			fc.constant(null),
			fc.constant(undefined),
			fc.date({ noInvalidDate: true }),
		);
		const { value } = fc.letrec(tie => ({
			value: fc.oneof(
				{ depthSize: "small" },
				leaf,
				fc.array(tie("value"), { maxLength: 4 }),
				fc.dictionary(key, tie("value"), { maxKeys: 4 }),
			),
		}));
		fc.assert(
			fc.property(fc.dictionary(key, value, { maxKeys: 6 }), fc.date({ noInvalidDate: true }), (doc, at) => {
				const record = { ...doc, _id: "x", at };
				expect(serializeRecord(record)).toBe(model.serialize(record));
			}),
			{ numRuns: 500 },
		);
		// A key `__proto__` holding a Date stays a key.
		const odd = JSON.parse('{"_id":"p","__proto__":{"when":1}}');
		odd.__proto__.when = new Date(7);
		expect(serializeRecord(odd)).toBe('{"_id":"p","__proto__":{"when":{"$$date":7}}}');
	});

	it("appends a write at once, not through libuv's thread pool: the line is in the file when the append returns; a failed append fails the write", async () => {
		const dir = tempDir("nedb-file");
		const file = path.join(dir, "a.db");
		const ours = await open(file, true);
		const before = lines(file).length;
		// Not awaited: an append handed to the thread pool (fs.promises) would not be in the file yet.
		const pending = ours.db.persistence.persistNewStateAsync([doc(1), doc(2)]);
		expect(
			lines(file)
				.slice(before)
				.map(l => JSON.parse(l)._id),
		).toEqual(["h-001", "h-002"]);
		await pending;
		await ours.db.insertAsync(doc(3));
		expect((await open(file, false)).db.getAllData().map(d => d._id)).toEqual(
			expect.arrayContaining(["h-001", "h-002", "h-003"]),
		);
		// The folder gone under the store: the write is refused with the system's error, the process goes on.
		fs.rmSync(dir, { recursive: true, force: true });
		await expect(ours.db.insertAsync(doc(4))).rejects.toThrow(/ENOENT/);
		ours.stop();
	});

	it("lets the event loop in between queued writes: a request or a timer does not wait for a queue of writes to drain", async () => {
		const file = path.join(tempDir("nedb-file"), "q.db");
		const ours = await open(file, true);
		let done = 0;
		const writes = Array.from({ length: 200 }, (_, i) => ours.db.insertAsync(doc(i)).then(() => done++));
		// An I/O callback or a timer comes due once the writes are queued: it runs after a few of them, not after all.
		const seen = await new Promise<number>(resolve => setImmediate(() => resolve(done)));
		await Promise.all(writes);
		expect(seen).toBeLessThan(10);
		expect(done).toBe(200);
		expect(lines(file)).toHaveLength(200);
		ours.stop();
	});

	it("writes what NeDB's own loader reads back: appends, removals, index definitions and a rewrite", async () => {
		const file = path.join(tempDir("nedb-file"), "w.db");
		const ours = await open(file, true);
		for (let i = 0; i < 20; i++) await ours.db.insertAsync(doc(i));
		await ours.db.updateAsync({ _id: "h-003" }, { $set: { n: 333, at: new Date(5), "grain.when": new Date(6) } });
		await ours.db.removeAsync({ _id: "h-004" });
		await ours.db.ensureIndexAsync({ fieldName: "n", unique: true });
		const appended = await open(file, false);
		expect(byId(appended.db.getAllData())).toEqual(byId(ours.db.getAllData()));
		await expect(appended.db.insertAsync({ _id: "dup", n: 333 })).rejects.toThrow(/unique/i);
		await ours.db.compactDatafileAsync();
		expect(lines(file)).toHaveLength(19 + 1);
		const rewritten = await open(file, false);
		expect(byId(rewritten.db.getAllData())).toEqual(byId(ours.db.getAllData()));
		expect((rewritten.db.getAllData().find(d => d._id === "h-003")!.grain as Record<string, unknown>).when).toEqual(
			new Date(6),
		);
		ours.stop();
	});
});
