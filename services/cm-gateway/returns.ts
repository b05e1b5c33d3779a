/**
 * Job returns: every return of every job started here (or followed: history.ts) becomes one `actions` record
 * (_id = jid + hostname) and the host's `last_action`, and its job's counts in the history are recounted; a state run of a patch that failed also becomes a `failed_patches` record and a
 * `patch.failed` alert; a return of a grain-changing function asks for the host's grains again. Owns the job
 * tracker (which hosts each job still waits for), the buffer returns gather in before they are written, and
 * the job's history record and "running" records its returns are written after.
 */
import { batchesBySize, capText } from "../../lib/fleet/batches";
import { countMetric } from "../../lib/runtime/metrics";
import { JobTracker, type JobOrigin, type JobReturn, type Verdict } from "./job-tracker";
import { failedPatchSteps, patchOf, type PatchStep } from "./salt-state";
import type { GatewayAlerts } from "./alerts";
import { UPSERT_BATCH, type GatewayContext } from "./context";
import { call } from "../../lib/contracts/call";

/** Returns of these functions change grains the host fields come from (`ctl` dates, versions). */
const GRAIN_CHANGING = /^(state\.|pkg\.(upgrade|install)|saltutil\.(sync_grains|refresh_grains|sync_all)|grains\.)/;
/** How long returns are gathered before they are written (events arrive one host at a time). */
const RETURN_FLUSH_MS = 50;

/** The return as the `actions` record keeps it: text. */
function asText(value: unknown): string {
	if (typeof value === "string") return value;
	return JSON.stringify(value) ?? "null";
}

/** A step whose command output is cut to the size an `actions` return keeps. */
function capStep(step: PatchStep, maxBytes: number): PatchStep {
	const changes = { ...step.changes };
	for (const k of ["stdout", "stderr"])
		if (typeof changes[k] === "string") changes[k] = capText(changes[k] as string, maxBytes);
	return { ...step, comment: capText(step.comment, maxBytes), changes };
}

/** Salt's `retcode` and `success` of a return, when it sent them. */
const verdict = (r: JobReturn) => ({
	...(r.retcode !== undefined ? { retcode: r.retcode } : {}),
	...(r.success !== undefined ? { success: r.success } : {}),
});

/** The task and run an `actions` record links to, when the job is a task's run. */
export const links = (o: { task?: string; run?: string }) => ({
	...(o.task ? { task: o.task } : {}),
	...(o.run ? { run: o.run } : {}),
});

