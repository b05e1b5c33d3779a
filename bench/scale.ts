/**
 * The `scale` part of `npm run bench` (BENCH_ONLY=scale): the rows of the real 1,000-minion run (docs/salt.md,
 * "A real master with 1,004 minions") on the salt-api simulator, so the two can be read side by side. fleet-ctl
 * runs as in that run: every service in one process, no transporter, NeDB, only the HTTP API used. The simulated
 * master has BENCH_SCALE_MINIONS (default 1,004) minions, all accepted and up, the real master's loop_interval
 * (15 s) and timeouts (5 s, 10 s). Each row next to its baseline, interleaved where there are rounds:
 *
 *   sync        process start to every host in GET /api/hosts | the reconciliation's salt-api reads alone
 *   restart     the master restarted (down 20 s): hosts fleet-ctl shows down and host.down alerts | the hosts
 *               the master's first reading (`present: []`) leaves out, what a naive reader would take down
 *   ping        POST /api/run `*` test.ping to every return an `actions` record and the job's counts final |
 *               the same lowstate straight to salt-api until every return is on the bus
 *   rollout     10% batches: a batch's last return to the next batch published | a loop against salt-api
 *   conformity  POST /api/run `*` state.apply test=True until GET /api/conformity holds it | straight to salt-api
 *   history     GET /api/salt_jobs?where={"minions":h} (newest 25) | the same list unfiltered
 *   rest        runner and wheel calls on the master per reconciliation and in an idle window; fleet-ctl's CPU
 *               and RSS at rest and during the fleet-wide run
 *   nodegroups  start to every host's `nodegroups` right, BENCH_NODEGROUP_MINIONS (default 10,000) minions and
 *               BENCH_NODEGROUPS (default 20) master nodegroups with grain rules | the same start with none
 *
 * Invalid (the bench fails) when a count is not what the simulated master says: a host missing, a return not
 * recorded, a batch unfinished, a nodegroup's members wrong, or the restart without its empty first reading.
 */
import fs from "node:fs";
import path from "node:path";
import { SaltApiSimulator, type SaltEvent } from "../test/simulators/salt-api";
import { subdictMatch } from "../test/simulators/salt/targeting";
import { SaltClient } from "../services/cm-gateway/salt-client";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	runProductionCommand,
	serviceNames,
	sleep,
	stopProc,
	type Proc,
} from "./support";

const MINIONS = envInt("BENCH_SCALE_MINIONS", 1004, 20);
const NG_MINIONS = envInt("BENCH_NODEGROUP_MINIONS", 10_000, 20);
const NODEGROUPS = envInt("BENCH_NODEGROUPS", 20);
const ROUNDS = envInt("BENCH_SCALE_ROUNDS", 3);
const IDLE_S = envInt("BENCH_SCALE_IDLE_S", 30);
const LOOP_MS = 15_000;

/** CPU seconds (user + system) of a process so far, and its resident memory in MiB. */
function usage(pid: number): { cpu: number; rss: number } {
	const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
	const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN) / 1024;
	return { cpu: (Number(stat[11]) + Number(stat[12])) / 100, rss };
}

const count = async (base: string, coll: string, where: unknown) =>
	(await apiJson(base, "GET", `/api/${coll}?where=${encodeURIComponent(JSON.stringify(where))}&max_results=1`)).body
		?._meta?.total as number;

/** Polls `fn` every `everyMs` until it answers true; throws after `timeoutMs`. */
async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 300_000, everyMs = 50): Promise<void> {
	for (const deadline = Date.now() + timeoutMs; !(await fn().catch(() => false)); await sleep(everyMs)) {
		if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
	}
}

/** A simulated fleet of exactly `n` accepted keys, as in the real run (the simulator makes a few other key states). */
function acceptedOnly(sim: SaltApiSimulator, n: number): string[] {
	for (const id of sim.minionIds()) if (sim.minion(id)!.key !== "accepted") sim.removeMinion(id);
	while (sim.minionIds().length < n) sim.addMinion({ key: "accepted", up: true });
	return sim.minionIds().sort();
}

/** fleet-ctl as in the real run: the production command, every service, no transporter. */
async function startFleetCtl(
	part: string,
	dataDir: string,
	sim: SaltApiSimulator,
): Promise<{ proc: Proc; base: string }> {
	const { base, env } = await benchCluster(part, dataDir, sim.cmApiEnv);
	const proc = runProductionCommand(part, serviceNames(), { ...env, TRANSPORTER: "", CM_API_TIMEOUT_MS: "120000" });
	return { proc, base };
}

