/**
 * Owns the `rollouts` collection: a change made to a fleet gradually (docs/rollouts.md). `POST /api/rollouts`
 * resolves the compound target now (the hosts are frozen), authorizes the whole call on all of them against the
 * creator's token (who becomes the owner), and cuts them into batches: canary hosts first, then batches of a
 * count or a share. `PATCH /api/rollouts/{id}/{pause|resume|abort}` moves it; reads are Eve's.
 *
 * The driver (driver.ts) advances every running rollout, one step at a time, under a claim in the database: any
 * replica continues any rollout, and a batch is asked for under a run id written before the ask, so a replica that
 * takes over asks for the same run and gets the job already started (never a second one).
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import type { Issues } from "../../lib/eve/errors";
import { Conflict, Invalid, NothingToRun, RunRefused } from "../../lib/errors";
import { SALT_FUN } from "../../lib/http/bodies";
import { authorizeScopedWork } from "../../lib/http/work-scope";
import { DuplicateKeyError, type Doc } from "../../lib/storage/store";
import { SHARE, hostsOf, planBatches, type Batch } from "./plan";
import { STATE_FUNCTIONS } from "../../lib/fleet/state-results";
import { newObjectId } from "../../lib/eve/ids";
import { driverMethods, type RolloutsThis } from "./driver";
import { keepMasked } from "../../lib/security/masking";
import { RunArgs } from "../../mixins/run-args.mixin";
import { call } from "../../lib/contracts/call";

export const ROLLOUT_STATUSES = ["running", "paused", "aborted", "finished"] as const;
/** What PATCH /rollouts/{id}/{action} does, from which statuses. */
const CONTROLS: Record<string, { from: string[]; to: string; done: string }> = {
	pause: { from: ["running"], to: "paused", done: "paused" },
	resume: { from: ["paused"], to: "running", done: "resumed" },
	abort: { from: ["running", "paused"], to: "aborted", done: "aborted" },
};
const share = { type: "string", pattern: SHARE } as const;

