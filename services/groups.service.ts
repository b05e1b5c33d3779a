/**
 * Owns the `groups` collection: static groups (type 0: subgroups and explicit hosts) and automatic
 * ones (type 1: `info.regex` / `info.grain`). Keeps the subgroup graph acyclic and free of dangling ids,
 * and refuses rules that cannot be matched safely (lib/fleet/group-rules.ts). Every change is an event the
 * hosts service recomputes memberships on.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
	type WriteInfo,
} from "../mixins/eve-collection.mixin";
import { OBJECT_ID, HOSTNAME, idFromName } from "../lib/eve/ids";
import { nowSeconds } from "../lib/eve/dates";
import { Malformed } from "../lib/errors";
import { QueryArgs, parseWhere } from "../lib/eve/query";
import type { Doc } from "../lib/storage/store";
import type { Issues } from "../lib/eve/errors";
import { ruleProblems, type GroupDef, type Rule } from "../lib/fleet/group-rules";
import { action, call } from "../lib/contracts/call";

/**
 * The group types the spec documents, and only those: 0 (static: subgroups and hosts) and 1 (automatic:
 * `info`) as observed, 2, 3 and 4 as its `DELETE /groups?where={"type": …}` names them (fleet-ctl's
 * `build_graph` makes its roots type 2). Anything else is a 422 (`_issues.type`).
 */
export const GROUP_TYPE_MIN = 0;
export const GROUP_TYPE_MAX = 4;

/** What this service has on `this` besides the Eve mixin's. */
interface GroupsMembers {
	subgroupIndex(): Promise<Map<string, string[]>>;
	descendants(byId: Map<string, string[]>, root: string): string[];
	pathBetween(byId: Map<string, string[]>, from: string, to: string): string[] | null;
}

type GroupsThis = EveThis & GroupsMembers;

