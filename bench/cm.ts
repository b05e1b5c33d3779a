/**
 * The cm-gateway part of `npm run bench`, against the salt-api simulator with BENCH_MINIONS (default
 * 10,000) minions, fleet-ctl running every service in one child process (the production command) on
 * NATS so that the bench can call the internal `cm-gateway.sync`:
 *
 *   sync      a full inventory reconciliation of every minion, first into an empty database, then again
 *             with nothing changed; next to it, the floor: the same four salt-api reads alone. The
 *             fleet-ctl process's resident memory before and its peak (VmHWM) after. What the two runs
 *             published to minions (must be nothing: invalid otherwise), and the presence read they use
 *             (manage.present) beside the one used before issue 17 (manage.status), interleaved.
 *   events    BENCH_EVENTS (default 200) minions going down or up one after the other, each announced by the
 *             presence change event the master's loop sends: the delay to GET /api/hosts/<id> showing it, next to the delay until a bare
 *             event-stream subscriber in the bench process sees the presence event (the master's own
 *             share). Target: p99 under 1 s.
 *   exec      POST /api/groups/{id} (local_async test.ping) on a group of 5,000 hosts, BENCH_EXEC_RUNS
 *             (default 10) times, next to the same lowstate sent straight to salt-api: the gateway's own
 *             overhead; plus the time until all 5,000 returns are `actions` records.
 */
import fs from "node:fs";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { SaltApiSimulator } from "../test/simulators/salt-api";
import { SaltClient } from "../services/cm-gateway/salt-client";
import type { SaltEvent } from "../services/cm-gateway/salt-events";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	rawGet,
	recordedReturns,
	runProductionCommand,
	serviceNames,
	sleep,
	stopProc,
	waitForHttp200,
} from "./support";

const MINIONS = envInt("BENCH_MINIONS", 10_000);
const EVENTS = envInt("BENCH_EVENTS", 200);
const EXEC_RUNS = envInt("BENCH_EXEC_RUNS", 10);
const GROUP_SIZE = 5000;
const EVENT_TARGET_MS = 1000;
/** The simulated master's `timeout` and `gather_job_timeout` (s): what manage.status waits when a minion is down. */
const SIM_TIMEOUT = 5;
const SIM_GATHER_TIMEOUT = 0;

/** Resident memory of a process from /proc: current and peak, in MB. */
function memory(pid: number): { rss: number; peak: number } {
	const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
	const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
	return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
	const t = process.hrtime.bigint();
	const value = await fn();
	return { ms: Number(process.hrtime.bigint() - t) / 1e6, value };
}