const RolloutsService: EveServiceSchema<RolloutsThis> = {
	name: "rollouts",
	mixins: [
		// `arg` and `kwarg` shown masked, or withheld from viewers; stored whole (the driver runs them).
		RunArgs,
		EveCollection({
			resource: "rollouts",
			writes: ["create"],
			idPattern: /^[0-9a-f]{24}$/,
			schema: {
				name: { type: "string", min: 1, max: 200 },
				target: { type: "string", min: 1, max: 10_000 },
				fun: { type: "string", pattern: SALT_FUN, max: 200 },
				arg: { type: "array", optional: true, max: 1000 },
				kwarg: { type: "object", optional: true },
				canary: { type: "number", integer: true, min: 0, max: 100_000, optional: true },
				batch: {
					type: "multi",
					optional: true,
					rules: [share, { type: "number", integer: true, min: 1, max: 100_000 }],
				},
				failure_budget: {
					type: "multi",
					optional: true,
					rules: [share, { type: "number", integer: true, min: 0, max: 100_000 }],
				},
				wait_s: { type: "number", integer: true, min: 0, max: 86_400, optional: true },
				// Beyond wait_s, a random share of this many seconds before each batch (conformity checks spread their load).
				jitter_s: { type: "number", integer: true, min: 0, max: 3600, optional: true },
				dry_run_first: { type: "boolean", optional: true },
			},
			readOnlyFields: [
				"check",
				"fix",
				"status",
				"reason",
				"owner",
				"total",
				"hosts",
				"batches",
				"current",
				"budget",
				"accepted_failures",
				"done",
				"succeeded",
				"failed",
				"timed_out",
				"unreached",
				"next_at",
				"last_error",
				"waiting",
			],
			// A 10,000-host rollout's hosts and batches are for its own page; lists carry the progress.
			listHidden: ["hosts", "batches"],
			// Stored whole: a filter on them would reveal a secret a comparison at a time.
			secretPaths: ["arg", "kwarg"],
			indexes: { status: {}, name: {}, check: { sparse: true } },
			// The frozen host list of each rollout, written once: the record, rewritten at every step, stays small.
			extraCollections: ["rollout_hosts"],
		}),
	],

	actions: {
		/** PATCH /rollouts/{id}/{pause|resume|abort} */
		control: {
			params: { id: "string", action: "string", query: { type: "any", optional: true } },
			async handler(this: RolloutsThis, ctx: Context<{ id: string; action: string }, RestContext["meta"]>) {
				const rollout = await this.visibleItem(ctx.params.id);
				const move = CONTROLS[ctx.params.action];
				if (!move)
					throw new Invalid(
						{ action: `unallowed value '${ctx.params.action.slice(0, 50)}' (one of: pause, resume, abort)` },
						"Update failure: the document contains errors",
					);
				if (!move.from.includes(rollout.status))
					throw new Invalid(
						{ status: `a ${rollout.status} rollout cannot be ${move.done}` },
						"Update failure: the document contains errors",
					);
				// A scoped token moves only a rollout wholly inside its scope: its call on every host it was frozen with.
				await authorizeScopedWork(ctx, ctx.params.action, "this rollout", {
					client: "local_async",
					fun: rollout.fun,
					arg: rollout.arg,
					kwarg: rollout.kwarg,
					hosts: await this.rolloutHosts(String(rollout._id)),
				});
				const who = (ctx.meta as { user?: { name?: string } }).user?.name ?? "an operator";
				let set: Doc = { status: move.to, reason: `${move.to} by ${who}` };
				if (ctx.params.action === "resume") {
					// Resuming makes batches run: the resumer must be allowed to run the rest too (the owner stays);
					// the failures so far are accepted, the budget counts from here.
					const all = await this.rolloutHosts(String(rollout._id));
					const left = (rollout.batches as Batch[])
						.filter(b => b.state !== "finished" && b.state !== "skipped")
						.flatMap(b => all.slice(b.from, b.to));
					await this.authorizeRollout(ctx as unknown as RestContext, rollout, left);
					set = {
						status: "running",
						reason: null,
						accepted_failures: rollout.failed + rollout.timed_out + rollout.unreached,
						next_at: new Date(),
					};
				}
				const updated = await this.store.findOneAndUpdate(
					{ _id: rollout._id, status: rollout.status },
					{ $set: { ...set, _updated: new Date() } },
				);
				if (!updated) throw new Conflict("the rollout changed meanwhile; read it again");
				await this.afterWrite(ctx as unknown as RestContext, "updated", [String(rollout._id)]);
				this.kick();
				return this.writeResponse(updated);
			},
		},

		/**
		 * One pass of a conformity check (internal: the conformity-checks service): `state.apply test=True` on the
		 * check's target resolved now, in batches with jitter, as a rollout under the given id — asked again with the
		 * same id (a replica took the pass over), it answers the rollout already made. The check's owner token must
		 * allow the call on the hosts now (403 otherwise); failures never pause a check.
		 */
		startCheck: {
			visibility: "public",
			params: {
				id: { type: "string", pattern: /^[0-9a-f]{24}$/ },
				check: "string",
				name: { type: "string", max: 200 },
				target: { type: "string", max: 10_000 },
				kwarg: "object",
				batch: { type: "multi", rules: [share, { type: "number", integer: true, min: 1 }] },
				jitter_s: { type: "number", integer: true, min: 0, max: 3600 },
				owner: "string",
				/** Exactly these hosts (those still live) rather than the target resolved now. */
				hosts: { type: "array", items: "string", max: 100_000, optional: true },
			},
			async handler(
				this: RolloutsThis,
				ctx: Context<{
					id: string;
					check: string;
					name: string;
					target: string;
					kwarg: Doc;
					batch: string | number;
					jitter_s: number;
					owner: string;
					hosts?: string[];
				}>,
			) {
				const { id, check, name, target, kwarg, batch, jitter_s, owner, hosts } = ctx.params;
				const base: Doc = {
					name: `conformity check: ${name}`.slice(0, 200),
					target,
					fun: "state.apply",
					kwarg,
					canary: 0,
					batch,
					failure_budget: "100%",
					wait_s: 0,
					jitter_s,
					dry_run_first: false,
					check,
				};
				return this.createInternal(ctx, id, base, owner, hosts);
			},
		},
		/**
		 * A fix of drifted states on several hosts (internal: the conformity service): `fun`/`arg` on exactly `hosts`
		 * (those still live), a canary then batches of 10%, paused at the first failure, as the owner's token allows now.
		 */
		startFix: {
			visibility: "public",
			params: {
				id: { type: "string", pattern: /^[0-9a-f]{24}$/ },
				fix: "string",
				name: { type: "string", max: 200 },
				hosts: { type: "array", items: "string", min: 1, max: 100_000 },
				fun: "string",
				arg: { type: "array", max: 100 },
				kwarg: "object",
				owner: "string",
			},
			async handler(
				this: RolloutsThis,
				ctx: Context<{
					id: string;
					fix: string;
					name: string;
					hosts: string[];
					fun: string;
					arg: unknown[];
					kwarg: Doc;
					owner: string;
				}>,
			) {
				const { id, fix, name, hosts, fun, arg, kwarg, owner } = ctx.params;
				const base: Doc = {
					name: name.slice(0, 200),
					target: `L@${hosts.join(",")}`.slice(0, 10_000),
					fun,
					arg,
					kwarg,
					canary: 1,
					batch: "10%",
					failure_budget: 0,
					wait_s: 0,
					dry_run_first: false,
					fix,
				};
				return this.createInternal(ctx, id, base, owner, hosts);
			},
		},
		/** The status of each of these rollouts (internal: the conformity service waits for its fixes). */
		statuses: {
			visibility: "public",
			params: { ids: { type: "array", items: "string", max: 1000 } },
			async handler(this: RolloutsThis, ctx: Context<{ ids: string[] }>) {
				const docs = await this.store.find({ _id: { $in: ctx.params.ids } }, { only: ["status"] });
				return Object.fromEntries(docs.map(d => [String(d._id), String(d.status)]));
			},
		},
		/** Every host the rollout was made with (internal: the approvals service judges a scoped approver on them all). */
		frozenHosts: {
			visibility: "public",
			params: { id: "string" },
			async handler(this: RolloutsThis, ctx: Context<{ id: string }>): Promise<string[]> {
				return this.rolloutHosts(ctx.params.id);
			},
		},
		/** The conformity check each of these rollouts is a pass of, if any (internal: the conformity service). */
		checksOf: {
			visibility: "public",
			params: { ids: { type: "array", items: "string", max: 1000 } },
			async handler(this: RolloutsThis, ctx: Context<{ ids: string[] }>) {
				const docs = await this.store.find(
					{ _id: { $in: ctx.params.ids }, check: { $exists: true } },
					{ only: ["check"] },
				);
				return Object.fromEntries(docs.map(d => [String(d._id), String(d.check)]));
			},
		},
	},

	events: {
		/** A job ended: a rollout waiting for it goes on now rather than at its next look. */
		"salt-jobs.finished"(this: RolloutsThis) {
			this.kick();
		},
		"rollouts.kick"(this: RolloutsThis) {
			this.kick();
		},
		/** A maintenance window was written: batches waiting for one ask again now (it may be open). */
		async "maintenance-windows.*"(this: RolloutsThis) {
			if (
				await this.store.updateMany({ status: "running", "waiting.for": "window" }, { $set: { next_at: new Date() } })
			)
				this.kick();
		},
		/**
		 * A rollout's approval request was decided: approved, its waiting batch is asked again now; rejected, expired
		 * or superseded, the rollout pauses and says why (docs/rollouts.md).
		 */
		async "approvals.changed"(
			this: RolloutsThis,
			ctx: Context<{ approvals: Array<{ _id: string; status: string; definition?: { kind: string; id: string } }> }>,
		) {
			for (const a of ctx.params.approvals) {
				if (a.definition?.kind !== "rollout" || a.status === "pending") continue;
				const r = await this.store.findOne({ _id: a.definition.id, "waiting.approval": a._id });
				if (!r) continue;
				if (a.status === "approved")
					await this.store.updateMany({ _id: r._id, "waiting.approval": a._id }, { $set: { next_at: new Date() } });
				else await this.pauseForBudget(r, `its approval request ${a._id} was ${a.status}`);
			}
			this.kick();
		},
	},

	methods: {
		...driverMethods,

		async prepareInput(this: RolloutsThis, _ctx: RestContext, doc: Doc, info: WriteInfo) {
			if (info.op !== "create") return { doc };
			// A call copied from a rollout as shown, masks in it: a new rollout has no secret for a mask to keep.
			const unkept = ["arg", "kwarg"].flatMap(f => keepMasked(doc[f], undefined, f).unkept);
			if (unkept.length)
				return {
					doc,
					issues: {
						[unkept[0].split(".")[0]]:
							`${unkept.join(", ")}: the mask (********) stands for a stored secret, and a new rollout stores none: give the value`,
					},
				};
			return { doc: { canary: 1, batch: "10%", failure_budget: 0, wait_s: 0, dry_run_first: false, ...doc } };
		},

		async checkRules(this: RolloutsThis, _ctx: RestContext, doc: Doc): Promise<Issues | null> {
			for (const f of ["batch", "failure_budget"]) {
				const m = typeof doc[f] === "string" ? SHARE.exec(doc[f]) : null;
				if (m && Number(m[1]) > 100) return { [f]: "a share is at most 100%" };
			}
			if (doc.batch === "0%") return { batch: "a batch has at least one host" };
			if (doc.dry_run_first && !STATE_FUNCTIONS.has(doc.fun))
				return { dry_run_first: `a dry run (test=True) is for ${[...STATE_FUNCTIONS].join(", ")}` };
			return null;
		},

		/** The hosts the target selects now (a target that cannot be evaluated is the document's fault: 422). */
		async resolveRollout(this: RolloutsThis, ctx: RestContext, target: string): Promise<string[]> {
			const { hosts } = await call(ctx, "hosts.resolveTarget", { target, field: "target" });
			return hosts;
		},

		/** The caller may run the rollout's call on these hosts now (403 saying why, else the caller's token id). */
		async authorizeRollout(this: RolloutsThis, ctx: RestContext, rollout: Doc, hosts: string[]): Promise<string> {
			const user = (ctx.meta as { user?: { id: string } }).user;
			if (!user?.id) throw new RunRefused("the rollout is refused: no token authorizes it", "no token authorizes it");
			(ctx.meta as { auditRun?: { fun: string; targets: string[] } }).auditRun = { fun: rollout.fun, targets: hosts };
			await call(ctx, "tokens.authorizeRun", {
				token: user.id,
				client: "local_async",
				fun: rollout.fun,
				arg: rollout.arg,
				kwarg: rollout.kwarg ?? {},
				targets: hosts,
			});
			return user.id;
		},

		async beforeStore(this: RolloutsThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.op !== "create") return doc;
			const hosts = await this.resolveRollout(ctx, doc.target);
			if (!hosts.length) throw new Invalid({ target: "selects no live host" });
			const owner = await this.authorizeRollout(ctx, doc, hosts);
			return this.plannedRollout(newObjectId(), doc, hosts, owner);
		},

		/**
		 * A rollout another service asks for, under an id it chose: made once (asked again, the one made is answered),
		 * its target resolved now (or exactly `only` hosts, those still live), authorized against the owner's token now.
		 */
		async createInternal(this: RolloutsThis, ctx: Context, id: string, base: Doc, owner: string, only?: string[]) {
			const existing = await this.store.findOne({ _id: id });
			if (existing) return { _id: existing._id, total: existing.total, repeated: true };
			const hosts = only
				? (await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: only })).sort()
				: (await call(ctx, "hosts.resolveTarget", { target: base.target })).hosts;
			if (!hosts.length)
				throw new NothingToRun(`the target '${String(base.target).slice(0, 200)}' selects no live host`);
			await call(ctx, "tokens.authorizeRun", {
				token: owner,
				client: "local_async",
				fun: base.fun,
				arg: base.arg,
				kwarg: base.kwarg ?? {},
				targets: hosts,
			});
			const now = new Date();
			const doc = { ...(await this.plannedRollout(id, base, hosts, owner)), _created: now, _updated: now };
			try {
				await this.store.insertMany([doc]);
			} catch (err) {
				// Another replica made it meanwhile: that one stands.
				if (!(err instanceof DuplicateKeyError)) throw err;
				return { _id: id, total: hosts.length, repeated: true };
			}
			await this.notifyChanged(ctx as unknown as RestContext, "created", [id]);
			ctx.broadcast("rollouts.kick", {}, { groups: ["rollouts"] });
			return { _id: id, total: hosts.length, repeated: false };
		},

		/** A new rollout's record (its hosts written apart): every batch pending, the driver's fields reset. */
		async plannedRollout(this: RolloutsThis, _id: string, doc: Doc, hosts: string[], owner: string): Promise<Doc> {
			await this.stores.rollout_hosts.removeMany({ _id });
			try {
				await this.stores.rollout_hosts.insertMany([{ _id, hosts }]);
			} catch (err) {
				// Another replica makes the same rollout at this moment (createInternal): the record's insert decides which stands.
				if (!(err instanceof DuplicateKeyError)) throw err;
				await this.stores.rollout_hosts.updateMany({ _id }, { $set: { hosts } });
			}
			return {
				...doc,
				_id,
				status: "running",
				reason: null,
				owner,
				total: hosts.length,
				batches: planBatches(hosts.length, doc.canary, doc.batch),
				current: 0,
				budget: hostsOf(doc.failure_budget, hosts.length, false),
				accepted_failures: 0,
				done: 0,
				succeeded: 0,
				failed: 0,
				timed_out: 0,
				unreached: 0,
				next_at: new Date(),
				last_error: null,
				// Whether a batch's job is out, for the driver (never shown: not a field of the schema).
				in_flight: false,
			};
		},

		/** A rollout's own page shows its hosts, and each batch's (lists leave both out). */
		async beforeRender(this: RolloutsThis, _ctx: RestContext, docs: Doc[]) {
			if (docs.length !== 1) return;
			const [doc] = docs;
			const hosts = await this.rolloutHosts(String(doc._id));
			doc.hosts = hosts;
			if (Array.isArray(doc.batches))
				doc.batches = (doc.batches as Batch[]).map(b => ({ ...b, hosts: hosts.slice(b.from, b.to) }));
		},

		async afterWrite(this: RolloutsThis, ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]) {
			await this.notifyChanged(ctx, op, ids);
			// Every replica's driver looks now: the new (or resumed) rollout starts without waiting for a tick.
			if (op === "created") ctx.broadcast("rollouts.kick", {}, { groups: ["rollouts"] });
		},
	},

	created(this: RolloutsThis) {
		this.driverCreated();
	},
	async started(this: RolloutsThis) {
		await this.store.ensureIndex("next_at", { ordered: true });
		await this.driverStarted();
	},
	async stopped(this: RolloutsThis) {
		await this.driverStopped();
	},
};

export default RolloutsService;
