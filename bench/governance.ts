/**
 * The governance part of `npm run bench` (`BENCH_ONLY=governance`): what the run door's governance step
 * (services/cm-gateway/governance.ts) costs a run. fleet-ctl runs every service in one child process (the production
 * command) against the salt-api simulator with BENCH_GOV_MINIONS (default 2,000) minions, all in one group.
 *
 *   baseline  POST /api/groups/{id} (local_async test.ping) on every host, with every window and policy disabled
 *   governed  the same with BENCH_GOV_RULES (default 20) maintenance windows and as many approval policies enabled:
 *             the windows each govern a group of all the hosts (one of them open now and naming test.ping, the
 *             others other functions), the policies each name the hosts and test.ping with a threshold no run
 *             reaches, so every one of them is evaluated on every run and none holds it
 *
 * The two alternate, BENCH_GOV_RUNS (default 10) rounds after one warm-up each; medians and p95 side by side. Each run
 * starts once the previous one's returns are all recorded, so that it measures the run door, not the recording of
 * another run's returns. Every run must have started a job (a 200 with a jid) in both, and its returns must all be
 * recorded within 120 s: anything else (a 409, a 202) makes the figures worthless and the part invalid.
 */
import { SaltApiSimulator } from "../test/simulators/salt-api";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	recordedReturns,
	runProductionCommand,
	serviceNames,
	stopProc,
	waitForHttp200,
} from "./support";

const MINIONS = envInt("BENCH_GOV_MINIONS", 2000);
const RULES = envInt("BENCH_GOV_RULES", 20);
const RUNS = envInt("BENCH_GOV_RUNS", 10);

export async function benchGovernance(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const sim = new SaltApiSimulator({
		minions: MINIONS,
		timeout: 5,
		gatherJobTimeout: 0,
		latencyMs: [1, 5],
		presenceIntervalMs: 3_600_000,
		downFraction: 0,
	});
	await sim.start();
	const { base, env } = await benchCluster("governance", dataDir, sim.cmApiEnv);
	const proc = runProductionCommand("governance-all", serviceNames(), {
		...env,
		CM_API_TIMEOUT_MS: "120000",
		CM_SYNC_INTERVAL_MS: "0",
		CM_JOB_POLL_MS: "60000",
		READ_CACHE_MS: "0",
	});
	let valid = true;
	try {
		await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);
		log(`governance: the inventory of ${MINIONS} minions ...`);
		if ((await apiJson(base, "POST", "/api/inventory/sync")).status !== 200)
			throw new Error("the inventory sync failed");
		const hosts = sim.upMinions();
		const group = await apiJson(base, "POST", "/api/groups", { name: "bench-governed", type: 0, hosts });
		if (group.status !== 201) throw new Error(`POST /api/groups answered ${group.status}`);
		const id = group.body._id as string;
		const always = { rrule: "FREQ=DAILY", start: "2026-01-01T00:00", timezone: "Europe/Paris", duration: "P1D" };
		const windows: string[] = [];
		const policies: string[] = [];
		for (let i = 0; i < RULES; i++) {
			const w = await apiJson(base, "POST", "/api/maintenance_windows", {
				name: `bench window ${i}`,
				targets: { groups: [id] },
				functions: i === 0 ? ["test.*"] : [`pkg.bench${i}*`, "state.apply"],
				...always,
				enabled: false,
			});
			const p = await apiJson(base, "POST", "/api/approval_policies", {
				name: `bench policy ${i}`,
				functions: ["test.*"],
				targets: { groups: [id] },
				more_than_hosts: 1_000_000,
				approvers: { count: 1, roles: ["admin"] },
				enabled: false,
			});
			if (w.status !== 201 || p.status !== 201)
				throw new Error(
					`creating the rules answered ${w.status}/${p.status}: ${JSON.stringify(w.body)} ${JSON.stringify(p.body)}`,
				);
			windows.push(w.body._id);
			policies.push(p.body._id);
		}
		const setEnabled = async (enabled: boolean) => {
			for (const w of windows) await apiJson(base, "PATCH", `/api/maintenance_windows/${w}`, { enabled });
			for (const p of policies) await apiJson(base, "PATCH", `/api/approval_policies/${p}`, { enabled });
		};
		const run = async (): Promise<number> => {
			const t0 = performance.now();
			const res = await apiJson(base, "POST", `/api/groups/${id}`, { fun: "test.ping" });
			const ms = performance.now() - t0;
			if (res.status !== 200 || typeof res.body.task_id !== "string") {
				valid = false;
				log(`governance: INVALID: a run answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
				return ms;
			}
			// The next run starts once this one's returns are all recorded: each run is measured on a quiet process,
			// not against the previous run's returns (with them, the same build's governance step measured -7 to 59 ms).
			const jid = res.body.task_id as string;
			while ((await recordedReturns(base, jid)) < hosts.length) {
				if (performance.now() - t0 > 120_000) {
					valid = false;
					log(`governance: INVALID: the returns of job ${jid} were not all recorded within 120 s`);
					break;
				}
				await new Promise(r => setTimeout(r, 50));
			}
			return ms;
		};
		const times: Record<"baseline" | "governed", number[]> = { baseline: [], governed: [] };
		log(
			`governance: ${RUNS} rounds of a run on ${hosts.length} hosts, without and with ${RULES} windows and ${RULES} policies, alternating ...`,
		);
		for (let round = 0; round <= RUNS; round++) {
			for (const mode of ["baseline", "governed"] as const) {
				await setEnabled(mode === "governed");
				const ms = await run();
				if (round > 0) times[mode].push(ms);
			}
		}
		const row = (name: string, xs: number[]) =>
			`| ${name} | ${fmt(quantile(xs, 0.5), 1)} | ${fmt(quantile(xs, 0.95), 1)} |`;
		const extra = quantile(times.governed, 0.5) - quantile(times.baseline, 0.5);
		return {
			valid,
			report: [
				`A run on ${fmt(hosts.length)} hosts (POST /api/groups/{id}, local_async test.ping), ${RUNS} rounds alternating:`,
				"",
				"| run door | median ms | p95 ms |",
				"|---|---|---|",
				row("no window or policy enabled (baseline)", times.baseline),
				row(`${RULES} maintenance windows + ${RULES} approval policies, each evaluated on every host`, times.governed),
				"",
				`The governance step costs ${fmt(extra, 1)} ms at the median (${fmt((extra / quantile(times.baseline, 0.5)) * 100, 0)}% of the run's time at the gateway).`,
				"",
			].join("\n"),
		};
	} finally {
		await stopProc(proc);
		await sim.stop();
	}
}
