/**
 * The stats service against a brute-force computation: a generated history (hosts appearing, going up
 * and down, updated, dist-upgraded, readdressed, soft-deleted and restored, changing nodegroups) is made
 * through the hosts service, a snapshot taken after each step (`stats.snapshot` with the step's time);
 * after each step the test also keeps its own full copy of every host entry, read from the hosts
 * service. Every statistic, over ranges with edges on, between and outside snapshots and with
 * filters, must equal what a naive scan of those full copies gives; so must the rebuilt snapshots of
 * GET /hosts_statistic and /hosts_statistic/{id}. Runs on NeDB, and on the Mongo path when MONGO_URI is set.
 */
import fs from "node:fs";
import path from "node:path";
import { startEmbedded, tempDir, uniqueMongoUri, type Harness } from "../support/harness";
import { itIf } from "../support/skip";
import { request, withQuery, expectEveError } from "../support/http";
import { formatHttpDate } from "../../lib/eve/dates";
import { prng as rng } from "../../bench/hosts";

type Entry = Record<string, any>;
interface Truth {
	index: number;
	timestamp: Date;
	entries: Map<string, Entry>;
}

const BASE = Date.UTC(2024, 0, 1, 0, 0, 0);
const STEP_MS = 60_000;
const STEPS = 40;
const KEYFRAME_EVERY = 7;
const NODEGROUPS = { web: { regex: "^web-" }, db: { regex: "^db-" } };
const TRACKED = [
	"version",
	"ip",
	"nodegroups",
	"_created",
	"_soft_deleted",
	"status",
	"last_stateapply",
	"last_distupgrade",
	"groups",
];

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
const http = (d: Date) => formatHttpDate(d);

// Read once: the embedded harness overwrites process.env (MONGO_URI too) with the settings of each run.
const MONGO_URI = process.env.MONGO_URI;

