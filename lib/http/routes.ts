/**
 * The /api routing table: every path of the interface spec, the action behind each method, and
 * nothing else (the gateway publishes no other action). A method a path does not list is a 405.
 * Paths use path-to-regexp 8 syntax; more specific paths come first.
 */

import type { Role } from "./auth";
import { ALL_STATUS_BODY, GRAPH_RUN_BODY, RUN_BODY, RUN_TARGET_BODY, TARGET_PREVIEW_BODY } from "./bodies";

/** How the gateway hands the request to the action. */
export type BodyKind = "json" | "none" | "stream";

/**
 * A route that leads to a run (remote execution, a live poll, a task write). Its scope check is not the
 * gateway's: the cm-gateway and the tasks service authorize the run where it starts (docs/security.md).
 */
export type ScopeCheck = "host" | "group" | "target" | "task" | "rollout";

export interface RouteMethod {
	action: string;
	/** The least role that may call it. */
	role: Role;
	body?: BodyKind;
	/** The gateway may keep this read's response until that service's collection changes. */
	cachedBy?: string;
	scope?: ScopeCheck;
	/** Why the route answers 503 when its action is not published (default: its service is not running). */
	unavailable?: string;
	/** The response is a text/event-stream that stays open (`?timeout=<seconds>` ends it sooner). */
	events?: boolean;
	/** What the route does, for the OpenAPI document (generic CRUD routes are described from their action). */
	summary?: string;
	/** A read that is audited like a write (it hands out a secret). */
	audited?: boolean;
	/** A POST that changes nothing and runs nothing (it computes an answer from its body): not audited, like a read. */
	computes?: boolean;
	/** The JSON body as the action validates it (lib/http/bodies.ts), for the OpenAPI document; collections describe theirs. */
	bodySchema?: Record<string, unknown>;
	/** Query parameters beyond a collection's (where, sort, …), for the OpenAPI document. */
	query?: QueryParam[];
	/** A read that changes state when this query parameter is given: with a session cookie it needs the CSRF header, as a write. */
	writesWith?: string;
}

export interface QueryParam {
	name: string;
	description: string;
	required?: boolean;
	/** JSON Schema of the value (default: a string). */
	schema?: Record<string, unknown>;
}

export interface RouteDef {
	path: string;
	methods: Partial<Record<"GET" | "POST" | "PATCH" | "PUT" | "DELETE", RouteMethod>>;
}

/** Collections listed by GET /api/: the spec's, in its order, then fleet-ctl's own. */
export const COLLECTIONS = [
	"groups",
	"nodegroups",
	"hosts",
	"hosts_statistic",
	"tasks",
	"actions",
	"failed_patches",
	"updates",
	"alerts",
	"settings",
	"files",
	"vpn_managers",
	"vpn_organizations",
	"tokens",
	"audit",
	"graph_jobs",
	"jobs",
	"salt_jobs",
	"rollouts",
	"conformity_checks",
	"conformity_rules",
	"webhooks",
	"webhook_deliveries",
	"maintenance_windows",
	"approval_policies",
	"approvals",
];

const read = (service: string, role: Role = "viewer", query?: QueryParam[]) => ({
	GET: { action: `${service}.list`, role, cachedBy: service, query },
});
const readItem = (service: string, role: Role = "viewer", query?: QueryParam[]) => ({
	GET: { action: `${service}.get`, role, cachedBy: service, query },
});
/** `?mark_as_read=1` on a read of alerts (docs/api.md). */
const MARK_AS_READ: QueryParam[] = [
	{ name: "mark_as_read", description: "1: mark the alerts this read returns as read" },
];
const get = (action: string): RouteMethod => ({ action, role: "viewer" });
const json = (action: string, role: Role, scope?: ScopeCheck): RouteMethod => ({ action, role, body: "json", scope });
const none = (action: string, role: Role): RouteMethod => ({ action, role, body: "none" });
/** The cm-gateway publishes its salt actions only when CM_API_URL names a salt-api. */
const NO_MASTER = "no configuration-management master is configured (CM_API_URL), or the cm-gateway is not running";
const needsMaster = (m: RouteMethod): RouteMethod => ({ ...m, unavailable: NO_MASTER });
const withBody = (m: RouteMethod, bodySchema: Record<string, unknown>): RouteMethod => ({ ...m, bodySchema });

/** `?count=` of the maintenance windows' previews. */
const COUNT: QueryParam = {
	name: "count",
	description: "How many openings (1 to 100, default 5)",
	schema: { type: "integer", minimum: 1, maximum: 100 },
};

