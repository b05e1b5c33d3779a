/**
 * The statistics part of `npm run bench` (BENCH_ONLY=stats): 30 days of one-minute snapshots of 10,000
 * hosts, 1% of them changing in each (status flips, state applies, dist-upgrades, new addresses and
 * versions, a few new and soft-deleted hosts). Runs in a child process of its own (its peak RSS is the
 * figure), with the stats service on NeDB in memory.
 *
 * The history is written directly through the stats service's own stores with the code its snapshots
 * use (lib/fleet/stats-history.ts nextSnapshot: the same documents), not through hosts.upsertMany and 43,200
 * snapshot rounds: that would take hours of the hosts service, not of the statistics.
 *
 * Reported: stored bytes per snapshot (a keyframe, a 1% snapshot, the average) against a full copy of
 * every host entry per snapshot (what the spec's service stored); the five statistics over the 30 days,
 * called through the service's actions, each next to a naive scan of full snapshots generated on the fly
 * (their answers must be equal); peak RSS.
 *
 * BENCH_STATS_HOSTS (10,000), BENCH_STATS_DAYS (30), BENCH_STATS_CHANGE (0.01), BENCH_STATS_HEAP_MB (the worker's
 * --max-old-space-size, 800), BENCH_STATS_NAIVE=0 (no naive scan; quick runs only).
 */
import path from "node:path";
import { ServiceBroker } from "moleculer";
import { formatHttpDate } from "../lib/eve/dates";
import { newObjectId } from "../lib/eve/ids";
import { FleetState, nextSnapshot, type Entry } from "../lib/fleet/stats-history";
import type { Doc, Store } from "../lib/storage/store";
import { prng } from "./hosts";
import { envInt, fmt, quantile, spawnNode } from "./support";

const HOSTS = envInt("BENCH_STATS_HOSTS", 10_000);
const DAYS = envInt("BENCH_STATS_DAYS", 30);
const CHANGE = Number(process.env.BENCH_STATS_CHANGE || 0.01);
const KEYFRAME_EVERY = 1440;
const SNAPSHOTS = DAYS * 1440;
const MINUTE = 60_000;
const SEED = 20261123;
const RUNS = 3;
/** The worker's heap cap: V8 otherwise lets garbage pile up towards its default limit before collecting it. */
const HEAP_MB = envInt("BENCH_STATS_HEAP_MB", 800);
/** BENCH_STATS_NAIVE=0 leaves the naive scan out (minutes at 30 days): for quick runs only, the report says so. */
const NAIVE = process.env.BENCH_STATS_NAIVE !== "0";

const now = () => performance.now();
const DAY0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 - DAYS * 86_400_000;
const at = (i: number) => new Date(DAY0 + i * MINUTE + 5000);

/** The spec's service kept a full copy of these in every snapshot. */
function specEntry(e: Entry): Doc {
	return {
		_id: e._id,
		version: e.version,
		ip: e.ip,
		nodegroups: e.nodegroups,
		_created: e._created,
		_updated: e._updated,
		_deleted: e._soft_deleted,
	};
}

/**
 * The history, deterministic: calls `visit` with each snapshot's index, time, every host entry (the
 * generator's own objects: read, never kept) and the entries that changed (copies).
 */
