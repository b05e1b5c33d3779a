/**
 * The embedded engine against node:sqlite (issue 45, part `engines`; docs/storage.md says what was decided from it):
 * the same BENCH_HOSTS (10,000) hosts of bench/hosts.ts, with Eve's `_created`, `_updated` and soft-delete flag (1%
 * deleted), in three places of one process —
 *
 *   engine   the embedded store (NedbStore on an in-memory NeDB datastore) with the hosts collection's indexes,
 *            read as a list is (`findPageShared`: the total and the page, records shared, not copied);
 *   sqlite   node:sqlite in memory, the fields filtered on as columns of their own (`status`, `ip`, `nat`,
 *            `soft_deleted`; indexes on `status` and `ip`) and the rest of the host as JSON text, the grain in a
 *            table of its own that a list does not read: `SELECT count(*)`, then the page's ids (`SELECT id … ORDER
 *            BY id LIMIT 25`) and their JSON, parsed, dates revived (a list needs objects). Its best schema of those
 *            tried (docs/storage.md): with an index on `soft_deleted` too, SQLite's planner takes it for every read
 *            and sorts 9,900 rows for each page; with the JSON in the sorter, each page took 20–35 ms;
 *   by hand  the hosts in an array in `_id` order, the filter written as code: the work's own limit.
 *
 * Each read is a total and the first page of 25 in `_id` order, for an Eve list's filters: indexed (`status` down, an
 * `ip` range), not served by an index (`status` up and `ip` `$ne` a new value each time; `nat` alone). The three are
 * timed in turn, BENCH_ENGINE_ROUNDS rounds (default 5, the order rotated each round), each sample at least 50 ms of
 * reads. A read whose total or page differs between the three invalidates the run.
 */
import os from "node:os";
import { groupIds, makeHost } from "./hosts";
import { envInt, fmt } from "./support";
import { NedbStore, type NedbDatastore } from "../lib/storage/nedb-store";
import type { Doc, Filter } from "../lib/storage/store";

const Datastore = require("@seald-io/nedb") as new (o: {
	inMemoryOnly: boolean;
}) => NedbDatastore & { loadDatabaseAsync(): Promise<void> };

const ROUNDS = envInt("BENCH_ENGINE_ROUNDS", 5);
const PAGE = 25;
const SAMPLE_MS = 50;
const DATES = ["_created", "_updated", "heartbeat", "last_distupgrade", "last_stateapply"];

interface Read {
	name: string;
	/** The Eve list's filter for the engine (its `where` beside the soft-delete condition). */
	filter(n: number): Filter;
	/** The same as SQL over the extracted columns, and its parameters. */
	sql: string;
	params(n: number): Array<string | number>;
	/** The same written by hand. */
	test(n: number): (h: Doc) => boolean;
}

const live = { _soft_deleted: false };
const READS: Read[] = [
	{
		name: "unfiltered (soft-delete condition only)",
		filter: () => live,
		sql: "soft_deleted = 0",
		params: () => [],
		test: () => h => h._soft_deleted === false,
	},
	{
		name: "indexed: status down",
		filter: () => ({ $and: [{ status: "down" }, live] }),
		sql: "status = ? AND soft_deleted = 0",
		params: () => ["down"],
		test: () => h => h.status === "down" && h._soft_deleted === false,
	},
	{
		name: "indexed: ip range (10.100 to 10.110)",
		filter: () => ({ $and: [{ ip: { $gte: "10.100.", $lt: "10.110." } }, live] }),
		sql: "ip >= ? AND ip < ? AND soft_deleted = 0",
		params: () => ["10.100.", "10.110."],
		test: () => h => typeof h.ip === "string" && h.ip >= "10.100." && h.ip < "10.110." && h._soft_deleted === false,
	},
	{
		name: "no index serves: status up, ip $ne a new value",
		filter: n => ({ $and: [{ status: "up", ip: { $ne: `unseen-${n}` } }, live] }),
		sql: "status = ? AND (ip IS NULL OR ip <> ?) AND soft_deleted = 0",
		params: n => ["up", `unseen-${n}`],
		test: n => {
			const ne = `unseen-${n}`;
			return h => h.status === "up" && h.ip !== ne && h._soft_deleted === false;
		},
	},
	{
		name: "no index at all: nat true",
		filter: () => ({ $and: [{ nat: true }, live] }),
		sql: "nat = 1 AND soft_deleted = 0",
		params: () => [],
		test: () => h => h.nat === true && h._soft_deleted === false,
	},
];

