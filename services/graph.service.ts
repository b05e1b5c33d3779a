/**
 * The group graph in ECharts' graph-series format (the spec's "Graph node and edge"), computed from the
 * groups service on every request; it owns no collection.
 *
 *  - `GET /graph/{id}`: {nodes, edges} of the group and every group below it. Each group is ONE node,
 *    however many parents reach it (ECharts refuses a graph with two nodes of the same id); each link
 *    parent → child is one edge {type: "groupLink", source, target}. Nodes are in breadth-first order from
 *    the root, edges in the order their parents are visited.
 *  - Node fields, in this order: category "group", type, id, name, info (the group's, or {}), value,
 *    itemStyle.color, symbolSize. Automatic groups (type 1): value 1, color #e57373, symbolSize 10; every
 *    other type (0, and 2–4 which only the delete filter mentions): value 0, color #AED581, symbolSize 0.
 *  - `GET /graph/{id}/nodes?where={"type":1}`: the nodes only, filtered by type (an integer, or {"$in": [...]});
 *    `GET /graph/{id}/edges`: the edges only.
 *  - `GET /graph/not-linked`: the hostnames of the live hosts no group resolves to (their `groups` is empty), sorted.
 */
import type { Context, ServiceSchema } from "moleculer";
import { badRequest, notFound } from "../lib/eve/errors";
import { OBJECT_ID } from "../lib/eve/ids";
import { QueryArgs, parseWhere } from "../lib/eve/query";
import type { GroupDef } from "../lib/group-rules";

export interface GraphNode {
	category: "group";
	type: number;
	id: string;
	name: string;
	info: Record<string, unknown>;
	value: number;
	itemStyle: { color: string };
	symbolSize: number;
}

export interface GraphEdge {
	type: "groupLink";
	source: string;
	target: string;
}

const AUTOMATIC = 1;

export function graphNode(g: GroupDef): GraphNode {
	const type = g.type ?? 0;
	const automatic = type === AUTOMATIC;
	return {
		category: "group",
		type,
		id: g._id,
		name: g.name ?? "",
		info: (g.info as Record<string, unknown> | undefined) ?? {},
		value: automatic ? 1 : 0,
		itemStyle: { color: automatic ? "#e57373" : "#AED581" },
		symbolSize: automatic ? 10 : 0,
	};
}

/** The graph below `root`: each group once, each parent → child link once. */
export function graphFrom(groups: GroupDef[], root: string): { nodes: GraphNode[]; edges: GraphEdge[] } {
	const byId = new Map(groups.map(g => [g._id, g]));
	const nodes: GraphNode[] = [];
	const edges: GraphEdge[] = [];
	const seen = new Set<string>([root]);
	const queue = [root];
	while (queue.length) {
		const g = byId.get(queue.shift()!)!;
		nodes.push(graphNode(g));
		for (const child of new Set(g.subgroups ?? [])) {
			if (!byId.has(child)) continue;
			edges.push({ type: "groupLink", source: g._id, target: child });
			if (!seen.has(child)) {
				seen.add(child);
				queue.push(child);
			}
		}
	}
	return { nodes, edges };
}

/** The `where` of GET /graph/{id}/nodes: only `type`, as an integer or {"$in": [integers]}. */
function typeFilter(raw: string | undefined): ((t: number) => boolean) | null {
	if (raw === undefined || raw.trim() === "") return null;
	const where = parseWhere(raw);
	const keys = Object.keys(where);
	if (keys.length === 0) return null;
	if (keys.length !== 1 || keys[0] !== "type") throw badRequest('the nodes of a graph are filtered by `type` only: where={"type": 1}');
	const t = where.type as unknown;
	const list = Number.isInteger(t) ? [t as number] : t && typeof t === "object" && !Array.isArray(t) && Object.keys(t).join() === "$in" ? ((t as { $in: unknown }).$in as unknown) : null;
	if (!Array.isArray(list) || !list.every(Number.isInteger)) throw badRequest("`type` must be an integer or {\"$in\": [integers]}");
	return v => (list as number[]).includes(v);
}

const GraphService: ServiceSchema = {
	name: "graph",

	actions: {
		get: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: any, ctx: Context<{ id: string }>) {
				return this.graphOf(ctx, ctx.params.id);
			},
		},
		nodes: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: any, ctx: Context<{ id: string; query?: unknown }>) {
				const keep = typeFilter(QueryArgs.from(ctx.params.query).get("where"));
				const { nodes } = await this.graphOf(ctx, ctx.params.id);
				return { nodes: keep ? nodes.filter((n: GraphNode) => keep(n.type)) : nodes };
			},
		},
		edges: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: any, ctx: Context<{ id: string }>) {
				const { edges } = await this.graphOf(ctx, ctx.params.id);
				return { edges };
			},
		},
		notLinked: {
			params: { query: { type: "any", optional: true } },
			async handler(this: any, ctx: Context) {
				return ctx.call("hosts.unlinked");
			},
		},
	},

	methods: {
		async graphOf(this: any, ctx: Context, id: string) {
			if (!OBJECT_ID.test(id)) throw notFound(`group '${id}' not found`);
			const groups: GroupDef[] = await ctx.call("groups.rules");
			if (!groups.some(g => g._id === id)) throw notFound(`group '${id}' not found`);
			return graphFrom(groups, id);
		},
	},
};

export default GraphService;

