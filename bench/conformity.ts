/**
 * The conformity part of `npm run bench` (BENCH_ONLY=conformity, docs/conformity.md): checks of BENCH_CONF_HOSTS
 * (default 10,000) hosts with BENCH_CONF_STATES (default 200) states each, their returns written as the cm-gateway
 * writes them (`actions.record`) and judged by the conformity service (`conformity.judgeJob`), in two fleet-ctl
 * processes on NATS and NeDB fed the same checks, interleaved:
 *
 *   subject    as shipped: a host's judgement is stored only where it changed (CONFORMITY_CHECKED_RESOLUTION_MS 10 min)
 *   baseline   every host rewritten at every check (CONFORMITY_CHECKED_RESOLUTION_MS=0: its `checked` always moves)
 *
 * Checks: a first one (every host conformant), then checks with 1% of the hosts drifted (one state each, a different
 * 1% each time). Measured: bytes the conformity and hosts files grow by per check (what a check stores), the time to
 * judge a check, and `GET /api/conformity` (the fleet view from the stored judgements) next to a naive scan (the
 * fleet view computed from the check's raw returns, every state of every host read again). Valid when both
 * processes and the naive scan count the same drifted hosts and the same top state.
 */
import fs from "node:fs";
import path from "node:path";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { judge } from "../lib/fleet/conformity";
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
	type Proc,
} from "./support";

const HOSTS = envInt("BENCH_CONF_HOSTS", 10_000, 100);
const STATES = envInt("BENCH_CONF_STATES", 200, 1);
const DRIFTED = Math.max(1, Math.round(HOSTS / 100));
const CHECKS = 4;
/** Returns per actions.record call: under NATS's 1 MB payload. */
const RECORDS_PER_CALL = 25;
const now = () => performance.now();
const host = (i: number) => `cf-host-${String(i).padStart(5, "0")}`;

/** One host's `state.apply test=True` return: STATES states, `drift` (a state index) would change. */
function stateReturn(i: number, drift: number | null): string {
	const ret: Record<string, unknown> = {};
	for (let s = 0; s < STATES; s++) {
		const id = `pkg-${s}`;
		const drifted = s === drift;
		ret[`pkg_|-${id}_|-${id}_|-installed`] = {
			name: id,
			changes: drifted ? { [id]: { old: "1.0", new: "1.1" } } : {},
			result: drifted ? null : true,
			comment: drifted ? "would update" : "installed",
			__sls__: `sls-${s % 20}`,
			__run_num__: s,
			__id__: id,
			duration: 1 + (i % 7),
		};
	}
	return JSON.stringify(ret);
}

const jidOf = (check: number) => `2026112403000000${String(check).padStart(4, "0")}`;
/** The hosts drifted at a check: a different 1% each time (none at the first). */
const driftedAt = (check: number) =>
	check === 0 ? new Set<number>() : new Set(Array.from({ length: DRIFTED }, (_, k) => (check * 7919 + k * 97) % HOSTS));
const driftState = (check: number, i: number) => (check + i) % STATES;

function bytesOf(dir: string, files: string[]): number {
	return files.reduce((n, f) => n + (fs.existsSync(path.join(dir, f)) ? fs.statSync(path.join(dir, f)).size : 0), 0);
}

interface Side {
	name: string;
	dir: string;
	proc: Proc;
	broker: ServiceBroker;
	base: string;
	grown: number[];
	judged: number[];
	view: number[];
	drifted: number[];
}

async function startSide(name: string, dataDir: string, resolutionMs: number): Promise<Side> {
	const { nats, namespace, base, env } = await benchCluster(`conformity-${name}`, dataDir, {
		CM_API_URL: "",
		CONFORMITY_CHECKED_RESOLUTION_MS: String(resolutionMs),
	});
	const proc = runProductionCommand(`conformity-${name}`, serviceNames(), env);
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-conformity-${name}-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	return { name, dir: dataDir, proc, broker, base, grown: [], judged: [], view: [], drifted: [] };
}