interface Answer {
	total: number;
	ids: string[];
}

type System = { name: string; read(r: Read, n: number): Promise<Answer> | Answer };

async function engineOf(hosts: Doc[]): Promise<System> {
	const db = new Datastore({ inMemoryOnly: true });
	await db.loadDatabaseAsync();
	const store = new NedbStore(db);
	for (const field of ["status", "key", "nodegroups", "groups", "vpn_organization", "version", "_soft_deleted"])
		await store.ensureIndex(field);
	for (const field of ["ip", "_updated"]) await store.ensureIndex(field, { ordered: true });
	for (let i = 0; i < hosts.length; i += 1000) await store.insertMany(hosts.slice(i, i + 1000).map(h => ({ ...h })));
	return {
		name: "engine",
		async read(r, n) {
			const page = await store.findPageShared!(r.filter(n), { skip: 0, limit: PAGE });
			return { total: page.total, ids: page.docs.map(d => d._id as string) };
		},
	};
}

function sqliteOf(hosts: Doc[]): System {
	const { DatabaseSync } = require("node:sqlite") as typeof import("node:sqlite");
	const db = new DatabaseSync(":memory:");
	db.exec(
		"CREATE TABLE hosts (id TEXT PRIMARY KEY, status TEXT, ip TEXT, nat INTEGER, soft_deleted INTEGER NOT NULL, doc TEXT NOT NULL)",
	);
	db.exec("CREATE TABLE grains (id TEXT PRIMARY KEY, grain TEXT NOT NULL)");
	for (const column of ["status", "ip"]) db.exec(`CREATE INDEX hosts_${column} ON hosts (${column})`);
	const insert = db.prepare("INSERT INTO hosts VALUES (?, ?, ?, ?, ?, ?)");
	const insertGrain = db.prepare("INSERT INTO grains VALUES (?, ?)");
	db.exec("BEGIN");
	for (const h of hosts) {
		const { grain, ...rest } = h;
		insert.run(
			h._id as string,
			h.status as string,
			h.ip as string,
			h.nat ? 1 : 0,
			h._soft_deleted ? 1 : 0,
			JSON.stringify(rest),
		);
		insertGrain.run(h._id as string, JSON.stringify(grain));
	}
	db.exec("COMMIT");
	db.exec("ANALYZE");
	const statements = new Map(
		READS.map(r => [
			r.name,
			{
				count: db.prepare(`SELECT count(*) AS n FROM hosts WHERE ${r.sql}`),
				page: db.prepare(`SELECT id FROM hosts WHERE ${r.sql} ORDER BY id LIMIT ${PAGE}`),
			},
		]),
	);
	const docsOf = db.prepare("SELECT doc FROM hosts WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id");
	return {
		name: "sqlite",
		read(r, n) {
			const s = statements.get(r.name)!;
			const params = r.params(n);
			const total = Number((s.count.get(...params) as { n: number }).n);
			const ids = (s.page.all(...params) as Array<{ id: string }>).map(row => row.id);
			const docs = (docsOf.all(JSON.stringify(ids)) as Array<{ doc: string }>).map(row => {
				const doc = JSON.parse(row.doc) as Doc;
				for (const f of DATES) if (typeof doc[f] === "string") doc[f] = new Date(doc[f]);
				return doc;
			});
			return { total, ids: docs.map(d => d._id as string) };
		},
	};
}

