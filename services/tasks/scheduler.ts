/**
 * The scheduler (docs/scheduling.md): a pass whenever the soonest task falls due (and soon after a task
 * changes), taking over the runs of replicas that died (their lease lapsed), claiming each due run once across
 * replicas (task-claims.ts), handing it to the cm-gateway (retried while no cm-gateway can take it), and
 * recording what became of it. A replica hands over at most TASK_HANDOVERS runs at once: it claims (or takes
 * over) only while it has room, and due runs beyond that stay unclaimed for a replica with room.
 */
import type { Context } from "moleculer";
import type { EveThis, RestContext } from "../../mixins/eve-collection.mixin";
import { newObjectId } from "../../lib/eve/ids";
import { planRun, type Schedule } from "../../lib/fleet/schedule";
import type { Doc } from "../../lib/storage/store";
import { countMetric, observeMetric } from "../../lib/runtime/metrics";
import {
	claimRun,
	deferRun,
	findDue,
	findExpired,
	findSoonest,
	recordRun,
	renewLease,
	takeOverRun,
	type LastRun,
} from "./task-claims";
import { PassLoop } from "../../lib/runtime/lease";
import { configOf, type Config } from "../../lib/config";
import { call } from "../../lib/contracts/call";
import { ErrorType, isError } from "../../lib/errors";

/** What the tasks service has on `this` besides the Eve mixin's: the scheduler's state and methods, and the task checks. */
export interface TasksMembers {
	/** The scheduler's passes (none while TASK_SCHEDULER is off or before the service started). */
	scheduler?: PassLoop;
	lastTakeoverScan?: number;
	/** Runs being handed to the cm-gateway now (claimed or taken over, not recorded yet). */
	handovers?: number;
	/** A pass left due work for lack of room: the next hand-over to end asks for a pass. */
	roomWanted?: boolean;
	changedIds?: Set<string>;
	changedTimer?: NodeJS.Timeout | null;
	createScheduler(): void;
	kickScheduler(delayMs?: number): void;
	schedulerTick(): Promise<number>;
	claimRun(t: Doc): Promise<unknown>;
	executeRun(t: Doc, takeover?: boolean): Promise<unknown>;
	handOver(t: Doc, takeover?: boolean): Promise<void>;
	noteChanged(id: string): void;
	authorizeTask(ctx: RestContext, task: Doc): Promise<string>;
	taskTargetsNow(ctx: RestContext, task: Doc): Promise<string[]>;
	taskInScope(ctx: RestContext, task: Doc, action: string): Promise<void>;
	keptSecrets(doc: Doc, existing: Doc | undefined): { kwarg: unknown } | { problem: string };
}

export type TasksThis = EveThis & TasksMembers;

/** The schedule a task describes. */
export function scheduleOf(t: Doc, timezone: string): Schedule {
	return {
		start: new Date(t.start),
		end: t.end ? new Date(t.end) : null,
		interval: t.interval ?? 0,
		cron: t.cron ?? null,
		timezone: t.timezone ?? timezone,
	};
}

/** The task's schedule as its definition's approval covers it (cm-gateway governance.ts, TaskSchedule). */
function definitionSchedule(t: Doc) {
	const iso = (d: unknown) => (d ? new Date(d as string).toISOString() : null);
	return {
		start: iso(t.start),
		end: iso(t.end),
		interval: t.interval ?? 0,
		cron: t.cron ?? null,
		timezone: t.timezone ?? null,
		misfire: t.misfire ?? null,
		overlap: t.overlap ?? null,
	};
}

/** Waits between attempts to hand a run to a cm-gateway that is not there or cannot reach salt-api. */
const RETRY_DELAYS_MS = [1000, 4000, 15000];
/** Due runs claimed at once by one replica. */
const CLAIM_CONCURRENCY = 16;

/**
 * Whether a failed hand-over proves that nothing ran, so that the run may be tried again: refused before it ran (its
 * audit record not stored), no cm-gateway (or the node left before answering), a bulkhead's queue full, secrets at
 * rest unreadable, or salt-api unreachable or its master not answering. Told by type, never by message.
 */
const NOTHING_RAN: ReadonlySet<string> = new Set([
	ErrorType.NothingRan,
	"SERVICE_NOT_FOUND",
	"SERVICE_NOT_AVAILABLE",
	"REQUEST_REJECTED",
	"QUEUE_FULL",
	"SECRETS",
]);
const SALT_NOT_REACHED: ReadonlySet<string> = new Set(["unreachable", "master"]);
export function nothingRan(e: { type?: string; data?: { kind?: string } }): boolean {
	if (typeof e.type !== "string") return false;
	return NOTHING_RAN.has(e.type) || (e.type === "SALT_API" && SALT_NOT_REACHED.has(e.data?.kind ?? ""));
}
/** The tasks service's configuration: its broker's (lib/config.ts configOf), loaded once at the broker's start. */
export function cfg(svc: { broker: object }): Config {
	return configOf(svc.broker);
}

