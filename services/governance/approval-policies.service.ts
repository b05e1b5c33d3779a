/**
 * Owns the `approval_policies` collection (docs/security.md, "Approvals"): which runs need approvers before they
 * run. A policy is `{name, functions: [globs], targets?: {groups?, target?}, more_than_hosts?, origins?, approvers:
 * {count, roles}, expires_after?, enabled?}`; admins write them. A run matches a policy when its function matches
 * a glob, it comes from one of the policy's origins (api, task, rollout; `repl` is an alias of api; all when none is given), and more
 * than `more_than_hosts` (default 0) of its hosts are among the policy's targets (every host when none are given).
 * Dry runs never match (they change nothing).
 *
 * A threshold counts more than the run in hand: the hosts one principal asked the same definition (function and
 * arguments as the minion takes them) to run on within the policy's `window` (seconds, default 3600), this run's
 * included — so a call split host by host is held like the whole. Each ask a threshold watches is kept in the
 * `approval_tallies` collection (shared by every replica) before it is counted, held or not, and dropped after
 * the longest window.
 *
 * The approvals service asks `matching` for every run the run door lets through (services/governance/approvals.service.ts).
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import { canonicalDigest } from "../../lib/eve/etag";
import type { Doc } from "../../lib/storage/store";
import {
	DEFAULT_EXPIRY_S,
	FUNCTIONS_SCHEMA,
	ORIGINS,
	TARGETS_SCHEMA,
	governedNames,
	governs,
	hostsOf,
	originCovered,
	isDryRun,
	targetsIssues,
	type HostsMemo,
	type MatchedPolicy,
	type Origin,
	type Targets,
} from "./scope";
import { effectiveCall, Structured } from "../../lib/security/effective-call";

/** A threshold counts the hosts of this many seconds of a principal's asks, unless the policy says otherwise. */
export const DEFAULT_WINDOW_S = 3600;
/** The longest window a policy may give (seconds); older tallies are dropped. */
const MAX_WINDOW_S = 30 * 86_400;
/** Tallies past every window are dropped at most this often per replica. */
const PRUNE_MS = 60_000;
/**
 * What one definition of a call is, as thresholds count it: the function with its arguments as the minion takes
 * them (lib/security/effective-call.ts), Salt's `__pub_*` left out.
 */
export function definitionKey(fun: string, arg: unknown[] = [], kwarg: Record<string, unknown> = {}): string {
	const call = effectiveCall(fun, arg, kwarg);
	const keywords = Object.fromEntries(
		Object.entries(call.kwargs)
			.filter(([k]) => !k.startsWith("__pub_"))
			.map(([k, v]) => [k, v instanceof Structured ? v.text : v]),
	);
	const positional = call.args.map(v => (v instanceof Structured ? v.text : v));
	return canonicalDigest({ fun, arg: positional, kwarg: keywords });
}

type PoliciesThis = EveThis & {
	prunedAt: number;
	tallied(
		principal: string,
		key: string,
		hosts: string[],
		windowS: number,
	): Promise<Array<{ hosts: string[]; at: Date }>>;
};

