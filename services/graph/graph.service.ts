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
 *
 * `POST /graph` starts a background job (docs/graph.md) and answers 202 with where to follow it: the
 * jobs service's record of that action (`build_graph`, `request_ips`) holding its latest run: status,
 * progress, result or error (services/jobs.service.ts; `graph_jobs` is that collection's first name).
 * A second POST while one runs is a 409; a run whose process died is taken over once its lease has passed.
 */
import type { Context, Service, ServiceSchema } from "moleculer";
import type { RestContext } from "../../mixins/eve-collection.mixin";
import { configOf } from "../../lib/config";
import { batchesBySize } from "../../lib/fleet/batches";
import { formatHttpDate, nowSeconds } from "../../lib/eve/dates";
import { Invalid, Malformed, NotFound } from "../../lib/errors";
import { OBJECT_ID } from "../../lib/eve/ids";
import { QueryArgs, parseWhere } from "../../lib/eve/query";
import { compileSchema } from "../../lib/eve/validation";
import { type GRAPH_ACTIONS, GRAPH_RUN_BODY } from "../../lib/http/bodies";
import type { GroupDef } from "../../lib/fleet/group-rules";
import { RESOLVE_BATCH, ResolverError, checkResolverUrl, resolveBatch } from "./ip-resolver";
import { outboundPolicy, type OutboundPolicy } from "../../lib/security/address-guard";
import type { Doc } from "../../lib/storage/store";
import { call } from "../../lib/contracts/call";

type EveThis = Service & Record<string, any>;

type JobAction = (typeof GRAPH_ACTIONS)[number];
/** How long a run may go without a sign of life before another replica may take it over. */
const LEASE_MS = 60_000;

const checkRunBody = compileSchema(GRAPH_RUN_BODY, { wellFormed: true });

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
	if (keys.length !== 1 || keys[0] !== "type")
		throw new Malformed('the nodes of a graph are filtered by `type` only: where={"type": 1}');
	const t = where.type as unknown;
	const list = Number.isInteger(t)
		? [t as number]
		: t && typeof t === "object" && !Array.isArray(t) && Object.keys(t).join() === "$in"
			? ((t as { $in: unknown }).$in as unknown)
			: null;
	if (!Array.isArray(list) || !list.every(Number.isInteger))
		throw new Malformed('`type` must be an integer or {"$in": [integers]}');
	return v => (list as number[]).includes(v);
}

