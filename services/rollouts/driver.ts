/**
 * The rollout driver (docs/rollouts.md): every replica of the rollouts service looks, every ROLLOUT_TICK_MS and
 * whenever a job ends or a rollout changes, for rollouts with something to do — a running one whose next batch
 * is due, or any one with a batch in flight — claims each with one atomic update (a lease of ROLLOUT_LEASE_MS, so
 * a dead replica's claim lapses), does one step, and lets it go.
 *
 * A step: start the current batch (its dry run first when asked), or look at the batch's job in the history and,
 * once it ended, count it, pause the rollout past its failure budget (with a `rollout.paused` alert) or move on.
 * What to do is decided without effects in decisions.ts; here it is carried out.
 * Starting is exactly-once: the batch is marked `starting` with its run id before the cm-gateway is asked; a
 * step that finds it marked so (the asker died, or the answer was lost) asks again as a takeover, and the
 * cm-gateway answers the job that run already started.
 */
import type { Context } from "moleculer";
import type { EveThis, RestContext } from "../../mixins/eve-collection.mixin";
import type { Doc } from "../../lib/storage/store";
import { configOf } from "../../lib/config";
import { ErrorType, isError } from "../../lib/errors";
import { countMetric } from "../../lib/runtime/metrics";
import {
	PassLoop,
	both,
	claim,
	claimable,
	heldBy,
	migrateLeases,
	release,
	type OldLeases,
} from "../../lib/runtime/lease";
import { readDryRun, type DryRunReturn } from "../../lib/fleet/state-results";
import { sizeOf, type Batch } from "./plan";
import {
	afterBatch,
	afterDryRun,
	countBatch,
	inFlight,
	nextStep,
	nobodyLive,
	stateBeforeAsk,
	type JobCounts,
	type RolloutProgress,
} from "./decisions";
import { call } from "../../lib/contracts/call";

/** What the driver keeps on the service. */
export interface RolloutsMembers {
	driver: { enabled: boolean; tickMs: number; leaseMs: number; timer: NodeJS.Timeout | null; passes: PassLoop | null };
	kick(): void;
	driverCreated(): void;
	driverStarted(): Promise<void>;
	driverStopped(): Promise<void>;
	drive(): Promise<void>;
	stepRollout(r: Doc): Promise<boolean>;
	startBatch(r: Doc, b: Batch, dry: boolean, takeover: boolean): Promise<void>;
	afterBatch(r: Doc | null, index: number): Promise<void>;
	observeBatch(r: Doc, b: Batch, dry: boolean): Promise<void>;
	saveProgress(r: Doc, set: Doc): Promise<boolean>;
	moveStatus(r: Doc, from: string[], to: string, reason: string | null): Promise<boolean>;
	pauseForBudget(r: Doc, why: string): Promise<void>;
	authorizeRollout(ctx: RestContext, rollout: Doc, hosts: string[]): Promise<string>;
	/** The rollout's frozen host list (kept in `rollout_hosts`, apart from the record). */
	rolloutHosts(id: string): Promise<string[]>;
	batchHosts(r: Doc, b: Batch): Promise<string[]>;
	plannedRollout(_id: string, doc: Doc, hosts: string[], owner: string): Promise<Doc>;
	createInternal(
		ctx: Context,
		id: string,
		base: Doc,
		owner: string,
		only?: string[],
	): Promise<{ _id: string; total: number; repeated: boolean }>;
	resolveRollout(ctx: RestContext, target: string): Promise<string[]>;
}

export type RolloutsThis = EveThis & RolloutsMembers;

/** After a failed ask (salt-api or the cm-gateway unavailable), the next one waits this long. */
const RETRY_MS = 5000;
/** A batch held for approval asks again this often (and at once when a request is decided: rollouts.service.ts). */
const APPROVAL_POLL_MS = 5000;
/** Rollouts one pass looks at. */
const PASS_MAX = 100;

interface JobSummary extends JobCounts {
	jid: string;
	state: string;
}

/** A run id for each ask of a batch: the same on every replica, its dry run's apart. */
const runId = (r: Doc, b: Batch, dry: boolean) => `${r._id}:${b.index}${dry ? ":dry" : ""}`;