/** The statistics' parameters (docs/statistics.md). */
const RANGE: QueryParam = {
	name: "range[]",
	required: true,
	description: "Twice: the range's start and end as HTTP-dates",
	schema: { type: "array", items: { type: "string" }, minItems: 2, maxItems: 2 },
};
const STATS_WHERE: QueryParam = {
	name: "where",
	description: 'A filter on the entries of the hosts in the snapshots, as JSON: {"nodegroups": "web"}',
};
const statistic = (action: string, summary: string, extra: QueryParam[] = []): RouteMethod => ({
	action,
	role: "viewer",
	summary,
	query: [RANGE, STATS_WHERE, ...extra],
});

export const ROUTES: RouteDef[] = [
	{
		path: "groups",
		methods: {
			...read("groups"),
			POST: json("groups.create", "admin"),
			DELETE: {
				...none("groups.removeWhere", "admin"),
				summary: "Delete the groups a `where` selects (by type, as the spec does)",
			},
		},
	},
	{
		path: "groups/:id/subgroups",
		methods: { GET: { ...get("groups.subgroups"), summary: "The group's subgroups, all the way down" } },
	},
	{
		path: "groups/:id/hostnames",
		methods: {
			GET: {
				...get("groups.hostnames"),
				summary: "The hosts the group resolves to now: listed, by its rule, and through its subgroups",
			},
		},
	},
	{
		path: "groups/:id",
		methods: {
			...readItem("groups"),
			POST: {
				...needsMaster(withBody(json("cm-gateway.runOnGroup", "operator", "group"), RUN_BODY)),
				summary: "Run a Salt function on every host the group resolves to (authorized and audited before it runs)",
			},
			PATCH: json("groups.patch", "admin"),
			DELETE: none("groups.remove", "admin"),
		},
	},

	{
		path: "graph",
		methods: {
			POST: {
				...withBody(json("graph.run", "admin"), GRAPH_RUN_BODY),
				summary:
					"Start a background job: build the group graph from the master's nodegroups, or resolve the hosts' IP addresses",
			},
		},
	},
	{ path: "graph/not-linked", methods: { GET: { ...get("graph.notLinked"), summary: "The groups no graph reaches" } } },
	{
		path: "graph/:id/nodes",
		methods: {
			GET: {
				...get("graph.nodes"),
				summary: "The nodes of the graph under a group",
				query: [{ name: "where", description: 'Only nodes of a type, as JSON: {"type": 1}' }],
			},
		},
	},
	{
		path: "graph/:id/edges",
		methods: { GET: { ...get("graph.edges"), summary: "The edges of the graph under a group" } },
	},
	{
		path: "graph/:id",
		methods: {
			GET: { ...get("graph.tree"), summary: "The graph under a group: its nodes and edges, as ECharts draws them" },
		},
	},
	// The first name of `jobs`, kept for the clients of POST /graph.
	{ path: "graph_jobs", methods: read("jobs") },
	{ path: "graph_jobs/:id", methods: readItem("jobs") },
	{ path: "jobs", methods: read("jobs") },
	{ path: "jobs/:id", methods: readItem("jobs") },

	{ path: "nodegroups", methods: read("nodegroups") },
	{ path: "nodegroups/:id", methods: readItem("nodegroups") },

	{
		path: "hosts/statistics/online",
		methods: {
			GET: statistic("stats.online", "Hosts up and down over time, a point per interval", [
				{
					name: "interval",
					required: true,
					description: "Seconds between two points",
					schema: { type: "integer", minimum: 1 },
				},
			]),
		},
	},
	{
		path: "hosts/statistics/unique_online",
		methods: { GET: statistic("stats.uniqueOnline", "The hosts seen, and those seen up, in the range") },
	},
	{
		path: "hosts/statistics/unique_updated",
		methods: { GET: statistic("stats.uniqueUpdated", "The hosts whose state apply happened in the range") },
	},
	{
		path: "hosts/statistics/unique_dist_upgraded",
		methods: { GET: statistic("stats.uniqueDistUpgraded", "The hosts whose dist-upgrade happened in the range") },
	},
	{
		path: "hosts/statistics/new_hosts",
		methods: { GET: statistic("stats.newHosts", "The hosts first seen in the range") },
	},
	{ path: "hosts", methods: read("hosts") },
	{
		path: "run",
		methods: {
			POST: {
				...needsMaster(withBody(json("cm-gateway.runOnTarget", "operator", "target"), RUN_TARGET_BODY)),
				summary:
					"Run a Salt function on the live hosts a compound target selects now (the list previewed is the list sent to Salt)",
			},
		},
	},
	{
		path: "targets/preview",
		methods: {
			POST: {
				...withBody(json("hosts.previewTarget", "viewer"), TARGET_PREVIEW_BODY),
				computes: true,
				summary:
					"The live hosts a compound target selects (evaluated on the inventory, nothing is published), their count, and the hosts it names that do not exist",
			},
		},
	},
	{
		path: "hosts/:id/all_status",
		methods: {
			POST: {
				...needsMaster(withBody(json("cm-gateway.allStatus", "operator", "host"), ALL_STATUS_BODY)),
				summary: "Start, extend or stop polling the host's status.all_status live",
			},
		},
	},
	// The host's Pritunl profile archive (docs/vpn.md): it holds the host's VPN keys, so not for viewers.
	{
		path: "hosts/:id/conformity/fix",
		methods: {
			POST: {
				...needsMaster(json("conformity.fixHost", "operator", "host")),
				summary:
					"Apply only the states the host's last check found drifted (state.sls_id each, as the caller, audited), then check it again",
			},
		},
	},
	{
		path: "hosts/:id/conformity",
		methods: {
			GET: {
				...get("conformity.hostView"),
				summary:
					"How the host compares with its declared state: the states that differ with their predicted changes, since when, and its timeline",
			},
		},
	},
	{
		path: "hosts/:id/maintenance_windows",
		methods: {
			GET: {
				...get("maintenance-windows.ofHost"),
				summary: "The maintenance windows that govern the host, whether each is open now, and their next openings",
				query: [COUNT],
			},
		},
	},
	{
		path: "hosts/:id/vpn_profile",
		methods: {
			GET: {
				action: "vpn.profile",
				role: "operator",
				audited: true,
				summary: "The host's Pritunl profile archive (tar; it holds the host's VPN keys: audited)",
			},
		},
	},
	{
		path: "hosts/:id",
		methods: {
			...readItem("hosts"),
			POST: {
				...needsMaster(withBody(json("cm-gateway.runOnHost", "operator", "host"), RUN_BODY)),
				summary: "Run a Salt function on the host (authorized and audited before it runs)",
			},
			PATCH: json("hosts.patch", "admin"),
			DELETE: none("hosts.remove", "admin"),
		},
	},

	{
		path: "inventory/sync",
		methods: {
			POST: {
				...needsMaster(none("cm-gateway.sync", "operator")),
				summary:
					"Reconcile the inventory with the master now (keys, fingerprints, presence, grains); progress in /jobs/inventory_sync",
			},
		},
	},
	{ path: "hosts_statistic", methods: read("stats") },
	{ path: "hosts_statistic/:id", methods: readItem("stats") },

	{
		path: "tasks",
		methods: {
			...read("tasks"),
			POST: json("tasks.create", "operator", "task"),
			PUT: { ...json("tasks.replace", "operator", "task"), summary: "Change a task, named by its _id in the body" },
		},
	},
	{
		path: "tasks/preview",
		methods: {
			POST: {
				...json("tasks.previewSchedule", "viewer"),
				computes: true,
				summary: "The next due times of a schedule not saved yet (a task's start, end, interval, cron and timezone)",
				query: [
					{
						name: "count",
						description: "How many (1 to 1000, default 10)",
						schema: { type: "integer", minimum: 1, maximum: 1000 },
					},
				],
			},
		},
	},
	{
		path: "tasks/:id/preview",
		methods: {
			GET: {
				...get("tasks.preview"),
				summary: "The task's next due times",
				query: [
					{
						name: "count",
						description: "How many (1 to 1000, default 10)",
						schema: { type: "integer", minimum: 1, maximum: 1000 },
					},
				],
			},
		},
	},
	{
		path: "tasks/:id/:status",
		methods: {
			PATCH: { ...none("tasks.setStatus", "operator"), summary: "Pause (paused) or resume (scheduled) a task" },
		},
	},
	{ path: "tasks/:id", methods: { ...readItem("tasks"), DELETE: none("tasks.remove", "operator") } },

	{
		path: "conformity_checks",
		methods: { ...read("conformity-checks"), POST: json("conformity-checks.create", "operator", "rollout") },
	},
	{
		path: "conformity_checks/:id",
		methods: {
			...readItem("conformity-checks"),
			PATCH: json("conformity-checks.patch", "operator", "rollout"),
			DELETE: none("conformity-checks.remove", "operator"),
		},
	},
	{
		path: "conformity_rules",
		methods: { ...read("conformity-rules"), POST: json("conformity-rules.create", "operator") },
	},
	{
		path: "conformity_rules/:id",
		methods: {
			...readItem("conformity-rules"),
			PATCH: json("conformity-rules.patch", "operator"),
			DELETE: none("conformity-rules.remove", "operator"),
		},
	},
	{
		path: "conformity/fix",
		methods: {
			POST: {
				...needsMaster(json("conformity.fixTarget", "operator", "target")),
				summary:
					"Fix only the drifted states of the hosts a target selects: one host at once, several as one rollout per drifted state, then a new check",
			},
		},
	},
	{
		path: "conformity",
		methods: {
			GET: {
				...get("conformity.fleetView"),
				summary:
					"The fleet's hosts by conformity (conformant, drifted, failing, unknown) and the states that differ on most hosts",
			},
		},
	},

	{
		path: "rollouts",
		methods: {
			...read("rollouts"),
			POST: {
				...json("rollouts.create", "operator", "rollout"),
				summary:
					"Start a rollout: the target resolved now, the call authorized on every host, then canary and batches, paused past the failure budget",
			},
		},
	},
	{
		path: "rollouts/:id/:action",
		methods: {
			PATCH: {
				...none("rollouts.control", "operator"),
				summary: "pause, resume (the failures so far accepted) or abort a rollout",
			},
		},
	},
	{ path: "rollouts/:id", methods: readItem("rollouts") },

	{
		path: "actions/stream",
		methods: {
			GET: {
				action: "api.returnStream",
				role: "viewer",
				events: true,
				summary:
					"The jobs whose returns were just recorded, as server-sent events (one `returns` event per job and batch), for pages that follow a job",
				query: [{ name: "jid", description: "Only this job's", schema: { type: "string", pattern: "^[0-9]{20}$" } }],
			},
		},
	},
	{ path: "actions", methods: read("actions") },
	{ path: "actions/:id", methods: readItem("actions") },

	{ path: "salt_jobs", methods: read("salt-jobs") },
	{ path: "salt_jobs/:id", methods: readItem("salt-jobs") },
	{ path: "failed_patches", methods: read("failed-patches") },
	{ path: "failed_patches/:id", methods: readItem("failed-patches") },

	{
		path: "updates",
		methods: {
			...read("updates"),
			POST: {
				...needsMaster(none("cm-gateway.loadUpdates", "operator")),
				summary: "Read the patches on the master's file server into updates",
			},
		},
	},
	{ path: "updates/:id", methods: { ...readItem("updates"), PATCH: json("updates.patch", "operator") } },

	{ path: "alerts", methods: { GET: { ...read("alerts", "viewer", MARK_AS_READ).GET, writesWith: "mark_as_read" } } },
	{
		path: "alerts/stream",
		methods: {
			GET: {
				action: "api.alertStream",
				role: "viewer",
				events: true,
				summary: "New alerts as server-sent events, pushed as they are raised",
			},
		},
	},
	{
		path: "alerts/:id",
		methods: { GET: { ...readItem("alerts", "viewer", MARK_AS_READ).GET, writesWith: "mark_as_read" } },
	},

	{ path: "settings", methods: read("settings") },
	{ path: "settings/:id", methods: { ...readItem("settings"), PATCH: json("settings.patch", "admin") } },

	{
		path: "files",
		methods: {
			...read("files"),
			POST: { action: "files.upload", role: "admin", body: "stream", summary: "Upload a file (multipart/form-data)" },
		},
	},
	{ path: "files/:id", methods: { ...readItem("files"), DELETE: none("files.remove", "admin") } },
	{ path: "media/:id", methods: { GET: { ...get("media.get"), summary: "A file's content" } } },

	{ path: "vpn_managers", methods: { ...read("vpn-managers"), POST: json("vpn-managers.create", "admin") } },
	{ path: "vpn_managers/:id", methods: { ...readItem("vpn-managers"), DELETE: none("vpn-managers.remove", "admin") } },

	{
		path: "vpn_organizations",
		methods: {
			...read("vpn-organizations"),
			POST: {
				...json("vpn.createOrganization", "admin"),
				summary: "Create an organization in a VPN manager's Pritunl",
			},
		},
	},
	{
		path: "vpn_organizations/:id/sync",
		methods: {
			POST: { ...none("vpn.syncOrganization", "operator"), summary: "Read an organization again from its Pritunl" },
		},
	},
	{
		path: "vpn_organizations/:id",
		methods: {
			...readItem("vpn-organizations"),
			DELETE: { ...none("vpn.deleteOrganization", "admin"), summary: "Delete an organization, in its Pritunl too" },
		},
	},

	{ path: "tokens", methods: { ...read("tokens", "admin"), POST: json("tokens.create", "admin") } },
	{
		path: "tokens/mine",
		methods: {
			GET: {
				...get("tokens.listMine"),
				summary:
					"Your own API tokens (the signed-in person's; a service account token's, those made from it), each naming its maker, never their secrets",
			},
			POST: {
				...json("tokens.createMine", "viewer"),
				summary:
					"An API token for yourself, for scripts: a role at most yours, a scope within yours, for up to a year; its secret is shown once",
				bodySchema: {
					name: { type: "string", min: 1, max: 200 },
					role: { type: "string", optional: true },
					scope: { type: "object", optional: true },
					expires: { type: "string", optional: true },
				},
			},
		},
	},
	{
		path: "tokens/mine/:id",
		methods: {
			DELETE: {
				...none("tokens.revokeMine", "viewer"),
				summary: "Revoke one of your own tokens, and those made from it",
			},
		},
	},
	{ path: "tokens/:id", methods: { ...readItem("tokens", "admin"), DELETE: none("tokens.remove", "admin") } },

	{ path: "audit", methods: read("audit", "admin") },
	{ path: "audit/:id", methods: readItem("audit", "admin") },

	{ path: "webhooks", methods: { ...read("webhooks", "admin"), POST: json("webhooks.create", "admin") } },
	{
		path: "webhooks/:id/deliveries",
		methods: {
			GET: { action: "webhook-deliveries.ofWebhook", role: "admin", summary: "A webhook's deliveries, newest first" },
		},
	},
	{
		path: "webhooks/:id",
		methods: {
			...readItem("webhooks", "admin"),
			PATCH: json("webhooks.patch", "admin"),
			DELETE: none("webhooks.remove", "admin"),
		},
	},
	{ path: "webhook_deliveries", methods: read("webhook-deliveries", "admin") },
	{ path: "webhook_deliveries/:id", methods: readItem("webhook-deliveries", "admin") },

	{
		path: "maintenance_windows",
		methods: { ...read("maintenance-windows"), POST: json("maintenance-windows.create", "admin") },
	},
	{
		path: "maintenance_windows/:id/preview",
		methods: {
			GET: {
				...get("maintenance-windows.preview"),
				summary: "The window's next openings, and the one open now",
				query: [COUNT],
			},
		},
	},
	{
		path: "maintenance_windows/:id",
		methods: {
			...readItem("maintenance-windows"),
			PATCH: json("maintenance-windows.patch", "admin"),
			DELETE: none("maintenance-windows.remove", "admin"),
		},
	},
	{
		path: "approval_policies",
		methods: { ...read("approval-policies"), POST: json("approval-policies.create", "admin") },
	},
	{
		path: "approval_policies/:id",
		methods: {
			...readItem("approval-policies"),
			PATCH: json("approval-policies.patch", "admin"),
			DELETE: none("approval-policies.remove", "admin"),
		},
	},
	{ path: "approvals", methods: read("approvals", "operator") },
	{
		path: "approvals/stream",
		methods: {
			GET: {
				action: "api.approvalStream",
				role: "operator",
				events: true,
				summary: "Approval requests as server-sent events, pushed as they are made, voted on, decided and carried out",
			},
		},
	},
	{
		path: "approvals/:id/:decision",
		methods: {
			POST: {
				...json("approvals.decide", "operator"),
				summary: "approve or reject a request, with a comment: the vote that completes its approvals runs it (once)",
				bodySchema: { comment: { type: "string", max: 2000, optional: true } },
			},
		},
	},
	{ path: "approvals/:id", methods: readItem("approvals", "operator") },

	{
		path: "whoami",
		methods: {
			GET: { action: "api.whoami", role: "viewer", summary: "The caller: token name, role, scope and principal" },
		},
	},
	{
		path: "openapi.json",
		methods: {
			GET: {
				action: "api.openapi",
				role: "viewer",
				summary: "This document: OpenAPI 3.1, generated from the route table and the collections' schemas",
			},
		},
	},
];

/** Every action the gateway may call: its whitelist. */
export const PUBLISHED_ACTIONS = [
	...new Set(ROUTES.flatMap(r => Object.values(r.methods).map(m => (m as RouteMethod).action))),
	"api.root",
];
