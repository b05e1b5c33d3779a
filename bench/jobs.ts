/**
 * The job history part of `npm run bench` (BENCH_ONLY=jobs, docs/jobs.md): BENCH_JOB_RECORDS (default 1,000,000)
 * `actions` records — jobs of 1,000 hosts each over 10,000 hosts, every host in about a hundred jobs — written
 * the way the cm-gateway writes them (salt-jobs.open, actions.record, salt-jobs.tally), fleet-ctl in one process on
 * NATS and NeDB. Then, a different host each time (so no read cache answers), interleaved:
 *
 *   history     GET /api/salt_jobs?where={"minions":<host>}&max_results=25: the host's jobs, newest first, with counts
 *   unindexed   the same jobs through a filter no index serves (`{"minions":{"$all":[<host>]}}`): every job read
 *   actions     what a client without the history reads: the host's `actions` records, newest 25 jobs first
 *
 * and the history's newest page and its failed state runs. Valid when the three agree with the seed on every host
 * asked (how many jobs, which ones first); the figures are worthless otherwise and the bench fails.
 */
import fs from "node:fs";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import {
	againstFleetCtl,
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	runProductionCommand,
	serviceNames,
	waitForHttp200,
} from "./support";

const RECORDS = envInt("BENCH_JOB_RECORDS", 1_000_000, 1000);
const HOSTS = 10_000;
const PER_JOB = 1000;
const RUNS = 30;
const now = () => performance.now();
const host = (i: number) => `jb-host-${String(i % HOSTS).padStart(5, "0")}`;
/** Job j's first host: spread so that every host is in about the same number of jobs. */
const firstHost = (j: number) => (j * 7919) % HOSTS;
/** Which hosts of every job time out, and which fail. */
const silent = (k: number) => k % 97 === 0;
const failing = (k: number) => !silent(k) && k % 50 === 0;
const FAILED_PER_JOB = Array.from({ length: PER_JOB }, (_, k) => k).filter(failing).length;
const jidOf = (j: number) => `2026010100${String(j).padStart(10, "0")}`;

function rssMiB(pid: number | undefined): number {
	try {
		const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
		return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
	} catch {
		return 0;
	}
}