/** Master events by kind: job publications and returns, runner and wheel calls. */
class Bus {
	readonly published = new Map<string, number>();
	readonly returns = new Map<string, number[]>();
	runner = 0;
	wheelEvents = 0;
	constructor(sim: SaltApiSimulator) {
		sim.onEvent(e => this.see(e));
	}
	private see(e: SaltEvent): void {
		if (/^salt\/run\/\d+\/new$/.test(e.tag)) this.runner++;
		else if (/^salt\/wheel\/\d+\/new$/.test(e.tag)) this.wheelEvents++;
		const m = /^salt\/job\/(\d{20})\/(new|ret\/.+)$/.exec(e.tag);
		if (!m) return;
		if (m[2] === "new") this.published.set(m[1], performance.now());
		else (this.returns.get(m[1]) ?? this.returns.set(m[1], []).get(m[1])!).push(performance.now());
	}
	/** Runner calls and wheel calls so far (a wheel call puts two `new` events on the bus, as on a real master). */
	calls(): { runner: number; wheel: number } {
		return { runner: this.runner, wheel: this.wheelEvents / 2 };
	}
	returned(jid: string): number {
		return this.returns.get(jid)?.length ?? 0;
	}
}

export async function benchScale(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	let valid = true;
	const invalid = (why: string) => {
		valid = false;
		log(`scale: INVALID: ${why}`);
	};
	const lines: string[] = [];
	const rows: string[] = [];
	const row = (what: string, ours: string, baseline: string, note = "") =>
		rows.push(`| ${what} | ${ours} | ${baseline} | ${note} |`);
	const ms = (xs: number[]) => `${fmt(quantile(xs, 0.5), 0)} (max ${fmt(Math.max(...xs), 0)})`;

	const sim = new SaltApiSimulator({
		minions: MINIONS,
		timeout: 5,
		gatherJobTimeout: 10,
		latencyMs: [2, 50],
		presenceIntervalMs: LOOP_MS,
		downFraction: 0,
		keyMix: { pending: 0, rejected: 0, denied: 0 },
	});
	const { url: salt } = await sim.start();
	const bus = new Bus(sim);
	const direct = new SaltClient({ url: salt, ...sim.credentials, timeoutMs: 120_000 });
	const ids = acceptedOnly(sim, MINIONS);
	let fc: { proc: Proc; base: string } | undefined;
	try {
		// ------------------------------------------------------------ sync
		const readsAlone = async () => {
			const t = performance.now();
			await direct.lowstate({ client: "wheel", fun: "key.list_all" }, { safe: true });
			await direct.lowstate({ client: "wheel", fun: "key.finger", match: "*" }, { safe: true });
			await direct.lowstate({ client: "runner", fun: "manage.present" }, { safe: true });
			await direct.lowstate({ client: "runner", fun: "config.get", arg: ["nodegroups"] }, { safe: true });
			await direct.lowstate({ client: "runner", fun: "cache.grains", tgt: ids, tgt_type: "list" }, { safe: true });
			return performance.now() - t;
		};
		log(`scale: fleet-ctl start to ${fmt(ids.length)} hosts listed, next to the salt-api reads alone ...`);
		const before = await readsAlone();
		const t0 = performance.now();
		fc = await startFleetCtl("scale", path.join(dataDir, "scale"), sim);
		const { proc, base } = fc;
		const pid = proc.child.pid!;
		await until("the inventory at start", async () => (await count(base, "hosts", {})) === ids.length, 300_000, 100);
		const syncMs = performance.now() - t0;
		const after = await readsAlone();
		row(
			`inventory at start: process start to all ${fmt(ids.length)} hosts in GET /api/hosts, s`,
			fmt(syncMs / 1000, 1),
			`${fmt(before / 1000, 2)} / ${fmt(after / 1000, 2)}`,
			"baseline: the reconciliation's five salt-api reads alone, before and after",
		);
		// The reconciliation at start: what it costs the master.
		await until(
			"the start's reconciliation",
			async () => (await count(base, "hosts", { status: "up" })) === ids.length,
			60_000,
			100,
		);

		// ------------------------------------------------------------ a fleet-wide test.ping
		const runAll = async (body: Record<string, unknown>, done: (jid: string) => Promise<boolean>) => {
			const u0 = usage(pid);
			const t = performance.now();
			const res = await apiJson(base, "POST", "/api/run", { target: "*", cm_client: "local_async", ...body });
			if (res.status !== 200 || typeof res.body?.task_id !== "string")
				throw new Error(`POST /api/run answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
			const jid = res.body.task_id as string;
			let peak = u0.rss;
			await until(
				`job ${jid}`,
				async () => {
					peak = Math.max(peak, usage(pid).rss);
					return done(jid);
				},
				300_000,
				50,
			);
			const took = performance.now() - t;
			return { jid, ms: took, cpu: (usage(pid).cpu - u0.cpu) / (took / 1000), peak };
		};
		const straight = async (fun: string, kwarg?: Record<string, unknown>) => {
			const t = performance.now();
			const { jid } = await direct.lowstate<{ jid: string }>({
				client: "local_async",
				tgt: ids,
				tgt_type: "list",
				fun,
				...(kwarg ? { kwarg } : {}),
			});
			await until(`job ${jid} at Salt`, async () => bus.returned(jid) >= ids.length, 300_000, 5);
			return performance.now() - t;
		};
		const pingDone = async (jid: string) => {
			const job = (
				await apiJson(base, "GET", `/api/salt_jobs/${jid}?projection=${encodeURIComponent('{"minions":0}')}`)
			).body;
			return job?.state === "finished" && (await count(base, "actions", { jid, state: "finished" })) === ids.length;
		};
		const ping = { ours: [] as number[], bare: [] as number[], cpu: [] as number[], peak: 0 };
		for (let i = 0; i < ROUNDS; i++) {
			log(`scale: fleet-wide test.ping, round ${i + 1}/${ROUNDS} ...`);
			const r = await runAll({ fun: "test.ping" }, pingDone);
			const job = (
				await apiJson(base, "GET", `/api/salt_jobs/${r.jid}?projection=${encodeURIComponent('{"minions":0}')}`)
			).body;
			if (job.expected !== ids.length || job.returned !== ids.length || job.succeeded !== ids.length)
				invalid(
					`test.ping job ${r.jid}: expected ${job.expected}, returned ${job.returned}, succeeded ${job.succeeded} of ${ids.length}`,
				);
			ping.ours.push(r.ms);
			ping.cpu.push(r.cpu);
			ping.peak = Math.max(ping.peak, r.peak);
			ping.bare.push(await straight("test.ping"));
		}
		row(
			`fleet-wide test.ping (POST /api/run \`*\`) to every return an actions record and the job final, ms, median of ${ROUNDS}`,
			ms(ping.ours),
			ms(ping.bare),
			"baseline: the lowstate straight to salt-api, to every return on the bus",
		);

		// ------------------------------------------------------------ rollout, 10% batches
		log("scale: a rollout of test.ping, 10% batches, then the same batches straight against salt-api ...");
		const gaps = (jids: string[]) =>
			jids.slice(1).map((jid, i) => (bus.published.get(jid) ?? NaN) - Math.max(...(bus.returns.get(jids[i]) ?? [NaN])));
		const jobTimes = (jids: string[]) =>
			jids.map(jid => Math.max(...(bus.returns.get(jid) ?? [NaN])) - (bus.published.get(jid) ?? NaN));
		const created = await apiJson(base, "POST", "/api/rollouts", {
			name: "scale",
			target: "*",
			fun: "test.ping",
			canary: 1,
			batch: "10%",
		});
		if (created.status !== 201)
			throw new Error(`POST /api/rollouts answered ${created.status}: ${JSON.stringify(created.body)}`);
		await until(
			"the rollout",
			async () =>
				(
					await apiJson(
						base,
						"GET",
						`/api/rollouts/${created.body._id}?projection=${encodeURIComponent('{"hosts":0,"batches":0}')}`,
					)
				).body?.status !== "running",
			600_000,
			200,
		);
		const rollout: { status: string; succeeded: number; batches: Array<{ jid: string }> } | undefined = (
			await apiJson(base, "GET", `/api/rollouts/${created.body._id}`)
		).body;
		if (rollout?.status !== "finished" || rollout.succeeded !== ids.length)
			invalid(`the rollout ended ${rollout?.status} with ${rollout?.succeeded} of ${ids.length} hosts succeeded`);
		const rJids = (rollout?.batches ?? []).map(b => b.jid);
		const size = Math.ceil((ids.length - 1) / 10);
		const plan = [
			ids.slice(0, 1),
			...Array.from({ length: Math.ceil((ids.length - 1) / size) }, (_, i) =>
				ids.slice(1 + i * size, 1 + (i + 1) * size),
			),
		];
		const bJids: string[] = [];
		for (const hosts of plan) {
			const { jid } = await direct.lowstate<{ jid: string }>({
				client: "local_async",
				tgt: hosts,
				tgt_type: "list",
				fun: "test.ping",
			});
			bJids.push(jid);
			await until(`baseline batch ${jid}`, async () => bus.returned(jid) >= hosts.length, 120_000, 1);
		}
		const rg = gaps(rJids);
		const bg = gaps(bJids);
		if ([...rg, ...bg].some(Number.isNaN)) invalid("a batch's publication or returns were not seen on the bus");
		row(
			`rollout, canary 1 then 10% (${rJids.length} batches): a batch's last return to the next published, ms, median`,
			ms(rg),
			ms(bg),
			"baseline: a loop publishing the same batches straight to salt-api",
		);
		row(
			"the same rollout: a batch's job at Salt, published to last return, ms, median",
			ms(jobTimes(rJids)),
			ms(jobTimes(bJids)),
			"",
		);

		// ------------------------------------------------------------ conformity check of the whole fleet
		const conf = { ours: [] as number[], bare: [] as number[] };
		for (let i = 0; i < Math.min(ROUNDS, 2); i++) {
			log(`scale: a conformity check of the whole fleet, round ${i + 1} ...`);
			const r = await runAll({ fun: "state.apply", kwarg: { test: true } }, async jid =>
				((await apiJson(base, "GET", "/api/conformity")).body?.series ?? []).some(
					(s: { jid: string }) => s.jid === jid,
				),
			);
			const view = (await apiJson(base, "GET", "/api/conformity")).body;
			const judged =
				Object.values((view?.counts ?? {}) as Record<string, number>).reduce((a, b) => a + b, 0) -
				(view?.counts?.unknown ?? 0);
			if (judged !== ids.length)
				invalid(`the conformity view judged ${judged} of ${ids.length} hosts after check ${r.jid}`);
			conf.ours.push(r.ms);
			conf.bare.push(await straight("state.apply", { test: true }));
		}
		row(
			"conformity check of the whole fleet (POST /api/run `*` state.apply test=True) to GET /api/conformity holding it, ms, median",
			ms(conf.ours),
			ms(conf.bare),
			"baseline: the same lowstate straight to salt-api, to every return on the bus",
		);

		// ------------------------------------------------------------ job history by minion
		log("scale: job history by minion ...");
		// The baselines' jobs are external to fleet-ctl: recorded CM_EXTERNAL_JOB_GRACE_MS (2 s) after their publication.
		const publishedJobs = sim.jobs().filter(j => !["saltutil.find_job", "saltutil.running"].includes(j.fun)).length;
		await until(
			"every published job in the history",
			async () => (await apiJson(base, "GET", "/api/salt_jobs?max_results=1")).body?._meta?.total >= publishedJobs,
			60_000,
			100,
		);
		const hidden = new Set(["saltutil.find_job", "saltutil.running"]);
		const published = (h: string) => sim.jobs().filter(j => !hidden.has(j.fun) && j.minions.includes(h));
		const hist = { ours: [] as number[], bare: [] as number[], listed: 0 };
		for (let i = 0; i < 100; i++) {
			const h = ids[(i * 37) % ids.length];
			let t = performance.now();
			const r = await apiJson(
				base,
				"GET",
				`/api/salt_jobs?where=${encodeURIComponent(JSON.stringify({ minions: h }))}&max_results=25&sort=-started`,
			);
			hist.ours.push(performance.now() - t);
			const listed: string[] = (r.body?._items ?? []).map((j: { _id: string }) => j._id);
			hist.listed += listed.length;
			const missing = published(h).filter(j => !listed.includes(j.jid));
			if (missing.length && listed.length < 25)
				log(
					`scale: ${h}'s history lacks ${missing.map(j => `${j.jid} (${j.fun}, ${j.minions.length} minions, by ${j.user})`).join(", ")}`,
				);
			t = performance.now();
			const b = await apiJson(base, "GET", "/api/salt_jobs?max_results=25&sort=-started");
			hist.bare.push(performance.now() - t);
			if (r.status !== 200 || b.status !== 200) invalid(`GET /api/salt_jobs answered ${r.status} / ${b.status}`);
		}
		// Every job the master published to a host is in its history, fleet-ctl's and the baselines' (external) alike.
		const expectedListed = Array.from({ length: 100 }, (_, i) => ids[(i * 37) % ids.length]).reduce(
			(n, h) => n + Math.min(25, published(h).length),
			0,
		);
		if (hist.listed !== expectedListed)
			invalid(
				`job history by minion listed ${hist.listed / 100} jobs per host, the master published ${expectedListed / 100}`,
			);
		row(
			`job history by minion (GET /api/salt_jobs?where={"minions":h}, newest 25; ${fmt(expectedListed / 100, 0)} jobs each), ms, p50 (max), 100 hosts`,
			ms(hist.ours),
			ms(hist.bare),
			"baseline: the same list with no filter, interleaved",
		);

		// ------------------------------------------------------------ the master restarted
		log("scale: the master restarted (down 20 s) ...");
		let firstReading: number | null = null;
		let restartedAt = Infinity;
		let trueList = false;
		const off = sim.onEvent(e => {
			if (e.tag !== "salt/presence/present" || performance.now() < restartedAt) return;
			const present = Array.isArray(e.data.present) ? e.data.present.length : 0;
			firstReading ??= present;
			if (present === ids.length) trueList = true;
		});
		const downAlerts0 = await count(base, "alerts", { type: "host.down" });
		let worstDown = 0;
		const watch = (async () => {
			while (!trueList) {
				worstDown = Math.max(worstDown, await count(base, "hosts", { status: "down" }).catch(() => 0));
				await sleep(200);
			}
		})();
		await sim.goDown("master-down");
		await sleep(20_000);
		restartedAt = performance.now();
		await sim.comeBack();
		await until("the master's full presence list after its restart", async () => trueList, 120_000, 100);
		await watch;
		// A reading that took hosts down has had its confirmation time by now; one more loop for the alerts.
		await sleep(LOOP_MS);
		worstDown = Math.max(worstDown, await count(base, "hosts", { status: "down" }));
		off();
		const downAlerts = (await count(base, "alerts", { type: "host.down" })) - downAlerts0;
		if (firstReading !== 0)
			invalid(
				`the restarted master's first reading listed ${firstReading} minions; a restart after 20 s lists none first`,
			);
		row(
			"master restart (down 20 s): most hosts shown down at once / host.down alerts",
			`${fmt(worstDown)} / ${fmt(downAlerts)}`,
			`${fmt(ids.length - (firstReading ?? 0))} / –`,
			"baseline: the hosts the master's first reading (`present: []`) leaves out",
		);

		// ------------------------------------------------------------ at rest
		log(`scale: at rest, ${IDLE_S} s, then one reconciliation ...`);
		await until(
			"no job left running",
			async () => (await count(base, "salt_jobs", { state: "running" })) === 0,
			120_000,
			200,
		);
		const c0 = bus.calls();
		const u0 = usage(pid);
		await sleep(IDLE_S * 1000);
		const u1 = usage(pid);
		const c1 = bus.calls();
		const sync = await apiJson(base, "POST", "/api/inventory/sync", {});
		if (sync.status !== 200) invalid(`POST /api/inventory/sync answered ${sync.status}`);
		const c2 = bus.calls();
		const perSync = { runner: c2.runner - c1.runner, wheel: c2.wheel - c1.wheel };
		row(
			`master calls at rest: runner / wheel in ${IDLE_S} s idle (nothing running)`,
			`${fmt(c1.runner - c0.runner)} / ${fmt(c1.wheel - c0.wheel)}`,
			"–",
			"",
		);
		row(
			"master calls per reconciliation (every CM_SYNC_INTERVAL_MS, default 5 min): runner / wheel",
			`${fmt(perSync.runner)} / ${fmt(perSync.wheel)}`,
			"–",
			"",
		);
		row(
			`fleet-ctl at rest: CPU % of a core over ${IDLE_S} s / RSS MiB`,
			`${fmt(((u1.cpu - u0.cpu) / IDLE_S) * 100, 1)} / ${fmt(u1.rss)}`,
			"–",
			"",
		);
		row(
			"fleet-ctl during the fleet-wide test.ping: CPU % of a core, median / peak RSS MiB",
			`${fmt(quantile(ping.cpu, 0.5) * 100, 0)} / ${fmt(ping.peak)}`,
			"–",
			"",
		);
		await stopProc(proc);
		fc = undefined;
	} finally {
		direct.close();
		if (fc) await stopProc(fc.proc);
		await sim.stop();
	}
	lines.push(
		`The real 1,004-minion run's rows on the salt-api simulator (${fmt(MINIONS)} minions, all up, 2–50 ms per return, loop_interval 15 s); fleet-ctl in one process, no transporter, NeDB:`,
		"",
		"| row | fleet-ctl | baseline | |",
		"|---|---|---|---|",
		...rows,
		"",
	);

	// ---------------------------------------------------------------- nodegroups with grain rules, 10,000 hosts
	const ng = await benchNodegroupStart(dataDir, log, invalid);
	lines.push(ng, "");
	return { report: lines.join("\n"), valid };
}

/**
 * The start cost of the master's nodegroups: fleet-ctl started on an empty database against NG_MINIONS minions,
 * with NODEGROUPS grain-rule nodegroups on the master, then with none, alternated; each time from process start
 * to every host listed and (with nodegroups) every host's `nodegroups` as the grains say.
 */
async function benchNodegroupStart(
	dataDir: string,
	log: (msg: string) => void,
	invalid: (why: string) => void,
): Promise<string> {
	const sim = new SaltApiSimulator({
		minions: NG_MINIONS,
		latencyMs: [2, 50],
		presenceIntervalMs: 3_600_000,
		downFraction: 0,
		keyMix: { pending: 0, rejected: 0, denied: 0 },
	});
	await sim.start();
	const ids = acceptedOnly(sim, NG_MINIONS);
	// Grain rules on what the simulated grains hold: an os and a role each, and one on a grain every host has.
	const oses = [...new Set(ids.map(id => String(sim.minion(id)!.grains.os)))].sort();
	const roles = [...new Set(ids.map(id => String((sim.minion(id)!.grains.roles as string[])[0])))].sort();
	const groups: Record<string, string> = {};
	for (let i = 0; Object.keys(groups).length < NODEGROUPS; i++) {
		const os = oses[i % oses.length];
		const role = roles[Math.floor(i / oses.length) % roles.length];
		groups[`ng${i}`] = i === 0 ? "G@kernel:Linux" : `G@os:${os} and G@roles:${role}`;
	}
	const expected = Object.fromEntries(
		Object.entries(groups).map(([name, rule]) => [
			name,
			ids.filter(id => rule.split(" and ").every(term => subdictMatch(sim.minion(id)!.grains, term.slice(2)))).length,
		]),
	);
	const times = { with: [] as Array<{ hosts: number; groups: number }>, without: [] as Array<{ hosts: number }> };
	try {
		for (let round = 0; round < 2; round++) {
			for (const variant of ["with", "without"] as const) {
				sim.setNodegroups(variant === "with" ? groups : {});
				log(
					`scale: start on ${fmt(NG_MINIONS)} minions ${variant} ${NODEGROUPS} master nodegroups, round ${round + 1}/2 ...`,
				);
				const t0 = performance.now();
				const { proc, base } = await startFleetCtl(
					`ng-${variant}-${round}`,
					path.join(dataDir, `ng-${variant}-${round}`),
					sim,
				);
				try {
					await until(
						"the inventory at start",
						async () => (await count(base, "hosts", {})) === ids.length,
						300_000,
						100,
					);
					const hosts = performance.now() - t0;
					if (variant === "without") {
						times.without.push({ hosts });
						continue;
					}
					await until(
						"the hosts' nodegroups",
						async () => {
							for (const [name, n] of Object.entries(expected))
								if ((await count(base, "hosts", { nodegroups: name })) !== n) return false;
							return true;
						},
						300_000,
						100,
					);
					times.with.push({ hosts, groups: performance.now() - t0 });
				} catch (err) {
					invalid(`nodegroups start (${variant}, round ${round + 1}): ${(err as Error).message}`);
				} finally {
					await stopProc(proc);
				}
			}
		}
	} finally {
		await sim.stop();
	}
	const med = (xs: number[]) => fmt(quantile(xs, 0.5) / 1000, 1);
	const sizes = Object.values(expected);
	return [
		`Start cost of the master's nodegroups: ${fmt(NG_MINIONS)} minions, ${NODEGROUPS} nodegroups with grain rules (\`G@os:… and G@roles:…\`, ${fmt(Math.min(...sizes))}–${fmt(Math.max(...sizes))} hosts each) on the simulated master, fleet-ctl started on an empty database, alternated with the same start with none, 2 rounds:`,
		"",
		"| start | every host listed, s | every host's nodegroups right, s |",
		"|---|---|---|",
		`| with ${NODEGROUPS} nodegroups | ${med(times.with.map(t => t.hosts))} | ${med(times.with.map(t => t.groups))} |`,
		`| without (baseline) | ${med(times.without.map(t => t.hosts))} | – |`,
	].join("\n");
}
