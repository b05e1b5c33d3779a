/**
 * Owns the `conformity_checks` collection (docs/conformity.md, "Scheduled checks"): `{name, target, mods, interval
 * or cron, batch, jitter_s, status}` — a check of the declared state (`state.apply test=True`, the highstate unless
 * `mods` names sls) run on the target every interval (seconds) or on a cron, in batches with jitter, never on the
 * whole target at once. Whoever creates it (or changes what it runs) must be allowed the call on the hosts it
 * selects then, and becomes its owner; every pass runs as the owner's token is at that moment.
 *
 * Scheduling is exactly-once across replicas, as the tasks' scheduler does it: a due pass is claimed with one atomic
 * update conditional on `next` and on the check's lease (lib/runtime/lease.ts: one replica wins it), which records
 * the pass under an id derived from the check and its due time; the pass itself is a rollout made under that id
 * (`rollouts.startCheck`), and the lease is let go once it is made. A replica that dies between the claim and the
 * rollout leaves the pass to another one (its lease of ROLLOUT_LEASE_MS passes), which makes the same rollout —
 * never a second one. The rollout's batches are judged by the conformity service as they end.
 */
import crypto from "node:crypto";
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import { ErrorType, Invalid, isError, RunRefused } from "../../lib/errors";
import { configOf } from "../../lib/config";
import { CronError, nextDue, parseCron, type Schedule } from "../../lib/fleet/schedule";
import type { Doc } from "../../lib/storage/store";
import { authorizeScopedWork, scopedCaller } from "../../lib/http/work-scope";
import { writeMethods } from "../../mixins/eve-collection/writes";
import { call } from "../../lib/contracts/call";
import { PassLoop, claim, findLapsed, migrateLeases, takeOver, type OldLeases } from "../../lib/runtime/lease";

const SHARE = /^(\d{1,3})%$/;
const share = { type: "string", pattern: SHARE } as const;
/** Checks looked at per pass of the scheduler. */
const DUE_LIMIT = 100;
/** A pass's rollout refused for good (the owner's token, a target that selects nothing, bad parameters): recorded, not retried. */
const REFUSALS = [ErrorType.RunRefused, ErrorType.Invalid, ErrorType.NothingToRun, "VALIDATION_ERROR"] as const;

type ChecksThis = EveThis & {
	timer: NodeJS.Timeout | null;
	passes: PassLoop;
	tickMs: number;
	leaseMs: number;
	timezone: string;
	tick(): void;
	lookForPasses(): Promise<void>;
	startPass(check: Doc): Promise<void>;
	authorizeCheck(ctx: RestContext, check: Doc): Promise<string>;
	checkInScope(ctx: RestContext, check: Doc, action: string): Promise<void>;
};

/** The pass of `check` due at `due`: the same 24-hex id on every replica (the rollout's id). */
export const passId = (check: string, due: Date) =>
	crypto.createHash("sha256").update(`${check}:${due.toISOString()}`).digest("hex").slice(0, 24);

const scheduleOf = (c: Doc, tz: string): Schedule => ({
	start: new Date(c._created ?? c.start ?? Date.now()),
	interval: c.interval ?? 0,
	cron: c.cron ?? null,
	timezone: tz,
});
const kwargOf = (c: Doc) => ({
	test: true,
	...(c.mods !== undefined && c.mods !== "" && !(Array.isArray(c.mods) && !c.mods.length) ? { mods: c.mods } : {}),
});

/**
 * Passes as versions before issue 45 left them unstarted: no lease, the pass's `at` being when it was claimed (or
 * last taken over), taken over ROLLOUT_LEASE_MS after it.
 */
export function oldLeases(leaseMs: number): OldLeases {
	return {
		filter: { "last_pass.started": false, lease: { $exists: false } },
		lease: d => ({ owner: "", until: new Date(new Date(d.last_pass.at).getTime() + leaseMs) }),
		unset: [],
	};
}

