/**
 * The jobs the cm-gateway started and still waits for: which hosts have not returned, until when.
 * Returns come from the event stream (usually) or from GET /jobs/<jid> (the fallback); each host's
 * return is taken once, whichever source brings it first. A return can arrive on the event stream
 * before salt-api's answer to `local_async` has told us the jid: such early returns are kept for a
 * while and claimed when the job is tracked.
 */
import type { HistoryEntry } from "./history";

export interface JobReturn {
	jid: string;
	action: string;
	host: string;
	state: "finished" | "timeout";
	args: unknown[];
	/** The return as salt sent it. */
	raw: unknown;
	/** A monitoring poll (`all_status`), not an operator's job. */
	monitor: boolean;
	/** The scheduled task the job is a run of, and which run. */
	task?: string;
	run?: string;
	/** Salt's verdict on the host's run, when its return said (`retcode`, `success`). */
	retcode?: number;
	success?: boolean;
}

/** What a return says of its run besides its output: Salt's `retcode` and `success`, when sent. */
export interface Verdict {
	retcode?: number;
	success?: boolean;
}

/** The verdict fields of a return event's data or a job cache entry (anything else is left out). */
export function verdictOf(data: unknown): Verdict {
	if (!data || typeof data !== "object") return {};
	const { retcode, success } = data as { retcode?: unknown; success?: unknown };
	return {
		...(Number.isInteger(retcode) ? { retcode: retcode as number } : {}),
		...(typeof success === "boolean" ? { success } : {}),
	};
}

/** Where a job came from. */
export interface JobOrigin {
	monitor?: boolean;
	task?: string;
	run?: string;
	/** The job's record in the history (`salt_jobs`), opened before its hosts' records; none for monitoring polls. */
	history?: HistoryEntry;
	/** When the job started (default: when its record is opened). */
	started?: Date;
}

interface TrackedJob {
	jid: string;
	fun: string;
	args: unknown[];
	pending: Set<string>;
	/** Hosts whose entry in the master's job cache may be another minion's forgery: awaited from the event stream only. */
	distrusted: Set<string>;
	deadline: number;
	monitor: boolean;
	task?: string;
	run?: string;
}

export const NO_RETURN = "Minion did not return";

export class JobTracker {
	private readonly jobs = new Map<string, TrackedJob>();
	/** Returns of jobs not (yet) tracked, by jid, with when they arrived. */
	private readonly early = new Map<string, { at: number; returns: Map<string, { raw: unknown; verdict: Verdict }> }>();

	constructor(
		private readonly earlyKeepMs = 30_000,
		private readonly earlyMax = 100_000,
	) {}

	get size(): number {
		return this.jobs.size;
	}

	has(jid: string): boolean {
		return this.jobs.has(jid);
	}

	/** Is this host of this job still expected? */
	waitsFor(jid: string, host: string): boolean {
		return this.jobs.get(jid)?.pending.has(host) === true;
	}

	/** Starts waiting for a job's hosts; answers the returns that arrived before. */
	track(
		jid: string,
		fun: string,
		args: unknown[],
		minions: string[],
		timeoutMs: number,
		origin: JobOrigin = {},
	): JobReturn[] {
		// Already waited for (a resumed or adopted job this process started itself): the hosts that answered
		// stay answered, so no return is taken, and recorded, twice.
		if (this.jobs.has(jid)) return [];
		const job: TrackedJob = {
			jid,
			fun,
			args,
			pending: new Set(minions),
			distrusted: new Set(),
			deadline: Date.now() + timeoutMs,
			monitor: origin.monitor === true,
			task: origin.task,
			run: origin.run,
		};
		const early = this.early.get(jid);
		this.early.delete(jid);
		const out: JobReturn[] = [];
		if (job.pending.size) this.jobs.set(jid, job);
		if (early)
			for (const [host, { raw, verdict }] of early.returns) {
				const r = this.take(jid, host, raw, verdict);
				if (r) out.push(r);
			}
		return out;
	}

	/** A return from either source: the record to write, or null if it is not awaited (or was taken). */
	take(jid: string, host: string, raw: unknown, verdict: Verdict = {}): JobReturn | null {
		const job = this.jobs.get(jid);
		if (!job?.pending.delete(host)) return null;
		if (!job.pending.size) this.jobs.delete(jid);
		return {
			jid,
			action: job.fun,
			host,
			state: "finished",
			args: job.args,
			raw,
			monitor: job.monitor,
			task: job.task,
			run: job.run,
			...verdict,
		};
	}

	/** A return seen on the event stream for a jid that is not tracked: kept in case it soon will be. */
	keepEarly(jid: string, host: string, raw: unknown, verdict: Verdict = {}): void {
		const now = Date.now();
		if (this.early.size >= this.earlyMax) this.pruneEarly(now, true);
		let entry = this.early.get(jid);
		if (!entry) this.early.set(jid, (entry = { at: now, returns: new Map() }));
		entry.returns.set(host, { raw, verdict });
	}

	private pruneEarly(now: number, force = false): void {
		for (const [jid, e] of this.early) {
			if (now - e.at > this.earlyKeepMs || force) this.early.delete(jid);
			if (force && this.early.size < this.earlyMax / 2) break;
		}
	}

	/**
	 * A return of this host for this job may have reached the master's job cache in another minion's name (Salt
	 * 3006.0 stores a `_return` without checking whose it is, and keeps a minion's first one): the /jobs/<jid>
	 * fallback no longer takes it; its return is awaited from the event stream, else it times out.
	 */
	distrust(jid: string, host: string): boolean {
		const job = this.jobs.get(jid);
		if (!job?.pending.has(host)) return false;
		job.distrusted.add(host);
		return true;
	}

	/** The jobs still waiting, with their pending hosts whose job cache entry can be believed (for the /jobs/<jid> fallback). */
	pendingJobs(): Array<{ jid: string; hosts: string[]; deadline: number }> {
		this.pruneEarly(Date.now());
		const out: Array<{ jid: string; hosts: string[]; deadline: number }> = [];
		for (const j of this.jobs.values()) {
			const hosts = [...j.pending].filter(h => !j.distrusted.has(h));
			if (hosts.length) out.push({ jid: j.jid, hosts, deadline: j.deadline });
		}
		return out;
	}

	/** Hosts of jobs past their deadline, as "timeout" records; those jobs are forgotten. */
	expire(now = Date.now()): JobReturn[] {
		const out: JobReturn[] = [];
		for (const job of [...this.jobs.values()]) {
			if (now < job.deadline) continue;
			for (const host of job.pending)
				out.push({
					jid: job.jid,
					action: job.fun,
					host,
					state: "timeout",
					args: job.args,
					raw: NO_RETURN,
					monitor: job.monitor,
					task: job.task,
					run: job.run,
				});
			this.jobs.delete(job.jid);
		}
		return out;
	}

	/** Is a monitoring job for this host still outstanding? */
	monitorPending(host: string): boolean {
		for (const j of this.jobs.values()) if (j.monitor && j.pending.has(host)) return true;
		return false;
	}

	clear(): void {
		this.jobs.clear();
		this.early.clear();
	}
}
