/**
 * What a job's hosts came to, the one meaning the job history (`salt_jobs`) and the hosts' `actions` records share:
 * a host is `running` until it answers, then `returned` (and `failed` when Salt said so: `success` false or a
 * non-zero `retcode`, as a failed state's 2; else `succeeded`), or `timed_out` when it never answered.
 */

export interface JobCounts {
	jid: string;
	running: number;
	returned: number;
	succeeded: number;
	failed: number;
	timed_out: number;
}

export const noCounts = (jid: string): JobCounts => ({
	jid,
	running: 0,
	returned: 0,
	succeeded: 0,
	failed: 0,
	timed_out: 0,
});

/** Did this answered host fail, by what Salt sent with its return? */
export function returnFailed(r: { success?: unknown; retcode?: unknown }): boolean {
	return r.success === false || (typeof r.retcode === "number" && r.retcode !== 0);
}

/** Counts one host's record of a job. */
export function countReturn(c: JobCounts, r: { state?: unknown; success?: unknown; retcode?: unknown }): void {
	if (r.state === "running") c.running++;
	else if (r.state === "timeout") c.timed_out++;
	else {
		c.returned++;
		if (returnFailed(r)) c.failed++;
		else c.succeeded++;
	}
}