function byHandOf(hosts: Doc[]): System {
	const sorted = [...hosts].sort((a, b) => (a._id < b._id ? -1 : 1));
	return {
		name: "by hand",
		read(r, n) {
			const test = r.test(n);
			let total = 0;
			const ids: string[] = [];
			for (const h of sorted) {
				if (!test(h)) continue;
				if (total < PAGE) ids.push(h._id as string);
				total++;
			}
			return { total, ids };
		},
	};
}

/** µs per read of `count` reads, each with a new value. */
async function timed(system: System, r: Read, count: number, next: () => number): Promise<number> {
	const t0 = performance.now();
	for (let i = 0; i < count; i++) await system.read(r, next());
	return ((performance.now() - t0) * 1000) / count;
}

export async function benchEngines(log: (m: string) => void): Promise<{ report: string; valid: boolean }> {
	const count = envInt("BENCH_HOSTS", 10_000);
	const groups = groupIds();
	const now = Date.now();
	const hosts = Array.from(
		{ length: count },
		(_, i) =>
			({
				...makeHost(i, now, groups),
				_created: new Date(now),
				_updated: new Date(now),
				_soft_deleted: i % 100 === 99,
			}) as Doc,
	);
	log(`engines: ${count} hosts into the engine, node:sqlite and an array ...`);
	const systems = [await engineOf(hosts), sqliteOf(hosts), byHandOf(hosts)];
	let value = 0;
	const next = () => ++value;
	const out: string[] = [];
	let valid = true;
	const rows: string[][] = [];
	for (const r of READS) {
		// The three must agree, on several values, before any figure means something.
		for (let k = 0; k < 3; k++) {
			const n = next();
			const answers = await Promise.all(systems.map(s => s.read(r, n)));
			if (answers.some(a => JSON.stringify(a) !== JSON.stringify(answers[0]))) {
				valid = false;
				out.push(
					`!!! INVALID: ${r.name}: ${systems.map((s, i) => `${s.name} total ${answers[i].total}, first ${answers[i].ids[0]}`).join("; ")}`,
				);
			}
		}
		// As many reads per sample as take SAMPLE_MS on each, from a first timing.
		const per = await Promise.all(
			systems.map(async s => Math.max(5, Math.ceil((SAMPLE_MS * 1000) / (await timed(s, r, 5, next))))),
		);
		const samples: number[][] = systems.map(() => []);
		for (let round = 0; round < ROUNDS; round++) {
			for (let j = 0; j < systems.length; j++) {
				const at = (j + round) % systems.length;
				samples[at].push(await timed(systems[at], r, per[at], next));
			}
		}
		const med = samples.map(xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
		const total = (await systems[2].read(r, next())).total;
		rows.push([
			r.name,
			fmt(total),
			...med.map((m, i) => `${fmt(m, 1)} (${fmt(Math.min(...samples[i]), 1)}–${fmt(Math.max(...samples[i]), 1)})`),
			(med[1] / med[0]).toFixed(2),
			(med[2] / med[0]).toFixed(2),
		]);
		log(`  ${r.name}: ${systems.map((s, i) => `${s.name} ${fmt(med[i], 1)} µs`).join(", ")}`);
	}
	const header = [
		"read (a total and a page of 25)",
		"total",
		"engine µs",
		"sqlite µs",
		"by hand µs",
		"sqlite ÷ engine",
		"by hand ÷ engine",
	];
	const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)));
	const line = (cells: string[]) =>
		cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
	out.unshift(
		`${fmt(count)} hosts; node:sqlite in memory, extracted columns (status, ip, nat, soft_deleted; indexes on status, ip) + the host as JSON text, grains apart; load average ${os.loadavg()[0].toFixed(1)}`,
		`median of ${ROUNDS} rounds per read (min–max), the three in turn; a ratio over 1: the engine is faster`,
		"",
		line(header),
		widths.map(w => "-".repeat(w)).join("  "),
		...rows.map(line),
	);
	return { report: out.join("\n"), valid };
}