export async function benchJobs(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const { nats, namespace, base, env } = await benchCluster("jobs", dataDir, { CM_API_URL: "" });
	const proc = runProductionCommand("jobs-all", serviceNames(), env);
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-jobs-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	let valid = true;
	const lines: string[] = [];
	const invalid = (why: string) => {
		valid = false;
		log(`jobs: INVALID: ${why}`);
	};
	await againstFleetCtl(proc, broker, async () => {
		await broker.start();
		await broker.waitForServices(["salt-jobs", "actions", "api"], 120_000);
		await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);

		// ------------------------------------------------------------ seed
		const jobs = Math.ceil(RECORDS / PER_JOB);
		log(`jobs: writing ${fmt(jobs)} jobs of ${PER_JOB} hosts (${fmt(jobs * PER_JOB)} actions records) ...`);
		const jobsOf = new Map<string, number[]>();
		const t0 = now();
		const tallies: number[] = [];
		for (let j = 0; j < jobs; j++) {
			const jid = jidOf(j);
			const minions = Array.from({ length: PER_JOB }, (_, k) => host(firstHost(j) + k));
			for (const m of minions) (jobsOf.get(m) ?? jobsOf.set(m, []).get(m)!).push(j);
			const fun = j % 10 === 0 ? "state.apply" : "cmd.run";
			await broker.call("salt-jobs.open", {
				job: {
					jid,
					fun,
					args: fun === "cmd.run" ? ["uptime"] : [{ __kwarg__: true, mods: "patches.fix" }],
					target: `L@${minions[0]},…`,
					minions,
					user: "bench",
					origin: "api",
					started: new Date(Date.UTC(2026, 0, 1) + j * 60_000),
				},
			});
			const returns = minions.map((m, k) =>
				silent(k)
					? { jid, action: fun, host: m, state: "timeout", args: [], return: "Minion did not return" }
					: {
							jid,
							action: fun,
							host: m,
							state: "finished",
							args: [],
							return: failing(k) ? "failed" : "ok",
							retcode: failing(k) ? 2 : 0,
							success: !failing(k),
						},
			);
			await broker.call("actions.record", { returns });
			const t = now();
			await broker.call("salt-jobs.tally", { jids: [jid] });
			tallies.push(now() - t);
			if (j % 100 === 99) log(`jobs: ${fmt((j + 1) * PER_JOB)} records, ${fmt((now() - t0) / 1000, 1)} s`);
		}
		const seedS = (now() - t0) / 1000;
		const rss = rssMiB(proc.child.pid);

		// ------------------------------------------------------------ measurements, interleaved
		const urls = {
			history: (h: string) =>
				`/api/salt_jobs?where=${encodeURIComponent(JSON.stringify({ minions: h }))}&max_results=25`,
			unindexed: (h: string) =>
				`/api/salt_jobs?where=${encodeURIComponent(JSON.stringify({ minions: { $all: [h] } }))}&max_results=25`,
			actions: (h: string) =>
				`/api/actions?where=${encodeURIComponent(JSON.stringify({ host: h }))}&sort=-jid&max_results=25&projection=${encodeURIComponent('{"jid":1}')}`,
		};
		const times: Record<keyof typeof urls, number[]> = { history: [], unindexed: [], actions: [] };
		log("jobs: reading the history of one host at a time ...");
		for (let r = 0; r <= RUNS; r++) {
			const h = host(r * 331 + 17);
			const mine = jobsOf.get(h) ?? [];
			const newest = [...mine]
				.sort((a, b) => b - a)
				.slice(0, 25)
				.map(jidOf);
			for (const kind of Object.keys(urls) as Array<keyof typeof urls>) {
				const t = now();
				const res = await apiJson(base, "GET", urls[kind](h));
				const took = now() - t;
				if (r > 0) times[kind].push(took); // the first round warms up
				const ids = (res.body?._items ?? []).map((i: { _id: string; jid?: string }) => i.jid ?? i._id);
				if (
					res.status !== 200 ||
					res.body._meta.total !== mine.length ||
					JSON.stringify(ids) !== JSON.stringify(newest)
				)
					invalid(
						`${kind} of ${h} answered ${res.status}, ${res.body?._meta?.total} jobs (${mine.length} seeded), first ${ids[0]} (expected ${newest[0]})`,
					);
			}
		}
		const page = await (async () => {
			const t: number[] = [];
			for (let r = 0; r < Math.min(RUNS, Math.floor(jobs / 25)); r++) {
				const s = now();
				const res = await apiJson(base, "GET", `/api/salt_jobs?max_results=25&page=${r + 1}`);
				t.push(now() - s);
				if (res.status !== 200 || res.body._items[0]?._id !== jidOf(jobs - 1 - r * 25))
					invalid(`page ${r + 1} starts with ${res.body?._items?.[0]?._id}`);
			}
			return t;
		})();
		const failedRuns = await (async () => {
			const t: number[] = [];
			for (let r = 0; r < RUNS; r++) {
				const s = now();
				const res = await apiJson(
					base,
					"GET",
					`/api/salt_jobs?where=${encodeURIComponent(JSON.stringify({ fun: "state.apply", failed: { $gt: r } }))}&max_results=25`,
				);
				t.push(now() - s);
				if (res.status !== 200 || res.body._meta.total !== (r < FAILED_PER_JOB ? Math.ceil(jobs / 10) : 0))
					invalid(`failed state runs (> ${r}): ${res.body?._meta?.total}`);
			}
			return t;
		})();
		const row = (what: string, t: number[]) =>
			`| ${what} | ${fmt(quantile(t, 0.5), 1)} | ${fmt(quantile(t, 0.99), 1)} |`;
		lines.push(
			`Job history: ${fmt(jobs)} jobs of ${PER_JOB} hosts over ${fmt(HOSTS)} hosts = ${fmt(jobs * PER_JOB)} actions records; fleet-ctl in one process on NeDB (seeded in ${fmt(seedS, 0)} s, RSS ${fmt(rss, 0)} MiB); a different host each request:`,
			"",
			"| request | p50 ms | p99 ms |",
			"|---|---|---|",
			row(
				`the host's jobs, newest 25 with counts: \`salt_jobs?where={"minions":h}\` (~${fmt((jobs * PER_JOB) / HOSTS)} jobs)`,
				times.history,
			),
			row('baseline: the same, through a filter no index serves (`{"minions":{"$all":[h]}}`)', times.unindexed),
			row('baseline: without the history, the host\'s `actions` records (`where={"host":h}&sort=-jid`)', times.actions),
			row("the newest page of the history (`page` 1 to 30)", page),
			row('failed state runs (`{"fun":"state.apply","failed":{"$gt":n}}`)', failedRuns),
			row(`salt-jobs.tally of one ${PER_JOB}-host job (its counts recounted from its returns)`, tallies),
			"",
		);
	});
	return { report: lines.join("\n"), valid };
}