export class Returns {
	readonly tracker = new JobTracker();
	private buffer: JobReturn[] = [];
	private flushTimer: NodeJS.Timeout | null = null;
	private flushing: Promise<void> = Promise.resolve();
	/** The "running" records being written, by jid: that job's returns are written after them. */
	private readonly runningWrites = new Map<string, Promise<void>>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly alerts: GatewayAlerts,
		/** A host whose grains a finished job changed (its grains are read again). */
		private readonly grainsChanged: (host: string) => void,
	) {}

	/** Starts waiting for a job's hosts; returns that came before it are buffered at once. */
	track(jid: string, fun: string, args: unknown[], hosts: string[], timeoutMs: number, origin: JobOrigin = {}): void {
		for (const r of this.tracker.track(jid, fun, args, hosts, timeoutMs, origin)) this.add(r);
	}

	/** A host's return of a tracked job (a repeated or unknown one is dropped by the tracker). */
	take(jid: string, host: string, raw: unknown, verdict: Verdict = {}): boolean {
		const r = this.tracker.take(jid, host, raw, verdict);
		if (r) this.add(r);
		return !!r;
	}

	/**
	 * The job's record in the history (when its origin has one), then its hosts as `actions` records in state
	 * "running": operators see who has not answered yet, and a restarted cm-gateway knows which returns it
	 * still waits for (JobPoll.resume).
	 */
	writeRunning(jid: string, fun: string, args: unknown[], hosts: string[], origin: JobOrigin = {}): Promise<void> {
		const written = (async () => {
			if (origin.history) await this.openJob(jid, fun, args, hosts, origin);
			for (const returns of batchesBySize(
				hosts.map(host => ({ jid, action: fun, host, state: "running", args, return: "", ...links(origin) })),
				UPSERT_BATCH,
			)) {
				try {
					await this.gw.broker.call("actions.record", { returns });
				} catch (err) {
					this.gw.logger.error(`Could not record the running hosts of job ${jid}:`, (err as Error).message);
				}
			}
		})();
		// Returns of this job wait for it (flush); other jobs' returns do not.
		this.runningWrites.set(jid, written);
		void written.finally(() => this.runningWrites.delete(jid));
		return written;
	}

	/** The job's record in `salt_jobs` (a failure is logged: the job runs, its history record is missing). */
	async openJob(jid: string, fun: string, args: unknown[], minions: string[], origin: JobOrigin): Promise<void> {
		const h = origin.history;
		if (!h) return;
		const job = {
			jid,
			fun,
			args,
			minions,
			target: h.target,
			user: h.user,
			origin: h.origin,
			...links(origin),
			...(h.rollout ? { rollout: h.rollout } : {}),
			...(h.batch !== undefined ? { batch: h.batch } : {}),
			...(origin.started ? { started: origin.started } : {}),
		};
		try {
			await this.gw.broker.call("salt-jobs.open", { job });
		} catch (err) {
			this.gw.logger.error(`Could not record job ${jid} (${fun}) in the job history:`, (err as Error).message);
		}
	}

	add(r: JobReturn): void {
		this.buffer.push(r);
		if (!this.flushTimer && !this.gw.stopping()) {
			this.flushTimer = setTimeout(() => {
				this.flushTimer = null;
				void this.flush();
			}, RETURN_FLUSH_MS);
		}
	}

	/** Writes the buffered returns, one flush after another. */
	flush(): Promise<void> {
		this.flushing = this.flushing.then(async () => {
			while (this.buffer.length) {
				const batch = this.buffer.splice(0, UPSERT_BATCH);
				await Promise.all([...new Set(batch.map(r => r.jid))].map(jid => this.runningWrites.get(jid)));
				try {
					await this.record(batch);
				} catch (err) {
					this.gw.logger.error(`Could not record ${batch.length} job return(s):`, (err as Error).message);
				}
			}
		});
		return this.flushing;
	}

	/** Stops the flush timer and writes what was received; the tracker forgets every job. */
	async stop(): Promise<void> {
		if (this.flushTimer) clearTimeout(this.flushTimer);
		this.flushTimer = null;
		await this.flush().catch(() => undefined);
		this.tracker.clear();
	}

	/** The history's counts of these jobs, recounted from their hosts' records (a failure is logged: the next batch recounts). */
	private async tally(jids: string[]): Promise<void> {
		for (let i = 0; i < jids.length; i += 1000) {
			try {
				await this.gw.broker.call("salt-jobs.tally", { jids: jids.slice(i, i + 1000) });
			} catch (err) {
				this.gw.logger.warn(
					`Could not update the job history's counts of ${jids.length} job(s):`,
					(err as Error).message,
				);
			}
		}
	}

	/**
	 * Writes returns: `actions` records, the hosts' `last_action` (not for monitoring polls), the
	 * failed patches with their alerts, and a grain refresh of hosts whose grains the job changed.
	 */
	async record(records: JobReturn[]): Promise<void> {
		if (!records.length) return;
		const { broker, config } = this.gw;
		const returns = records.map(r => ({
			jid: r.jid,
			action: r.action,
			host: r.host,
			state: r.state,
			args: r.args,
			return: capText(asText(r.raw), config.cmReturnMaxBytes),
			...verdict(r),
			...links(r),
		}));
		const byState = new Map<string, number>();
		for (const r of records) byState.set(r.state, (byState.get(r.state) ?? 0) + 1);
		for (const [state, n] of byState) countMetric(broker, "fleet.job.returns.total", { state }, n);
		for (const batch of batchesBySize(returns, UPSERT_BATCH)) await broker.call("actions.record", { returns: batch });
		// Pages following a job read its returns again (GET /api/actions/stream).
		const jobs = [...new Set(records.filter(r => !r.monitor).map(r => r.jid))];
		if (jobs.length) broker.broadcast("actions.returned", { jids: jobs });
		await this.tally([...new Set(records.filter(r => !r.monitor).map(r => r.jid))]);
		const hosts = [...new Set(records.map(r => r.host))];
		const known = new Set<string>(await broker.call<string[], { ids: string[] }>("hosts.exist", { ids: hosts }));
		const latest = new Map<string, string>();
		for (const r of records) if (!r.monitor && known.has(r.host)) latest.set(r.host, `${r.jid}${r.host}`);
		if (latest.size)
			await call(broker, "hosts.upsertMany", {
				hosts: [...latest].map(([_id, last_action]) => ({ _id, last_action })),
			});

		const failed = [];
		for (const r of records) {
			if (r.state !== "finished") continue;
			const patch = patchOf(r.action, r.args, config.cmPatchPrefix);
			const steps = patch ? failedPatchSteps(r.raw, patch) : null;
			if (patch && steps)
				failed.push({
					jid: r.jid,
					action: r.action,
					host: r.host,
					state: r.state,
					patch,
					return: steps.map(step => capStep(step, config.cmReturnMaxBytes)),
				});
		}
		if (failed.length) {
			for (const batch of batchesBySize(failed, UPSERT_BATCH))
				await broker.call("failed-patches.record", { returns: batch });
			await this.alerts.raise(
				failed.map(f => ({
					type: "patch.failed",
					level: "error",
					payload: { hostname: f.host, patch: f.patch, jid: f.jid, failed_patch: `${f.jid}${f.host}` },
				})),
			);
		}
		for (const r of records)
			if (r.state === "finished" && known.has(r.host) && GRAIN_CHANGING.test(r.action)) this.grainsChanged(r.host);
		for (const r of records)
			if (r.action === "status.all_status")
				broker.broadcast("cm.allStatus", { hostname: r.host, jid: r.jid, state: r.state, return: r.raw });
	}
}
