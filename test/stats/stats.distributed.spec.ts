/**
 * Snapshots on two stats replicas on shared storage, on both legs of test/support/replicas.ts (brokers in one process
 * on one NeDB directory; processes over NATS on MongoDB): two replicas run the stats service, next to the other data
 * services in a third and the API gateway in a fourth, taking a snapshot every second while hosts change. Every
 * interval's snapshot must be taken once (never twice: distinct intervals, contiguous indexes), by either replica;
 * after one replica ends (SIGKILL on the process leg) the other goes on alone; and the last snapshot, rebuilt from
 * what both stored, must be the hosts as they are.
 */
import { ALL_SERVICES } from "../support/harness";
import { describeReplicated } from "../support/replicas";
import { request, eventually, withQuery } from "../support/http";

const HOSTS = 40;

describeReplicated("snapshots on two stats replicas", legOf => {
	it("takes every interval's snapshot exactly once, and goes on when a replica dies", async () => {
		const leg = legOf();
		const env = {
			...(await leg.env("stats")),
			STATS_SNAPSHOT_INTERVAL: "1",
			STATS_KEYFRAME_EVERY: "5",
			TASK_SCHEDULER: "false",
		};
		leg.run(
			ALL_SERVICES().filter(s => s !== "api" && s !== "stats" && s !== "cm-gateway"),
			env,
		);
		const replicas = [
			leg.run(["stats"], env, `stats-a-${process.pid}`),
			leg.run(["stats"], env, `stats-b-${process.pid}`),
		];
		const api = await leg.run(["api"], env).api();
		await Promise.all(replicas.map(r => r.ready()));

		const ids = Array.from({ length: HOSTS }, (_, i) => `dist-${String(i).padStart(2, "0")}`);
		await leg.call("hosts.upsertMany", {
			hosts: ids.map(_id => ({ _id, status: "up", key: "accepted", version: "3006.8" })),
		});
		// Hosts change while the replicas take snapshots; one replica dies half-way.
		const status = new Map(ids.map(id => [id, "up"]));
		const started = Date.now();
		let killedAt = 0;
		for (let round = 0; Date.now() - started < 20_000; round++) {
			const id = ids[(round * 7) % HOSTS];
			const next = status.get(id) === "up" ? "down" : "up";
			await leg.call("hosts.upsertMany", { hosts: [{ _id: id, status: next }] });
			status.set(id, next);
			if (!killedAt && Date.now() - started > 6000) {
				await replicas[0].kill();
				killedAt = Date.now();
			}
			// Not an oracle: the changes are paced over the snapshots' seconds (what was stored is checked below).
			await new Promise(r => setTimeout(r, 300));
		}
		const changesEnded = Date.now();

		// Until the cluster notices the killed node (heartbeats), a read balanced to it fails: such reads count as "not yet".
		const headers = async (): Promise<any[] | undefined> => {
			const out: any[] = [];
			for (let page = 1; ; page++) {
				const res = await request(
					"GET",
					withQuery(`${api}/hosts_statistic`, { sort: "index", max_results: 50, page, projection: { hosts: 0 } }),
				);
				if (res.status !== 200) return undefined;
				out.push(...res.body._items);
				if (!res.body._links.next) return out;
			}
		};
		// A snapshot taken after the last change, by the surviving replica.
		const all = await eventually(
			async () => {
				const found = await headers();
				const late = found?.filter(h => Date.parse(h.timestamp) > killedAt + 12_000) ?? [];
				return found?.some(h => Date.parse(h.timestamp) > changesEnded + 1000) && late.length > 3 ? found : undefined;
			},
			90_000,
			"snapshots by the survivor, one after the last change",
		);

		// Never twice: one snapshot per interval (second), indexes without gaps or repeats.
		const seconds = all.map(h => Date.parse(h.timestamp) / 1000);
		expect(new Set(seconds).size).toBe(seconds.length);
		expect(all.map(h => h.index)).toEqual(all.map((_, i) => all[0].index + i));
		for (let i = 1; i < seconds.length; i++) expect(seconds[i]).toBeGreaterThan(seconds[i - 1]);
		// Each replica took some while both ran; the survivor alone after the kill (a snapshot the killed one left
		// half-way is undone after its lease, so snapshots resume within about ten seconds).
		const by = (node: string) =>
			eventually(
				async () => {
					const res = await request(
						"GET",
						withQuery(`${api}/hosts_statistic`, {
							where: { by: node, index: { $lte: all[all.length - 1].index } },
							max_results: 1,
							projection: { hosts: 0 },
						}),
					);
					return res.status === 200 ? (res.body._meta.total as number) : undefined;
				},
				30_000,
				`the count of ${node}'s snapshots`,
			);
		const [a, b] = [await by(`stats-a-${process.pid}`), await by(`stats-b-${process.pid}`)];
		if (process.env.TEST_LOG)
			console.log(`snapshots: ${all.length}; by replica a ${a}, b ${b}; killed after ${killedAt - started} ms`);
		expect(a + b).toBe(all.length);
		expect(b).toBeGreaterThan(0);
		const afterKill = all.filter(h => Date.parse(h.timestamp) > killedAt + 12_000);
		expect(afterKill.length).toBeGreaterThan(3);
		// Nearly every second has its snapshot (a timer woken late on a loaded machine may miss one).
		const span = seconds[seconds.length - 1] - seconds[0] + 1;
		const beforeKill = seconds.filter(s => s * 1000 < killedAt).length;
		expect(beforeKill).toBeGreaterThanOrEqual(3);
		expect(all.length).toBeLessThanOrEqual(span);

		// The last snapshot, rebuilt from what both replicas stored, is the hosts as they are.
		const last = (await request("GET", `${api}/hosts_statistic/${all[all.length - 1]._id}`)).body;
		const mine = last.hosts.filter((e: any) => e._id.startsWith("dist-"));
		expect(mine.map((e: any) => [e._id, e.status])).toEqual(ids.map(id => [id, status.get(id)]));
	}, 180_000);
});
