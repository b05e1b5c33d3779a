/**
 * The rollouts part of `npm run bench` (BENCH_ONLY=rollouts, docs/rollouts.md): a rollout of `test.ping` over
 * BENCH_ROLLOUT_MINIONS (default 10,000) simulated minions, a canary then batches of 10%, fleet-ctl in one process
 * on NATS and NeDB next to the salt-api simulator in the bench process. Every time is read on the master's bus:
 *
 *   overhead per batch   from a batch's last return to the next batch's job published: what fleet-ctl adds
 *                        (counting the returns, the history, the claim, the budget, the authorization, the audit)
 *   baseline             the same batches driven by a loop in the bench process straight against salt-api
 *                        (publish, wait for every return on the event stream, publish the next): the floor
 *
 * Rounds alternate, rollout then baseline. Valid when every host ran the function once per round and every
 * batch of the rollout finished; the bench fails otherwise.
 */
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { SaltApiSimulator } from "../test/simulators/salt-api";
import { SaltClient } from "../services/cm-gateway/salt-client";
import { profileFlags } from "./reads";
import {
	againstFleetCtl,
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	runProductionCommand,
	serviceNames,
	sleep,
	waitForHttp200,
} from "./support";

const MINIONS = envInt("BENCH_ROLLOUT_MINIONS", 10_000, 20);
const ROUNDS = 2;

/** When each job was published and when its returns came, from the master's bus. */
class BusClock {
	readonly published = new Map<string, number>();
	readonly returns = new Map<string, number[]>();
	constructor(sim: SaltApiSimulator) {
		sim.onEvent(e => {
			const m = /^salt\/job\/(\d{20})\/(new|ret\/.+)$/.exec(e.tag);
			if (!m) return;
			if (m[2] === "new") this.published.set(m[1], performance.now());
			else (this.returns.get(m[1]) ?? this.returns.set(m[1], []).get(m[1])!).push(performance.now());
		});
	}
	/** Gaps from each job's last return to the next job's publication, and each job's own time. */
	gaps(jids: string[]): { gaps: number[]; jobs: number[] } {
		const gaps: number[] = [];
		const jobs: number[] = [];
		for (let i = 0; i < jids.length; i++) {
			const last = Math.max(...(this.returns.get(jids[i]) ?? [NaN]));
			jobs.push(last - (this.published.get(jids[i]) ?? NaN));
			if (i + 1 < jids.length) gaps.push((this.published.get(jids[i + 1]) ?? NaN) - last);
		}
		return { gaps, jobs };
	}
}

