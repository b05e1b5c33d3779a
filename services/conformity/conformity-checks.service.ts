/**
 * Owns the `conformity_checks` collection (docs/conformity.md, "Scheduled checks"): `{name, target, mods, interval
 * or cron, batch, jitter_s, status}` — a check of the declared state (`state.apply test=True`, the highstate unless
 * `mods` names sls) run on the target every interval (seconds) or on a cron, in batches with jitter, never on the
 * whole target at once. Whoever creates it (or changes what it runs) must be allowed the call on the hosts it
 * selects then, and becomes its owner; every pass runs as the owner's token is at that moment.
 *
 * Scheduling is exactly-once across replicas, as the tasks' scheduler does it: a due pass is claimed with one atomic
 * update conditional on `next` (one replica wins it), which records the pass under an id derived from the check and
 * its due time; the pass itself is a rollout made under that id (`rollouts.startCheck`), so a replica that dies
 * between the claim and the rollout leaves the pass to another one (after ROLLOUT_LEASE_MS), which makes the same
 * rollout — never a second one. The rollout's batches are judged by the conformity service as they end.
 */
import crypto from "node:crypto";
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext, type WriteInfo } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import { EveError, validationFailed, type Issues } from "../../lib/eve/errors";
import { configOf } from "../../lib/config";
import { CronError, nextDue, parseCron, type Schedule } from "../../lib/fleet/schedule";
import type { Doc } from "../../lib/storage/store";
import { authorizeScopedWork, scopedCaller } from "../../lib/http/work-scope";
import { writeMethods } from "../../mixins/eve-collection/writes";

const SHARE = /^(\d{1,3})%$/;
const share = { type: "string", pattern: SHARE } as const;
/** Checks looked at per pass of the scheduler. */
const DUE_LIMIT = 100;

type ChecksThis = EveThis & {
	timer: NodeJS.Timeout | null;
	ticking: Promise<void> | null;
	tickMs: number;
	leaseMs: number;
	timezone: string;
	tick(): Promise<void>;
	startPass(check: Doc): Promise<void>;
	authorizeCheck(ctx: RestContext, check: Doc): Promise<string>;
	checkInScope(ctx: RestContext, check: Doc, action: string): Promise<void>;
};

/** The pass of `check` due at `due`: the same 24-hex id on every replica (the rollout's id). */
export const passId = (check: string, due: Date) => crypto.createHash("sha256").update(`${check}:${due.toISOString()}`).digest("hex").slice(0, 24);

const scheduleOf = (c: Doc, tz: string): Schedule => ({ start: new Date(c._created ?? c.start ?? Date.now()), interval: c.interval ?? 0, cron: c.cron ?? null, timezone: tz });
const kwargOf = (c: Doc) => ({ test: true, ...(c.mods !== undefined && c.mods !== "" && !(Array.isArray(c.mods) && !c.mods.length) ? { mods: c.mods } : {}) });

