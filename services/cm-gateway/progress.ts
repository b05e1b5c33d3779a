/**
 * Progress of long work in the `jobs` collection (services/jobs.service.ts), for work that must run
 * whether or not its progress can be recorded: an inventory sync or a patch load goes on when the jobs
 * service is not reachable, or when another replica's run of the same kind holds the record (409).
 */
import type { ServiceBroker } from "moleculer";

export interface JobHandle {
	progress(done: number, total: number): Promise<void>;
	finish(result: Record<string, unknown>): Promise<void>;
	fail(err: unknown): Promise<void>;
}

const NOOP: JobHandle = { progress: async () => undefined, finish: async () => undefined, fail: async () => undefined };

export async function trackJob(
	broker: ServiceBroker,
	kind: string,
	params: Record<string, unknown> = {},
	leaseMs = 5 * 60_000,
): Promise<JobHandle> {
	let job: { _id: string; run: string };
	try {
		job = await broker.call("jobs.claim", { kind, params, leaseMs });
	} catch (err) {
		broker.logger.debug(`No progress record for ${kind}:`, (err as Error).message);
		return NOOP;
	}
	const update = async (set: Record<string, unknown>) => {
		try {
			await broker.call("jobs.update", { id: job._id, run: job.run, set });
		} catch (err) {
			broker.logger.debug(`Could not record the progress of ${kind}:`, (err as Error).message);
		}
	};
	let last = 0;
	return {
		// At most a few writes a second, whatever the caller's pace; the last one always lands via finish.
		async progress(done, total) {
			const now = Date.now();
			if (now - last < 250 && done < total) return;
			last = now;
			await update({ progress: { done, total } });
		},
		finish: result => update({ status: "finished", result }),
		fail: err => update({ status: "failed", error: err instanceof Error ? err.message : String(err) }),
	};
}