export async function benchConformity(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const subject = await startSide("subject", path.join(dataDir, "subject"), 600_000);
	const baseline = await startSide("baseline", path.join(dataDir, "baseline"), 0);
	let valid = true;
	const invalid = (why: string) => {
		valid = false;
		log(`conformity: INVALID: ${why}`);
	};
	const lines: string[] = [];
	const naive: number[] = [];
	await againstFleetCtl(baseline.proc, baseline.broker, () =>
		againstFleetCtl(subject.proc, subject.broker, async () => {
			for (const side of [subject, baseline]) {
				await side.broker.start();
				await side.broker.waitForServices(["conformity", "actions", "hosts", "api"], 120_000);
				await waitForHttp200(`${side.base}/api/settings/0`, 120_000, [side.proc]);
				for (let i = 0; i < HOSTS; i += 1000)
					await side.broker.call("hosts.upsertMany", {
						hosts: Array.from({ length: Math.min(1000, HOSTS - i) }, (_, k) => ({
							_id: host(i + k),
							status: "up",
							key: "accepted",
						})),
					});
			}
			const files = ["conformity.db", "conformity_transitions.db", "conformity_passes.db", "hosts.db"];
			for (let check = 0; check < CHECKS; check++) {
				const jid = jidOf(check);
				const drift = driftedAt(check);
				log(
					`conformity: check ${check + 1} of ${CHECKS}: ${fmt(HOSTS)} hosts × ${STATES} states, ${drift.size} drifted ...`,
				);
				const texts = Array.from({ length: HOSTS }, (_, i) =>
					stateReturn(i, drift.has(i) ? driftState(check, i) : null),
				);
				for (const side of [subject, baseline]) {
					for (let i = 0; i < HOSTS; i += RECORDS_PER_CALL) {
						const returns = texts.slice(i, i + RECORDS_PER_CALL).map((t, k) => ({
							jid,
							action: "state.apply",
							host: host(i + k),
							state: "finished",
							args: [{ __kwarg__: true, test: true }],
							return: t,
							retcode: 0,
							success: true,
						}));
						await side.broker.call("actions.record", { returns });
					}
					const before = bytesOf(side.dir, files);
					const t = now();
					await side.broker.call("conformity.judgeJob", { jid });
					side.judged.push(now() - t);
					// NeDB appends each write to its file: what the check stored is what the files grew by.
					side.grown.push(bytesOf(side.dir, files) - before);
					// The check's returns go once judged (as retention would): memory stays one check's worth.
					await side.broker.call("actions.removeJobs", { jids: [jid] });
				}
				// The naive fleet view: every state of every host read again from the raw returns.
				const n0 = now();
				let naiveDrifted = 0;
				const naiveTop = new Map<string, number>();
				for (const t of texts) {
					const j = judge(JSON.parse(t), true);
					if (j.state === "drifted") naiveDrifted++;
					for (const s of j.states)
						naiveTop.set(`${s.sls}/${s.state_id}`, (naiveTop.get(`${s.sls}/${s.state_id}`) ?? 0) + 1);
				}
				naive.push(now() - n0);
				for (const side of [subject, baseline]) {
					for (let r = 0; r < 5; r++) {
						const t = now();
						const res = await apiJson(side.base, "GET", "/api/conformity");
						side.view.push(now() - t);
						if (r === 0) {
							side.drifted.push(res.body.counts?.drifted);
							if (
								res.status !== 200 ||
								res.body.counts.drifted !== naiveDrifted ||
								res.body.counts.conformant !== HOSTS - naiveDrifted
							)
								invalid(
									`${side.name} after check ${check + 1}: ${JSON.stringify(res.body.counts)}, naive ${naiveDrifted} drifted`,
								);
						}
					}
				}
			}
			const later = (xs: number[]) => xs.slice(1);
			const mb = (n: number) => `${fmt(n / 1024, 0)} KB`;
			const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
			if (!(avg(later(subject.grown)) < avg(later(baseline.grown))))
				invalid("the subject stored no less than the baseline");
			lines.push(
				`Conformity checks of ${fmt(HOSTS)} hosts × ${STATES} states (${fmt(DRIFTED)} hosts, 1%, drifted at each check after the first); two fleet-ctl processes on NATS and NeDB fed the same ${CHECKS} checks, interleaved:`,
				"",
				"| per check | stored only where changed (as shipped) | every host rewritten (baseline) |",
				"|---|---|---|",
				`| bytes stored by the first check (every host judged for the first time) | ${mb(subject.grown[0])} | ${mb(baseline.grown[0])} |`,
				`| bytes stored by a check with 1% drifted (mean of ${CHECKS - 1}) | ${mb(avg(later(subject.grown)))} | ${mb(avg(later(baseline.grown)))} |`,
				`| time to judge a check (p50) | ${fmt(quantile(subject.judged, 0.5), 0)} ms | ${fmt(quantile(baseline.judged, 0.5), 0)} ms |`,
				`| GET /api/conformity (the fleet view) p50 / p99 | ${fmt(quantile(subject.view, 0.5), 1)} / ${fmt(quantile(subject.view, 0.99), 1)} ms | ${fmt(quantile(baseline.view, 0.5), 1)} / ${fmt(quantile(baseline.view, 0.99), 1)} ms |`,
				`| the same answer by a naive scan of the check's raw returns (every state read again) p50 | ${fmt(quantile(naive, 0.5), 0)} ms | |`,
				"",
			);
		}),
	);
	return { report: lines.join("\n"), valid };
}
