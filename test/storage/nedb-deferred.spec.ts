/**
 * lib/storage/nedb-deferred.ts: a collection's deferred field (a host's grain) is left in the file at a load and
 * parsed when first read, and every read, write and rewrite means what it meant with the field loaded at once: the
 * records equal what NeDB's own loader makes of the same file, lists never parse it, files written before the field
 * was deferred load as they were and are rewritten once, and the background pass parses every field and lets the
 * file go.
 */
import fs from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { manageNedbFile, serializeRecord, type ManagedFile, type NedbFileDatastore } from "../../lib/storage/nedb-file";
import { DeferredField, serializeDeferred } from "../../lib/storage/nedb-deferred";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import { tempDir } from "../support/harness";

const Datastore = require("@seald-io/nedb");
import * as model from "../../lib/storage/nedb-internals";

type Doc = Record<string, unknown>;
type Db = NedbFileDatastore &
	NedbDatastore & {
		loadDatabaseAsync(): Promise<void>;
		insertAsync(doc: unknown): Promise<unknown>;
		updateAsync(q: unknown, u: unknown, o?: unknown): Promise<unknown>;
	};

const lines = (file: string) => fs.readFileSync(file, "utf8").split("\n").filter(Boolean);
const byId = (docs: Doc[]) => [...docs].sort((a, b) => String(a._id).localeCompare(String(b._id)));
const openFds = () => fs.readdirSync("/proc/self/fd").length;
/** The descriptors this process holds on `file`, or on a file it replaced (a rewrite renames a new file over it: "… (deleted)"). */
const fdsOn = (file: string) => {
	const real = path.join(fs.realpathSync(path.dirname(file)), path.basename(file));
	return fs.readdirSync("/proc/self/fd").filter(fd => {
		try {
			const target = fs.readlinkSync(`/proc/self/fd/${fd}`);
			return target === real || target === `${real} (deleted)`;
		} catch {
			return false; // closed since it was listed (the directory's own descriptor)
		}
	}).length;
};

/** A datastore on `file` loaded with `grain` deferred (or by NeDB alone, `managed` false). */
async function open(
	file: string,
	managed = true,
	options: Record<string, unknown> = {},
): Promise<{ db: Db; m: ManagedFile; store: NedbStore }> {
	const db = new Datastore({ filename: file, ...options }) as Db;
	const m = managed
		? manageNedbFile(db, undefined, "grain")
		: { stop: () => undefined, checkGrowth: async () => false };
	await db.loadDatabaseAsync();
	return { db, m, store: new NedbStore(db) };
}

/** A file of `count` hosts (host(i)) written with the grain deferred. */
async function writtenFile(count: number): Promise<string> {
	const file = path.join(tempDir("deferred"), "hosts.db");
	const writer = await open(file);
	await writer.store.insertMany(Array.from({ length: count }, (_, i) => host(i)));
	writer.m.stop();
	return file;
}

const host = (i: number): Doc => ({
	_id: `h-${String(i).padStart(3, "0")}`,
	status: i % 3 ? "up" : "down",
	// A key "grain" deeper in the record, before the record's own: the line is then parsed whole.
	...(i % 5 === 0 ? { labels: { x: 1, grain: { os: "decoy" } } } : {}),
	grain: {
		os: "ALT",
		osrelease: `p${10 + (i % 2)}`,
		cpu_flags: Array.from({ length: 20 }, (_, k) => `f${k}`),
		ctl: { at: new Date(Date.UTC(2026, 0, 1, 0, 0, i)) },
		"a.b": { "50%": i },
		text: 'a,"grain":{"x":1}',
	},
	_updated: new Date(Date.UTC(2026, 0, 2, 0, 0, i)),
	ip: `10.0.0.${i}`,
});