const fields = {
	name: { type: "string", min: 1, max: 200 },
	target: { type: "string", min: 1, max: 10_000 },
	mods: {
		type: "multi",
		optional: true,
		rules: [
			{ type: "string", max: 500 },
			{ type: "array", items: { type: "string", min: 1, max: 500 }, max: 100 },
		],
	},
	interval: { type: "number", integer: true, min: 10, max: 31_536_000, optional: true },
	cron: { type: "string", min: 1, max: 200, optional: true },
	batch: { type: "multi", optional: true, rules: [share, { type: "number", integer: true, min: 1, max: 100_000 }] },
	jitter_s: { type: "number", integer: true, min: 0, max: 3600, optional: true },
	status: { type: "enum", values: ["scheduled", "paused"], optional: true },
} as const;

const ConformityChecksService: EveServiceSchema<ChecksThis> = {
	name: "conformity-checks",
	mixins: [
		EveCollection({
			resource: "conformity_checks",
			idPattern: OBJECT_ID,
			schema: fields,
			readOnlyFields: ["owner", "next", "last_pass", "passes"],
			indexes: { next: { ordered: true, sparse: true } },
		}),
	],

	methods: {
		async prepareInput(this: ChecksThis, _ctx: RestContext, doc: Doc, info: WriteInfo) {
			return { doc: info.op === "create" ? { batch: "10%", jitter_s: 0, status: "scheduled", ...doc } : doc };
		},

		async checkRules(this: ChecksThis, _ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null> {
			const c = { ...(info.existing ?? {}), ...doc };
			if ((c.interval === undefined || c.interval === null) === (c.cron === undefined || c.cron === null))
				return { interval: "give either interval (seconds) or cron, one of them" };
			if (typeof c.cron === "string") {
				try {
					parseCron(c.cron);
				} catch (err) {
					if (err instanceof CronError) return { cron: err.message };
					throw err;
				}
			}
			const m = typeof c.batch === "string" ? SHARE.exec(c.batch) : null;
			if (m && (Number(m[1]) > 100 || Number(m[1]) === 0)) return { batch: "a share from 1% to 100%" };
			return null;
		},

		/** The caller may run the check on the hosts it selects now (403 saying why); answers the caller's token id. */
		async authorizeCheck(this: ChecksThis, ctx: RestContext, check: Doc): Promise<string> {
			const user = (ctx.meta as { user?: { id: string } }).user;
			if (!user?.id) throw new RunRefused("the check is refused: no token authorizes it", "no token authorizes it");
			const { hosts } = await call(ctx, "hosts.resolveTarget", { target: check.target, field: "target" });
			if (!hosts.length) throw new Invalid({ target: "selects no live host" });
			(ctx.meta as { auditRun?: { fun: string; targets: string[] } }).auditRun = { fun: "state.apply", targets: hosts };
			await call(ctx, "tokens.authorizeRun", {
				token: user.id,
				client: "local_async",
				fun: "state.apply",
				kwarg: kwargOf(check),
				targets: hosts,
			});
			return user.id;
		},

		/** A scoped caller changes or deletes a check only when its call on the hosts it selects now is inside the scope (403). */
		async checkInScope(this: ChecksThis, ctx: RestContext, check: Doc, action: string): Promise<void> {
			if (!scopedCaller(ctx)) return;
			let hosts: string[];
			try {
				hosts = (await call(ctx, "hosts.resolveTarget", { target: check.target })).hosts;
			} catch (err) {
				if (!isError(err, ErrorType.TargetUnevaluable)) throw err;
				throw new RunRefused(
					`your token may not ${action} this check: its target cannot be evaluated now, so nothing shows it lies inside the token's scope`,
				);
			}
			await authorizeScopedWork(ctx, action, "this check", {
				client: "local_async",
				fun: "state.apply",
				kwarg: kwargOf(check),
				hosts,
			});
		},

		async removeDocs(this: ChecksThis, ctx: RestContext, docs: Doc[]) {
			for (const doc of docs) await this.checkInScope(ctx, doc, "delete");
			await writeMethods.removeDocs.call(this, ctx, docs);
		},

		async beforeStore(this: ChecksThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.existing) await this.checkInScope(ctx, info.existing, "change");
			const merged = { ...(info.existing ?? {}), ...doc };
			const out: Doc = { ...doc };
			// Creating, or changing what runs or where, needs the writer to be allowed it; the writer owns it then.
			if (info.op === "create" || ["target", "mods"].some(k => k in doc))
				out.owner = await this.authorizeCheck(ctx, merged);
			if (info.op === "create" || ["interval", "cron", "status"].some(k => k in doc)) {
				const now = new Date();
				out.next =
					merged.status === "paused"
						? null
						: nextDue(
								scheduleOf({ ...merged, _created: merged._created ?? now }, this.timezone),
								new Date(now.getTime() - 1),
							);
			}
			if (info.op === "create") out.passes = 0;
			return out;
		},

		async afterWrite(this: ChecksThis, ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]) {
			await this.notifyChanged(ctx, op, ids);
			if (op !== "removed") this.tick();
		},

		/** A look now, or once more right after the one under way (what was written meanwhile may be due). */
		tick(this: ChecksThis) {
			this.passes.ask();
		},

		/** One look: due passes claimed (one replica each) and started; passes left by a replica that died, started again. */
		async lookForPasses(this: ChecksThis) {
			const now = new Date();
			const holder = { owner: this.broker.nodeID, ms: this.leaseMs, now };
			for (const c of await this.store.find({ status: "scheduled", next: { $lte: now } }, { limit: DUE_LIMIT })) {
				const due = new Date(c.next);
				const claimed = await claim(this.store, { _id: c._id, next: due, status: "scheduled" }, holder, {
					$set: {
						next: nextDue(scheduleOf(c, this.timezone), now),
						last_pass: { due, rollout: passId(String(c._id), due), at: now, started: false, error: null },
					},
					$inc: { passes: 1 },
				});
				if (claimed) await this.startPass(claimed);
			}
			for (const c of await findLapsed(this.store, {}, now, { limit: DUE_LIMIT })) {
				// Taken over: the same pass id, so the rollout made (if it was) is the one answered.
				const taken = await takeOver(this.store, { _id: c._id, "last_pass.rollout": c.last_pass.rollout }, holder);
				if (taken) await this.startPass(taken);
			}
		},

		/** Makes the pass's rollout (once, whoever asks); a refusal (the owner's token, a target that selects nothing) is recorded and not retried. */
		async startPass(this: ChecksThis, c: Doc) {
			const pass = c.last_pass;
			const set = (fields: Doc) =>
				this.store.updateMany({ _id: c._id, "last_pass.rollout": pass.rollout }, { $set: fields });
			try {
				const started = await this.broker.call<{ total: number }, Record<string, unknown>>("rollouts.startCheck", {
					id: pass.rollout,
					check: String(c._id),
					name: c.name,
					target: c.target,
					kwarg: kwargOf(c),
					batch: c.batch,
					jitter_s: c.jitter_s ?? 0,
					owner: c.owner,
				});
				await set({ "last_pass.started": true, "last_pass.hosts": started.total, "last_pass.error": null });
			} catch (err) {
				const e = err as { message: string };
				if (REFUSALS.some(type => isError(err, type)))
					await set({ "last_pass.started": true, "last_pass.error": String(e.message).slice(0, 2000) });
				else
					this.logger.warn(`Conformity check ${c._id}: its pass could not start yet (tried again later):`, e.message);
			}
			await this.notifyChanged(this.broker as unknown as Context, "updated", [String(c._id)]);
		},
	},

	created(this: ChecksThis) {
		const config = configOf(this.broker);
		this.timer = null;
		this.passes = new PassLoop(
			() => this.lookForPasses(),
			err => this.logger.warn("Conformity check pass failed; the next look tries again:", err.message),
		);
		this.tickMs = config.rolloutTickMs;
		this.leaseMs = config.rolloutLeaseMs;
		this.timezone = config.taskTimezone;
	},
	async started(this: ChecksThis) {
		// Passes an older version left unstarted are moved to a lease first: they are taken over as usual.
		const moved = await migrateLeases(this.store, oldLeases(this.leaseMs));
		if (moved) this.logger.info(`Moved ${moved} unstarted conformity check passes to a \`lease\``);
		if (!configOf(this.broker).rolloutDriver) return;
		this.timer = setInterval(() => this.tick(), this.tickMs);
		this.timer.unref?.();
	},
	async stopped(this: ChecksThis) {
		if (this.timer) clearInterval(this.timer);
		await this.passes.stop();
	},
};

export default ConformityChecksService;