const fields = {
	name: { type: "string", min: 1, max: 200 },
	target: { type: "string", min: 1, max: 10_000 },
	mods: { type: "multi", optional: true, rules: [{ type: "string", max: 500 }, { type: "array", items: { type: "string", min: 1, max: 500 }, max: 100 }] },
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
			if ((c.interval === undefined || c.interval === null) === (c.cron === undefined || c.cron === null)) return { interval: "give either interval (seconds) or cron, one of them" };
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
			if (!user?.id) throw new EveError(403, "the check is refused: no token authorizes it");
			const { hosts } = await ctx.call<{ hosts: string[] }, { target: string; field: string }>("hosts.resolveTarget", { target: check.target, field: "target" });
			if (!hosts.length) throw validationFailed({ target: "selects no live host" });
			(ctx.meta as { auditRun?: { fun: string; targets: string[] } }).auditRun = { fun: "state.apply", targets: hosts };
			await ctx.call("tokens.authorizeRun", { token: user.id, client: "local_async", fun: "state.apply", kwarg: kwargOf(check), targets: hosts });
			return user.id;
		},

		/** A scoped caller changes or deletes a check only when its call on the hosts it selects now is inside the scope (403). */
		async checkInScope(this: ChecksThis, ctx: RestContext, check: Doc, action: string): Promise<void> {
			if (!scopedCaller(ctx)) return;
			let hosts: string[];
			try {
				hosts = (await ctx.call<{ hosts: string[] }, { target: string }>("hosts.resolveTarget", { target: check.target })).hosts;
			} catch (err) {
				if ((err as { code?: number }).code !== 422) throw err;
				throw new EveError(403, `your token may not ${action} this check: its target cannot be evaluated now, so nothing shows it lies inside the token's scope`);
			}
			await authorizeScopedWork(ctx, action, "this check", { client: "local_async", fun: "state.apply", kwarg: kwargOf(check), hosts });
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
			if (info.op === "create" || ["target", "mods"].some(k => k in doc)) out.owner = await this.authorizeCheck(ctx, merged);
			if (info.op === "create" || ["interval", "cron", "status"].some(k => k in doc)) {
				const now = new Date();
				out.next = merged.status === "paused" ? null : nextDue(scheduleOf({ ...merged, _created: merged._created ?? now }, this.timezone), new Date(now.getTime() - 1));
			}
			if (info.op === "create") out.passes = 0;
			return out;
		},

		async afterWrite(this: ChecksThis, ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]) {
			await this.notifyChanged(ctx, op, ids);
			if (op !== "removed") void this.tick();
		},

		/** One look: due passes claimed (one replica each) and started; passes left by a replica that died, started again. */
		async tick(this: ChecksThis) {
			if (this.ticking) return this.ticking;
			this.ticking = (async () => {
				const now = new Date();
				for (const c of await this.store.find({ status: "scheduled", next: { $lte: now } }, { limit: DUE_LIMIT })) {
					const due = new Date(c.next);
					const claimed = await this.store.findOneAndUpdate(
						{ _id: c._id, next: due, status: "scheduled" },
						{ $set: { next: nextDue(scheduleOf(c, this.timezone), now), last_pass: { due, rollout: passId(String(c._id), due), at: now, started: false, error: null } }, $inc: { passes: 1 } },
					);
					if (claimed) await this.startPass(claimed);
				}
				const stale = new Date(now.getTime() - this.leaseMs);
				for (const c of await this.store.find({ "last_pass.started": false, "last_pass.at": { $lt: stale } }, { limit: DUE_LIMIT })) {
					// Taken over: the same pass id, so the rollout made (if it was) is the one answered.
					const taken = await this.store.findOneAndUpdate({ _id: c._id, "last_pass.rollout": c.last_pass.rollout, "last_pass.at": c.last_pass.at }, { $set: { "last_pass.at": now } });
					if (taken) await this.startPass(taken);
				}
			})()
				.catch((err: Error) => this.logger.warn("Conformity check pass failed; the next look tries again:", err.message))
				.finally(() => (this.ticking = null));
			return this.ticking;
		},

		/** Makes the pass's rollout (once, whoever asks); a refusal (the owner's token, a target that selects nothing) is recorded and not retried. */
		async startPass(this: ChecksThis, c: Doc) {
			const pass = c.last_pass;
			const set = (fields: Doc) => this.store.updateMany({ _id: c._id, "last_pass.rollout": pass.rollout }, { $set: fields });
			try {
				const started = await this.broker.call<{ total: number }, Record<string, unknown>>("rollouts.startCheck", { id: pass.rollout, check: String(c._id), name: c.name, target: c.target, kwarg: kwargOf(c), batch: c.batch, jitter_s: c.jitter_s ?? 0, owner: c.owner });
				await set({ "last_pass.started": true, "last_pass.hosts": started.total, "last_pass.error": null });
			} catch (err) {
				const e = err as { code?: number; message: string };
				if (e.code === 403 || e.code === 422) await set({ "last_pass.started": true, "last_pass.error": String(e.message).slice(0, 2000) });
				else this.logger.warn(`Conformity check ${c._id}: its pass could not start yet (tried again later):`, e.message);
			}
			await this.notifyChanged(this.broker as unknown as Context, "updated", [String(c._id)]);
		},
	},

	created(this: ChecksThis) {
		const config = configOf(this.broker);
		this.timer = null;
		this.ticking = null;
		this.tickMs = config.rolloutTickMs;
		this.leaseMs = config.rolloutLeaseMs;
		this.timezone = config.taskTimezone;
	},
	started(this: ChecksThis) {
		if (!configOf(this.broker).rolloutDriver) return;
		this.timer = setInterval(() => void this.tick(), this.tickMs);
		this.timer.unref?.();
	},
	async stopped(this: ChecksThis) {
		if (this.timer) clearInterval(this.timer);
		await this.ticking;
	},
};

export default ConformityChecksService;
