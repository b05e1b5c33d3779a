/**
 * Owns the `approvals` collection (docs/security.md, "Approvals"): the requests of runs an approval policy holds.
 * The run door asks `gate` for every run it authorized (services/cm-gateway/run-door.ts); a matched run becomes a
 * request — the exact call, the resolved hosts, the requester, the policies and what they take, an expiry, and for
 * a state run a dry run's predicted changes — and nothing runs. Approvers (never the requester; of the roles the
 * policies name) approve or reject it with a comment (POST /approvals/{id}/approve|reject). Once every policy has
 * its approvals an ad-hoc request runs exactly once (a conditional update moves it to `running` before the run is
 * asked for), through the run door again, as its requester's token is then; a rejected or expired one runs
 * nothing. A task's or a rollout's request is for its definition: once approved, its runs pass while what they run
 * is unchanged (a change makes a new request and supersedes the old).
 *
 * Every change is announced (`approvals.changed`: the gateway's /api/approvals/stream) and raises alerts
 * (`approval.requested`, `approval.approved`, `approval.rejected`, `approval.expired`) that webhooks deliver.
 * The rules themselves (digest, grant, expiry, who votes, what the votes make) are pure, in approval-rules.ts.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import {
	Conflict,
	ErrorType,
	Forbidden,
	Invalid,
	isError,
	NotFound,
	runRefused,
	Unauthenticated,
} from "../../lib/errors";
import { authorizeScopedWork, scopedCaller } from "../../lib/http/work-scope";
import { maskSecrets } from "../../lib/security/masking";
import { readDryRun, type DryRunReturn } from "../../lib/fleet/state-results";
import type { Doc } from "../../lib/storage/store";
import { ORIGINS, type MatchedPolicy, type Origin } from "./scope";
import {
	DECISIONS,
	callDigest,
	expiryOf,
	grantCovers,
	statusAfter,
	stillPending,
	voteRefusal,
	type HeldCall,
	type Vote,
} from "./approval-rules";
import type { Caller } from "../../lib/http/auth";
import { call } from "../../lib/contracts/call";

/** Who asked: the token the run is authorized against, and who it is. */
export interface Requester {
	token: string;
	name: string;
	role: string;
	/** The principal behind the token (a person, or a service account with every token minted from it): it may not decide its own request. */
	identity: string;
}

export interface GateParams {
	requester: Requester;
	origin: Origin;
	call: HeldCall;
	hosts: string[];
	target?: string;
	/** A task's or a rollout's run: its definition, approved once. */
	definition?: { kind: "task" | "rollout"; id: string; digest: string; hosts?: number };
	/** The approval this run carries out. */
	grant?: string;
	break_glass?: string;
}

export type GateAnswer = { pass: true } | { held: Doc; created: boolean };

/** How often pending requests past their expiry are looked for. */
const SWEEP_MS = 15_000;

interface ApprovalsMembers {
	render(doc: Doc): Doc;
	announce(ctx: Context, docs: Doc[], alert?: string, level?: string): Promise<void>;
	expire(ctx: Context): Promise<void>;
	runApproved(ctx: Context, doc: Doc): Promise<Doc>;
	fillPredicted(ctx: Context, doc: Doc): Promise<void>;
	sweepTimer?: NodeJS.Timeout;
}

type ApprovalsThis = EveThis & ApprovalsMembers;