const GraphService: ServiceSchema = {
	name: "graph",
	actions: {
		tree: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: Context<{ id: string }>) {
				return this.graphOf(ctx, ctx.params.id);
			},
		},
		nodes: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: Context<{ id: string; query?: unknown }>) {
				const keep = typeFilter(QueryArgs.from(ctx.params.query).get("where"));
				const { nodes } = await this.graphOf(ctx, ctx.params.id);
				return { nodes: keep ? nodes.filter((n: GraphNode) => keep(n.type)) : nodes };
			},
		},
		edges: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: Context<{ id: string }>) {
				const { edges } = await this.graphOf(ctx, ctx.params.id);
				return { edges };
			},
		},
		notLinked: {
			params: { query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: Context) {
				return call(ctx, "hosts.unlinked");
			},
		},

		/** POST /graph: starts build_graph or request_ips in the background; 202 with the job to follow. */
		run: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: RestContext) {
				const body = (ctx.params.body ?? {}) as { action?: JobAction; master?: string; ip_resolver?: string };
				const issues = checkRunBody(body);
				if (issues) throw new Invalid(issues);
				const addresses: { resolver_address: string; master_address: string } = await ctx.call("settings.addresses");
				let params: Record<string, string>;
				if (body.action === "build_graph") {
					if (body.ip_resolver !== undefined) throw new Invalid({ ip_resolver: "used only with request_ips" });
					const master = body.master ?? addresses.master_address;
					if (!master)
						throw new Invalid({ master: "required: name the master, or set addresses.master_address in the settings" });
					params = { master };
				} else {
					if (body.master !== undefined) throw new Invalid({ master: "used only with build_graph" });
					const raw = body.ip_resolver ?? addresses.resolver_address;
					if (!raw)
						throw new Invalid({
							ip_resolver: "required: give the resolver's URL, or set addresses.resolver_address in the settings",
						});
					try {
						params = { ip_resolver: checkResolverUrl(raw, this.resolverPolicy()).href };
					} catch (err) {
						throw new Invalid({ ip_resolver: (err as Error).message });
					}
				}
				const job = await this.claimJob(ctx, body.action!, params);
				void this.runJob(job);
				ctx.meta.$statusCode = 202;
				// moleculer-web sends $location only with 201 and redirects; a 202 names its job by header itself.
				ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, Location: `/api/graph_jobs/${job._id}` };
				return {
					_status: "OK",
					_id: job._id,
					status: job.status,
					started: formatHttpDate(job.started),
					_links: { self: { title: "Graph job", href: `graph_jobs/${job._id}` } },
				};
			},
		},
	},

	methods: {
		/** Where the IP resolver may be (lib/security/address-guard.ts): checked when a run is asked for, and when it connects. */
		resolverPolicy(this: EveThis): OutboundPolicy {
			return outboundPolicy("ip-resolver", this.config);
		},

		async graphOf(this: EveThis, ctx: Context, id: string) {
			if (!OBJECT_ID.test(id)) throw new NotFound(`group '${id}' not found`);
			const groups: GroupDef[] = await call(ctx, "groups.rules");
			if (!groups.some(g => g._id === id)) throw new NotFound(`group '${id}' not found`);
			return graphFrom(groups, id);
		},

		/** Takes the action's record in `jobs` for a new run, or answers 409 while a live run holds it. */
		async claimJob(this: EveThis, ctx: Context, action: JobAction, params: Record<string, string>): Promise<Doc> {
			return ctx.call("jobs.claim", { kind: action, params, leaseMs: LEASE_MS });
		},

		/** Records progress (and keeps the lease) of a run, unless another run took the record over. */
		async jobUpdate(this: EveThis, job: Doc, set: Doc) {
			await this.broker.call("jobs.update", { id: job._id, run: job.run, set });
		},

		async runJob(this: EveThis, job: Doc) {
			try {
				const result = job.action === "build_graph" ? await this.buildGraph(job) : await this.requestIps(job);
				await this.jobUpdate(job, { status: "finished", result });
			} catch (err) {
				this.logger.warn(`${job.action} failed:`, (err as Error).message);
				await this.jobUpdate(job, { status: "failed", error: (err as Error).message.slice(0, 1000) }).catch(
					() => undefined,
				);
			}
		},

		/** The generated part of the graph for the master: a root group and an automatic group per nodegroup. */
		async buildGraph(this: EveThis, job: Doc) {
			const nodegroups = await call(this.broker, "nodegroups.rules");
			await this.jobUpdate(job, { progress: { done: 0, total: nodegroups.length + 1 } });
			const result: Doc = await call(this.broker, "groups.applyGenerated", { master: job.params.master, nodegroups });
			await this.jobUpdate(job, { progress: { done: nodegroups.length + 1, total: nodegroups.length + 1 } });
			return result;
		},

		/**
		 * Asks the resolver for every live host's address, RESOLVE_BATCH at a time, and stores each answer as
		 * the host's `resolved` {ip, gateway, resolver, at}, with `nat` true when the resolved address is not
		 * the host's own `ip`. A batch that fails is tried once more; the run fails only if every batch did.
		 */
		async requestIps(this: EveThis, job: Doc) {
			const policy = this.resolverPolicy();
			const url = checkResolverUrl(job.params.ip_resolver, policy);
			const hosts: Array<{ _id: string; ip?: string }> = await call(this.broker, "hosts.liveAddresses");
			const own = new Map(hosts.map(h => [h._id, h.ip]));
			const total = hosts.length;
			const counts = { asked: 0, resolved: 0, unknown: 0, rejected: 0, failed_batches: 0 };
			const errors: string[] = [];
			await this.jobUpdate(job, { progress: { done: 0, total } });
			const timeout = this.config.ipResolverTimeoutMs;
			for (let i = 0; i < hosts.length; i += RESOLVE_BATCH) {
				const names = hosts.slice(i, i + RESOLVE_BATCH).map(h => h._id);
				counts.asked += names.length;
				let answer: Awaited<ReturnType<typeof resolveBatch>> | null = null;
				for (let attempt = 0; attempt < 2 && !answer; attempt++) {
					try {
						answer = await resolveBatch(url, names, timeout, policy);
					} catch (err) {
						if (!(err instanceof ResolverError)) throw err;
						if (attempt === 1) {
							counts.failed_batches++;
							if (errors.length < 5) errors.push(err.message);
						}
					}
				}
				if (answer) {
					const at = nowSeconds();
					const updates = [...answer.addresses].map(([_id, a]) => ({
						_id,
						resolved: { ...a, resolver: url.href, at },
						...(own.get(_id) ? { nat: own.get(_id) !== a.ip } : {}),
					}));
					for (const batch of batchesBySize(updates, 1000))
						await call(this.broker, "hosts.upsertMany", { hosts: batch });
					counts.resolved += answer.addresses.size;
					counts.rejected += answer.rejected;
					counts.unknown += names.length - answer.addresses.size;
				}
				await this.jobUpdate(job, { progress: { done: Math.min(total, i + names.length), total } });
			}
			const batches = Math.ceil(total / RESOLVE_BATCH);
			if (batches > 0 && counts.failed_batches === batches)
				throw new Error(`every request to the IP resolver failed: ${errors.join("; ")}`);
			return { resolver: url.href, ...counts, errors };
		},
	},

	created(this: EveThis) {
		this.config = configOf(this.broker);
	},
};

export default GraphService;
