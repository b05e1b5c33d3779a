/**
 * The /jobs/<jid> fallback: returns normally come from the event stream; every CM_JOB_POLL_MS the jobs still
 * waiting are read from the master's job cache, and past their deadline the silent hosts are recorded as
 * "timeout". Also resumes, after a restart, the jobs whose hosts are still "running" in `actions`.
 *
 * Each read is a runner call (jobs.list_job) that costs a real master 0.3-1.6 s of work at 1,000 minions. While the
 * event stream is up, a job is read at growing intervals (CM_JOB_POLL_MS, then twice as long each time) and once
 * more just before its deadline; every poll reads it while the stream is down, at a reconnection, and when the
 * stream skipped one of its returns.
 */
import type { GatewayContext } from "./context";
import type { Returns } from "./returns";
import { verdictOf } from "./job-tracker";

export class JobPoll {
	private timer: NodeJS.Timeout | null = null;
	private polling = false;
	/** Whether the event stream is up: returns then come from it, and the job cache is only the safety net. */
	private streamUp = false;
	/** Jobs to read at the next poll whatever their schedule (the stream skipped a return of theirs); "*": every job. */
	private readonly wanted = new Set<string>();
	/** When each pending job is next read from the job cache while the stream is up, and the gap after that. */
	private readonly nextRead = new Map<string, { at: number; gap: number }>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly returns: Returns,
	) {}

	schedule(): void {
		if (this.timer || this.gw.stopping() || this.returns.tracker.size === 0) return;
		this.timer = setTimeout(() => {
			this.timer = null;
			void this.poll().finally(() => this.schedule());
		}, this.gw.config.cmJobPollMs);
	}

	stop(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
	}

	/** The event stream opened or closed (its returns are then missed until the catch-up read at the reconnection). */
	setStreamUp(up: boolean): void {
		this.streamUp = up;
	}

	/** The stream skipped an event: that job's returns (every job's when the tag is unknown) are read at the next poll. */
	want(jid: string | null): void {
		this.wanted.add(jid ?? "*");
		this.schedule();
	}

	/** Whether a pending job is read from the job cache at this poll (see the header); moves its next read on. */
	private due(jid: string, deadline: number, force: boolean): boolean {
		const now = Date.now();
		const pollMs = this.gw.config.cmJobPollMs;
		const next = this.nextRead.get(jid) ?? { at: now, gap: pollMs };
		const due =
			force ||
			!this.streamUp ||
			this.wanted.has("*") ||
			this.wanted.has(jid) ||
			now >= next.at ||
			deadline - now <= pollMs;
		if (due && this.streamUp) this.nextRead.set(jid, { at: now + next.gap * 2, gap: next.gap * 2 });
		else if (!this.nextRead.has(jid)) this.nextRead.set(jid, next);
		return due;
	}

	/**
	 * Reads the jobs still waiting from the job cache (those due, or all with `force`: a catch-up); past their
	 * deadline, the silent hosts time out.
	 */
	async poll(force = false): Promise<void> {
		if (this.polling) {
			// A catch-up asked for during a poll reads every job at the next one.
			if (force) this.want(null);
			return;
		}
		this.polling = true;
		try {
			const pending = this.returns.tracker.pendingJobs();
			const waiting = new Set(pending.map(p => p.jid));
			for (const jid of this.nextRead.keys()) if (!waiting.has(jid)) this.nextRead.delete(jid);
			const due = pending.filter(p => this.due(p.jid, p.deadline, force));
			this.wanted.clear();
			for (const { jid, hosts } of due) {
				if (this.gw.stopping()) return;
				try {
					const res = await this.gw.salt.listJob(jid);
					const result: Record<string, { return?: unknown }> = res.info[0]?.Result ?? {};
					for (const host of hosts)
						if (host in result) this.returns.take(jid, host, result[host]?.return, verdictOf(result[host]));
				} catch (err) {
					this.gw.logger.warn(`Could not read job ${jid} from salt-api:`, (err as Error).message);
				}
			}
			for (const r of this.returns.tracker.expire()) this.returns.add(r);
		} finally {
			this.polling = false;
		}
	}

	/** After a restart: waits again for the jobs whose hosts are still "running", until their deadlines. */
	async resume(): Promise<void> {
		const running: Array<{
			jid: string;
			action: string;
			host: string;
			args: unknown[];
			task?: string;
			run?: string;
			_created: Date | string;
		}> = await this.gw.broker.call("actions.running");
		const jobs = new Map<
			string,
			{ fun: string; args: unknown[]; hosts: string[]; created: number; task?: string; run?: string }
		>();
		for (const r of running) {
			const job = jobs.get(r.jid) ?? {
				fun: r.action,
				args: r.args ?? [],
				hosts: [],
				created: new Date(r._created).getTime(),
				task: r.task,
				run: r.run,
			};
			job.hosts.push(r.host);
			jobs.set(r.jid, job);
		}
		// A new process has kept no early return: nothing comes back from tracking them.
		for (const [jid, job] of jobs)
			this.returns.tracker.track(
				jid,
				job.fun,
				job.args,
				job.hosts,
				Math.max(0, job.created + this.gw.config.cmJobTimeoutMs - Date.now()),
				{ task: job.task, run: job.run },
			);
		if (jobs.size) {
			this.gw.logger.info(`Waiting again for the returns of ${jobs.size} job(s) started before this restart`);
			await this.poll(true);
			this.schedule();
		}
	}
}