const ApprovalsService: EveServiceSchema<ApprovalsThis> = {
	name: "approvals",
	mixins: [
		EveCollection({
			resource: "approvals",
			idPattern: OBJECT_ID,
			writes: [],
			defaultSort: [["_id", -1]],
			schema: {
				status: {
					type: "enum",
					values: ["pending", "approved", "rejected", "expired", "superseded", "running", "done", "failed"],
				},
				origin: { type: "enum", values: [...ORIGINS] },
				call: { type: "object" },
				hosts: { type: "array", items: "string" },
				hosts_count: { type: "number" },
				target: { type: "string", optional: true },
				requester: { type: "object" },
				definition: { type: "object", optional: true },
				policies: { type: "array" },
				votes: { type: "array" },
				expires: { type: "date" },
				dry_run: { type: "object", optional: true },
				run: { type: "object", optional: true },
				break_glass: { type: "string", optional: true },
				digest: { type: "string" },
			},
			indexes: { status: {}, digest: {}, "dry_run.jid": { sparse: true } },
			listHidden: ["hosts"],
		}),
	],

	actions: {
		/**
		 * The approval gate of an authorized run (internal: the run door). Answers `pass` when no enabled policy
		 * matches, when the run carries out an approved request (its `grant`, in `running`), or when a task's or
		 * rollout's definition is approved as it is; otherwise the request that holds it — made now (alerted), or
		 * the one already pending for the same run by the same requester (a retry makes no second request).
		 */
		gate: {
			visibility: "public",
			params: {
				requester: { type: "object", props: { token: "string", name: "string", role: "string", identity: "string" } },
				origin: { type: "enum", values: [...ORIGINS] },
				call: {
					type: "object",
					props: {
						cm_client: { type: "enum", values: ["local", "local_async"] },
						fun: "string",
						arg: { type: "array", optional: true },
						kwarg: { type: "object", optional: true },
					},
				},
				hosts: { type: "array", items: "string", max: 100_000 },
				target: { type: "string", optional: true },
				definition: {
					type: "object",
					optional: true,
					props: {
						kind: { type: "enum", values: ["task", "rollout"] },
						id: "string",
						digest: "string",
						hosts: { type: "number", optional: true },
					},
				},
				grant: { type: "string", optional: true },
				break_glass: { type: "string", optional: true },
			},
			async handler(this: ApprovalsThis, ctx: Context<GateParams>): Promise<GateAnswer> {
				const { requester, origin, call, hosts, target, definition, grant } = ctx.params;
				if (grant) {
					const doc = OBJECT_ID.test(grant) ? await this.store.findOne({ _id: grant }) : null;
					if (grantCovers(doc, call, hosts, requester.token)) return { pass: true };
					throw runRefused(
						`approval ${grant.slice(0, 24)} does not cover it (it is not being carried out, or its call, hosts or requester differ)`,
					);
				}
				const policies = await ctx.call<MatchedPolicy[], Doc>("approval-policies.matching", {
					fun: call.fun,
					arg: call.arg,
					kwarg: call.kwarg,
					hosts,
					origin,
					scale: definition?.hosts,
					principal: requester.identity,
				});
				if (!policies.length) return { pass: true };
				// What a request runs: a definition's fields (its digest), or an ad-hoc call on its hosts.
				const digest = definition ? definition.digest : callDigest(call, hosts, target);
				if (definition) {
					const same = { "definition.kind": definition.kind, "definition.id": definition.id };
					// What the definition ran before was approved for that, not for this: those requests no longer apply.
					const stale = await this.store.find(
						{ ...same, digest: { $ne: digest }, status: { $in: ["pending", "approved"] } },
						{ only: ["_id"] },
					);
					if (stale.length) {
						await this.store.updateMany(
							{ _id: { $in: stale.map(d => d._id) } },
							{ $set: { status: "superseded", _updated: new Date() } },
						);
						await this.announce(ctx, await this.store.find({ _id: { $in: stale.map(d => d._id) } }));
					}
					if (await this.store.findOne({ ...same, digest, status: "approved" })) return { pass: true };
					const pending = await this.store.findOne({ ...same, digest, status: "pending" });
					if (stillPending(pending, Date.now())) return { held: this.render(pending), created: false };
				} else {
					const pending = await this.store.findOne({
						digest,
						status: "pending",
						"requester.identity": requester.identity,
					});
					if (stillPending(pending, Date.now())) return { held: this.render(pending), created: false };
				}
				const now = new Date();
				const doc: Doc = {
					_id: newObjectId(),
					status: "pending",
					origin,
					call,
					hosts: [...hosts].sort(),
					hosts_count: hosts.length,
					...(target !== undefined ? { target } : {}),
					requester,
					...(definition ? { definition } : {}),
					policies,
					votes: [],
					expires: expiryOf(policies, now),
					...(ctx.params.break_glass ? { break_glass: ctx.params.break_glass } : {}),
					digest,
					_created: now,
					_updated: now,
				};
				await this.store.insertMany([doc]);
				await this.announce(ctx, [doc], "approval.requested", "warning");
				return { held: this.render(doc), created: true };
			},
		},

		/** The request as stored, for the run that carries it out (internal: the cm-gateway). */
		forRun: {
			visibility: "public",
			params: { id: { type: "string", pattern: OBJECT_ID } },
			async handler(this: ApprovalsThis, ctx: Context<{ id: string }>) {
				const doc = await this.store.findOne({ _id: ctx.params.id });
				if (!doc) throw new NotFound(`approval '${ctx.params.id}' not found`);
				return doc;
			},
		},

		/** The dry run started for a request (internal: the cm-gateway): its predicted changes are read when it ends. */
		attachDryRun: {
			visibility: "public",
			params: {
				id: { type: "string", pattern: OBJECT_ID },
				jid: { type: "string", optional: true },
				error: { type: "string", optional: true },
			},
			async handler(this: ApprovalsThis, ctx: Context<{ id: string; jid?: string; error?: string }>) {
				const dry = ctx.params.jid
					? { jid: ctx.params.jid, state: "running" }
					: { state: "failed", error: String(ctx.params.error ?? "").slice(0, 2000) };
				await this.store.updateMany({ _id: ctx.params.id }, { $set: { dry_run: dry, _updated: new Date() } });
				const doc = await this.store.findOne({ _id: ctx.params.id });
				if (doc) await this.announce(ctx, [doc]);
			},
		},

		/**
		 * POST /approvals/{id}/approve and /reject, `{"comment": "…"}`: a vote of the caller. Refused (403, saying
		 * why) to the requester, to a role no matched policy lets approve, and to an approver whose own token could
		 * not make the run (its scope); refused (409) once the request is
		 * decided, expired, or voted on by the same person. The vote that completes the approvals of every policy
		 * approves the request, and an ad-hoc request then runs at once, exactly once; a rejection ends it.
		 */
		decide: {
			params: {
				id: "string",
				decision: "string",
				body: { type: "any", optional: true },
				query: { type: "any", optional: true },
			},
			async handler(
				this: ApprovalsThis,
				ctx: Context<{ id: string; decision: string; body?: unknown }, RestContext["meta"] & { user?: Caller }>,
			) {
				const decision = DECISIONS[ctx.params.decision];
				if (!decision)
					throw new Invalid({ decision: `unallowed value '${ctx.params.decision.slice(0, 50)}' (approve or reject)` });
				const body = (ctx.params.body ?? {}) as Record<string, unknown>;
				if (typeof body !== "object" || Array.isArray(body) || body === null)
					throw new Invalid({ body: 'must be an object: {"comment": "…"}' });
				const unknown = Object.keys(body).filter(k => k !== "comment");
				if (unknown.length) throw new Invalid(Object.fromEntries(unknown.map(k => [k, "unknown field"])));
				if (body.comment !== undefined && (typeof body.comment !== "string" || body.comment.length > 2000))
					throw new Invalid({ comment: "must be a string of at most 2000 characters" });
				const user = ctx.meta.user;
				if (!user) throw new Unauthenticated();
				await this.expire(ctx);
				const doc = await this.visibleItem(ctx.params.id);
				if (doc.status !== "pending")
					throw new Conflict(`the request is ${doc.status}: it can no longer be ${decision}`);
				// Principals, not tokens: a token minted from the requester's (or a voter's) is the same one.
				const identity = user.principal;
				const refused = voteRefusal(doc, user);
				if (refused) throw refused;
				if (decision === "approved") {
					// An approver vouches for the run: their own token must allow it (the complete call on those hosts).
					try {
						await call(ctx, "tokens.authorizeRun", {
							token: user.id,
							client: doc.call.cm_client,
							fun: doc.call.fun,
							arg: doc.call.arg,
							kwarg: doc.call.kwarg,
							targets: doc.hosts,
						});
					} catch (err) {
						if (isError(err, ErrorType.RunRefused))
							throw new Forbidden(`you may not approve a run you could not make yourself: ${err.data?.reason}`);
						throw err;
					}
				}
				if (scopedCaller(ctx)) {
					// A scoped token decides only work wholly inside its scope (a rejection too); a rollout's request is for all its hosts, not the batch held.
					const hosts =
						doc.definition?.kind === "rollout"
							? await ctx.call<string[], { id: string }>("rollouts.frozenHosts", { id: doc.definition.id })
							: doc.hosts;
					await authorizeScopedWork(ctx, decision === "approved" ? "approve" : "reject", "this request", {
						client: doc.call.cm_client,
						fun: doc.call.fun,
						arg: doc.call.arg,
						kwarg: doc.call.kwarg,
						hosts,
					});
				}
				const vote = {
					decision,
					token: user.id,
					name: user.name,
					role: user.role,
					identity,
					comment: (body.comment as string | undefined) ?? "",
					at: new Date(),
				};
				const votes = [...(doc.votes as Vote[]), vote];
				const status = statusAfter(doc.policies as MatchedPolicy[], votes);
				const updated = await this.store.findOneAndUpdate(
					{ _id: doc._id, status: "pending", votes: { $size: doc.votes.length } },
					{ $set: { votes, status, _updated: new Date() } },
				);
				if (!updated) throw new Conflict("the request changed meanwhile (another vote, or it expired); read it again");
				await this.announce(
					ctx,
					[updated],
					status === "pending" ? undefined : `approval.${status}`,
					status === "rejected" ? "warning" : "info",
				);
				if (status === "approved" && !updated.definition) return this.render(await this.runApproved(ctx, updated));
				return this.render(updated);
			},
		},
	},

	events: {
		/** A request's dry run ended: its predicted changes, read from its hosts' returns. */
		async "salt-jobs.finished"(this: ApprovalsThis, ctx: Context<{ jids: string[] }>) {
			const docs = await this.store.find({ "dry_run.jid": { $in: ctx.params.jids } });
			for (const doc of docs)
				await this.fillPredicted(ctx, doc).catch(err =>
					this.logger.warn(`Could not read the dry run of approval ${doc._id}:`, (err as Error).message),
				);
		},
	},

	methods: {
		/** A request as clients see it (and its stream, and the REPL): its call's secrets masked by the one rule (lib/security/masking.ts); kept whole to run. */
		transformOutput(this: ApprovalsThis, doc: Doc): Doc {
			if (!doc.call) return doc;
			const { digest: _digest, ...rest } = doc;
			return {
				...rest,
				call: {
					...doc.call,
					...(doc.call.arg ? { arg: maskSecrets(doc.call.arg) } : {}),
					...(doc.call.kwarg ? { kwarg: maskSecrets(doc.call.kwarg) } : {}),
				},
				requester: { name: doc.requester?.name, role: doc.requester?.role, token: doc.requester?.token },
			};
		},

		render(this: ApprovalsThis, doc: Doc): Doc {
			return { ...this.outputFields(doc, null, true), _links: { self: this.selfLink(String(doc._id)) } };
		},

		/** Announces changed requests (cache, SSE) and, for a new state, raises its alert. */
		async announce(this: ApprovalsThis, ctx: Context, docs: Doc[], alert?: string, level = "info") {
			if (!docs.length) return;
			await this.notifyChanged(
				ctx,
				"updated",
				docs.map(d => String(d._id)),
			);
			ctx.broadcast("approvals.changed", { approvals: docs.map(d => this.render(d)) });
			if (!alert) return;
			for (const d of docs) {
				const payload = {
					approval: String(d._id),
					fun: d.call.fun,
					hosts: d.hosts_count,
					target: d.target ?? null,
					origin: d.origin,
					requester: d.requester.name,
					policies: (d.policies as MatchedPolicy[]).map(p => p.name),
					expires: new Date(d.expires).toISOString(),
					...(d.definition ? { definition: `${d.definition.kind} ${d.definition.id}` } : {}),
				};
				await call(ctx, "alerts.raise", { type: alert, level, payload }).catch(err =>
					this.logger.warn(`Could not raise ${alert}:`, (err as Error).message),
				);
			}
		},

		/** Pending requests past their expiry become `expired` (and run nothing). */
		async expire(this: ApprovalsThis, ctx: Context) {
			const now = new Date();
			const due = await this.store.find({ status: "pending", expires: { $lte: now } }, { only: ["_id"], limit: 1000 });
			if (!due.length) return;
			const ids = due.map(d => d._id);
			await this.store.updateMany(
				{ _id: { $in: ids }, status: "pending" },
				{ $set: { status: "expired", _updated: now } },
			);
			await this.announce(
				ctx,
				await this.store.find({ _id: { $in: ids }, status: "expired" }),
				"approval.expired",
				"warning",
			);
		},

		/**
		 * An approved ad-hoc request, run once: moved from `approved` to `running` by one conditional update (whoever
		 * loses it runs nothing), then asked of the cm-gateway, which puts it through the run door as its requester.
		 */
		async runApproved(this: ApprovalsThis, ctx: Context, doc: Doc): Promise<Doc> {
			const claimed = await this.store.findOneAndUpdate(
				{ _id: doc._id, status: "approved" },
				{ $set: { status: "running", _updated: new Date() } },
			);
			if (!claimed) return (await this.store.findOne({ _id: doc._id })) ?? doc;
			let run: Doc;
			try {
				const answer = await ctx.call<{ task_id: string | null; status: string }, { id: string }>(
					"cm-gateway.runApproved",
					{ id: String(doc._id) },
				);
				run = { status: answer.status, jid: answer.task_id, at: new Date() };
			} catch (err) {
				const e = err as { code?: number; message?: string };
				run = {
					status: "failed",
					code: typeof e.code === "number" ? e.code : 500,
					message: String(e.message ?? err).slice(0, 2000),
					at: new Date(),
				};
			}
			const done = await this.store.findOneAndUpdate(
				{ _id: doc._id, status: "running" },
				{ $set: { status: run.status === "failed" ? "failed" : "done", run, _updated: new Date() } },
			);
			if (done) await this.announce(ctx, [done], run.status === "failed" ? "approval.failed" : undefined, "error");
			return done ?? claimed;
		},

		/** The dry run's predicted changes on the request, once its job ended. */
		async fillPredicted(this: ApprovalsThis, ctx: Context, doc: Doc) {
			const returns = await ctx.call<DryRunReturn[], { jid: string }>("actions.returnsOf", { jid: doc.dry_run.jid });
			const { predicted, total, failures } = readDryRun(returns, doc.hosts_count);
			const dry = {
				...doc.dry_run,
				state: "finished",
				predicted,
				predicted_total: total,
				predicted_failures: failures,
			};
			await this.store.updateMany({ _id: doc._id }, { $set: { dry_run: dry, _updated: new Date() } });
			const fresh = await this.store.findOne({ _id: doc._id });
			if (fresh) await this.announce(ctx, [fresh]);
		},
	},

	started(this: ApprovalsThis) {
		this.sweepTimer = setInterval(
			() =>
				void this.expire(this.broker as unknown as Context).catch(err =>
					this.logger.warn("Expiry sweep failed:", (err as Error).message),
				),
			SWEEP_MS,
		);
		this.sweepTimer.unref?.();
	},

	stopped(this: ApprovalsThis) {
		if (this.sweepTimer) clearInterval(this.sweepTimer);
	},
};

export default ApprovalsService;
