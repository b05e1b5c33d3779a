/**
 * The /api routing table: every path of the interface spec, the action behind each method, and
 * nothing else (the gateway publishes no other action). A method a path does not list is a 405.
 * Paths use path-to-regexp 8 syntax; more specific paths come first.
 */

/** How the gateway hands the request to the action. */
export type BodyKind = "json" | "none" | "stream";

export interface RouteMethod {
	action: string;
	body?: BodyKind;
	/** The gateway may keep this read's response until that service's collection changes. */
	cachedBy?: string;
}

export interface RouteDef {
	path: string;
	methods: Partial<Record<"GET" | "POST" | "PATCH" | "PUT" | "DELETE", RouteMethod>>;
}

/** Collections listed by GET /api/, in the spec's order. */
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
];

const read = (service: string) => ({ GET: { action: `${service}.list`, cachedBy: service } });
const readItem = (service: string) => ({ GET: { action: `${service}.get`, cachedBy: service } });
const json = (action: string): RouteMethod => ({ action, body: "json" });
const none = (action: string): RouteMethod => ({ action, body: "none" });

export const ROUTES: RouteDef[] = [
	{ path: "groups", methods: { ...read("groups"), POST: json("groups.create"), DELETE: none("groups.removeWhere") } },
	{ path: "groups/:id/subgroups", methods: { GET: { action: "groups.subgroups" } } },
	{ path: "groups/:id/hostnames", methods: { GET: { action: "groups.hostnames" } } },
	{
		path: "groups/:id",
		methods: { ...readItem("groups"), POST: json("cm-gateway.runOnGroup"), PATCH: json("groups.patch"), DELETE: none("groups.remove") },
	},

	{ path: "graph", methods: { POST: json("graph.run") } },
	{ path: "graph/not-linked", methods: { GET: { action: "graph.notLinked" } } },
	{ path: "graph/:id/nodes", methods: { GET: { action: "graph.nodes" } } },
	{ path: "graph/:id/edges", methods: { GET: { action: "graph.edges" } } },
	{ path: "graph/:id", methods: { GET: { action: "graph.get" } } },

	{ path: "nodegroups", methods: read("nodegroups") },
	{ path: "nodegroups/:id", methods: readItem("nodegroups") },

	{ path: "hosts/statistics/online", methods: { GET: { action: "stats.online" } } },
	{ path: "hosts/statistics/unique_online", methods: { GET: { action: "stats.uniqueOnline" } } },
	{ path: "hosts/statistics/unique_updated", methods: { GET: { action: "stats.uniqueUpdated" } } },
	{ path: "hosts/statistics/unique_dist_upgraded", methods: { GET: { action: "stats.uniqueDistUpgraded" } } },
	{ path: "hosts/statistics/new_hosts", methods: { GET: { action: "stats.newHosts" } } },
	{ path: "hosts", methods: read("hosts") },
	{ path: "hosts/:id/all_status", methods: { POST: json("cm-gateway.allStatus") } },
	{
		path: "hosts/:id",
		methods: { ...readItem("hosts"), POST: json("cm-gateway.runOnHost"), PATCH: json("hosts.patch"), DELETE: none("hosts.remove") },
	},

	{ path: "hosts_statistic", methods: read("stats") },
	{ path: "hosts_statistic/:id", methods: readItem("stats") },

	{ path: "tasks", methods: { ...read("tasks"), POST: json("tasks.create"), PUT: json("tasks.replace") } },
	{ path: "tasks/:id/:status", methods: { PATCH: none("tasks.setStatus") } },
	{ path: "tasks/:id", methods: { ...readItem("tasks"), DELETE: none("tasks.remove") } },

	{ path: "actions", methods: read("actions") },
	{ path: "actions/:id", methods: readItem("actions") },

	{ path: "failed_patches", methods: read("failed-patches") },
	{ path: "failed_patches/:id", methods: readItem("failed-patches") },

	{ path: "updates", methods: { ...read("updates"), POST: none("cm-gateway.loadUpdates") } },
	{ path: "updates/:id", methods: { ...readItem("updates"), PATCH: json("updates.patch") } },

	{ path: "alerts", methods: read("alerts") },
	{ path: "alerts/:id", methods: readItem("alerts") },

	{ path: "settings", methods: read("settings") },
	{ path: "settings/:id", methods: { ...readItem("settings"), PATCH: json("settings.patch") } },

	{ path: "files", methods: { ...read("files"), POST: { action: "files.upload", body: "stream" } } },
	{ path: "files/:id", methods: { ...readItem("files"), DELETE: none("files.remove") } },
	{ path: "media/:id", methods: { GET: { action: "media.get" } } },

	{ path: "vpn_managers", methods: { ...read("vpn-managers"), POST: json("vpn-managers.create") } },
	{ path: "vpn_managers/:id", methods: { ...readItem("vpn-managers"), DELETE: none("vpn-managers.remove") } },

	{ path: "vpn_organizations", methods: { ...read("vpn-organizations"), POST: json("vpn.createOrganization") } },
	{ path: "vpn_organizations/:id", methods: { ...readItem("vpn-organizations"), DELETE: none("vpn.deleteOrganization") } },
];

/** Every action the gateway may call: its whitelist. */
export const PUBLISHED_ACTIONS = [...new Set(ROUTES.flatMap(r => Object.values(r.methods).map(m => (m as RouteMethod).action))), "api.root"];