/** Claims as versions before issue 45 stored them: `claim_by` and `claim_until` (moved at start). */
export const OLD_LEASES: OldLeases = {
	filter: { claim_until: { $exists: true } },
	lease: d => (d.claim_until ? { owner: String(d.claim_by ?? ""), until: new Date(d.claim_until) } : null),
	unset: ["claim_by", "claim_until"],
};

export const driverMethods = {
	driverCreated(this: RolloutsThis) {
		const config = configOf(this.broker);
		this.driver = {
			enabled: config.rolloutDriver,
			tickMs: config.rolloutTickMs,
			leaseMs: config.rolloutLeaseMs,
			timer: null,
			passes: null,
		};
	},

	async driverStarted(this: RolloutsThis) {
		// Claims stored by an older version are moved first: a rollout claimed before the upgrade is let go as usual.
		const moved = await migrateLeases(this.store, OLD_LEASES);
		if (moved) this.logger.info(`Moved the claims of ${moved} rollouts to \`lease\``);
		if (!this.driver.enabled) return;
		// No pass before that: a claim of the older shape would look free.
		this.driver.passes = new PassLoop(
			() => this.drive(),
			err => this.logger.warn("Rollout pass failed; the next one tries again:", err.message),
		);
		this.driver.timer = setInterval(() => this.kick(), this.driver.tickMs);
		this.driver.timer.unref?.();
		this.kick();
	},

	async driverStopped(this: RolloutsThis) {
		if (this.driver.timer) clearInterval(this.driver.timer);
		this.driver.timer = null;
		await this.driver.passes?.stop();
	},

	/** A pass now, or right after the one under way. */
	kick(this: RolloutsThis) {
		this.driver?.passes?.ask();
	},

	/** One pass: each rollout with something to do, claimed, stepped, let go. */
	async drive(this: RolloutsThis) {
		const now = new Date();
		const due = await this.store.find(
			{ $and: [{ next_at: { $lte: now } }, { $or: [{ status: "running" }, { in_flight: true }] }, claimable(now)] },
			{ only: ["_id"], limit: PASS_MAX },
		);
		for (const { _id } of due) {
			if (this.driver.passes?.stopping) return;
			const claimed = await claim(this.store, { _id }, { owner: this.broker.nodeID, ms: this.driver.leaseMs });
			if (!claimed) continue;
			let progressed = false;
			try {
				progressed = await this.stepRollout(claimed);
			} catch (err) {
				this.logger.warn(`Rollout ${_id}: step failed, retried later:`, (err as Error).message);
				await this.saveProgress(claimed, {
					last_error: String((err as Error).message).slice(0, 2000),
					next_at: new Date(Date.now() + RETRY_MS),
				});
			} finally {
				const fresh = await this.store.findOne({ _id });
				await release(
					this.store,
					{ _id },
					{ $set: { in_flight: !!fresh?.batches && inFlight(fresh as RolloutProgress) } },
					this.broker.nodeID,
				);
			}
			if (progressed) this.kick();
		}
	},

	/** One step of a claimed rollout; true when it moved (another step may follow at once). */
	async stepRollout(this: RolloutsThis, r: Doc): Promise<boolean> {
		const step = nextStep(r as RolloutProgress);
		switch (step.do) {
			case "finish":
				await this.moveStatus(r, ["running", "paused"], "finished", null);
				return false;
			case "start":
				await this.startBatch(r, step.batch, step.dry, step.takeover);
				return true;
			case "observe":
				await this.observeBatch(r, step.batch, step.dry);
				return false;
			default:
				return false;
		}
	},

	/**
	 * Asks the cm-gateway for the batch's job (its dry run: `test=True`). The batch is marked as starting, with
	 * its run id, before the ask; an ask that fails with no answer leaves the mark, and the next step asks again
	 * as a takeover.
	 */
	async startBatch(this: RolloutsThis, r: Doc, b: Batch, dry: boolean, takeover: boolean) {
		const at = `batches.${b.index}`;
		if (!takeover) await this.saveProgress(r, { [`${at}.state`]: dry ? "dry_starting" : "starting", in_flight: true });
		const kwarg = dry ? { ...(r.kwarg ?? {}), test: true } : r.kwarg;
		let answer: { task_id: string | null; repeated?: boolean; status?: string; approval?: { _id: string } };
		const back = { [`${at}.state`]: stateBeforeAsk(dry, r.dry_run_first), in_flight: false };
		try {
			answer = await this.broker.call("cm-gateway.runRolloutBatch", {
				rollout: String(r._id),
				batch: b.index,
				run: runId(r, b, dry),
				takeover,
				owner: r.owner,
				fun: r.fun,
				...(r.arg ? { arg: r.arg } : {}),
				...(kwarg ? { kwarg } : {}),
				hosts: await this.batchHosts(r, b),
				target: r.target,
				total: r.total,
			});
		} catch (err) {
			const e = err as { message: string; data?: { window?: { name: string; start: string } } };
			if (isError(err, ErrorType.OutsideWindow) && e.data?.window) {
				// Outside a maintenance window: the batch waits for it to open (docs/rollouts.md), nothing ran.
				const until = new Date(e.data.window.start);
				await this.saveProgress(r, {
					...back,
					waiting: { for: "window", window: e.data.window.name, until },
					last_error: e.message.slice(0, 2000),
					next_at: until,
				});
				return;
			}
			if (isError(err, ErrorType.RunRefused)) {
				// Refused before anything ran: the batch waits, the rollout pauses and says why.
				await this.saveProgress(r, { ...back, last_error: e.message.slice(0, 2000) });
				await this.pauseForBudget(r, `batch ${b.index} was refused: ${e.message}`.slice(0, 2000));
				return;
			}
			await this.saveProgress(r, {
				last_error: String(e.message).slice(0, 2000),
				next_at: new Date(Date.now() + RETRY_MS),
			});
			return;
		}
		if (answer.status === "pending_approval" && answer.approval) {
			// Held: the rollout's definition awaits approval; asked again shortly (and at once when it is decided).
			await this.saveProgress(r, {
				...back,
				waiting: { for: "approval", approval: answer.approval._id },
				last_error: null,
				next_at: new Date(Date.now() + APPROVAL_POLL_MS),
			});
			return;
		}
		if (!answer.task_id) {
			// None of the batch's hosts is live any more (or has an accepted key): nothing ran.
			const none = nobodyLive(r as RolloutProgress, b, dry);
			await this.saveProgress(r, {
				[`${at}.state`]: none.state,
				[`${at}.unreached`]: none.unreached,
				[`${at}.finished`]: new Date(),
				...none.rollout,
				last_error: null,
			});
			if (!dry) await this.afterBatch(await this.store.findOne({ _id: r._id }), b.index);
			return;
		}
		countMetric(this.broker, "fleet.rollout.batches.total", {
			kind: dry ? "dry_run" : "run",
			repeated: String(answer.repeated === true),
		});
		await this.saveProgress(r, {
			[`${at}.state`]: dry ? "dry_running" : "running",
			[`${at}.${dry ? "dry_jid" : "jid"}`]: answer.task_id,
			[`${at}.started`]: b.started ?? new Date(),
			in_flight: true,
			next_at: new Date(),
			last_error: null,
			waiting: null,
		});
	},

	/** Looks at the batch's job (or dry run) in the history; once it ended, counts it and decides what comes next. */
	async observeBatch(this: RolloutsThis, r: Doc, b: Batch, dry: boolean) {
		const jid = dry ? b.dry_jid : b.jid;
		if (!jid) return;
		const [job] = await this.broker.call<JobSummary[], { jids: string[] }>("salt-jobs.summaries", { jids: [jid] });
		if (job?.state !== "finished") return;
		const at = `batches.${b.index}`;
		if (dry) {
			const returns = await this.broker.call<DryRunReturn[], { jid: string }>("actions.returnsOf", { jid });
			const reading = readDryRun(returns, sizeOf(b));
			const set: Doc = {
				[`${at}.predicted`]: reading.predicted,
				[`${at}.predicted_total`]: reading.total,
				[`${at}.predicted_failures`]: reading.failures,
			};
			const next = afterDryRun(r as RolloutProgress, b, reading);
			if (next.do === "pause") {
				await this.saveProgress(r, { ...set, [`${at}.state`]: "ready" });
				await this.pauseForBudget(r, next.reason);
				return;
			}
			if (next.do === "skip") {
				// Nothing would change: the batch is skipped, the next one follows.
				await this.saveProgress(r, {
					...set,
					[`${at}.state`]: "skipped",
					[`${at}.finished`]: new Date(),
					current: next.current,
					done: next.done,
					next_at: new Date(),
				});
				if (next.last) await this.moveStatus(r, ["running", "paused"], "finished", null);
				this.kick();
				return;
			}
			await this.saveProgress(r, { ...set, [`${at}.state`]: "ready", next_at: new Date() });
			this.kick();
			return;
		}
		const counted = countBatch(r as RolloutProgress, b, job);
		const batchSet = Object.fromEntries(
			Object.entries({ state: "finished", finished: new Date(), ...counted.batch }).map(([k, v]) => [`${at}.${k}`, v]),
		);
		await this.saveProgress(r, { ...batchSet, ...counted.rollout, in_flight: false });
		await this.afterBatch(await this.store.findOne({ _id: r._id }), b.index);
	},

	/** After a batch ended: past the budget the rollout pauses; else the next batch is due after `wait_s`, or it is finished. */
	async afterBatch(this: RolloutsThis, r: Doc | null, index: number) {
		if (!r) return;
		// A check spreads its batches: each waits wait_s plus a random share of jitter_s.
		const { current, waitMs, next } = afterBatch(r as RolloutProgress, index, Math.random());
		await this.saveProgress(r, { current, next_at: new Date(Date.now() + waitMs) });
		if (next.do === "pause") {
			await this.pauseForBudget(r, next.reason);
			return;
		}
		if (next.do === "finish") {
			await this.moveStatus(r, ["running", "paused"], "finished", null);
			return;
		}
		// The next batch starts now (another pass at once), or once `wait_s` has passed.
		if (waitMs > 0) setTimeout(() => this.kick(), waitMs).unref?.();
		else this.kick();
	},

	async rolloutHosts(this: RolloutsThis, id: string): Promise<string[]> {
		const doc = await this.stores.rollout_hosts.findOne({ _id: id });
		return doc?.hosts ?? [];
	},

	async batchHosts(this: RolloutsThis, r: Doc, b: Batch): Promise<string[]> {
		return (await this.rolloutHosts(String(r._id))).slice(b.from, b.to);
	},

	/** Writes progress while the claim is this replica's (a lost claim writes nothing: another replica has it). */
	async saveProgress(this: RolloutsThis, r: Doc, set: Doc): Promise<boolean> {
		const n = await this.store.updateMany(both({ _id: r._id }, heldBy(this.broker.nodeID)), {
			$set: { ...set, _updated: new Date() },
		});
		if (n) await this.notifyChanged(this.broker as unknown as Context, "updated", [String(r._id)]);
		return n > 0;
	},

	/** Moves the status if it is still one of `from` (an operator's pause or abort meanwhile wins). */
	async moveStatus(this: RolloutsThis, r: Doc, from: string[], to: string, reason: string | null): Promise<boolean> {
		const n = await this.store.updateMany(
			{ _id: r._id, status: { $in: from } },
			{ $set: { status: to, reason, _updated: new Date() } },
		);
		if (n) await this.notifyChanged(this.broker as unknown as Context, "updated", [String(r._id)]);
		return n > 0;
	},

	/** Pauses a running rollout by itself, saying why, with a `rollout.paused` alert. */
	async pauseForBudget(this: RolloutsThis, r: Doc, why: string) {
		if (!(await this.moveStatus(r, ["running"], "paused", why))) return;
		this.logger.warn(`Rollout ${r._id} (${r.name}) paused: ${why}`);
		try {
			await call(this.broker, "alerts.raise", {
				type: "rollout.paused",
				level: "error",
				payload: { rollout: String(r._id), name: r.name, reason: why },
			});
		} catch (err) {
			this.logger.error(`Could not raise the alert of rollout ${r._id}:`, (err as Error).message);
		}
	},
};