export const schedulerMethods = {
	/** The scheduler's passes (asked for by kickScheduler): each answers when the next is due; a failed one is tried again in a second. */
	createScheduler(this: TasksThis) {
		this.scheduler = new PassLoop(
			() => this.schedulerTick(),
			err => {
				this.logger.warn("Scheduler pass failed:", err.message);
				return 1000;
			},
		);
	},

	/** Looks again soon (a task changed), or right after the pass under way (what changed meanwhile may be due). */
	kickScheduler(this: TasksThis, delayMs = 5) {
		this.scheduler?.ask(delayMs);
	},

	/** One pass: take over dead runs, claim and start due runs (while there is room); answers how long to wait for the next. */
	async schedulerTick(this: TasksThis): Promise<number> {
		const now = new Date();
		// Whether this replica has no room for another hand-over; if so, the next hand-over to end asks for a pass.
		const full = () => {
			if (cfg(this).taskHandovers - (this.handovers ?? 0) > 0) return false;
			this.roomWanted = true;
			return true;
		};
		// Dead runs are rare and the search is not indexed: looked for a few times per lease, not every pass.
		const takeoverDue = now.getTime() - (this.lastTakeoverScan ?? 0) >= Math.max(250, cfg(this).taskLeaseMs / 4);
		if (takeoverDue) this.lastTakeoverScan = now.getTime();
		for (const t of takeoverDue ? await findExpired(this.store, now) : []) {
			// No room: the rest stay with their lease passed, for this replica's next look or another replica's.
			if (full()) {
				this.lastTakeoverScan = 0;
				break;
			}
			const taken = await takeOverRun(
				this.store,
				{ _id: t._id, pending: t.pending },
				this.broker.nodeID,
				new Date(),
				cfg(this).taskLeaseMs,
			);
			if (taken) {
				this.logger.warn(
					`Task '${t._id}': taking over run ${t.pending.run} (due ${new Date(t.pending.due).toISOString()}) from ${t.lease.owner}, whose lease passed`,
				);
				void this.handOver(taken, true);
			}
		}
		// A task whose previous run is still being handed over waits for it (see claimRun).
		const due = full() ? [] : await findDue(this.store, now);
		// Claims are independent (each is one conditional update): a few at a time, earliest first, never more
		// runs than there is room to hand over.
		let next = 0;
		await Promise.all(
			Array.from({ length: Math.min(CLAIM_CONCURRENCY, due.length) }, async () => {
				while (next < due.length) {
					if (full()) return;
					// The room is held from before the claim (a run claimed is handed over at once, in a room of its own).
					this.handovers = (this.handovers ?? 0) + 1;
					try {
						await this.claimRun(due[next++]);
					} finally {
						this.handovers--;
					}
				}
			}),
		);
		// Only the coming second matters: the scheduler looks again at least once a second anyway.
		const soonest = await findSoonest(this.store, now, 1000);
		const wait = soonest.length ? new Date(soonest[0].next).getTime() - Date.now() : 1000;
		return Math.min(1000, Math.max(0, wait));
	},

	/** Claims the task's due run (one replica wins), applying the misfire and overlap policies. */
	async claimRun(this: TasksThis, t: Doc) {
		const now = new Date();
		const due = new Date(t.next);
		// A run that waited for a maintenance window is judged by when it was due (misfire policy), not by the window.
		const scheduled = t.window_wait?.due ? new Date(t.window_wait.due) : due;
		const outstanding =
			t.overlap !== "allow" &&
			!!t.last_run?.jid &&
			(await this.broker.call<number, { jid: string }>("actions.outstanding", { jid: t.last_run.jid }).catch(() => 0)) >
				0;
		const { skip, next } = planRun(
			{ ...scheduleOf(t, cfg(this).taskTimezone), misfire: t.misfire, overlap: t.overlap },
			scheduled,
			now,
			cfg(this).taskMisfireGraceMs,
			outstanding,
		);
		const skipped = skip && outstanding && !skip.startsWith("missed") ? `${skip} (job ${t.last_run.jid})` : skip;
		// Only with no run pending: a task holds one run at a time, so a run still being handed over (retrying, or
		// held by a replica that died and awaiting takeover) is never overwritten and lost by the next one.
		const claimed = await claimRun(
			this.store,
			{ _id: t._id },
			{
				due,
				next,
				skipped: skipped || null,
				run: newObjectId(),
				by: this.broker.nodeID,
				now,
				leaseMs: cfg(this).taskLeaseMs,
			},
		);
		if (!claimed) return; // another replica won this run, or the task changed
		observeMetric(this.broker, "fleet.task.lateness_seconds", Math.max(0, now.getTime() - due.getTime()) / 1000);
		if (skipped) countMetric(this.broker, "fleet.task.runs.total", { outcome: "skipped" });
		this.noteChanged(t._id);
		if (!skipped) void this.handOver(claimed);
	},

	/** Hands a run over in the room it holds; once done, a pass that left due work for lack of room is asked for. */
	async handOver(this: TasksThis, t: Doc, takeover = false) {
		this.handovers = (this.handovers ?? 0) + 1;
		try {
			await this.executeRun(t, takeover);
		} catch (err) {
			this.logger.warn(`Task '${t._id}': handing run ${t.pending?.run} over failed:`, (err as Error).message);
		} finally {
			this.handovers--;
			if (this.roomWanted) {
				this.roomWanted = false;
				this.kickScheduler(0);
			}
		}
	},

	/**
	 * Sends a claimed run to the cm-gateway. Failures that prove nothing ran (no cm-gateway, salt-api
	 * unreachable, its bulkhead full) are tried again for a bounded time; then, or at once for any other failure (a run must
	 * never be sent twice blindly), the run is recorded as failed with a `task.failed` alert.
	 */
	async executeRun(this: TasksThis, t: Doc, takeover = false) {
		const pending = t.pending;
		let result: LastRun;
		for (let attempt = 0; ; attempt++) {
			try {
				const res: { task_id: string | null; status: string; approval?: { _id: string } } = await this.broker.call(
					"cm-gateway.runTask",
					{
						task: t._id,
						run: pending.run,
						takeover,
						owner: t.owner ?? null,
						cm_client: t.cm_client ?? "local_async",
						fun: t.fun,
						kwarg: t.kwarg ?? {},
						tgt: t.tgt ?? [],
						...(typeof t.target === "string" ? { target: t.target } : {}),
						schedule: definitionSchedule(t),
					},
				);
				if (res.status === "pending_approval" && res.approval) {
					// Held: nothing ran. Its runs pass once the task's definition is approved (docs/security.md).
					result = {
						due: pending.due,
						at: new Date(),
						status: "awaiting_approval",
						message: `the task's definition awaits approval ${res.approval._id}; nothing ran`,
						approval: res.approval._id,
					};
					countMetric(this.broker, "fleet.task.runs.total", { outcome: result.status });
					if (await recordRun(this.store, t._id, pending.run, result, new Date())) this.noteChanged(t._id);
					await call(this.broker, "alerts.raise", {
						type: "task.awaiting_approval",
						level: "warning",
						payload: { task: t._id, name: t.name, approval: res.approval._id },
					}).catch(() => undefined);
					return;
				}
				result = { due: pending.due, at: new Date(), status: res.task_id ? "started" : "no_minions", jid: res.task_id };
				break;
			} catch (err) {
				const e = err as {
					type?: string;
					message: string;
					data?: { kind?: string; window?: { start: string; name: string } };
				};
				if (isError(err, ErrorType.OutsideWindow) && e.data?.window) {
					// Outside a maintenance window: the run waits for the window to open (the misfire policy decides then).
					const until = new Date(e.data.window.start);
					const waiting: LastRun = {
						due: pending.due,
						at: new Date(),
						status: "waiting",
						message: `outside the maintenance window: waits for '${e.data.window.name}' opening ${until.toISOString()}`,
					};
					countMetric(this.broker, "fleet.task.runs.total", { outcome: "waiting" });
					if (await deferRun(this.store, t, pending.run, waiting, until, new Date())) this.noteChanged(t._id);
					return;
				}
				const retryable = nothingRan(e) && attempt < RETRY_DELAYS_MS.length;
				if (!retryable) {
					result = { due: pending.due, at: new Date(), status: "failed", message: e.message.slice(0, 500) };
					await call(this.broker, "alerts.raise", {
						type: "task.failed",
						level: "error",
						payload: {
							task: t._id,
							name: t.name,
							due: new Date(pending.due).toISOString(),
							message: e.message.slice(0, 500),
						},
					}).catch(() => undefined);
					break;
				}
				await new Promise(r => setTimeout(r, RETRY_DELAYS_MS[attempt]));
				if (this.scheduler?.stopping) return; // the lease runs out; another replica takes the run over
				await renewLease(this.store, t._id, pending.run, this.broker.nodeID, new Date(), cfg(this).taskLeaseMs);
			}
		}
		countMetric(this.broker, "fleet.task.runs.total", { outcome: result.status });
		if (await recordRun(this.store, t._id, pending.run, result, new Date())) this.noteChanged(t._id);
	},

	/** The scheduler's writes are announced together every 50 ms (caches, `tasks.updated`), not one by one. */
	noteChanged(this: TasksThis, id: string) {
		(this.changedIds ??= new Set<string>()).add(id);
		if (this.changedTimer) return;
		this.changedTimer = setTimeout(() => {
			this.changedTimer = null;
			const ids = [...(this.changedIds ?? [])];
			this.changedIds?.clear();
			void this.notifyChanged(this.broker as unknown as Context, "updated", ids).catch(() => undefined);
		}, 50);
		this.changedTimer.unref?.();
	},
};