// The Mongo path without MONGO_URI: reported skipped, with the reason.
for (const backend of ["nedb", "mongo"] as const)
	(backend === "mongo" && !MONGO_URI ? describe.skip : describe)(
		`fleet statistics against a brute force (${backend})${backend === "mongo" && !MONGO_URI ? " (skipped: MONGO_URI is not set)" : ""}`,
		() => {
			let h: Harness;
			const truths: Truth[] = [];
			/** Groups made during the history (their ids are the hosts' `groups`): `evens` from the start, `webs` from step 20 on. */
			const groupIds: Record<string, string> = {};
			const seed = Number(process.env.STATS_SEED ?? 7);

			const readAll = async (): Promise<Entry[]> => {
				const out: Entry[] = [];
				let after: string | undefined;
				for (;;) {
					const page = await h.call("hosts.statisticEntries", after ? { after, limit: 7 } : { limit: 7 });
					out.push(...page.entries);
					if (!page.more) return out;
					after = page.entries[page.entries.length - 1]._id;
				}
			};

			beforeAll(async () => {
				const dataDir = tempDir("stats");
				h = await startEmbedded({
					dataDir,
					mongoUri: backend === "mongo" ? uniqueMongoUri(MONGO_URI as string) : undefined,
					env: {
						STATS_SNAPSHOTS: "false",
						STATS_KEYFRAME_EVERY: String(KEYFRAME_EVERY),
						STATS_SNAPSHOT_INTERVAL: "60",
						NODEGROUPS: JSON.stringify(NODEGROUPS),
						TASK_SCHEDULER: "false",
					},
				});
				const random = rng(seed);
				const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
				// Some hostnames are FQDNs: their dots must survive every stored form (field names cannot hold them).
				const names = Array.from(
					{ length: 36 },
					(_, i) => `${["web", "db", "misc"][i % 3]}-${String(i).padStart(2, "0")}${i % 3 === 2 ? ".example.com" : ""}`,
				);
				const known: string[] = [];
				let previous = new Map<string, Entry>();
				const makeGroup = async (name: string, regex: string) => {
					const res = await request("POST", `${h.api}/groups`, { body: { name, type: 1, info: { regex } } });
					expect(res.status).toBe(201);
					groupIds[name] = res.body._id;
				};
				await makeGroup("evens", "[02468](\\.example\\.com)?$");
				for (let step = 0; step < STEPS; step++) {
					// Hosts join a group in the middle of the history: their entries change in `groups` only.
					if (step === 20) await makeGroup("webs", "^web-");
					const at = new Date(BASE + step * STEP_MS + 1000);
					const stepTime = (s: number) => new Date(BASE + step * STEP_MS + s * 1000);
					// Some new hosts, mostly early.
					const fresh = names
						.filter(n => !known.includes(n))
						.slice(0, step === 0 ? 12 : random() < 0.4 ? 1 + Math.floor(random() * 3) : 0);
					if (fresh.length) {
						await h.call("hosts.upsertMany", {
							hosts: fresh.map(n => ({
								_id: n,
								version: "3006.1",
								ip: `10.0.0.${names.indexOf(n)}`,
								status: random() < 0.7 ? "up" : "down",
								key: "accepted",
								grain: { id: n },
							})),
						});
						known.push(...fresh);
					}
					const changes = 1 + Math.floor(random() * 4);
					for (let c = 0; c < changes && known.length; c++) {
						const host = pick(known);
						const r = random();
						if (r < 0.35)
							await h.call("hosts.upsertMany", { hosts: [{ _id: host, status: random() < 0.5 ? "up" : "down" }] });
						else if (r < 0.55)
							await h.call("hosts.upsertMany", {
								hosts: [{ _id: host, last_stateapply: stepTime(10 + Math.floor(random() * 40)) }],
							});
						else if (r < 0.65)
							await h.call("hosts.upsertMany", {
								hosts: [{ _id: host, last_distupgrade: stepTime(5 + Math.floor(random() * 50)) }],
							});
						else if (r < 0.75)
							await h.call("hosts.upsertMany", {
								hosts: [{ _id: host, version: pick(["3006.1", "3006.8", "3007.0"]) }],
							});
						else if (r < 0.82) await h.call("hosts.upsertMany", { hosts: [{ _id: host, ip: `10.1.${step}.${c}` }] });
						else if (r < 0.92) await h.call("hosts.setPresent", { ids: [host], present: false });
						else await h.call("hosts.setPresent", { ids: [host], present: true });
					}
					// The hosts' `_updated` moves on every write, heartbeats too; that alone is no new version of an entry.
					if (step % 5 === 3) await h.call("hosts.setPresence", { up: known.slice(0, 3), down: [] });
					await h.call("hosts.membershipSettled", {});
					const taken = await h.call("stats.snapshot", { at });
					expect(taken).toEqual({ _id: expect.any(String), index: step });
					// The truth: every host as it is now, `_updated` carried over while no tracked field changed.
					const now = new Map<string, Entry>();
					for (const raw of await readAll()) {
						const e: Entry = { ...raw, _soft_deleted: raw._soft_deleted === true };
						const before = previous.get(e._id);
						if (before && TRACKED.every(f => same(before[f], e[f]))) e._updated = before._updated;
						now.set(e._id, e);
					}
					truths.push({ index: step, timestamp: at, entries: now });
					previous = now;
				}
			}, 120_000);
			afterAll(() => h?.stop());

			// ------------------------------------------------------------ brute force over the full copies

			const inRange = (start: Date, end: Date) => truths.filter(t => t.timestamp >= start && t.timestamp <= end);
			const firstSeen = (host: string) => truths.find(t => t.entries.has(host))!.index;
			const sorted = (s: Set<string>) => [...s].sort();

			function bruteUnique(start: Date, end: Date, test: (e: Entry) => boolean, hit: (e: Entry) => boolean) {
				const all = new Set<string>();
				const hits = new Set<string>();
				for (const t of inRange(start, end))
					for (const e of t.entries.values()) {
						if (!test(e)) continue;
						all.add(e._id);
						if (hit(e)) hits.add(e._id);
					}
				return { all: sorted(all), hits: sorted(hits) };
			}

			function bruteOnline(start: Date, end: Date, interval: number, test: (e: Entry) => boolean) {
				const buckets = new Map<number, Truth>();
				for (const t of inRange(start, end))
					buckets.set(Math.floor((t.timestamp.getTime() - start.getTime()) / (interval * 1000)), t);
				return [...buckets].map(([b, t]) => {
					const live = [...t.entries.values()].filter(test);
					return {
						timestamp: http(new Date(start.getTime() + b * interval * 1000)),
						_id: null,
						hostnames: {
							up: live.filter(e => e.status === "up").length,
							down: live.filter(e => e.status !== "up").length,
						},
					};
				});
			}

			const within = (field: string, start: Date, end: Date) => (e: Entry) =>
				e[field] != null && new Date(e[field]) >= start && new Date(e[field]) <= end;

			/** Filters (as sent) with the same test written by hand; soft-deleted entries count only when the filter names the flag. */
			const inGroup = (e: Entry, name: string) => (e.groups ?? []).includes(groupIds[name]);
			const FILTERS: Array<
				[string, Record<string, unknown> | (() => Record<string, unknown>) | undefined, (e: Entry) => boolean]
			> = [
				["none", undefined, e => !e._soft_deleted],
				["a nodegroup", { nodegroups: "web" }, e => !e._soft_deleted && e.nodegroups.includes("web")],
				[
					"hostnames ($in)",
					{ _id: { $in: ["db-01", "web-03", "misc-05.example.com", "web-12"] } },
					e => !e._soft_deleted && ["db-01", "web-03", "misc-05.example.com", "web-12"].includes(e._id),
				],
				["soft-deleted only", { _soft_deleted: true }, e => e._soft_deleted === true],
				[
					"$or with $ne",
					{ $or: [{ version: { $ne: "3006.1" } }, { nodegroups: "db" }] },
					e => !e._soft_deleted && (e.version !== "3006.1" || e.nodegroups.includes("db")),
				],
				["status", { status: "up" }, e => !e._soft_deleted && e.status === "up"],
				// What the stored counts answer besides a nodegroup and a status (docs/statistics.md):
				[
					"versions ($in)",
					{ version: { $in: ["3006.8", "3007.0", "3006.8"] } },
					e => !e._soft_deleted && ["3006.8", "3007.0"].includes(e.version),
				],
				[
					"a nodegroup and a status ($and)",
					{ $and: [{ nodegroups: "web" }, { status: { $in: ["down"] } }] },
					e => !e._soft_deleted && e.nodegroups.includes("web") && e.status === "down",
				],
				["a group", () => ({ groups: groupIds.evens }), e => !e._soft_deleted && inGroup(e, "evens")],
				[
					"a group joined later, and a status",
					() => ({ groups: { $eq: groupIds.webs }, status: "up" }),
					e => !e._soft_deleted && inGroup(e, "webs") && e.status === "up",
				],
			];

			/** Ranges: everything, edges exactly on snapshots, edges between them, one snapshot, none, partly outside. */
			const RANGES: Array<[string, Date, Date]> = [
				["the whole history", new Date(BASE - 86_400_000), new Date(BASE + 86_400_000)],
				["edges on snapshots", new Date(BASE + 5 * STEP_MS + 1000), new Date(BASE + 20 * STEP_MS + 1000)],
				["edges between snapshots", new Date(BASE + 7 * STEP_MS + 30_000), new Date(BASE + 31 * STEP_MS + 2000)],
				["one snapshot", new Date(BASE + 14 * STEP_MS + 1000), new Date(BASE + 14 * STEP_MS + 1000)],
				["no snapshot", new Date(BASE + 9 * STEP_MS + 2000), new Date(BASE + 9 * STEP_MS + 50_000)],
				[
					"exactly one keyframe period",
					new Date(BASE + KEYFRAME_EVERY * STEP_MS + 1000),
					new Date(BASE + (2 * KEYFRAME_EVERY - 1) * STEP_MS + 1000),
				],
				[
					"two keyframe periods and a bit",
					new Date(BASE + KEYFRAME_EVERY * STEP_MS + 1000),
					new Date(BASE + (3 * KEYFRAME_EVERY + 2) * STEP_MS + 1000),
				],
				[
					"across a keyframe, to the end",
					new Date(BASE + (2 * KEYFRAME_EVERY - 1) * STEP_MS),
					new Date(BASE + STEPS * STEP_MS),
				],
			];

			const query = (
				start: Date,
				end: Date,
				where?: Record<string, unknown> | (() => Record<string, unknown>),
				extra: Array<[string, string]> = [],
			) => [
				["range[]", http(start)],
				["range[]", http(end)],
				...(where ? [["where", JSON.stringify(typeof where === "function" ? where() : where)]] : []),
				...extra,
			];

			it("took one snapshot per step", () => {
				expect(truths).toHaveLength(STEPS);
			});

			// The stored documents are read from NeDB's file: on MongoDB there is no file to read.
			itIf(backend === "nedb", "MongoDB storage: no NeDB file to read")(
				"stores keyframes with every host, the other snapshots only what changed",
				async () => {
					const file = path.join(h.dataDir as string, "hosts_statistic_changes.db");
					const docs = fs
						.readFileSync(file, "utf8")
						.split("\n")
						.filter(Boolean)
						.map(l => JSON.parse(l))
						.filter(d => typeof d.index === "number");
					for (const t of truths.slice(1)) {
						const stored = docs.filter(d => d.index === t.index).flatMap(d => JSON.parse(d.data));
						const prev = truths[t.index - 1].entries;
						const changed = [...t.entries.values()].filter(
							e => !prev.has(e._id) || TRACKED.some(f => !same(prev.get(e._id)![f], e[f])),
						);
						if (t.index % KEYFRAME_EVERY === 0) expect(stored.length).toBe(t.entries.size);
						else expect(stored.map((e: Entry) => e._id).sort()).toEqual(changed.map(e => e._id).sort());
					}
				},
			);

			for (const [rangeName, start, end] of RANGES) {
				for (const [filterName, where, test] of FILTERS) {
					it(`unique_online, unique_updated, unique_dist_upgraded, new_hosts: ${rangeName}, filter ${filterName}`, async () => {
						const q = query(start, end, where);
						const first = inRange(start, end)[0]?.index ?? -1;
						const last = inRange(start, end).at(-1)?.index ?? -1;
						const upd = bruteUnique(start, end, test, within("last_stateapply", start, end));
						const dist = bruteUnique(start, end, test, within("last_distupgrade", start, end));
						const onl = bruteUnique(start, end, test, e => e.status === "up");
						const fresh = bruteUnique(start, end, test, e => firstSeen(e._id) >= first && firstSeen(e._id) <= last);
						expect(await h.call("stats.uniqueOnline", { query: q })).toEqual([
							{ hostnames: { up: onl.hits, all: onl.all } },
						]);
						expect(await h.call("stats.uniqueUpdated", { query: q })).toEqual([
							{ hostnames: { updated: upd.hits, all: upd.all } },
						]);
						expect(await h.call("stats.uniqueDistUpgraded", { query: q })).toEqual([
							{ hostnames: { distUpgraded: dist.hits, all: dist.all } },
						]);
						expect(await h.call("stats.newHosts", { query: q })).toEqual([{ hostnames: { new: fresh.hits } }]);
					});

					for (const interval of [60, 300, 3600]) {
						it(`online every ${interval} s: ${rangeName}, filter ${filterName}`, async () => {
							const res = await h.call("stats.online", {
								query: query(start, end, where, [["interval", String(interval)]]),
							});
							expect(res).toEqual(bruteOnline(start, end, interval, test));
						});
					}
				}
			}

			it("computes the unfiltered online points in the database on MongoDB (a pipeline), from a header scan on NeDB", async () => {
				const [whole] = RANGES;
				// Copied: a local call hands back the live counters.
				const ops = async () => ({ ...(await h.call("stats.storeStats", {})).ops });
				const before = await ops();
				const res = await h.call("stats.online", {
					query: query(whole[1], whole[2], undefined, [["interval", "300"]]),
				});
				const after = await ops();
				expect(res).toEqual(bruteOnline(whole[1], whole[2], 300, e => !e._soft_deleted));
				expect(res.length).toBeGreaterThan(3);
				if (backend === "mongo") {
					expect(after.aggregate - before.aggregate).toBe(1);
					// Nothing else read the headers: the points came from the pipeline alone.
					expect(after.scan + after.find - before.scan - before.find).toBe(0);
				} else {
					expect(after.aggregate).toBe(0);
					expect(after.scan - before.scan).toBe(1);
				}
				// A filter still replays the stored changes in the service, on both stores.
				await h.call("stats.online", { query: query(whole[1], whole[2], { status: "up" }, [["interval", "300"]]) });
				expect((await ops()).aggregate).toBe(after.aggregate);
			});

			it("answers online filtered on a counted field from the stored counts, reading none of the changes; replays any other filter", async () => {
				const [whole] = RANGES;
				const stores = () =>
					(
						h.broker!.getLocalService("stats") as unknown as {
							stores: Record<string, { ops: Record<string, number> } & Record<string, any>>;
						}
					).stores;
				const ops = () => ({
					changes: { ...stores().hosts_statistic_changes.ops },
					counts: { ...stores().hosts_statistic_counts.ops },
				});
				const reads = (o: Record<string, number>) => o.scan + o.find + o.findOne + o.findPage + (o.aggregate ?? 0);
				const counted: Array<[Record<string, unknown>, (e: Entry) => boolean]> = [
					[{ nodegroups: "web" }, e => !e._soft_deleted && e.nodegroups.includes("web")],
					[{ groups: groupIds.webs, status: { $in: ["up", "down"] } }, e => !e._soft_deleted && inGroup(e, "webs")],
					[{ status: "down" }, e => !e._soft_deleted && e.status === "down"],
				];
				for (const [where, test] of counted) {
					const before = ops();
					const res = await h.call("stats.online", { query: query(whole[1], whole[2], where, [["interval", "60"]]) });
					const after = ops();
					expect(res).toEqual(bruteOnline(whole[1], whole[2], 60, test));
					expect(reads(after.changes) - reads(before.changes)).toBe(0);
					expect(reads(after.counts) - reads(before.counts)).toBe(1);
				}
				// Hostnames, `$or`, `$ne`, two lists at once: not in the counts, replayed from the changes.
				const replayed: Array<[Record<string, unknown>, (e: Entry) => boolean]> = [
					[{ _id: { $in: ["web-03", "db-01"] } }, e => !e._soft_deleted && ["web-03", "db-01"].includes(e._id)],
					[{ version: { $ne: "3006.1" } }, e => !e._soft_deleted && e.version !== "3006.1"],
					[
						{ nodegroups: "web", groups: groupIds.evens },
						e => !e._soft_deleted && e.nodegroups.includes("web") && inGroup(e, "evens"),
					],
				];
				for (const [where, test] of replayed) {
					const before = ops();
					const res = await h.call("stats.online", { query: query(whole[1], whole[2], where, [["interval", "60"]]) });
					expect(res).toEqual(bruteOnline(whole[1], whole[2], 60, test));
					expect(reads(ops().changes) - reads(before.changes)).toBeGreaterThan(0);
				}
				// A snapshot without stored counts (taken before they were stored): the range is replayed, with the same answer.
				const counts = stores().hosts_statistic_counts;
				const [kept] = await counts.find({ index: 11 });
				expect(kept.counts.length % 5).toBe(0);
				await counts.removeMany({ index: 11 });
				try {
					const before = ops();
					const res = await h.call("stats.online", {
						query: query(whole[1], whole[2], { nodegroups: "db" }, [["interval", "60"]]),
					});
					expect(res).toEqual(
						bruteOnline(whole[1], whole[2], 60, e => !e._soft_deleted && e.nodegroups.includes("db")),
					);
					expect(reads(ops().changes) - reads(before.changes)).toBeGreaterThan(0);
				} finally {
					await counts.insertMany([kept]);
				}
			});

			it("unions the whole keyframe periods' summaries in the database on MongoDB (pipelines), in the service on NeDB", async () => {
				const [whole] = RANGES;
				const periodOps = () => ({
					...(
						h.broker!.getLocalService("stats") as unknown as { stores: Record<string, { ops: Record<string, number> }> }
					).stores.hosts_statistic_periods.ops,
				});
				const kinds: Array<[string, (e: Entry) => boolean]> = [
					["stats.uniqueOnline", e => e.status === "up"],
					["stats.uniqueUpdated", within("last_stateapply", whole[1], whole[2])],
				];
				for (const [action, hit] of kinds) {
					const before = periodOps();
					const res = await h.call(action, { query: query(whole[1], whole[2]) });
					const after = periodOps();
					const truth = bruteUnique(whole[1], whole[2], e => !e._soft_deleted, hit);
					expect(Object.values(res[0].hostnames)).toEqual([truth.hits, truth.all]);
					if (backend === "mongo") {
						// One union for `all`, one for the statistic's hits; the summaries themselves never leave the database.
						expect(after.aggregate - before.aggregate).toBe(2);
						expect(after.find + after.findOne - before.find - before.findOne).toBe(0);
					} else {
						expect(after.aggregate ?? 0).toBe(0);
						expect(after.scan - before.scan).toBe(1);
					}
				}
			});

			it("makes again a period summary stored in the older form (times keyed by hostname)", async () => {
				const [, start, end] = RANGES.find(([name]) => name === "exactly one keyframe period")!;
				const periods = (h.broker!.getLocalService("stats") as unknown as { stores: Record<string, any> }).stores
					.hosts_statistic_periods;
				const at = start.getTime() + 1;
				await periods.removeMany({ _id: String(KEYFRAME_EVERY) });
				await periods.insertMany([
					{
						_id: String(KEYFRAME_EVERY),
						from: KEYFRAME_EVERY,
						to: 2 * KEYFRAME_EVERY - 1,
						all: ["bogus-host"],
						up: ["bogus-host"],
						fresh: [],
						applies: { "bogus-host": [at] },
						upgrades: {},
					},
				]);
				const upd = bruteUnique(start, end, e => !e._soft_deleted, within("last_stateapply", start, end));
				expect(await h.call("stats.uniqueUpdated", { query: query(start, end) })).toEqual([
					{ hostnames: { updated: upd.hits, all: upd.all } },
				]);
				const stored = await periods.findOne({ _id: String(KEYFRAME_EVERY) });
				expect(Array.isArray(stored.applies)).toBe(true);
				expect(stored.all).not.toContain("bogus-host");
			});

			it("has results that are not all empty (the history is not trivial)", async () => {
				const [whole] = RANGES;
				const res = await h.call("stats.uniqueUpdated", { query: query(whole[1], whole[2]) });
				expect(res[0].hostnames.updated.length).toBeGreaterThan(3);
				expect(res[0].hostnames.all.length).toBeGreaterThan(20);
				const online = await h.call("stats.online", {
					query: query(whole[1], whole[2], { _soft_deleted: true }, [["interval", "60"]]),
				});
				expect(online.some((p: any) => p.hostnames.up + p.hostnames.down > 0)).toBe(true);
			});

			it("rebuilds every full snapshot for GET /hosts_statistic and /hosts_statistic/{id}", async () => {
				const render = (e: Entry, single: boolean) => {
					const out: Entry = {};
					for (const [k, v] of Object.entries(e))
						if (v !== undefined && v !== null)
							out[k] =
								v instanceof Date || (typeof v === "string" && k !== "_id" && /^\d{4}-\d\d-\d\dT/.test(v))
									? http(new Date(v))
									: v;
					if (single) {
						out._deleted = out._soft_deleted;
						delete out._soft_deleted;
					}
					return out;
				};
				const expected = (t: Truth, single: boolean) =>
					[...t.entries.values()].sort((a, b) => (a._id < b._id ? -1 : 1)).map(e => render(e, single));
				const norm = (hosts: Entry[]) =>
					hosts.map(e => Object.fromEntries(Object.entries(e).sort(([a], [b]) => (a < b ? -1 : 1))));
				for (let page = 1; page <= Math.ceil(STEPS / 10); page++) {
					const res = await request(
						"GET",
						withQuery(`${h.api}/hosts_statistic`, { sort: "-index", max_results: 10, page }),
					);
					expect(res.status).toBe(200);
					expect(res.body._meta.total).toBe(STEPS);
					for (const item of res.body._items) {
						const t = truths[item.index];
						expect(item.timestamp).toBe(http(t.timestamp));
						expect(norm(item.hosts)).toEqual(norm(expected(t, false)));
					}
				}
				for (const index of [0, 6, 7, 8, 23, STEPS - 1]) {
					const listed = await request(
						"GET",
						withQuery(`${h.api}/hosts_statistic`, { where: { index }, projection: { hosts: 0 } }),
					);
					expect(listed.body._items[0].hosts).toBeUndefined();
					const res = await request("GET", `${h.api}/hosts_statistic/${listed.body._items[0]._id}`);
					expect(res.status).toBe(200);
					expect(norm(res.body.hosts)).toEqual(norm(expected(truths[index], true)));
				}
			});

			it("answers bad ranges, intervals and filters with 400s in Eve's shape", async () => {
				const ok = http(new Date(BASE));
				const later = http(new Date(BASE + 3_600_000));
				const cases: Array<[string, Record<string, unknown>, RegExp]> = [
					["online", { "range[]": ok }, /exactly two/],
					["unique_online", {}, /range\[\]` is required/],
					["new_hosts", { where: "{}" }, /required/],
				];
				for (const [what, q, message] of cases) {
					const res = expectEveError(await request("GET", withQuery(`${h.api}/hosts/statistics/${what}`, q)), 400);
					expect(res._error.message).toMatch(message);
				}
				const url = (what: string, extra: string) =>
					`${h.api}/hosts/statistics/${what}?range[]=${encodeURIComponent(ok)}&range[]=${encodeURIComponent(later)}${extra}`;
				const reversed = `${h.api}/hosts/statistics/unique_updated?range[]=${encodeURIComponent(later)}&range[]=${encodeURIComponent(ok)}`;
				expect(expectEveError(await request("GET", reversed), 400)._error.message).toMatch(/reversed/);
				const malformed = `${h.api}/hosts/statistics/unique_updated?range[]=2024-01-01&range[]=${encodeURIComponent(ok)}`;
				expect(expectEveError(await request("GET", malformed), 400)._error.message).toMatch(/HTTP-dates/);
				expect(expectEveError(await request("GET", url("online", "")), 400)._error.message).toMatch(
					/`interval` is required/,
				);
				for (const bad of ["0", "-5", "1.5", "abc", "1e400"])
					expectEveError(await request("GET", url("online", `&interval=${bad}`)), 400);
				expect(expectEveError(await request("GET", url("online", "&interval=0.001")), 400)._error.message).toMatch(
					/positive integer/,
				);
				const decade = `${h.api}/hosts/statistics/online?range[]=${encodeURIComponent(ok)}&range[]=${encodeURIComponent(http(new Date(BASE + 10 * 365 * 86_400_000)))}&interval=1`;
				expect(expectEveError(await request("GET", decade), 400)._error.message).toMatch(/points/);
				expectEveError(
					await request("GET", url("unique_online", `&where=${encodeURIComponent('{"$where":"1"}')}`)),
					400,
				);
				expectEveError(
					await request("GET", url("unique_online", `&where=${encodeURIComponent('{"a":{"$regex":"x"}}')}`)),
					400,
				);
				expectEveError(await request("GET", url("unique_online", "&where=%7Bnot-json")), 400);
				expectEveError(
					await request("GET", withQuery(`${h.api}/hosts_statistic`, { where: { "hosts._id": "web-01" } })),
					400,
				);
				expectEveError(await request("GET", withQuery(`${h.api}/hosts_statistic`, { sort: "hosts" })), 400);
			});
		},
	);

describe("retention", () => {
	let h: Harness;
	const HOUR = 3_600_000;
	const at = (k: number) => new Date(BASE + k * HOUR);
	afterAll(() => h?.stop());

	it("drops whole keyframe periods older than STATS_RETENTION_DAYS; what is kept stays right", async () => {
		h = await startEmbedded({
			env: {
				STATS_SNAPSHOTS: "false",
				STATS_KEYFRAME_EVERY: "4",
				STATS_SNAPSHOT_INTERVAL: "3600",
				STATS_RETENTION_DAYS: "1",
				TASK_SCHEDULER: "false",
			},
		});
		await h.call("hosts.upsertMany", {
			hosts: ["ret-a", "ret-b"].map(_id => ({ _id, status: "up", key: "accepted" })),
		});
		for (let k = 0; k < 60; k++) {
			if (k === 40) await h.call("hosts.upsertMany", { hosts: [{ _id: "ret-new", status: "up", key: "accepted" }] });
			if (k % 3 === 0) await h.call("hosts.upsertMany", { hosts: [{ _id: "ret-b", status: k % 2 ? "up" : "down" }] });
			expect(await h.call("stats.snapshot", { at: at(k) })).toMatchObject({ index: k });
		}
		// The last keyframe (56, at 56 h) dropped what came before the period holding 32 h (56 h less a day).
		const listed = await request(
			"GET",
			withQuery(`${h.api}/hosts_statistic`, { sort: "index", max_results: 50, projection: { hosts: 0 } }),
		);
		expect(listed.body._meta.total).toBe(28);
		expect(listed.body._items[0].index).toBe(32);
		const q = [
			["range[]", http(at(0))],
			["range[]", http(at(100))],
		];
		// Hosts first seen before the cut are still not new.
		expect(await h.call("stats.newHosts", { query: q })).toEqual([{ hostnames: { new: ["ret-new"] } }]);
		expect(
			await h
				.call("stats.uniqueOnline", { query: [...q, ["where", JSON.stringify({ _id: { $regex: "x" } })]] })
				.catch((e: Error) => e.message),
		).toMatch(/not allowed/);
		const unique = await h.call("stats.uniqueOnline", { query: q });
		expect(unique[0].hostnames.all).toEqual(expect.arrayContaining(["ret-a", "ret-b", "ret-new"]));
		const item = await request("GET", `${h.api}/hosts_statistic/${listed.body._items[1]._id}`);
		expect(item.body.hosts.filter((e: Entry) => e._id.startsWith("ret-")).map((e: Entry) => [e._id, e.status])).toEqual(
			[
				["ret-a", "up"],
				["ret-b", "up"],
			],
		);
	}, 60_000);
});