export async function benchRollouts(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const sim = new SaltApiSimulator({
		minions: MINIONS,
		timeout: 5,
		gatherJobTimeout: 0,
		latencyMs: [2, 50],
		presenceIntervalMs: 3_600_000,
		downFraction: 0,
		keyMix: { pending: 0, rejected: 0, denied: 0 },
	});
	const { url: salt } = await sim.start();
	const clock = new BusClock(sim);
	const { nats, namespace, base, env } = await benchCluster("rollouts", dataDir, sim.cmApiEnv);
	const proc = runProductionCommand(
		"rollouts-all",
		serviceNames(),
		{ ...env, CM_API_TIMEOUT_MS: "120000", CM_SYNC_INTERVAL_MS: "0", CM_JOB_POLL_MS: "60000", ROLLOUT_TICK_MS: "1000" },
		profileFlags("rollouts-all"),
	);
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-rollouts-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	const direct = new SaltClient({ url: salt, ...sim.credentials, timeoutMs: 120_000 });
	let valid = true;
	const invalid = (why: string) => {
		valid = false;
		log(`rollouts: INVALID: ${why}`);
	};
	const lines: string[] = [];
	try {
		await againstFleetCtl(proc, broker, async () => {
			await broker.start();
			await broker.waitForServices(["cm-gateway", "rollouts", "hosts", "api"], 120_000);
			await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);
			for (let i = 0; !(await broker.call<{ connected: boolean }>("cm-gateway.eventStreamStatus")).connected; i++) {
				if (i > 200) throw new Error("the cm-gateway did not open the event stream");
				await sleep(50);
			}
			log(`rollouts: inventory of ${fmt(MINIONS)} minions ...`);
			await broker.call("cm-gateway.sync");
			const reachable = sim.upMinions().sort();

			const subject: { gaps: number[]; jobs: number[] } = { gaps: [], jobs: [] };
			const floor: { gaps: number[]; jobs: number[] } = { gaps: [], jobs: [] };
			let batches = 0;
			for (let round = 0; round < ROUNDS; round++) {
				sim.resetExecutions();
				log(`rollouts: round ${round + 1}, a rollout over ${fmt(reachable.length)} hosts ...`);
				// Every minion with a key is a host; the few whose key is not accepted are not reached (within the budget).
				const created = await apiJson(base, "POST", "/api/rollouts", {
					name: `bench ${round}`,
					target: "*",
					fun: "test.ping",
					canary: 1,
					batch: "10%",
					failure_budget: sim.minionIds().length - reachable.length,
				});
				if (created.status !== 201)
					throw new Error(`POST /api/rollouts answered ${created.status}: ${JSON.stringify(created.body)}`);
				let r: { status: string; batches: Array<{ jid: string; state: string }>; succeeded: number } | undefined;
				// Polled without its hosts and batches (a 10,000-host record is large), read whole once it ended.
				for (const deadline = Date.now() + 600_000; Date.now() < deadline; await sleep(200)) {
					r = (
						await apiJson(
							base,
							"GET",
							`/api/rollouts/${created.body._id}?projection=${encodeURIComponent('{"hosts":0,"batches":0}')}`,
						)
					).body;
					if (r?.status !== "running") break;
				}
				r = (await apiJson(base, "GET", `/api/rollouts/${created.body._id}`)).body;
				if (r?.status !== "finished" || r.succeeded !== reachable.length)
					invalid(
						`rollout ${round + 1} ended ${r?.status} with ${r?.succeeded} of ${reachable.length} hosts succeeded`,
					);
				if (sim.executions().length !== reachable.length)
					invalid(`rollout ${round + 1}: ${sim.executions().length} executions for ${reachable.length} hosts`);
				const jids = (r?.batches ?? []).map(b => b.jid);
				batches = jids.length;
				const s = clock.gaps(jids);
				subject.gaps.push(...s.gaps);
				subject.jobs.push(...s.jobs);

				sim.resetExecutions();
				log(`rollouts: round ${round + 1}, the same batches straight against salt-api ...`);
				const plan = [
					reachable.slice(0, 1),
					...Array.from({ length: Math.ceil((reachable.length - 1) / Math.ceil(reachable.length / 10)) }, (_, i) =>
						reachable.slice(1 + i * Math.ceil(reachable.length / 10), 1 + (i + 1) * Math.ceil(reachable.length / 10)),
					),
				].filter(b => b.length);
				const baseJids: string[] = [];
				for (const hosts of plan) {
					const ret = await direct.lowstate<{ jid: string }>({
						client: "local_async",
						tgt: hosts,
						tgt_type: "list",
						fun: "test.ping",
					});
					baseJids.push(ret.jid);
					for (
						const deadline = Date.now() + 120_000;
						(clock.returns.get(ret.jid)?.length ?? 0) < hosts.length;
						await sleep(1)
					) {
						if (Date.now() > deadline) throw new Error(`baseline batch ${ret.jid} did not return`);
					}
				}
				if (sim.executions().length !== reachable.length)
					invalid(`baseline ${round + 1}: ${sim.executions().length} executions for ${reachable.length} hosts`);
				const f = clock.gaps(baseJids);
				floor.gaps.push(...f.gaps);
				floor.jobs.push(...f.jobs);
			}
			if (subject.gaps.some(Number.isNaN) || floor.gaps.some(Number.isNaN))
				invalid("a batch's publication or returns were not seen on the bus");
			const row = (what: string, t: number[]) =>
				`| ${what} | ${fmt(quantile(t, 0.5), 0)} | ${fmt(quantile(t, 0.99), 0)} | ${fmt(Math.max(...t), 0)} |`;
			lines.push(
				`Rollout of test.ping over ${fmt(reachable.length)} minions (salt-api simulator, 2–50 ms per return), canary 1 then batches of 10% (${batches} batches), ${ROUNDS} rounds alternating with the same batches driven straight against salt-api; fleet-ctl in one process on NATS and NeDB, its driver looking every 1 s besides the moment a job ends:`,
				"",
				"| per batch | p50 ms | p99 ms | max ms |",
				"|---|---|---|---|",
				row("fleet-ctl: last return of a batch to the next batch published", subject.gaps),
				row("baseline, a loop against salt-api: the same", floor.gaps),
				row("a batch's job at Salt, published to last return (fleet-ctl's rollout)", subject.jobs),
				row("the same, baseline", floor.jobs),
				"",
			);
		});
	} finally {
		direct.close();
		await sim.stop();
	}
	return { report: lines.join("\n"), valid };
}