describe("a deferred field of the embedded store", () => {
	it("loads records equal to NeDB's own loader's, the field parsed only when read", async () => {
		const file = path.join(tempDir("deferred"), "hosts.db");
		const writer = await open(file);
		await writer.store.insertMany(Array.from({ length: 40 }, (_, i) => host(i)));
		await writer.store.updateMany({ _id: "h-003" }, { $set: { status: "down", "grain.osrelease": "p12" } });
		writer.m.stop();
		// The writer's lines: the marker first, every record's grain last.
		const written = lines(file);
		expect(written[0]).toBe('{"$$deferred":"grain"}');
		for (const line of written.filter(l => l.includes('"_id"'))) expect(line.endsWith("}}")).toBe(true);
		expect(written.filter(l => l.includes('"_id"')).every(l => Object.keys(JSON.parse(l)).pop() === "grain")).toBe(
			true,
		);

		const ours = await open(file);
		// NeDB's own loader rewrites the file: the fields still pending are read from the file as it was loaded.
		const theirs = await open(file, false);
		const deferred = ours.m.deferred!;
		// Records whose line holds a deeper "grain" first were parsed whole (8 of 40): the others wait.
		expect(deferred.hydrated).toBe(0);
		expect(deferred.unread).toBe(32);
		// A page of a list, as the API reads it (the grain left out): nothing parsed.
		const page = await ours.store.findPage({ status: "down" }, { limit: 10, exclude: ["grain"] });
		expect(page.total).toBe(14);
		expect(deferred.hydrated).toBe(0);
		// An item: its grain, read and kept.
		const one = await ours.store.findOne({ _id: "h-001" });
		expect(one?.grain).toEqual({ ...(host(1).grain as Doc) });
		expect((one!.grain as { ctl: { at: unknown } }).ctl.at).toEqual(new Date(Date.UTC(2026, 0, 1, 0, 0, 1)));
		expect(deferred.hydrated).toBe(1);
		await ours.store.findOne({ _id: "h-001" });
		expect(deferred.hydrated).toBe(1);
		// Every record as NeDB's own loader has it (keys in their stored form), the grain included.
		expect(byId(ours.db.getAllData().map(d => model.deepCopy(d)))).toEqual(byId(theirs.db.getAllData()));
		expect(deferred.hydrated).toBe(32);
		// The updated record's grain as written.
		expect(((await ours.store.findOne({ _id: "h-003" }))!.grain as Doc).osrelease).toBe("p12");
		ours.m.stop();
	});

	it("answers filters, sorts and projections on the grain as before, and a write of a record leaves its grain whole", async () => {
		const file = await writtenFile(30);
		const { store, m } = await open(file);
		expect(await store.count({ "grain.osrelease": "p11" })).toBe(15);
		expect((await store.find({}, { sort: [["grain.ctl.at", -1]], limit: 1, only: ["grain"] }))[0]).toEqual({
			_id: "h-029",
			grain: host(29).grain,
		});
		await store.updateMany({ _id: "h-002" }, { $set: { status: "down" } });
		await store.updateMany({ _id: "h-004" }, { $set: { "grain.os": "Debian" } });
		m.stop();
		const again = await open(file);
		expect((await again.store.findOne({ _id: "h-002" }))?.grain).toEqual(host(2).grain);
		expect(((await again.store.findOne({ _id: "h-004" }))!.grain as Doc).os).toBe("Debian");
		again.m.stop();
	});

	it("rewrites a file of records still pending without parsing them, and the rewrite loads the same", async () => {
		const file = path.join(tempDir("deferred"), "hosts.db");
		const writer = await open(file);
		await writer.store.insertMany(Array.from({ length: 20 }, (_, i) => host(i)));
		// Superseded lines: the next load rewrites the file.
		await writer.store.updateMany({ status: "up" }, { $set: { seen: true } });
		writer.m.stop();
		const before = lines(file).length;
		const reader = await open(file);
		expect(lines(file).length).toBeLessThan(before);
		const pending = reader.m.deferred!.unread;
		await reader.db.compactDatafileAsync();
		expect(reader.m.deferred!.hydrated).toBe(0);
		expect(reader.m.deferred!.unread).toBe(pending);
		const theirs = await open(file, false);
		expect(byId(reader.db.getAllData().map(d => model.deepCopy(d)))).toEqual(byId(theirs.db.getAllData()));
		reader.m.stop();
	});

	it("loads a file written before the field was deferred (the grain anywhere in a line) whole, rewrites it once, then leaves it", async () => {
		const file = path.join(tempDir("deferred"), "hosts.db");
		const old = Array.from({ length: 10 }, (_, i) => {
			const { grain, ...rest } = host(i);
			// The grain first, then the rest: its closing brace is not the line's last (and no dotted key: NeDB's serialize refuses it).
			const { "a.b": _dotted, ...plain } = grain as Doc;
			return { grain: { ...plain, ab: 1 }, ...rest };
		});
		fs.writeFileSync(file, old.map(d => model.serialize(d)).join("\n") + "\n");
		const theirs = await open(file, false);
		const ours = await open(file);
		expect(ours.m.deferred!.unread).toBe(0);
		expect(byId(ours.db.getAllData())).toEqual(byId(theirs.db.getAllData()));
		ours.m.stop();
		expect(lines(file)[0]).toBe('{"$$deferred":"grain"}');
		const stat = fs.statSync(file);
		const again = await open(file);
		expect(again.m.deferred!.unread).toBe(8);
		expect(fs.statSync(file).mtimeMs).toBe(stat.mtimeMs);
		expect(byId(again.db.getAllData().map(d => model.deepCopy(d)))).toEqual(byId(theirs.db.getAllData()));
		again.m.stop();
		// A build without the deferred field reads the marker as a line it does not know, and rewrites the file without it.
		const plain = new Datastore({ filename: file }) as Db;
		manageNedbFile(plain);
		await plain.loadDatabaseAsync();
		expect(lines(file)[0]).not.toContain("$$deferred");
		expect(byId(plain.getAllData())).toEqual(byId(theirs.db.getAllData()));
	});

	it("reads every field in the background pass, then closes the file", async () => {
		const file = await writtenFile(200);
		const fds = openFds();
		const { db, m } = await open(file);
		expect(openFds()).toBe(fds + 1);
		expect(m.deferred!.unread).toBe(160);
		m.hydrateInBackground!();
		while (m.deferred!.unread > 0) await new Promise(r => setImmediate(r));
		expect(openFds()).toBe(fds);
		expect(m.deferred!.hydrated).toBe(160);
		const theirs = await open(file, false);
		expect(byId(db.getAllData().map(d => model.deepCopy(d)))).toEqual(byId(theirs.db.getAllData()));
		m.stop();
	});

	it("closes the file of a load whose lines later lines superseded or deleted, once the records it loaded are read", async () => {
		const file = path.join(tempDir("deferred"), "hosts.db");
		const writer = await open(file);
		await writer.store.insertMany(Array.from({ length: 60 }, (_, i) => host(i)));
		// Each record written three more times (the grain changed: its last line holds the value), and ten removed.
		for (const round of [1, 2, 3]) await writer.store.updateMany({}, { $set: { "grain.osrelease": `r${round}` } });
		await writer.store.removeMany({ _id: { $in: Array.from({ length: 10 }, (_, i) => host(50 + i)._id as string) } });
		writer.m.stop();
		expect(lines(file).length).toBeGreaterThan(4 * 60);
		const { db, m, store } = await open(file);
		// The 50 records left, of which 40 wait for their grain in the file the load read (the others hold a deeper "grain").
		expect(db.getAllData()).toHaveLength(50);
		expect(m.deferred!.unread).toBe(40);
		expect(fdsOn(file)).toBe(1);
		// Two read before the background pass, which reads the others.
		for (const id of ["h-001", "h-049"])
			expect(((await store.findOne({ _id: id }))!.grain as Doc).osrelease).toBe("r3");
		expect(m.deferred!.unread).toBe(38);
		m.hydrateInBackground!();
		while (m.deferred!.unread > 0) await new Promise(r => setImmediate(r));
		// Every grain read, the last written: the file the load read is let go (its space with it, once replaced).
		expect(byId(db.getAllData()).map(d => (d.grain as Doc).osrelease)).toEqual(Array(50).fill("r3"));
		expect(fdsOn(file)).toBe(0);
		m.stop();
	});

	it("reads the fields a load left pending before loading again, and lets both files go", async () => {
		const file = await writtenFile(40);
		const { db, m } = await open(file);
		expect(m.deferred!.unread).toBe(32);
		const first = fdsOn(file);
		await db.loadDatabaseAsync();
		// The first load's fields were read (its file let go), the second's wait in the file it read.
		expect(m.deferred!.hydrated).toBe(32);
		expect(m.deferred!.unread).toBe(32);
		expect(fdsOn(file)).toBe(first);
		expect(byId(db.getAllData()).map(d => (d.grain as Doc).osrelease)).toEqual(
			Array.from({ length: 40 }, (_, i) => (host(i).grain as Doc).osrelease),
		);
		expect(m.deferred!.unreadable).toBe(0);
		expect(fdsOn(file)).toBe(0);
		m.stop();
	});

	it("lets the file go when a load fails (too many corrupt lines)", async () => {
		const file = await writtenFile(20);
		fs.appendFileSync(file, "not a record\n".repeat(10));
		const db = new Datastore({ filename: file }) as Db;
		const m = manageNedbFile(db, undefined, "grain");
		await expect(db.loadDatabaseAsync()).rejects.toThrow(/corrupt/);
		expect(m.deferred!.unread).toBe(0);
		expect(fdsOn(file)).toBe(0);
		m.stop();
	});

	it("counts a field assigned before it was read as read, and lets the file go after the last", async () => {
		const file = await writtenFile(10);
		const { db, m } = await open(file);
		const waiting = byId(db.getAllData()).filter((_, i) => i % 5 !== 0);
		expect(m.deferred!.unread).toBe(8);
		for (const [k, r] of waiting.entries()) {
			r.grain = { os: `new-${k}` };
			expect(m.deferred!.unread).toBe(8 - k - 1);
			expect(fdsOn(file)).toBe(k === 7 ? 0 : 1);
		}
		expect(waiting.map(r => (r.grain as Doc).os)).toEqual(waiting.map((_, k) => `new-${k}`));
		expect(m.deferred!.hydrated).toBe(0);
		// Half assigned, then the background pass: it reads only the others, and the assigned values stay.
		const again = await open(file);
		const some = byId(again.db.getAllData()).filter((_, i) => i % 5 !== 0);
		for (const r of some.slice(0, 4)) r.grain = { os: "assigned" };
		expect(again.m.deferred!.hydrateSome(Infinity)).toBe(false);
		expect(again.m.deferred!.hydrated).toBe(4);
		expect(again.m.deferred!.unread).toBe(0);
		expect(some.map(r => (r.grain as Doc).os)).toEqual([...Array(4).fill("assigned"), ...Array(4).fill("ALT")]);
		expect(fdsOn(file)).toBe(0);
		// An assigned field is a field as any other: deleted, it is gone.
		delete some[0].grain;
		expect("grain" in some[0]).toBe(false);
		m.stop();
		again.m.stop();
	});

	it("reads the fields in the background a slice at a time, many records' bytes at once, until none is left", async () => {
		// Grains of about 3 KB: 200 hosts hold more than one read's worth of bytes.
		const file = path.join(tempDir("deferred"), "hosts.db");
		const writer = await open(file);
		await writer.store.insertMany(
			Array.from({ length: 200 }, (_, i) => ({
				...host(i),
				labels: {},
				grain: { ...(host(i).grain as Doc), pad: "x".repeat(3_000) },
			})),
		);
		writer.m.stop();
		const { db, m } = await open(file);
		expect(m.deferred!.unread).toBe(200);
		// A slice with no time left reads one batch: many records, not all; more are left.
		expect(m.deferred!.hydrateSome(0)).toBe(true);
		const first = m.deferred!.hydrated;
		expect(first).toBeGreaterThan(1);
		expect(first).toBeLessThan(200);
		expect(m.deferred!.waiting).toBe(true);
		// With time, the rest; none left, the file let go.
		expect(m.deferred!.hydrateSome(Infinity)).toBe(false);
		expect(m.deferred!.waiting).toBe(false);
		expect(m.deferred!.hydrated).toBe(200);
		expect(m.deferred!.unreadable).toBe(0);
		expect(byId(db.getAllData()).map(d => (d.grain as Doc).osrelease)).toEqual(
			Array.from({ length: 200 }, (_, i) => (host(i).grain as Doc).osrelease),
		);
		expect(fdsOn(file)).toBe(0);
		expect(m.deferred!.hydrateSome(Infinity)).toBe(false);
		m.stop();
	});

	it("reads a field whose bytes are gone (a disk's fault: the file cut short under it) as null, the others as written, and never throws", async () => {
		const file = await writtenFile(50);
		const { db, m } = await open(file);
		fs.truncateSync(file, Math.floor(fs.statSync(file).size / 2));
		// A rewrite of the file meanwhile writes what it can read, and null for the rest.
		await db.compactDatafileAsync();
		const rewritten = lines(file)
			.filter(l => l.includes('"_id"'))
			.map(l => JSON.parse(l) as Doc);
		expect(rewritten).toHaveLength(50);
		expect(rewritten.filter(d => d.grain === null).length).toBe(m.deferred!.unreadable);
		expect(() => m.deferred!.hydrateSome(Infinity)).not.toThrow();
		const grains = byId(db.getAllData()).map(d => d.grain);
		expect(m.deferred!.unreadable).toBeGreaterThan(10);
		expect(grains.filter(g => g === null)).toHaveLength(m.deferred!.unreadable);
		// Keys as stored (encoded: `a%2Eb`), read from the records themselves.
		expect(grains[1]).toMatchObject({ os: "ALT", osrelease: "p11", "a%2Eb": { "50%25": 1 } });
		expect(m.deferred!.unread).toBe(0);
		m.stop();
	});

	it("keeps a record's field a field: assigned, copied, written and deleted as any other", async () => {
		const file = await writtenFile(3);
		const { db, m } = await open(file);
		const [, a, b] = byId(db.getAllData());
		expect(Object.keys(a).pop()).toBe("grain");
		expect(JSON.parse(JSON.stringify(a)).grain.os).toBe("ALT");
		expect({ ...b }.grain).toEqual(b.grain);
		b.grain = { os: "other" };
		expect(b.grain).toEqual({ os: "other" });
		expect(Object.getOwnPropertyDescriptor(b, "grain")).toMatchObject({
			value: { os: "other" },
			writable: true,
			enumerable: true,
		});
		delete a.grain;
		expect("grain" in a).toBe(false);
		expect(m.deferred!.unread).toBe(0);
		m.stop();
	});

	it("writes a line NeDB reads as the record, its field last, whatever the record", () => {
		const deferred = new DeferredField("grain", v => v);
		const key = fc.string({ maxLength: 6 }).filter(k => !k.startsWith("$") && !k.includes("."));
		const leaf = fc.oneof(
			fc.integer(),
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
				fc.dictionary(fc.oneof(key, fc.constant("grain")), tie("value"), { maxKeys: 4 }),
			),
		}));
		fc.assert(
			fc.property(fc.dictionary(fc.oneof(key, fc.constant("grain")), value, { maxKeys: 6 }), doc => {
				const record: Doc = { _id: "x", ...doc };
				const line = serializeRecord(record, deferred);
				expect(JSON.parse(line)).toEqual(JSON.parse(model.serialize(record)));
				if (record.grain !== undefined) expect(Object.keys(JSON.parse(line)).pop()).toBe("grain");
			}),
			{ numRuns: 500 },
		);
		// A record of the field alone, and one with a key `__proto__` (a key, not the copy's prototype).
		const write = (v: unknown) => JSON.stringify(v);
		expect(serializeDeferred({ grain: { os: "x" } }, deferred, write)).toBe('{"grain":{"os":"x"}}');
		const proto = JSON.parse('{"_id":"p","__proto__":{"a":1},"grain":2}') as Doc;
		expect(serializeDeferred(proto, deferred, write)).toBe('{"_id":"p","__proto__":{"a":1},"grain":2}');
	});

	it("is off where lines pass through serialization hooks (they would no longer be JSON.stringify's)", async () => {
		const file = path.join(tempDir("deferred"), "hosts.db");
		const hooks = {
			afterSerialization: (s: string) => Buffer.from(s).toString("base64"),
			beforeDeserialization: (s: string) => Buffer.from(s, "base64").toString(),
		};
		const writer = await open(file, true, hooks);
		expect(writer.m.deferred).toBeUndefined();
		await writer.store.insertMany([host(1)]);
		writer.m.stop();
		const reader = await open(file, true, hooks);
		expect((await reader.store.findOne({ _id: "h-001" }))?.grain).toEqual(host(1).grain);
		reader.m.stop();
	});
});