/** Runs the cm-gateway scenarios; answers the report and whether every figure is valid. */
export async function benchCm(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const sim = new SaltApiSimulator({
		minions: MINIONS,
		timeout: SIM_TIMEOUT,
		gatherJobTimeout: SIM_GATHER_TIMEOUT,
		latencyMs: [2, 50],
		presenceIntervalMs: 3_600_000,
	});
	const { url: salt } = await sim.start();
	const { nats, namespace, base, env } = await benchCluster("cm", dataDir, sim.cmApiEnv);
	const proc = runProductionCommand("cm-all", serviceNames(), {
		...env,
		CM_API_TIMEOUT_MS: "120000",
		CM_SYNC_INTERVAL_MS: "0",
		CM_JOB_POLL_MS: "60000",
	});
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-cm-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	const direct = new SaltClient({ url: salt, ...sim.credentials, timeoutMs: 120_000 });
	const watcher = new SaltClient({ url: salt, ...sim.credentials });
	const lines: string[] = [];
	let valid = true;
	try {
		await broker.start();
		await broker.waitForServices(["cm-gateway", "hosts", "api"], 120_000);
		await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);
		for (let i = 0; !(await broker.call<{ connected: boolean }>("cm-gateway.eventStreamStatus")).connected; i++) {
			if (i > 200) throw new Error("the cm-gateway did not open the event stream");
			await sleep(50);
		}
		const pid = proc.child.pid!;

		// ---------------------------------------------------------------- sync
		log(`cm sync: the four salt-api reads alone, ${MINIONS} minions ...`);
		const reads = await timed(async () => {
			await direct.lowstate({ client: "wheel", fun: "key.list_all" }, { safe: true });
			await direct.lowstate({ client: "wheel", fun: "key.finger", match: "*" }, { safe: true });
			await direct.lowstate({ client: "runner", fun: "manage.present" }, { safe: true });
			await direct.lowstate({ client: "runner", fun: "cache.grains", tgt: "*", tgt_type: "glob" }, { safe: true });
		});
		const before = memory(pid);
		// What the reconciliation publishes to minions: nothing (issue 17). Counted on the master, not assumed.
		const published: string[] = [];
		const offPublished = sim.onEvent(e => {
			if (/^salt\/job\/\d+\/new$/.test(e.tag)) published.push(String(e.data.fun));
		});
		sim.resetExecutions();
		log(`cm sync: into an empty database ...`);
		const first = await timed(() => broker.call<{ hosts: number; created: number }>("cm-gateway.sync"));
		log(`cm sync: again, nothing changed ...`);
		const second = await timed(() => broker.call<{ hosts: number; updated: number }>("cm-gateway.sync"));
		const after = memory(pid);
		offPublished();
		const executions = sim.executions().length;
		const keys = sim.minionIds().length;
		// The second reconciliation finds the fleet as the first left it: it writes (updates) no host at all.
		if (first.value.created !== keys || second.value.updated !== 0) {
			valid = false;
			log(
				`cm sync: INVALID: created ${first.value.created} (expected ${keys}), then updated ${second.value.updated} with nothing changed (expected 0)`,
			);
		}
		if (published.length || executions) {
			valid = false;
			log(
				`cm sync: INVALID: the reconciliation published ${published.length} job(s) (${[...new Set(published)].join(", ")}) and ran ${executions} execution(s) on minions; it must publish nothing`,
			);
		}

		// Presence: today's read (manage.present, reads what the master knows) beside the previous one
		// (manage.status, which publishes test.ping to the whole fleet and waits out the master's timeout when a
		// minion is down), interleaved, BENCH_PRESENCE_ROUNDS rounds.
		const down = sim.minionIds({ key: "accepted", up: false }).length;
		const rounds = envInt("BENCH_PRESENCE_ROUNDS", 3);
		const presence = { present: [] as number[], status: [] as number[], statusPublished: 0 };
		for (let i = 0; i < rounds; i++) {
			log(`cm presence read: round ${i + 1}/${rounds} (manage.present, then manage.status) ...`);
			sim.resetExecutions();
			presence.present.push(
				(await timed(() => direct.lowstate({ client: "runner", fun: "manage.present" }, { safe: true }))).ms,
			);
			const presentRan = sim.executions().length;
			presence.status.push(
				(await timed(() => direct.lowstate({ client: "runner", fun: "manage.status" }, { safe: true }))).ms,
			);
			presence.statusPublished = sim.executions().length - presentRan;
			if (presentRan) {
				valid = false;
				log(`cm presence read: INVALID: manage.present ran ${presentRan} execution(s) on minions`);
			}
		}
		if (down > 0 && presence.statusPublished === 0) {
			valid = false;
			log(
				"cm presence read: INVALID: manage.status published nothing: the baseline does not measure what a real master does",
			);
		}
		const med = (xs: number[]) => quantile(xs, 0.5);
		lines.push(
			`Full inventory sync, ${fmt(keys)} minions with keys (fleet-ctl: all services in one process, NeDB):`,
			"",
			"| run | fleet-ctl s | salt-api reads alone s | fleet-ctl RSS before MB | peak RSS MB |",
			"|---|---|---|---|---|",
			`| first (creates every host) | ${fmt(first.ms / 1000, 2)} | ${fmt(reads.ms / 1000, 2)} | ${fmt(before.rss)} | ${fmt(after.peak)} |`,
			`| second (nothing changed) | ${fmt(second.ms / 1000, 2)} | ${fmt(reads.ms / 1000, 2)} | | |`,
			"",
			`Jobs the two reconciliations published to minions: ${published.length} (executions on minions: ${executions}).`,
			"",
			`Presence read of the reconciliation, ${fmt(keys)} minions of which ${fmt(down)} down (master timeout ${SIM_TIMEOUT} s, gather_job_timeout ${SIM_GATHER_TIMEOUT} s; a real master's defaults are 5 s and 10 s), median of ${rounds} interleaved rounds:`,
			"",
			"| read | median ms | executions on minions per read |",
			"|---|---|---|",
			`| manage.present (now) | ${fmt(med(presence.present), 1)} | 0 |`,
			`| manage.status (before issue 17) | ${fmt(med(presence.status), 1)} | ${fmt(presence.statusPublished)} |`,
			"",
			`So the reconciliation before issue 17 cost about ${fmt((second.ms + med(presence.status) - med(presence.present)) / 1000, 2)} s for the second run (this run's ${fmt(second.ms / 1000, 2)} s with manage.status's read in place of manage.present's) and a test.ping on every minion.`,
			"",
		);

		// ---------------------------------------------------------------- events
		const seen = new Map<string, { up: boolean; at: number }[]>();
		const stream = watcher.streamEvents({
			onEvent: (ev: SaltEvent) => {
				if (ev.tag !== "salt/presence/change") return;
				const at = performance.now();
				for (const [list, up] of [
					[ev.data.new, true],
					[ev.data.lost, false],
				] as const)
					for (const id of Array.isArray(list) ? list : [])
						seen.set(String(id), [...(seen.get(String(id)) ?? []), { up, at }]);
			},
		});
		while (!stream.connected) await sleep(20);
		log(`cm events: ${EVENTS} presence changes, one at a time ...`);
		const accepted = sim.minionIds({ key: "accepted" });
		const apiDelays: number[] = [];
		const busDelays: number[] = [];
		for (let i = 0; i < EVENTS; i++) {
			const id = accepted[(i * 7919) % accepted.length];
			const up = !sim.minion(id)!.up;
			const t0 = performance.now();
			sim.setUp(id, up);
			// The master announces presence from its maintenance loop (every loop_interval), with this change event
			// and the full list. Sent now, as the loop would: what is measured is fleet-ctl's share, not the loop's
			// period (docs/salt.md, "Presence"). A stopped minion that starts also fires its start event at once.
			sim.fireEvent("salt/presence/change", up ? { new: [id], lost: [] } : { new: [], lost: [id] });
			for (;;) {
				const res = await rawGet(`${base}/api/hosts/${encodeURIComponent(id)}`);
				if (res.status === 200 && JSON.parse(res.body.toString("utf8")).status === (up ? "up" : "down")) break;
				if (performance.now() - t0 > 30_000)
					throw new Error(`host ${id} did not turn ${up ? "up" : "down"} within 30 s`);
				await sleep(2);
			}
			apiDelays.push(performance.now() - t0);
			const bus = seen.get(id)?.find(s => s.up === up && s.at >= t0);
			if (bus) busDelays.push(bus.at - t0);
			seen.delete(id);
		}
		stream.close();
		const met = quantile(apiDelays, 0.99) < EVENT_TARGET_MS;
		lines.push(
			`Minion presence change to the API showing it (${EVENTS} changes, GET /api/hosts/<id> polled every 2 ms):`,
			"",
			"| path | p50 ms | p95 ms | p99 ms | max ms | target |",
			"|---|---|---|---|---|---|",
			`| fleet-ctl API | ${fmt(quantile(apiDelays, 0.5), 1)} | ${fmt(quantile(apiDelays, 0.95), 1)} | ${fmt(quantile(apiDelays, 0.99), 1)} | ${fmt(Math.max(...apiDelays), 1)} | p99 < ${EVENT_TARGET_MS} ms ${met ? "met" : "NOT MET"} |`,
			`| salt-api event stream alone (${busDelays.length} seen) | ${fmt(quantile(busDelays, 0.5), 1)} | ${fmt(quantile(busDelays, 0.95), 1)} | ${fmt(quantile(busDelays, 0.99), 1)} | ${fmt(Math.max(...busDelays), 1)} | – |`,
			"",
		);

		// ---------------------------------------------------------------- exec on a group of 5,000
		const targets = sim.upMinions().slice(0, GROUP_SIZE);
		if (targets.length < GROUP_SIZE)
			throw new Error(`only ${targets.length} minions are up; BENCH_MINIONS must give ${GROUP_SIZE}`);
		const group = await apiJson(base, "POST", "/api/groups", { name: "bench-5000", type: 0, hosts: targets });
		if (group.status !== 201) throw new Error(`POST /api/groups answered ${group.status}`);
		log(
			`cm exec: POST /api/groups/{id} on ${GROUP_SIZE} hosts, ${EXEC_RUNS} runs, each next to the same lowstate sent straight to salt-api ...`,
		);
		const viaApi: number[] = [];
		const viaSalt: number[] = [];
		const untilRecorded: number[] = [];
		for (let i = 0; i < EXEC_RUNS + 1; i++) {
			const t0 = performance.now();
			const ours = await timed(() =>
				apiJson(base, "POST", `/api/groups/${group.body._id}`, { cm_client: "local_async", fun: "test.ping" }),
			);
			if (ours.value.status !== 200 || ours.value.body.return.return[0].minions.length !== GROUP_SIZE)
				throw new Error(`POST /api/groups/{id} answered ${ours.value.status}`);
			const jid = ours.value.body.task_id as string;
			while ((await recordedReturns(base, jid)) < GROUP_SIZE) {
				if (performance.now() - t0 > 120_000)
					throw new Error(`the returns of job ${jid} were not all recorded within 120 s`);
				await sleep(20);
			}
			const all = performance.now() - t0;
			const bare = await timed(() =>
				direct.lowstate({ client: "local_async", tgt: targets, tgt_type: "list", fun: "test.ping" }),
			);
			await sleep(300); // let the direct job's returns go by
			if (i === 0) continue; // warm-up
			viaApi.push(ours.ms);
			viaSalt.push(bare.ms);
			untilRecorded.push(all);
		}
		const overhead = viaApi.map((ms, i) => ms - viaSalt[i]);
		lines.push(
			`Remote execution on a group of ${fmt(GROUP_SIZE)} hosts (local_async test.ping, ${EXEC_RUNS} runs after one warm-up):`,
			"",
			"| path | median ms | p90 ms | max ms |",
			"|---|---|---|---|",
			`| POST /api/groups/{id} through fleet-ctl | ${fmt(quantile(viaApi, 0.5), 1)} | ${fmt(quantile(viaApi, 0.9), 1)} | ${fmt(Math.max(...viaApi), 1)} |`,
			`| the same lowstate straight to salt-api | ${fmt(quantile(viaSalt, 0.5), 1)} | ${fmt(quantile(viaSalt, 0.9), 1)} | ${fmt(Math.max(...viaSalt), 1)} |`,
			`| fleet-ctl's own overhead | ${fmt(quantile(overhead, 0.5), 1)} | ${fmt(quantile(overhead, 0.9), 1)} | ${fmt(Math.max(...overhead), 1)} |`,
			`| until all ${fmt(GROUP_SIZE)} returns are actions records | ${fmt(quantile(untilRecorded, 0.5), 1)} | ${fmt(quantile(untilRecorded, 0.9), 1)} | ${fmt(Math.max(...untilRecorded), 1)} |`,
			"",
		);
	} finally {
		watcher.close();
		direct.close();
		await broker.stop().catch(() => undefined);
		await stopProc(proc);
		await sim.stop();
	}
	return { report: lines.join("\n"), valid };
}