function generate(visit: (i: number, t: Date, all: Entry[], changed: Entry[]) => void): void {
	const random = prng(SEED);
	const initial = Math.floor(HOSTS * 0.99);
	const versions = ["3006.1", "3006.8", "3007.0", "3007.1"];
	const groups = ["web", "db", "ws", "kiosk"];
	const mk = (n: number, t: Date): Entry => ({
		_id: `host-${String(n).padStart(5, "0")}`,
		version: versions[n % 2],
		ip: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
		nodegroups: [groups[n % 4]],
		_created: t,
		_updated: t,
		_soft_deleted: false,
		status: random() < 0.8 ? "up" : "down",
		last_stateapply: new Date(t.getTime() - 86_400_000 * 7),
	});
	const hosts: Entry[] = [];
	const t0 = at(0);
	for (let n = 0; n < initial; n++) hosts.push(mk(n, t0));
	visit(
		0,
		t0,
		hosts,
		hosts.map(e => ({ ...e })),
	);
	const perSnapshot = Math.max(1, Math.round(HOSTS * CHANGE));
	for (let i = 1; i < SNAPSHOTS; i++) {
		const t = at(i);
		const changed = new Set<Entry>();
		// The rest of the fleet arrives over the month, within the 1%.
		if (hosts.length < HOSTS && random() < ((HOSTS - initial) / SNAPSHOTS) * 4) {
			const e = mk(hosts.length, t);
			hosts.push(e);
			changed.add(e);
		}
		while (changed.size < perSnapshot) {
			const e = hosts[Math.floor(random() * hosts.length)];
			if (changed.has(e)) continue;
			const r = random();
			if (r < 0.55) e.status = e.status === "up" ? "down" : "up";
			else if (r < 0.85) e.last_stateapply = t;
			else if (r < 0.93) {
				e.last_distupgrade = t;
				e.version = versions[2 + Math.floor(random() * 2)];
			} else if (r < 0.99) e.ip = `10.200.${Math.floor(random() * 256)}.${Math.floor(random() * 256)}`;
			else e._soft_deleted = !e._soft_deleted;
			e._updated = t;
			changed.add(e);
		}
		visit(
			i,
			t,
			hosts,
			[...changed].map(e => ({ ...e })),
		);
	}
}

/** Median of RUNS timed calls (after one warm-up); the answer of the last. */
async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
	const t0 = now();
	let value = await fn();
	const times: number[] = [];
	// A slow one (the filtered replay over the month) is measured once more after its warm-up, not RUNS times.
	for (let r = 0; r < (now() - t0 > 2000 ? 1 : RUNS); r++) {
		const t = now();
		value = await fn();
		times.push(now() - t);
	}
	return { ms: quantile(times, 0.5), value };
}

