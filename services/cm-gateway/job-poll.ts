/**
 * The /jobs/<jid> fallback: returns normally come from the event stream; every CM_JOB_POLL_MS the jobs still
 * waiting are read from the master's job cache, and past their deadline the silent hosts are recorded as
 * "timeout". Also resumes, after a restart, the jobs whose hosts are still "running" in `actions`.
 */
import type { GatewayContext } from "./context";
import type { Returns } from "./returns";
import { verdictOf } from "./job-tracker";

export class JobPoll {
	private timer: NodeJS.Timeout | null = null;
	private polling = false;

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

	/** Reads the jobs still waiting from the job cache; past their deadline, the silent hosts time out. */
	async poll(): Promise<void> {
		if (this.polling) return;
		this.polling = true;
		try {
			for (const { jid, hosts } of this.returns.tracker.pendingJobs()) {
				if (this.gw.stopping()) return;
				try {
					const res = await this.gw.salt.listJob(jid);
					const result: Record<string, { return?: unknown }> = res.info[0]?.Result ?? {};
					for (const host of hosts) if (host in result) this.returns.take(jid, host, result[host]?.return, verdictOf(result[host]));
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
		const running: Array<{ jid: string; action: string; host: string; args: unknown[]; task?: string; run?: string; _created: Date | string }> = await this.gw.broker.call("actions.running");
		const jobs = new Map<string, { fun: string; args: unknown[]; hosts: string[]; created: number; task?: string; run?: string }>();
		for (const r of running) {
			const job = jobs.get(r.jid) ?? { fun: r.action, args: r.args ?? [], hosts: [], created: new Date(r._created).getTime(), task: r.task, run: r.run };
			job.hosts.push(r.host);
			jobs.set(r.jid, job);
		}
		// A new process has kept no early return: nothing comes back from tracking them.
		for (const [jid, job] of jobs) this.returns.tracker.track(jid, job.fun, job.args, job.hosts, Math.max(0, job.created + this.gw.config.cmJobTimeoutMs - Date.now()), { task: job.task, run: job.run });
		if (jobs.size) {
			this.gw.logger.info(`Waiting again for the returns of ${jobs.size} job(s) started before this restart`);
			await this.poll();
			this.schedule();
		}
	}
}
