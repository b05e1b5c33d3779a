/**
 * Owns the `approval_policies` collection (docs/security.md, "Approvals"): which runs need approvers before they
 * run. A policy is `{name, functions: [globs], targets?: {groups?, target?}, more_than_hosts?, origins?, approvers:
 * {count, roles}, expires_after?, enabled?}`; admins write them. A run matches a policy when its function matches
 * a glob, it comes from one of the policy's origins (api, task, rollout, repl; all when none is given), and more
 * than `more_than_hosts` (default 0) of its hosts are among the policy's targets (every host when none are given).
 * Dry runs never match (they change nothing).
 *
 * The approvals service asks `matching` for every run the run door lets through (services/governance/approvals.service.ts).
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import type { Doc } from "../../lib/storage/store";
import { DEFAULT_EXPIRY_S, FUNCTIONS_SCHEMA, ORIGINS, TARGETS_SCHEMA, governedNames, governs, hostsOf, isDryRun, targetsIssues, type HostsMemo, type MatchedPolicy, type Origin, type Targets } from "./scope";

const PoliciesService: EveServiceSchema = {
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
				origins: { type: "array", items: { type: "enum", values: [...ORIGINS] }, min: 1, max: ORIGINS.length, unique: true, optional: true },
				approvers: {
					type: "object",
					strict: true,
					props: {
						count: { type: "number", integer: true, min: 1, max: 10 },
						roles: { type: "array", items: { type: "enum", values: ["operator", "admin"] }, min: 1, max: 2, unique: true },
					},
				},
				expires_after: { type: "number", integer: true, min: 60, max: 30 * 86_400, optional: true },
				enabled: { type: "boolean", optional: true },
			},
			indexes: { enabled: {} },
		}),
	],

	actions: {
		/**
		 * The enabled policies this run matches (internal: the approvals service), each with what it takes to
		 * approve. `hosts` is the run's resolved host list; `scale`, when larger, the count a threshold is
		 * compared with (a rollout's batch counts as the whole rollout). A policy whose target cannot be
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
			},
			async handler(this: EveThis, ctx: Context<{ fun: string; arg?: unknown[]; kwarg?: Record<string, unknown>; hosts: string[]; scale?: number; origin: Origin }>): Promise<MatchedPolicy[]> {
				const { fun, arg, kwarg, hosts, origin } = ctx.params;
				if (isDryRun(fun, arg, kwarg)) return [];
				const matched: MatchedPolicy[] = [];
				const memo: HostsMemo = new Map();
				const names = governedNames(fun, arg, kwarg);
				for (const p of await this.store.find({ enabled: { $ne: false } }, { sort: [["_id", 1]] })) {
					if (!governs(p.functions ?? [], names)) continue;
					if (p.origins && !p.origins.includes(origin)) continue;
					let inScope = hosts.length;
					if (p.targets) {
						const governed = await hostsOf(ctx, p.targets as Targets, memo).catch(() => null);
						inScope = governed ? hosts.filter(h => governed.has(h)).length : hosts.length;
						if (governed && inScope === 0) continue;
					}
					// A rollout's batch is a part of the rollout: a threshold counts the whole rollout (scale) once the batch is in scope.
					const counted = inScope > 0 ? Math.max(inScope, ctx.params.scale ?? 0) : 0;
					if (counted <= (p.more_than_hosts ?? 0)) continue;
					matched.push({ policy: String(p._id), name: p.name, count: p.approvers.count, roles: p.approvers.roles, expires_after: p.expires_after ?? DEFAULT_EXPIRY_S });
				}
				return matched;
			},
		},
	},

	methods: {
		async checkRules(this: EveThis, ctx: RestContext, doc: Doc, info: { op: string; existing?: Doc }): Promise<Issues | null> {
			const merged = { ...(info.existing ?? {}), ...doc };
			return targetsIssues(ctx, merged.targets, "targets", false);
		},
	},
};

export default PoliciesService;