/** The worker: builds the history, measures, prints the report and `VALID <bool>` last. */
async function worker(): Promise<void> {
	Object.assign(process.env, {
		DATA_DIR: ":memory:",
		STATS_SNAPSHOTS: "false",
		STATS_KEYFRAME_EVERY: String(KEYFRAME_EVERY),
		STATS_SNAPSHOT_INTERVAL: "60",
	});
	const broker = new ServiceBroker({ logger: false, transporter: null, nodeID: `bench-stats-${process.pid}` });
	broker.loadService(path.join(__dirname, "../services/stats/stats.service.js"));
	await broker.start();
	const service = broker.getLocalService("stats") as unknown as {
		store: Store;
		stores: Record<string, Store>;
		periodSummary(from: number, to: number): Promise<unknown>;
	};
	const headers = service.store;
	const changes = service.stores.hosts_statistic_changes;
	const countsStore = service.stores.hosts_statistic_counts;
	const lines: string[] = [];
	let valid = true;

	// ---------------------------------------------------------------- the history
	const started = now();
	const state = new FleetState();
	let pendingHeaders: Doc[] = [];
	let pendingDocs: Doc[] = [];
	let pendingCounts: Doc[] = [];
	const bytes = { keyframe: 0, keyframes: 0, delta: 0, deltas: 0, headers: 0, counts: 0, total: 0 };
	let fullCopy = 0;
	const writes: Promise<void>[] = [];
	generate((i, t, all, changed) => {
		const keyframe = i % KEYFRAME_EVERY === 0;
		const { docs, counts, up, down } = nextSnapshot(state, changed, i === 0, i, keyframe);
		const header = {
			_id: newObjectId(),
			index: i,
			slot: Math.floor(t.getTime() / MINUTE),
			timestamp: t,
			complete: true,
			keyframe,
			up,
			down,
			total: up + down,
			seen: t,
			_created: t,
			_updated: t,
		};
		// The per-value counts are part of every snapshot's cost.
		const countBytes = Buffer.byteLength(JSON.stringify(counts));
		bytes.counts += countBytes;
		const docBytes = docs.reduce((n, d) => n + Buffer.byteLength(JSON.stringify(d)), countBytes);
		const headerBytes = Buffer.byteLength(JSON.stringify(header));
		if (keyframe) {
			bytes.keyframe += docBytes + headerBytes;
			bytes.keyframes++;
		} else {
			bytes.delta += docBytes + headerBytes;
			bytes.deltas++;
		}
		bytes.headers += headerBytes;
		bytes.total += docBytes + headerBytes;
		if (i === SNAPSHOTS - 1)
			fullCopy = Buffer.byteLength(
				JSON.stringify({
					_id: header._id,
					hosts: all.map(specEntry),
					timestamp: t,
					index: i,
					_created: t,
					_updated: t,
				}),
			);
		pendingHeaders.push(header);
		pendingDocs.push(...docs);
		pendingCounts.push(counts);
		if (pendingHeaders.length >= 500 || i === SNAPSHOTS - 1) {
			writes.push(
				headers.insertMany(pendingHeaders),
				changes.insertMany(pendingDocs),
				countsStore.insertMany(pendingCounts),
			);
			pendingHeaders = [];
			pendingDocs = [];
			pendingCounts = [];
		}
	});
	await Promise.all(writes);
	const genSeconds = (now() - started) / 1000;
	// What the taker does at each keyframe: summarize the period that ended (lib/fleet/stats-history.ts summarize).
	const summaryStarted = now();
	let periods = 0;
	for (let from = 0; from + KEYFRAME_EVERY < SNAPSHOTS; from += KEYFRAME_EVERY, periods++)
		await service.periodSummary(from, from + KEYFRAME_EVERY - 1);
	const summaryMs = periods ? (now() - summaryStarted) / periods : 0;
	// The history's live size: the heap after a full collection (the worker runs with --expose-gc).
	(globalThis as { gc?: () => void }).gc?.();
	const heapAfterGen = process.memoryUsage().heapUsed;
	const rssAfterGen = process.memoryUsage().rss;
	lines.push(
		`history: ${fmt(SNAPSHOTS)} one-minute snapshots (${DAYS} days) of ${fmt(HOSTS)} hosts, ${CHANGE * 100}% changing per snapshot, keyframe every ${KEYFRAME_EVERY}; written through the stats service's stores in ${genSeconds.toFixed(1)} s`,
	);
	lines.push(`period summaries (made at each keyframe, once a day): ${fmt(summaryMs)} ms each`);
	lines.push("");
	lines.push("storage per snapshot (serialized bytes)      fleet-ctl    full copy    ratio");
	const row = (label: string, ours: number) =>
		lines.push(
			`  ${label.padEnd(40)} ${fmt(ours).padStart(11)} ${fmt(fullCopy).padStart(12)}   ${((ours / fullCopy) * 100).toFixed(2).padStart(5)}%`,
		);
	row("a 1% snapshot (changes + counts + header)", bytes.delta / bytes.deltas);
	row("  of which the per-value counts", bytes.counts / SNAPSHOTS);
	row("a keyframe (whole fleet + header)", bytes.keyframe / bytes.keyframes);
	let summaryBytes = 0;
	await service.stores.hosts_statistic_periods.scan(
		{},
		[],
		d => (summaryBytes += Buffer.byteLength(JSON.stringify(d))),
	);
	row("average over the month (with summaries)", (bytes.total + summaryBytes) / SNAPSHOTS);
	lines.push(
		`  month: ${fmt((bytes.total + summaryBytes) / 1e6, 1)} MB stored against ${fmt((fullCopy * SNAPSHOTS) / 1e9, 1)} GB of full copies`,
	);
	const deltaRatio = bytes.delta / bytes.deltas / fullCopy;
	lines.push(`  target: a 1% snapshot costs at most 2% of a full one: ${deltaRatio <= 0.02 ? "met" : "NOT met"}`);

	// ---------------------------------------------------------------- the statistics
	const range: [string, string] = [formatHttpDate(at(0)), formatHttpDate(at(SNAPSHOTS))];
	const query = (extra: Array<[string, string]> = []) => [["range[]", range[0]], ["range[]", range[1]], ...extra];
	const start = new Date(Date.parse(range[0]));
	const end = new Date(Date.parse(range[1]));
	const inRange = (d: unknown) => d instanceof Date && d.getTime() >= start.getTime() && d.getTime() <= end.getTime();

	interface Stat {
		name: string;
		action: string;
		extra?: Array<[string, string]>;
		/** Its own range[] (default: the whole month). */
		range?: [string, string];
		/** ms; 0: no target (shown for the record). */
		target: number;
		/** The naive computation: a fresh accumulator fed every full snapshot, then its answer. */
		naive: () => { snapshot(i: number, t: Date, all: Entry[]): void; answer(): unknown };
	}
	const uniqueNaive = (key: string, hit: (e: Entry) => boolean) => () => {
		const all = new Set<string>();
		const hits = new Set<string>();
		return {
			snapshot: (_i: number, _t: Date, entries: Entry[]) => {
				for (const e of entries) {
					if (e._soft_deleted) continue;
					all.add(e._id);
					if (hit(e)) hits.add(e._id);
				}
			},
			answer: () => [
				{ hostnames: key === "new" ? { new: [...hits].sort() } : { [key]: [...hits].sort(), all: [...all].sort() } },
			],
		};
	};
	// New: first held by a snapshot at or after `from`, and counted (not soft-deleted) in one of the range's.
	const newNaive = (from: number) => () => {
		const first = new Map<string, number>();
		const counted = new Set<string>();
		return {
			snapshot: (i: number, _t: Date, entries: Entry[]) => {
				for (const e of entries) {
					if (!first.has(e._id)) first.set(e._id, i);
					if (i >= from && !e._soft_deleted) counted.add(e._id);
				}
			},
			answer: () => [{ hostnames: { new: [...counted].filter(id => first.get(id)! >= from).sort() } }],
		};
	};
	const half = Math.floor(SNAPSHOTS / 2);
	const onlineNaive = (test: (e: Entry) => boolean) => onlineNaiveEvery(3_600_000, test);
	function onlineNaiveEvery(ms: number, test: (e: Entry) => boolean) {
		return () => {
			const points: unknown[] = [];
			return {
				snapshot: (i: number, t: Date, entries: Entry[]) => {
					// The last snapshot of each bucket holds the point.
					const bucket = Math.floor((t.getTime() - start.getTime()) / ms);
					const nextBucket = Math.floor((at(i + 1).getTime() - start.getTime()) / ms);
					if (bucket === nextBucket && i !== SNAPSHOTS - 1) return;
					let up = 0;
					let down = 0;
					for (const e of entries) {
						if (e._soft_deleted || !test(e)) continue;
						if (e.status === "up") up++;
						else down++;
					}
					points.push({
						timestamp: formatHttpDate(new Date(start.getTime() + bucket * ms)),
						_id: null,
						hostnames: { up, down },
					});
				},
				answer: () => points,
			};
		};
	}
	const stats: Stat[] = [
		{
			name: "online, 1-hour interval",
			action: "stats.online",
			extra: [["interval", "3600"]],
			target: 200,
			naive: onlineNaive(() => true),
		},
		{
			name: 'online, 1-hour, where nodegroups "web"',
			action: "stats.online",
			extra: [
				["interval", "3600"],
				["where", '{"nodegroups":"web"}'],
			],
			target: 200,
			naive: onlineNaive(e => e.nodegroups.includes("web")),
		},
		{
			name: "online, 1-minute, where version $in, status up",
			action: "stats.online",
			extra: [
				["interval", "60"],
				["where", '{"version":{"$in":["3007.0","3007.1"]},"status":"up"}'],
			],
			target: 200,
			naive: onlineNaiveEvery(60_000, e => ["3007.0", "3007.1"].includes(e.version) && e.status === "up"),
		},
		// Not answerable from the counts (`$ne`): the replay of the month, the limit of this design (docs/statistics.md).
		{
			name: "online, 1-hour, where version $ne (replayed)",
			action: "stats.online",
			extra: [
				["interval", "3600"],
				["where", '{"version":{"$ne":"3006.1"}}'],
			],
			target: 0,
			naive: onlineNaive(e => e.version !== "3006.1"),
		},
		{
			name: "unique_online",
			action: "stats.uniqueOnline",
			target: 1000,
			naive: uniqueNaive("up", e => e.status === "up"),
		},
		{
			name: "unique_updated",
			action: "stats.uniqueUpdated",
			target: 1000,
			naive: uniqueNaive("updated", e => inRange(e.last_stateapply)),
		},
		{
			name: "unique_dist_upgraded",
			action: "stats.uniqueDistUpgraded",
			target: 1000,
			naive: uniqueNaive("distUpgraded", e => inRange(e.last_distupgrade)),
		},
		{ name: "new_hosts", action: "stats.newHosts", target: 1000, naive: newNaive(0) },
		{
			name: "new_hosts, second half of the month",
			action: "stats.newHosts",
			range: [formatHttpDate(at(half)), range[1]],
			target: 1000,
			naive: newNaive(half),
		},
	];
	lines.push("");
	lines.push(
		`statistics over the ${DAYS} days (median of ${RUNS} after a warm-up)            fleet-ctl ms   target ms   naive scan ms   same answer`,
	);
	// The naive scan: every full snapshot, generated on the fly, fed to every statistic's accumulator in one pass
	// (each statistic alone would need the same pass over 432M entries; generating them is a fraction of it).
	const accs = stats.map(s => s.naive());
	const naiveStarted = now();
	if (NAIVE)
		generate((i, ts, all) => {
			for (const acc of accs) acc.snapshot(i, ts, all);
		});
	const naiveMs = (now() - naiveStarted) / stats.length;
	for (const [k, s] of stats.entries()) {
		const ours = await timed(() =>
			broker.call(s.action, {
				query: s.range ? [["range[]", s.range[0]], ["range[]", s.range[1]], ...(s.extra ?? [])] : query(s.extra),
			}),
		);
		const same = !NAIVE || JSON.stringify(accs[k].answer()) === JSON.stringify(ours.value);
		if (!same && process.env.BENCH_STATS_DEBUG)
			process.stderr.write(
				`${s.name}:\n naive ${JSON.stringify(accs[k].answer()).slice(0, 400)}\n ours  ${JSON.stringify(ours.value).slice(0, 400)}\n`,
			);
		valid &&= same;
		const met = !s.target ? "" : ours.ms < s.target ? "  met" : "  NOT met";
		lines.push(
			`  ${s.name.padEnd(48)} ${fmt(ours.ms, 1).padStart(10)} ${(s.target ? fmt(s.target) : "–").padStart(11)} ${fmt(naiveMs, 0).padStart(15)}   ${same ? "yes" : "NO"}${met}`,
		);
	}
	if (!NAIVE) lines.push("  (naive scan LEFT OUT: BENCH_STATS_NAIVE=0; answers not compared)");
	else
		lines.push(
			`  (naive scan: one pass over every full snapshot feeding all ${stats.length}, ${fmt(naiveMs * stats.length)} ms, shown per statistic)`,
		);
	const peak = process.resourceUsage().maxRSS * 1024;
	lines.push("");
	lines.push(
		`peak RSS of the process (service, its history in NeDB in memory, the generator): ${fmt(peak / 1e6)} MB (target: under 1,000 MB); after writing the history: ${fmt(rssAfterGen / 1e6)} MB RSS, ${fmt(heapAfterGen / 1e6)} MB live heap`,
	);
	await broker.stop();
	process.stdout.write(`${lines.join("\n")}\nVALID ${valid}\n`);
}

/** Runs the worker in a child process of its own and relays its report. */
export async function benchStats(log: (msg: string) => void): Promise<{ report: string; valid: boolean }> {
	log(`stats: generating ${DAYS} days of one-minute snapshots of ${HOSTS} hosts in a child process ...`);
	// Registered with the bench's child processes: stopped (SIGKILL at the latest) if the bench stops.
	const proc = spawnNode("stats", [__filename, "--worker"], process.env, [
		"--expose-gc",
		`--max-old-space-size=${HEAP_MB}`,
	]);
	const code = await new Promise<number | null>(r => proc.child.once("exit", r));
	const out = proc.log.join("");
	const valid = code === 0 && /\nVALID true\n$/.test(out);
	return { report: out.replace(/VALID \w+\n$/, "").trimEnd() || `the stats worker failed (exit ${code})`, valid };
}

if (require.main === module && process.argv.includes("--worker")) {
	worker().then(
		() => process.exit(0),
		err => {
			process.stderr.write(`stats bench worker failed: ${(err as Error)?.stack ?? err}\n`);
			process.exit(1);
		},
	);
}