const GroupsService: EveServiceSchema<GroupsThis> = {
	name: "groups",
	mixins: [
		EveCollection({
			resource: "groups",
			idPattern: OBJECT_ID,
			clientIds: true,
			schema: {
				name: { type: "string", min: 1, max: 200 },
				type: { type: "number", integer: true, min: GROUP_TYPE_MIN, max: GROUP_TYPE_MAX, optional: true, default: 0 },
				subgroups: { type: "array", items: { type: "string", pattern: OBJECT_ID }, max: 1000, optional: true },
				hosts: { type: "array", items: { type: "string", pattern: HOSTNAME }, max: 100_000, optional: true },
				info: {
					type: "object",
					optional: true,
					strict: true,
					props: {
						regex: { type: "string", max: 1000, optional: true },
						grain: {
							type: "record",
							key: { type: "string", min: 1, max: 200 },
							value: { type: "string", max: 1000 },
							optional: true,
						},
						// A compound target (docs/targeting.md), without F@; null (a PATCH) drops it.
						target: { type: "string", min: 1, max: 10_000, optional: true, nullable: true },
					},
				},
			},
			// Set on the groups POST /graph {action: "build_graph"} made: "build_graph:<master>".
			readOnlyFields: ["generated_by"],
			relations: { subgroups: { resource: "groups", service: "groups", many: true, embeddable: true } },
		}),
	],

	actions: {
		/** GET /groups/{id}/subgroups: every group below this one, nearest first. */
		subgroups: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: GroupsThis, ctx: Context<{ id: string }>) {
				const group = await this.visibleItem(ctx.params.id);
				const byId = await this.subgroupIndex();
				return this.descendants(byId, String(group._id));
			},
		},

		/**
		 * GET /groups/{id}/hostnames: every host this group selects (lib/fleet/group-rules.ts): its explicit hosts
		 * and those its rule matches, and the same of every group below it; soft-deleted hosts left out.
		 */
		hostnames: action("groups.hostnames", {
			async handler(this: GroupsThis, ctx) {
				const group = await this.visibleItem(ctx.params.id);
				const ids = [String(group._id), ...this.descendants(await this.subgroupIndex(), String(group._id))];
				const groups = await this.store.find({ _id: { $in: ids } });
				const explicit = new Set<string>();
				for (const g of groups) for (const h of g.hosts ?? []) explicit.add(h);
				const rules = groups
					.map(g => g.info as Rule | undefined)
					.filter(
						(r): r is Rule =>
							!!r && (r.regex !== undefined || typeof r.target === "string" || Object.keys(r.grain ?? {}).length > 0),
					);
				if (!explicit.size && !rules.length) return [];
				return call(ctx, "hosts.resolve", { explicit: [...explicit], rules });
			},
		}),

		/**
		 * A task's `tgt` as hostnames, now (internal: the tasks service and the cm-gateway): each entry that
		 * is a group's id becomes that group's hostnames; any other entry is taken as a hostname.
		 */
		expandTargets: action("groups.expandTargets", {
			visibility: "public",
			async handler(this: GroupsThis, ctx) {
				const names = new Set<string>();
				for (const t of ctx.params.tgt) {
					const group = OBJECT_ID.test(t) ? await this.store.findOne({ _id: t }) : null;
					if (!group) {
						names.add(t);
						continue;
					}
					for (const h of await call(ctx, "groups.hostnames", { id: t })) names.add(h);
				}
				return [...names].sort();
			},
		}),

		/**
		 * The generated part of the graph for a master (internal: POST /graph build_graph): one root group
		 * (type 2, named after the master) and under it one automatic group (type 1) per nodegroup with the
		 * nodegroup's rule. Ids derive from the master and nodegroup names, so a rebuild updates the same
		 * groups; generated groups whose nodegroup is gone are removed; groups people made are never touched,
		 * even when they were linked under the generated root (they stay linked).
		 */
		applyGenerated: action("groups.applyGenerated", {
			visibility: "public",
			async handler(this: GroupsThis, ctx) {
				const { master, nodegroups } = ctx.params;
				const tag = `build_graph:${master}`;
				const rootId = idFromName(`graph/${master}`);
				const wanted = nodegroups.map(n => ({
					_id: idFromName(`graph/${master}/nodegroup/${n.name}`),
					name: n.name,
					type: 1,
					info: n.info ?? {},
					subgroups: [],
					hosts: [],
					generated_by: tag,
				}));
				const existing = new Map((await this.store.find({ generated_by: tag })).map(d => [String(d._id), d]));
				const root = existing.get(rootId);
				const kept = (root?.subgroups ?? []).filter(
					(id: string) => !existing.has(id) || wanted.some(w => w._id === id),
				);
				const rootDoc = {
					_id: rootId,
					name: master,
					type: 2,
					subgroups: [...new Set([...wanted.map(w => w._id), ...kept])],
					hosts: root?.hosts ?? [],
					generated_by: tag,
				};
				const now = nowSeconds();
				const created: string[] = [];
				const updated: string[] = [];
				for (const doc of [...wanted, rootDoc]) {
					const before = existing.get(doc._id);
					if (!before) {
						await this.store.insertMany([{ ...doc, _created: now, _updated: now }]);
						created.push(doc._id);
					} else if (
						["name", "type", "info", "subgroups"].some(
							k => JSON.stringify(before[k]) !== JSON.stringify((doc as Doc)[k]),
						)
					) {
						await this.store.updateMany(
							{ _id: doc._id },
							{
								$set: {
									name: doc.name,
									type: doc.type,
									info: (doc as Doc).info,
									subgroups: doc.subgroups,
									_updated: now,
								},
							},
						);
						updated.push(doc._id);
					}
				}
				const stale = [...existing.values()].filter(d => d._id !== rootId && !wanted.some(w => w._id === d._id));
				await this.removeDocs(ctx as unknown as RestContext, stale);
				if (created.length) await this.afterWrite(ctx as unknown as RestContext, "created", created);
				if (updated.length) await this.afterWrite(ctx as unknown as RestContext, "updated", updated);
				return {
					master,
					root: rootId,
					groups: wanted.length + 1,
					created: created.length,
					updated: updated.length,
					removed: stale.length,
				};
			},
		}),

		/** Every group with its links and rules (internal: host memberships, the graph). */
		rules: action("groups.rules", {
			visibility: "public",
			async handler(this: GroupsThis): Promise<GroupDef[]> {
				const all = await this.store.find({});
				return all.map(g => ({
					_id: String(g._id),
					name: g.name,
					type: g.type ?? 0,
					hosts: g.hosts ?? [],
					subgroups: g.subgroups ?? [],
					info: g.info,
				}));
			},
		}),

		/** DELETE /groups?where={"type": 2} (or [2, 3]): removes every group of those types. */
		removeWhere: {
			params: { query: { type: "any", optional: true } },
			async handler(this: GroupsThis, ctx: RestContext) {
				const where = parseWhere(QueryArgs.from(ctx.params.query).get("where"));
				const keys = Object.keys(where);
				if (keys.length !== 1 || keys[0] !== "type")
					throw new Malformed('DELETE /groups needs where={"type": <integer or array of integers>}');
				const raw = where.type;
				const types = Array.isArray(raw)
					? raw
					: raw !== null && typeof raw === "object" && Array.isArray((raw as Doc).$in)
						? (raw as Doc).$in
						: [raw];
				if (types.length === 0 || !types.every((t: unknown) => Number.isInteger(t)))
					throw new Malformed("`type` must be an integer or an array of integers");
				const docs = await this.store.find({ type: { $in: types } });
				await this.removeDocs(ctx, docs);
				ctx.meta.$statusCode = 204;
				return null;
			},
		},
	},

	methods: {
		/**
		 * fastest-validator's `record` rule rebuilds `info.grain` by assignment, which would drop a grain named
		 * `__proto__` without a word (and then match more hosts than asked): refused instead.
		 */
		async prepareInput(this: GroupsThis, _ctx: RestContext, doc: Doc) {
			const grain = (doc.info as { grain?: unknown } | undefined)?.grain;
			if (grain !== null && typeof grain === "object" && Object.hasOwn(grain, "__proto__"))
				return { doc, issues: { info: { grain: "a grain named '__proto__' cannot be matched" } } };
			return { doc };
		},
		async subgroupIndex(this: GroupsThis): Promise<Map<string, string[]>> {
			const all = await this.store.find({});
			return new Map(all.map(g => [String(g._id), (g.subgroups ?? []).map(String)]));
		},

		descendants(this: GroupsThis, byId: Map<string, string[]>, root: string): string[] {
			const seen = new Set<string>([root]);
			const order: string[] = [];
			const queue = [...(byId.get(root) ?? [])];
			while (queue.length) {
				const id = queue.shift() as string;
				if (seen.has(id)) continue;
				seen.add(id);
				order.push(id);
				queue.push(...(byId.get(id) ?? []));
			}
			return order;
		},

		/** The path from `from` down to `to`, if one exists. */
		pathBetween(this: GroupsThis, byId: Map<string, string[]>, from: string, to: string): string[] | null {
			const parent = new Map<string, string>();
			const queue = [from];
			const seen = new Set([from]);
			while (queue.length) {
				const id = queue.shift() as string;
				if (id === to) {
					const path = [to];
					for (let cur = to; cur !== from; ) {
						cur = parent.get(cur) as string;
						path.unshift(cur);
					}
					return path;
				}
				for (const child of byId.get(id) ?? []) {
					if (!seen.has(child)) {
						seen.add(child);
						parent.set(child, id);
						queue.push(child);
					}
				}
			}
			return null;
		},

		async checkRules(this: GroupsThis, _ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null> {
			const issues: Issues = {};
			const ruleIssues = ruleProblems(doc.info);
			if (ruleIssues) issues.info = ruleIssues;
			const self = info.existing ? String(info.existing._id) : doc._id;
			if (Array.isArray(doc.subgroups) && self) {
				const byId = await this.subgroupIndex();
				for (const child of doc.subgroups as string[]) {
					const back = child === self ? [self] : this.pathBetween(byId, child, self);
					if (back) {
						issues.subgroups = `subgroups would form a cycle: ${[self, ...back].join(" -> ")}`;
						break;
					}
				}
			}
			return Object.keys(issues).length ? issues : null;
		},

		async afterWrite(this: GroupsThis, ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]) {
			if (op === "removed") {
				// No parent keeps pointing at a removed group.
				await this.store.updateMany({ subgroups: { $in: ids } }, { $pull: { subgroups: { $in: ids } } });
			}
			await this.notifyChanged(ctx, op, ids);
		},
	},

	async started(this: GroupsThis) {
		await this.store.ensureIndex("type");
		await this.store.ensureIndex("subgroups");
	},
};

export default GroupsService;