const PoliciesService: EveServiceSchema<PoliciesThis> = {
	name: "approval-policies",
	mixins: [
		EveCollection({
			resource: "approval_policies",
			idPattern: OBJECT_ID,
			schema: {
				name: { type: "string", min: 1, max: 200 },
				functions: FUNCTIONS_SCHEMA,
				targets: { ...TARGETS_SCHEMA, optional: true },
				more_than_hosts: { type: "number", integer: true, min: 0, max: 1_000_000, optional: true },
				origins: {
					type: "array",
					items: { type: "enum", values: [...ORIGINS] },
					min: 1,
					max: ORIGINS.length,
					unique: true,
					optional: true,
				},
				approvers: {
					type: "object",
					strict: true,
					props: {
						count: { type: "number", integer: true, min: 1, max: 10 },
						roles: {
							type: "array",
							items: { type: "enum", values: ["operator", "admin"] },
							min: 1,
							max: 2,
							unique: true,
						},
					},
				},
				expires_after: { type: "number", integer: true, min: 60, max: 30 * 86_400, optional: true },
				// Seconds of a principal's asks a threshold counts (default DEFAULT_WINDOW_S; 0: the run in hand alone).
				window: { type: "number", integer: true, min: 0, max: MAX_WINDOW_S, optional: true },
				enabled: { type: "boolean", optional: true },
			},
			indexes: { enabled: {} },
			extraCollections: ["approval_tallies"],
		}),
	],

	actions: {
		/**
		 * The enabled policies this run matches (internal: the approvals service), each with what it takes to
		 * approve. `hosts` is the run's resolved host list; `scale`, when larger, the count a threshold is
		 * compared with (a rollout's batch counts as the whole rollout); `principal`, who asks: a threshold counts
		 * the hosts of their asks of the same definition within its window too. A policy whose target cannot be
		 * evaluated matches every run of its functions: it holds rather than guesses.
		 */
		matching: {
			visibility: "public",
			params: {
				fun: { type: "string", max: 200 },
				arg: { type: "array", optional: true },
				kwarg: { type: "object", optional: true },
				hosts: { type: "array", items: "string", max: 100_000 },
				scale: { type: "number", integer: true, min: 0, optional: true },
				origin: { type: "enum", values: [...ORIGINS] },
				principal: { type: "string", min: 1, max: 500, optional: true },
			},
			async handler(
				this: PoliciesThis,
				ctx: Context<{
					fun: string;
					arg?: unknown[];
					kwarg?: Record<string, unknown>;
					hosts: string[];
					scale?: number;
					origin: Origin;
					principal?: string;
				}>,
			): Promise<MatchedPolicy[]> {
				const { fun, arg, kwarg, hosts, origin, principal } = ctx.params;
				if (isDryRun(fun, arg, kwarg)) return [];
				const names = governedNames(fun, arg, kwarg);
				const policies = (await this.store.find({ enabled: { $ne: false } }, { sort: [["_id", 1]] })).filter(
					p => governs(p.functions ?? [], names) && (!p.origins || originCovered(p.origins, origin)),
				);
				// The principal's asks of this definition within the longest window a watching threshold gives, this one recorded first.
				const windows = policies.filter(p => (p.more_than_hosts ?? 0) > 0).map(p => p.window ?? DEFAULT_WINDOW_S);
				const longest = Math.max(0, ...windows);
				const asks =
					principal && longest > 0 && hosts.length
						? await this.tallied(principal, definitionKey(fun, arg, kwarg), hosts, longest)
						: [];
				const matched: MatchedPolicy[] = [];
				const memo: HostsMemo = new Map();
				for (const p of policies) {
					// The hosts counted: this run's, and those of the asks within the policy's window.
					const since = Date.now() - (p.window ?? DEFAULT_WINDOW_S) * 1000;
					const counting = new Set([...hosts, ...asks.filter(a => a.at.getTime() >= since).flatMap(a => a.hosts)]);
					let inScope = hosts.length;
					let countedHosts = counting.size;
					if (p.targets) {
						const governed = await hostsOf(ctx, p.targets as Targets, memo).catch(() => null);
						inScope = governed ? hosts.filter(h => governed.has(h)).length : hosts.length;
						if (governed && inScope === 0) continue;
						if (governed) countedHosts = [...counting].filter(h => governed.has(h)).length;
					}
					// A rollout's batch is a part of the rollout: a threshold counts the whole rollout (scale) once the batch is in scope.
					const counted = inScope > 0 ? Math.max(countedHosts, ctx.params.scale ?? 0) : 0;
					if (counted <= (p.more_than_hosts ?? 0)) continue;
					matched.push({
						policy: String(p._id),
						name: p.name,
						count: p.approvers.count,
						roles: p.approvers.roles,
						expires_after: p.expires_after ?? DEFAULT_EXPIRY_S,
					});
				}
				return matched;
			},
		},
	},

	methods: {
		/**
		 * Records an ask (before it is counted: two replicas splitting one call at the same moment each see both) and
		 * answers the principal's asks of the definition within `windowS`, this one included.
		 */
		async tallied(this: PoliciesThis, principal: string, key: string, hosts: string[], windowS: number) {
			const tallies = this.stores.approval_tallies;
			const now = new Date();
			const who = canonicalDigest({ principal, key });
			await tallies.insertMany([{ _id: newObjectId(), who, hosts: [...new Set(hosts)], at: now }]);
			if (now.getTime() - this.prunedAt > PRUNE_MS) {
				this.prunedAt = now.getTime();
				await tallies.removeMany({ at: { $lt: new Date(now.getTime() - MAX_WINDOW_S * 1000) } });
			}
			const asks = await tallies.find(
				{ who, at: { $gte: new Date(now.getTime() - windowS * 1000) } },
				{ only: ["hosts", "at"] },
			);
			return asks.map(a => ({ hosts: a.hosts as string[], at: new Date(a.at) }));
		},

		async checkRules(
			this: PoliciesThis,
			ctx: RestContext,
			doc: Doc,
			info: { op: string; existing?: Doc },
		): Promise<Issues | null> {
			const merged = { ...(info.existing ?? {}), ...doc };
			return targetsIssues(ctx, merged.targets, "targets", false);
		},
	},
	created(this: PoliciesThis) {
		this.prunedAt = 0;
	},

	async started(this: PoliciesThis) {
		await this.stores.approval_tallies.ensureIndex("who");
		await this.stores.approval_tallies.ensureIndex("at", { ordered: true });
	},
};

export default PoliciesService;
