/**
 * Access control (issue 3): a route × caller matrix over every path and method of the route table, whose
 * expected answers come from a literal table of the least role of each (written from docs/security.md, not
 * read from lib/http/routes.ts or computed by lib/http/auth.ts), tokens (shown once,
 * never listed, revoked at once), scopes on remote execution and tasks, the audit log after a scripted
 * session, and a scan of every response (and, on the split leg, every process log) for planted secrets.
 *
 * Every record it writes is its own (names and hostnames start with "acc-"), and its matrix only sends
 * requests that cannot change anything: unknown ids, bodies that fail validation, routes whose service
 * is not there yet.
 */
import { randomBytes } from "node:crypto";
import type { Harness } from "../../support/harness";
import { ADMIN_TOKEN } from "../../support/harness";
import { request as send, withQuery, expectEveError, type Reply, type RequestOptions } from "../../support/http";
import { ROUTES, type RouteMethod } from "../../../lib/http/routes";
import type { Role } from "../../../lib/http/auth";
import { withholdArgs, withholdKwarg } from "../../../lib/security/masking";
import { VPN_SECRETS } from "./vpn";
import { PritunlSimulator } from "../../simulators/pritunl";

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));
const rand = () => randomBytes(6).toString("hex");
const UNKNOWN_ID = "0000000000000000000acc00";
const UNKNOWN_JOB = "00000000000000000000acc-none";
const UNKNOWN_HOST = "acc-no-such-host";
const MASK = "********";

/** Who calls: an Authorization header (or none), and for valid tokens the role and whether the probe is outside its scope. */
interface Caller {
	name: string;
	header: () => string | null;
	role?: Role;
}

/**
 * The least role that may call each path and method, written from docs/security.md's roles table ("Roles"):
 * a viewer reads every collection, the graph, statistics and media — not tokens, audit, webhooks, webhook
 * deliveries or VPN profiles; an operator also runs remote execution (POST /hosts/{id}, POST /groups/{id},
 * all_status), manages tasks, loads and describes patches (POST /updates, PATCH /updates/{id}), downloads a
 * host's VPN profile and syncs a VPN organization; everything else is an admin's. `whoami` and `openapi.json`
 * are for any role (docs/api.md, docs/dashboard.md), and so is a target preview (it reads, docs/targeting.md). Kept by hand: it is the oracle, not a copy of the table.
 */
const LEAST_ROLE: Record<string, Role> = {
	"GET groups": "viewer",
	"POST groups": "admin",
	"DELETE groups": "admin",
	"GET groups/:id/subgroups": "viewer",
	"GET groups/:id/hostnames": "viewer",
	"GET groups/:id": "viewer",
	"POST groups/:id": "operator",
	"POST run": "operator",
	"PATCH groups/:id": "admin",
	"DELETE groups/:id": "admin",
	"POST graph": "admin",
	"GET graph/not-linked": "viewer",
	"GET graph/:id/nodes": "viewer",
	"GET graph/:id/edges": "viewer",
	"GET graph/:id": "viewer",
	"GET graph_jobs": "viewer",
	"GET graph_jobs/:id": "viewer",
	"GET jobs": "viewer",
	"GET jobs/:id": "viewer",
	"GET nodegroups": "viewer",
	"GET nodegroups/:id": "viewer",
	"GET hosts/statistics/online": "viewer",
	"GET hosts/statistics/unique_online": "viewer",
	"GET hosts/statistics/unique_updated": "viewer",
	"GET hosts/statistics/unique_dist_upgraded": "viewer",
	"GET hosts/statistics/new_hosts": "viewer",
	"GET hosts": "viewer",
	"POST hosts/:id/all_status": "operator",
	"POST inventory/sync": "operator",
	"GET hosts/:id/vpn_profile": "operator",
	"GET hosts/:id": "viewer",
	"POST hosts/:id": "operator",
	"PATCH hosts/:id": "admin",
	"DELETE hosts/:id": "admin",
	"GET hosts_statistic": "viewer",
	"GET hosts_statistic/:id": "viewer",
	"GET tasks": "viewer",
	"POST tasks": "operator",
	"PUT tasks": "operator",
	"GET tasks/:id/preview": "viewer",
	"POST tasks/preview": "viewer",
	"PATCH tasks/:id/:status": "operator",
	"GET tasks/:id": "viewer",
	"DELETE tasks/:id": "operator",
	"GET conformity": "viewer",
	"GET hosts/:id/conformity": "viewer",
	"POST hosts/:id/conformity/fix": "operator",
	"POST conformity/fix": "operator",
	"GET conformity_checks": "viewer",
	"POST conformity_checks": "operator",
	"GET conformity_checks/:id": "viewer",
	"PATCH conformity_checks/:id": "operator",
	"DELETE conformity_checks/:id": "operator",
	"GET conformity_rules": "viewer",
	"POST conformity_rules": "operator",
	"GET conformity_rules/:id": "viewer",
	"PATCH conformity_rules/:id": "operator",
	"DELETE conformity_rules/:id": "operator",
	"GET rollouts": "viewer",
	"POST rollouts": "operator",
	"PATCH rollouts/:id/:action": "operator",
	"GET rollouts/:id": "viewer",
	"GET actions": "viewer",
	"GET actions/:id": "viewer",
	"GET salt_jobs": "viewer",
	"GET salt_jobs/:id": "viewer",
	"GET failed_patches": "viewer",
	"GET failed_patches/:id": "viewer",
	"GET updates": "viewer",
	"POST updates": "operator",
	"GET updates/:id": "viewer",
	"PATCH updates/:id": "operator",
	"GET alerts": "viewer",
	"GET alerts/stream": "viewer",
	"GET actions/stream": "viewer",
	"GET alerts/:id": "viewer",
	"GET settings": "viewer",
	"GET settings/:id": "viewer",
	"PATCH settings/:id": "admin",
	"GET files": "viewer",
	"POST files": "admin",
	"GET files/:id": "viewer",
	"DELETE files/:id": "admin",
	"GET media/:id": "viewer",
	"GET vpn_managers": "viewer",
	"POST vpn_managers": "admin",
	"GET vpn_managers/:id": "viewer",
	"DELETE vpn_managers/:id": "admin",
	"GET vpn_organizations": "viewer",
	"POST vpn_organizations": "admin",
	"POST vpn_organizations/:id/sync": "operator",
	"GET vpn_organizations/:id": "viewer",
	"DELETE vpn_organizations/:id": "admin",
	"GET tokens": "admin",
	"POST tokens": "admin",
	"GET tokens/mine": "viewer",
	"POST tokens/mine": "viewer",
	"DELETE tokens/mine/:id": "viewer",
	"GET tokens/:id": "admin",
	"DELETE tokens/:id": "admin",
	"GET audit": "admin",
	"GET audit/:id": "admin",
	"GET webhooks": "admin",
	"POST webhooks": "admin",
	"GET webhooks/:id/deliveries": "admin",
	"GET webhooks/:id": "admin",
	"PATCH webhooks/:id": "admin",
	"DELETE webhooks/:id": "admin",
	"GET webhook_deliveries": "admin",
	"GET webhook_deliveries/:id": "admin",
	"GET whoami": "viewer",
	"GET openapi.json": "viewer",
	"POST targets/preview": "viewer",
	"GET hosts/:id/maintenance_windows": "viewer",
	"GET maintenance_windows": "viewer",
	"POST maintenance_windows": "admin",
	"GET maintenance_windows/:id/preview": "viewer",
	"GET maintenance_windows/:id": "viewer",
	"PATCH maintenance_windows/:id": "admin",
	"DELETE maintenance_windows/:id": "admin",
	"GET approval_policies": "viewer",
	"POST approval_policies": "admin",
	"GET approval_policies/:id": "viewer",
	"PATCH approval_policies/:id": "admin",
	"DELETE approval_policies/:id": "admin",
	"GET approvals": "operator",
	"GET approvals/stream": "operator",
	"POST approvals/:id/:decision": "operator",
	"GET approvals/:id": "operator",
};

/** The roles that may do what `least` may, from docs/security.md: an operator may do what a viewer may, an admin everything. */
const ROLES_FROM: Record<Role, Role[]> = {
	viewer: ["viewer", "operator", "admin"],
	operator: ["operator", "admin"],
	admin: ["admin"],
};

/** A harmless request on one route and the status an allowed caller gets. */
interface Probe {
	path: string;
	body?: unknown;
	status: number;
}

export default function access(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const as = (token: string | null, opts: RequestOptions = {}): RequestOptions => ({ ...opts, token });
	const created = async (res: Reply): Promise<string> => {
		if (res.status !== 201) throw new Error(`expected 201, got ${res.status}: ${res.text}`);
		return res.body._id;
	};
	const newToken = async (body: Record<string, unknown>): Promise<{ id: string; secret: string }> => {
		const res = await send("POST", url("tokens"), { body });
		if (res.status !== 201) throw new Error(`token not created: ${res.status} ${res.text}`);
		return { id: res.body._id, secret: res.body.token };
	};

	// Hosts in the operators' scope (directly and through a subgroup), and one outside it.
	const IN = "acc-in-1";
	const IN_SUB = "acc-in-sub-1";
	const OUT = "acc-out-1";
	const fx: Record<string, string> = {};
	const tokens: Record<string, { id: string; secret: string }> = {};

	beforeAll(async () => {
		// An expiring token first: it must outlive its first use and be past its expiry by the matrix.
		const expiresAt = Date.now() + 2500;
		tokens.expired = await newToken({
			name: "acc-expiring",
			role: "viewer",
			expires: new Date(expiresAt).toISOString(),
		});
		expect((await send("GET", url("settings/0"), as(tokens.expired.secret))).status).toBe(200);

		await h().call("hosts.upsertMany", {
			hosts: [IN, IN_SUB, OUT].map(_id => ({ _id, status: "up", key: "accepted" })),
		});
		fx.sub = await created(await send("POST", url("groups"), { body: { name: "acc-scope-sub", hosts: [IN_SUB] } }));
		fx.scope = await created(
			await send("POST", url("groups"), { body: { name: "acc-scope", hosts: [IN], subgroups: [fx.sub] } }),
		);
		fx.elsewhere = await created(await send("POST", url("groups"), { body: { name: "acc-elsewhere", hosts: [OUT] } }));
		fx.mixed = await created(await send("POST", url("groups"), { body: { name: "acc-mixed", hosts: [IN, OUT] } }));
		fx.task = await created(
			await send("POST", url("tasks"), {
				body: { name: "acc-task", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" },
			}),
		);

		tokens.viewer = await newToken({ name: "acc-viewer", role: "viewer" });
		tokens.opIn = await newToken({
			name: "acc-op-in",
			role: "operator",
			scope: { groups: [fx.scope], functions: ["test.*", "status.all_status"] },
		});
		tokens.opOut = await newToken({
			name: "acc-op-out",
			role: "operator",
			scope: { groups: [fx.elsewhere], functions: ["state.*"] },
		});

		// Revoked after it was used once, so the gateway had it cached.
		tokens.revoked = await newToken({ name: "acc-revoked", role: "admin" });
		expect((await send("GET", url("settings/0"), as(tokens.revoked.secret))).status).toBe(200);
		expect((await send("DELETE", url(`tokens/${tokens.revoked.id}`))).status).toBe(204);

		await sleep(Math.max(0, expiresAt - Date.now() + 300));
	}, 30_000);

	const callers: Caller[] = [
		{ name: "no token", header: () => null },
		{ name: "malformed header", header: () => `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString("base64")}` },
		{ name: "unknown token", header: () => `Bearer fct_${randomBytes(32).toString("base64url")}` },
		{ name: "expired token", header: () => `Bearer ${tokens.expired.secret}` },
		{ name: "revoked token", header: () => `Bearer ${tokens.revoked.secret}` },
		{ name: "viewer", header: () => `Bearer ${tokens.viewer.secret}`, role: "viewer" },
		{ name: "operator in scope", header: () => `Bearer ${tokens.opIn.secret}`, role: "operator" },
		{ name: "operator out of scope", header: () => `Bearer ${tokens.opOut.secret}`, role: "operator" },
		{ name: "admin", header: () => `Bearer ${ADMIN_TOKEN}`, role: "admin" },
	];

	const STAT_RANGE = `range[]=${encodeURIComponent("Mon, 01 Jan 2024 00:00:00 GMT")}&range[]=${encodeURIComponent("Tue, 02 Jan 2024 00:00:00 GMT")}`;

	/** One harmless request per route and method of lib/http/routes.ts. */
	const probes = (): Record<string, Probe> => ({
		"GET groups": { path: "groups", status: 200 },
		"POST groups": { path: "groups", body: {}, status: 422 },
		"DELETE groups": { path: "groups", status: 400 },
		"GET groups/:id/subgroups": { path: `groups/${fx.scope}/subgroups`, status: 200 },
		"GET groups/:id/hostnames": { path: `groups/${fx.scope}/hostnames`, status: 200 },
		"GET groups/:id": { path: `groups/${fx.scope}`, status: 200 },
		"POST groups/:id": { path: `groups/${fx.scope}`, body: { cm_client: "local", fun: "test.ping" }, status: 503 },
		"POST run": { path: "run", body: { target: "acc-*", cm_client: "local", fun: "test.ping" }, status: 503 },
		"PATCH groups/:id": { path: `groups/${UNKNOWN_ID}`, body: { name: "x" }, status: 404 },
		"DELETE groups/:id": { path: `groups/${UNKNOWN_ID}`, status: 404 },
		"POST graph": { path: "graph", body: {}, status: 422 },
		"GET graph_jobs": { path: "graph_jobs", status: 200 },
		"GET graph_jobs/:id": { path: "graph_jobs/no-such-action", status: 404 },
		"GET graph/not-linked": { path: "graph/not-linked", status: 200 },
		"GET graph/:id/nodes": { path: `graph/${fx.scope}/nodes`, status: 200 },
		"GET graph/:id/edges": { path: `graph/${fx.scope}/edges`, status: 200 },
		"GET graph/:id": { path: `graph/${fx.scope}`, status: 200 },
		"GET nodegroups": { path: "nodegroups", status: 200 },
		"GET nodegroups/:id": { path: `nodegroups/${UNKNOWN_ID}`, status: 404 },
		"GET hosts/statistics/online": { path: `hosts/statistics/online?${STAT_RANGE}&interval=3600`, status: 200 },
		"GET hosts/statistics/unique_online": { path: `hosts/statistics/unique_online?${STAT_RANGE}`, status: 200 },
		"GET hosts/statistics/unique_updated": { path: `hosts/statistics/unique_updated?${STAT_RANGE}`, status: 200 },
		"GET hosts/statistics/unique_dist_upgraded": {
			path: `hosts/statistics/unique_dist_upgraded?${STAT_RANGE}`,
			status: 200,
		},
		"GET hosts/statistics/new_hosts": { path: `hosts/statistics/new_hosts?${STAT_RANGE}`, status: 200 },
		"GET hosts": { path: "hosts", status: 200 },
		"POST hosts/:id/all_status": { path: `hosts/${IN}/all_status`, body: {}, status: 503 },
		"POST inventory/sync": { path: "inventory/sync", status: 503 },
		"GET hosts/:id/vpn_profile": { path: `hosts/${UNKNOWN_HOST}/vpn_profile`, status: 404 },
		"GET hosts/:id": { path: `hosts/${IN}`, status: 200 },
		"POST hosts/:id": { path: `hosts/${IN}`, body: { fun: "test.ping" }, status: 503 },
		"PATCH hosts/:id": { path: `hosts/${UNKNOWN_HOST}`, body: { identification_number: "x" }, status: 404 },
		"DELETE hosts/:id": { path: `hosts/${UNKNOWN_HOST}`, status: 404 },
		"GET hosts_statistic": { path: "hosts_statistic", status: 200 },
		"GET hosts_statistic/:id": { path: `hosts_statistic/${UNKNOWN_ID}`, status: 404 },
		"GET tasks": { path: "tasks", status: 200 },
		// In scope for the operator in scope (test.ping on acc-in-1), then refused by the task schema.
		"POST tasks": {
			path: "tasks",
			body: { name: "", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" },
			status: 422,
		},
		"PUT tasks": { path: "tasks", body: { _id: fx.task, fun: "test.ping", name: "" }, status: 422 },
		"GET tasks/:id/preview": { path: `tasks/${fx.task}/preview`, status: 200 },
		"POST tasks/preview": { path: "tasks/preview", body: { start: "2030-01-01 00:00", interval: 3600 }, status: 200 },
		"PATCH tasks/:id/:status": { path: `tasks/${fx.task}/bogus`, status: 422 },
		"GET tasks/:id": { path: `tasks/${fx.task}`, status: 200 },
		"DELETE tasks/:id": { path: `tasks/${UNKNOWN_ID}`, status: 404 },
		"GET conformity": { path: "conformity", status: 200 },
		"GET hosts/:id/conformity": { path: `hosts/${IN}/conformity`, status: 200 },
		"POST hosts/:id/conformity/fix": { path: `hosts/${UNKNOWN_HOST}/conformity/fix`, status: 404 },
		"POST conformity/fix": { path: "conformity/fix", body: {}, status: 422 },
		"GET conformity_checks": { path: "conformity_checks", status: 200 },
		"POST conformity_checks": { path: "conformity_checks", body: { name: "", target: IN, interval: 600 }, status: 422 },
		"GET conformity_checks/:id": { path: `conformity_checks/${UNKNOWN_ID}`, status: 404 },
		"PATCH conformity_checks/:id": { path: `conformity_checks/${UNKNOWN_ID}`, body: { name: "x" }, status: 404 },
		"DELETE conformity_checks/:id": { path: `conformity_checks/${UNKNOWN_ID}`, status: 404 },
		"GET conformity_rules": { path: "conformity_rules", status: 200 },
		"POST conformity_rules": { path: "conformity_rules", body: { reason: "" }, status: 422 },
		"GET conformity_rules/:id": { path: `conformity_rules/${UNKNOWN_ID}`, status: 404 },
		"PATCH conformity_rules/:id": { path: `conformity_rules/${UNKNOWN_ID}`, body: { reason: "x" }, status: 404 },
		"DELETE conformity_rules/:id": { path: `conformity_rules/${UNKNOWN_ID}`, status: 404 },
		"GET rollouts": { path: "rollouts", status: 200 },
		"POST rollouts": { path: "rollouts", body: { name: "", target: IN, fun: "test.ping" }, status: 422 },
		"PATCH rollouts/:id/:action": { path: `rollouts/${UNKNOWN_ID}/pause`, status: 404 },
		"GET rollouts/:id": { path: `rollouts/${UNKNOWN_ID}`, status: 404 },
		"GET actions": { path: "actions", status: 200 },
		"GET actions/:id": { path: `actions/${UNKNOWN_JOB}`, status: 404 },
		"GET salt_jobs": { path: "salt_jobs", status: 200 },
		"GET salt_jobs/:id": { path: "salt_jobs/20000101000000000000", status: 404 },
		"GET failed_patches": { path: "failed_patches", status: 200 },
		"GET failed_patches/:id": { path: `failed_patches/${UNKNOWN_JOB}`, status: 404 },
		"GET updates": { path: "updates", status: 200 },
		"POST updates": { path: "updates", status: 503 },
		"GET updates/:id": { path: `updates/${UNKNOWN_ID}`, status: 404 },
		"PATCH updates/:id": { path: `updates/${UNKNOWN_ID}`, body: { description: "x" }, status: 404 },
		"GET alerts": { path: "alerts", status: 200 },
		"GET alerts/:id": { path: `alerts/${UNKNOWN_ID}`, status: 404 },
		"GET settings": { path: "settings", status: 200 },
		"GET settings/:id": { path: "settings/0", status: 200 },
		"PATCH settings/:id": { path: "settings/0", body: { addresses: 5 }, status: 422 },
		"GET files": { path: "files", status: 200 },
		"POST files": { path: "files", body: {}, status: 400 },
		"GET files/:id": { path: `files/${UNKNOWN_ID}`, status: 404 },
		"DELETE files/:id": { path: `files/${UNKNOWN_ID}`, status: 404 },
		"GET media/:id": { path: `media/${UNKNOWN_ID}`, status: 404 },
		"GET vpn_managers": { path: "vpn_managers", status: 200 },
		"POST vpn_managers": { path: "vpn_managers", body: {}, status: 422 },
		"GET vpn_managers/:id": { path: `vpn_managers/${UNKNOWN_ID}`, status: 404 },
		"DELETE vpn_managers/:id": { path: `vpn_managers/${UNKNOWN_ID}`, status: 404 },
		"GET vpn_organizations": { path: "vpn_organizations", status: 200 },
		"POST vpn_organizations": { path: "vpn_organizations", body: {}, status: 422 },
		"POST vpn_organizations/:id/sync": { path: `vpn_organizations/${UNKNOWN_ID}/sync`, status: 404 },
		"GET vpn_organizations/:id": { path: `vpn_organizations/${UNKNOWN_ID}`, status: 404 },
		// Not the Eve mixin's DELETE (services/vpn/vpn.service.ts deleteOrganization): still 204 for an absent id.
		"DELETE vpn_organizations/:id": { path: `vpn_organizations/${UNKNOWN_ID}`, status: 404 },
		"GET tokens": { path: "tokens", status: 200 },
		"POST tokens": { path: "tokens", body: {}, status: 422 },
		"GET tokens/:id": { path: `tokens/${tokens.viewer.id}`, status: 200 },
		"GET tokens/mine": { path: "tokens/mine", status: 200 },
		"POST tokens/mine": { path: "tokens/mine", body: {}, status: 422 },
		"DELETE tokens/mine/:id": { path: `tokens/mine/${UNKNOWN_ID}`, status: 404 },
		"DELETE tokens/:id": { path: `tokens/${UNKNOWN_ID}`, status: 404 },
		"GET audit": { path: "audit", status: 200 },
		"GET audit/:id": { path: `audit/${UNKNOWN_ID}`, status: 404 },
		"GET jobs": { path: "jobs", status: 200 },
		"GET jobs/:id": { path: "jobs/no_such_job", status: 404 },
		"GET alerts/stream": { path: "alerts/stream?timeout=0", status: 200 },
		"GET actions/stream": { path: "actions/stream?timeout=0", status: 200 },
		"GET webhooks": { path: "webhooks", status: 200 },
		"POST webhooks": { path: "webhooks", body: {}, status: 422 },
		"GET webhooks/:id/deliveries": { path: `webhooks/${UNKNOWN_ID}/deliveries`, status: 404 },
		"GET webhooks/:id": { path: `webhooks/${UNKNOWN_ID}`, status: 404 },
		"PATCH webhooks/:id": { path: `webhooks/${UNKNOWN_ID}`, body: { description: "x" }, status: 404 },
		"DELETE webhooks/:id": { path: `webhooks/${UNKNOWN_ID}`, status: 404 },
		"GET webhook_deliveries": { path: "webhook_deliveries", status: 200 },
		"GET webhook_deliveries/:id": { path: `webhook_deliveries/${UNKNOWN_ID}`, status: 404 },
		"GET whoami": { path: "whoami", status: 200 },
		"GET openapi.json": { path: "openapi.json", status: 200 },
		"POST targets/preview": { path: "targets/preview", body: { target: "acc-*" }, status: 200 },
		"GET hosts/:id/maintenance_windows": { path: `hosts/${IN}/maintenance_windows`, status: 200 },
		"GET maintenance_windows": { path: "maintenance_windows", status: 200 },
		"POST maintenance_windows": { path: "maintenance_windows", body: {}, status: 422 },
		"GET maintenance_windows/:id/preview": { path: `maintenance_windows/${UNKNOWN_ID}/preview`, status: 404 },
		"GET maintenance_windows/:id": { path: `maintenance_windows/${UNKNOWN_ID}`, status: 404 },
		"PATCH maintenance_windows/:id": { path: `maintenance_windows/${UNKNOWN_ID}`, body: { name: "x" }, status: 404 },
		"DELETE maintenance_windows/:id": { path: `maintenance_windows/${UNKNOWN_ID}`, status: 404 },
		"GET approval_policies": { path: "approval_policies", status: 200 },
		"POST approval_policies": { path: "approval_policies", body: {}, status: 422 },
		"GET approval_policies/:id": { path: `approval_policies/${UNKNOWN_ID}`, status: 404 },
		"PATCH approval_policies/:id": { path: `approval_policies/${UNKNOWN_ID}`, body: { name: "x" }, status: 404 },
		"DELETE approval_policies/:id": { path: `approval_policies/${UNKNOWN_ID}`, status: 404 },
		"GET approvals": { path: "approvals", status: 200 },
		"GET approvals/stream": { path: "approvals/stream?timeout=0", status: 200 },
		"POST approvals/:id/:decision": { path: `approvals/${UNKNOWN_ID}/approve`, body: { comment: "x" }, status: 404 },
		"GET approvals/:id": { path: `approvals/${UNKNOWN_ID}`, status: 404 },
	});

	/** The root and methods no path lists: any valid token (viewer up) gets the root, and 405 for the rest. */
	const extras: Array<{ method: string; probe: Probe }> = [
		{ method: "GET", probe: { path: "", status: 200 } },
		{ method: "PUT", probe: { path: "groups", body: {}, status: 405 } },
		{ method: "POST", probe: { path: "hosts", body: {}, status: 405 } },
		{ method: "PATCH", probe: { path: `tasks/${UNKNOWN_ID}`, body: {}, status: 405 } },
		{ method: "POST", probe: { path: "audit", body: {}, status: 405 } },
		{ method: "DELETE", probe: { path: "audit", status: 405 } },
		{ method: "PATCH", probe: { path: `audit/${UNKNOWN_ID}`, body: {}, status: 405 } },
		{ method: "DELETE", probe: { path: `audit/${UNKNOWN_ID}`, status: 405 } },
	];

	const routeMethods = () =>
		ROUTES.flatMap(r =>
			(Object.entries(r.methods) as Array<[string, RouteMethod]>).map(([method, def]) => ({
				method,
				path: r.path,
				def,
			})),
		);

	/** What `caller` gets for `probe` on a route whose least role is `least` (LEAST_ROLE): 401 without a valid token, 403 below it. */
	const expectedFor = (caller: Caller, least: Role, probe: Probe): number => {
		if (!caller.role) return 401;
		if (!ROLES_FROM[least].includes(caller.role)) return 403;
		// The scope is decided where a run starts (test/run-authorization.spec.ts): with no master here nothing
		// runs (503), and an invalid task document is refused before anything would run (422), for every operator.
		return probe.status;
	};

	/** Sends one probe as the caller; a description of what was wrong, or null. */
	const check = async (caller: Caller, method: string, probe: Probe, want: number): Promise<string | null> => {
		const header = caller.header();
		const res = await send(method, url(probe.path), {
			token: null,
			headers: header ? { authorization: header } : {},
			body: probe.body,
		});
		const what = `${caller.name}: ${method} /${probe.path}`;
		if (res.status !== want) return `${what} -> ${res.status}, expected ${want}: ${res.text.slice(0, 200)}`;
		if (
			want >= 400 &&
			(res.body?._status !== "ERR" || res.body?._error?.code !== want || typeof res.body?._error?.message !== "string")
		) {
			return `${what} -> not an Eve error body: ${res.text.slice(0, 200)}`;
		}
		if (want === 401 && res.headers.get("www-authenticate") !== 'Bearer realm="fleet-ctl"')
			return `${what} -> 401 without WWW-Authenticate`;
		return null;
	};

	describe("route × caller matrix", () => {
		it("has a harmless probe for every path and method of the route table, and nothing else", () => {
			const table = probes();
			const routed = routeMethods().map(r => `${r.method} ${r.path}`);
			expect(routed.filter(k => !(k in table))).toEqual([]);
			expect(Object.keys(table).filter(k => !routed.includes(k))).toEqual([]);
			// And a least role, written from the docs, for each.
			expect(routed.filter(k => !(k in LEAST_ROLE))).toEqual([]);
			expect(Object.keys(LEAST_ROLE).filter(k => !routed.includes(k))).toEqual([]);
		});

		it("routes each path and method to the least role docs/security.md gives it (LEAST_ROLE): viewer reads all but tokens, audit, webhooks and VPN profiles, operator runs, manages tasks and patches, syncs VPN organizations and downloads VPN profiles, admin the rest", () => {
			const wrong = routeMethods()
				.map(({ method, path, def }) => {
					const key = `${method} ${path}`;
					return def.role === LEAST_ROLE[key] ? null : `${key}: ${def.role}, expected ${LEAST_ROLE[key]}`;
				})
				.filter(Boolean);
			expect(wrong).toEqual([]);
		});

		for (const caller of callers) {
			it(`answers the exact status to: ${caller.name}`, async () => {
				const table = probes();
				const wrong: string[] = [];
				for (const { method, path } of routeMethods()) {
					const key = `${method} ${path}`;
					const probe = table[key];
					if (!probe) continue;
					const problem = await check(caller, method, probe, expectedFor(caller, LEAST_ROLE[key], probe));
					if (problem) wrong.push(problem);
				}
				for (const { method, probe } of extras) {
					const problem = await check(caller, method, probe, expectedFor(caller, "viewer", probe));
					if (problem) wrong.push(problem);
				}
				expect(wrong).toEqual([]);
			});
		}

		/** What a viewer is shown of an admin's answer: hosts' otp_secret masked, runs' arguments withheld (docs/security.md, "What is masked"). */
		const asViewer = (path: string, adminText: string): string => {
			const text = adminText.replace(/"otp_secret":"[^"]*"/g, `"otp_secret":"${MASK}"`);
			// Their records, not their event streams.
			if (!/^(actions|salt_jobs|tasks|rollouts)\b/.test(path) || !text.startsWith("{")) return text;
			const withheld = (d: Record<string, unknown>) => ({
				...d,
				...("args" in d ? { args: withholdArgs(d.args) } : {}),
				...("arg" in d ? { arg: withholdArgs(d.arg) } : {}),
				...("kwarg" in d ? { kwarg: withholdKwarg(d.kwarg) } : {}),
			});
			const body = JSON.parse(text);
			return JSON.stringify(
				Array.isArray(body._items) ? { ...body, _items: body._items.map(withheld) } : withheld(body),
			);
		};

		it("lets a viewer read every route an admin reads, except tokens, audit, webhooks and VPN profiles (403), hosts' otp_secret and runs' arguments", async () => {
			const table = probes();
			const wrong: string[] = [];
			for (const { method, path } of routeMethods().filter(r => r.method === "GET")) {
				const probe = table[`${method} ${path}`];
				const viewer = await send("GET", url(probe.path), as(tokens.viewer.secret));
				const admin = await send("GET", url(probe.path));
				const want = ROLES_FROM[LEAST_ROLE[`${method} ${path}`]].includes("viewer") ? admin.status : 403;
				if (viewer.status !== want) wrong.push(`GET /${probe.path}: viewer ${viewer.status}, admin ${admin.status}`);
				// Admins alone see hosts' otp_secret in clear, operators and admins runs' arguments; whoami answers who asks.
				if (
					want === 200 &&
					path !== "whoami" &&
					viewer.text !== (admin.status === 200 ? asViewer(probe.path, admin.text) : admin.text)
				)
					wrong.push(`GET /${probe.path}: the viewer sees something else`);
			}
			expect(wrong).toEqual([]);
		});

		it("refuses every malformed Authorization header, even around a valid token, with 401", async () => {
			const headers = [
				"",
				"Bearer",
				"Bearer ",
				`Bearer${ADMIN_TOKEN}`,
				`Bearer: ${ADMIN_TOKEN}`,
				`Bearer ${ADMIN_TOKEN} extra`,
				`Bearer ${ADMIN_TOKEN}, Bearer ${ADMIN_TOKEN}`,
				`Basic ${ADMIN_TOKEN}`,
				`Bearer short`,
				`Bearer ${"a".repeat(600)}`,
				`Bearer ${ADMIN_TOKEN.slice(0, -1)}`,
				`Bearer ${ADMIN_TOKEN}\u00e9`,
				ADMIN_TOKEN,
			];
			for (const authorization of headers) {
				const res = await send("GET", url("settings/0"), { token: null, headers: { authorization } });
				expect([authorization, res.status]).toEqual([authorization, 401]);
				expectEveError(res, 401);
			}
			// Nothing of the request is looked at before the token: not its body, its content type or its size.
			for (const opts of [
				{ raw: "{not json", headers: { "content-type": "application/json" } },
				{ raw: "name=x", headers: { "content-type": "text/plain" } },
				{ raw: `{"name":"${"a".repeat(1_200_000)}"}`, headers: { "content-type": "application/json" } },
			]) {
				expectEveError(await send("POST", url("groups"), { ...opts, token: null }), 401);
				expectEveError(await send("POST", url("groups"), { ...opts, token: tokens.viewer.secret }), 403);
				expectEveError(
					await send("POST", url(`hosts/${OUT}`), { ...opts, token: tokens.opOut.secret }),
					opts.raw.length > 1e6 ? 413 : 400,
				);
			}
			// Eve's TokenAuth scheme and any case of the scheme name are accepted.
			expect(
				(await send("GET", url("settings/0"), { token: null, headers: { authorization: `token ${ADMIN_TOKEN}` } }))
					.status,
			).toBe(200);
			expect(
				(await send("GET", url("settings/0"), { token: null, headers: { authorization: `bearer ${ADMIN_TOKEN}` } }))
					.status,
			).toBe(200);
		});
	});

	describe("tokens", () => {
		it("shows the secret once, and it works right away", async () => {
			const res = await send("POST", url("tokens"), { body: { name: "acc-fresh", role: "viewer" } });
			expect(res.status).toBe(201);
			expect(res.body.token).toMatch(/^fct_[A-Za-z0-9_-]{43}$/);
			expect((await send("GET", url("hosts"), as(res.body.token))).status).toBe(200);
			const item = await send("GET", url(`tokens/${res.body._id}`));
			expect(item.status).toBe(200);
			expect(item.body).toMatchObject({
				name: "acc-fresh",
				role: "viewer",
				revoked: false,
				prefix: res.body.token.slice(0, 8),
			});
			expect(item.body.token).toBeUndefined();
			expect(item.text).not.toContain(res.body.token);
		});

		it("never lists a hash or a secret, whatever the query asks for", async () => {
			const secrets = Object.values(tokens).map(t => t.secret);
			for (const query of [
				{},
				{ projection: { hash: 1, token: 1 } },
				{ projection: { hash: 1 } },
				{ max_results: 50 },
				{ embedded: { hash: 1 } },
			]) {
				const list = await send("GET", url("tokens", query));
				expect(list.status).toBe(200);
				expect(list.body._items.length).toBeGreaterThan(0);
				for (const item of list.body._items) {
					expect(item.hash).toBeUndefined();
					expect(item.token).toBeUndefined();
				}
				for (const secret of secrets) expect(list.text).not.toContain(secret);
			}
			const item = await send("GET", url(`tokens/${tokens.opIn.id}`, { projection: { hash: 1 } }));
			expect(item.status).toBe(200);
			expect(item.body.hash).toBeUndefined();
			expect(item.text).not.toContain(tokens.opIn.secret);
		});

		it("stops a revoked token at once, even one the gateway has just seen, and keeps its record", async () => {
			const t = await newToken({ name: "acc-revoke-now", role: "viewer" });
			for (let i = 0; i < 3; i++) expect((await send("GET", url("hosts"), as(t.secret))).status).toBe(200);
			expect((await send("DELETE", url(`tokens/${t.id}`))).status).toBe(204);
			const after = await send("GET", url("hosts"), as(t.secret));
			expectEveError(after, 401);
			expect(after.headers.get("www-authenticate")).toBe('Bearer realm="fleet-ctl"');
			const record = await send("GET", url(`tokens/${t.id}`));
			expect(record.body).toMatchObject({ name: "acc-revoke-now", revoked: true });
			expect((await send("GET", url("tokens", { where: { _id: t.id } }))).body._meta.total).toBe(1);
		});

		it("lets the expiring token in before its expiry and not after (the matrix checks it everywhere)", async () => {
			expectEveError(await send("GET", url("settings/0"), as(tokens.expired.secret)), 401);
			const record = await send("GET", url(`tokens/${tokens.expired.id}`));
			expect(record.body.revoked).toBe(false);
			expect(new Date(record.body.expires).getTime()).toBeLessThan(Date.now());
		});

		it("refuses an expiry in the past and unknown scope groups with 422", async () => {
			const past = await send("POST", url("tokens"), {
				body: { name: "acc-past", role: "viewer", expires: "2001-01-01T00:00:00Z" },
			});
			expect(expectEveError(past, 422)._issues.expires).toBeDefined();
			const scope = await send("POST", url("tokens"), {
				body: { name: "acc-bad-scope", role: "operator", scope: { groups: [UNKNOWN_ID] } },
			});
			expect(expectEveError(scope, 422)._issues.scope).toBeDefined();
			for (const body of [
				{ name: "x", role: "root" },
				{ name: "x", role: "viewer", hash: "0".repeat(64) },
				{ name: "x", role: "viewer", revoked: false },
			]) {
				expectEveError(await send("POST", url("tokens"), { body }), 422);
			}
		});

		it("has the bootstrap admin from CTL_ADMIN_TOKEN: listed by prefix, and working", async () => {
			const list = await send("GET", url("tokens", { where: { bootstrap: true, revoked: false } }));
			expect(list.body._items).toHaveLength(1);
			expect(list.body._items[0]).toMatchObject({
				name: "bootstrap-admin",
				role: "admin",
				prefix: ADMIN_TOKEN.slice(0, 8),
			});
			expect((await send("GET", url("audit", { max_results: 1 }), as(ADMIN_TOKEN))).status).toBe(200);
		});
	});

	describe("scopes", () => {
		// The operator of issue 3's example: group G (acc-scope, with a subgroup) and test.* only.
		let op: { id: string; secret: string };
		beforeAll(async () => {
			op = await newToken({
				name: "acc-scoped-op",
				role: "operator",
				scope: { groups: [fx.scope], functions: ["test.*"] },
			});
		});
		const run = (path: string, body: unknown, token = op.secret) => send("POST", url(path), as(token, { body }));

		it("runs nothing without a master, in scope or not (503); the scope of runs is tested against salt-api in test/run-authorization.spec.ts", async () => {
			expectEveError(await run(`hosts/${IN}`, { cm_client: "local", fun: "test.ping" }), 503);
			expectEveError(await run(`hosts/${OUT}`, { fun: "cmd.run", kwarg: { cmd: "id" } }), 503);
			expectEveError(await run(`groups/${fx.mixed}`, { fun: "test.ping" }), 503);
			expectEveError(await run(`hosts/${OUT}/all_status`, {}), 503);
		});

		it("creates tasks in scope (owned by its token), and refuses targets or functions outside it", async () => {
			const base = { name: "acc-scoped-task", start: "2030-01-01 00:00" };
			const ok = await run("tasks", { ...base, fun: "test.ping", tgt: [IN, IN_SUB] });
			expect(ok.status).toBe(201);
			expect((await send("GET", url(`tasks/${ok.body._id}`))).body.owner).toBe(op.id);

			expect(
				expectEveError(await run("tasks", { ...base, name: "acc-refused", fun: "test.ping", tgt: [IN, OUT] }), 403)
					._error.message,
			).toContain(OUT);
			expect(
				expectEveError(await run("tasks", { ...base, name: "acc-refused", fun: "cmd.run", tgt: [IN] }), 403)._error
					.message,
			).toContain("cmd.run");
			// A bulk create is checked document by document.
			expectEveError(
				await run("tasks", [
					{ ...base, name: "acc-refused", fun: "test.ping", tgt: [IN] },
					{ ...base, name: "acc-refused", fun: "cmd.run", tgt: [OUT] },
				]),
				403,
			);
			expect((await send("GET", url("tasks", { where: { name: "acc-refused" } }))).body._meta.total).toBe(0);
		});

		it("refuses PUT /tasks that moves a task's targets or function outside its scope, and allows it inside", async () => {
			const id = await created(
				await run("tasks", { name: "acc-put", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" }),
			);
			const put = (body: Record<string, unknown>) =>
				send("PUT", url("tasks"), as(op.secret, { body: { _id: id, ...body } }));
			expect(expectEveError(await put({ tgt: [OUT] }), 403)._error.message).toContain(OUT);
			expectEveError(await put({ fun: "cmd.run" }), 403);
			expect((await send("GET", url(`tasks/${id}`))).body).toMatchObject({ tgt: [IN], fun: "test.ping" });
			expect((await put({ tgt: [IN_SUB], fun: "test.echo" })).status).toBe(200);
			expect((await send("GET", url(`tasks/${id}`))).body).toMatchObject({ tgt: [IN_SUB], fun: "test.echo" });
			// A task someone else made that targets hosts outside the scope cannot be moved into it either.
			const foreign = await created(
				await send("POST", url("tasks"), {
					body: { name: "acc-foreign", fun: "cmd.run", tgt: [OUT], start: "2030-01-01 00:00" },
				}),
			);
			expectEveError(await send("PUT", url("tasks"), as(op.secret, { body: { _id: foreign, tgt: [IN] } })), 403);
		});

		it("checks a task's owner as it is now: tokens.authorizeRun refuses once the owner is revoked", async () => {
			const owner = await newToken({
				name: "acc-owner",
				role: "operator",
				scope: { groups: [fx.scope], functions: ["test.*"] },
			});
			const id = await created(
				await run("tasks", { name: "acc-owned", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" }, owner.secret),
			);
			const task = (await send("GET", url(`tasks/${id}`))).body;
			expect(task.owner).toBe(owner.id);
			const spec = { token: task.owner, client: "local_async", fun: task.fun, targets: task.tgt };
			await expect(h().call("tokens.authorizeRun", spec)).resolves.toMatchObject({
				id: owner.id,
				name: "acc-owner",
				role: "operator",
			});
			await expect(h().call("tokens.authorizeRun", { ...spec, client: "runner" })).rejects.toMatchObject({ code: 403 });
			await expect(h().call("tokens.authorizeRun", { ...spec, targets: [OUT] })).rejects.toMatchObject({ code: 403 });
			await expect(h().call("tokens.authorizeRun", { ...spec, fun: "cmd.run" })).rejects.toMatchObject({ code: 403 });
			expect((await send("DELETE", url(`tokens/${owner.id}`))).status).toBe(204);
			await expect(h().call("tokens.authorizeRun", spec)).rejects.toMatchObject({ code: 403 });
			// A viewer token never runs anything, and an unknown token neither.
			await expect(h().call("tokens.authorizeRun", { ...spec, token: tokens.viewer.id })).rejects.toMatchObject({
				code: 403,
			});
			await expect(h().call("tokens.authorizeRun", { ...spec, token: UNKNOWN_ID })).rejects.toMatchObject({
				code: 403,
			});
		});

		it("allows no host once the token's scope group is deleted", async () => {
			const group = await created(
				await send("POST", url("groups"), { body: { name: "acc-doomed-scope", hosts: [IN] } }),
			);
			const t = await newToken({ name: "acc-doomed-op", role: "operator", scope: { groups: [group] } });
			await expect(
				h().call("tokens.authorizeRun", { token: t.id, client: "local", fun: "cmd.run", targets: [IN] }),
			).resolves.toMatchObject({ id: t.id });
			expect((await send("DELETE", url(`groups/${group}`))).status).toBe(204);
			expect(
				expectEveError(
					await run("tasks", { name: "acc-refused", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" }, t.secret),
					403,
				)._error.message,
			).toContain(IN);
			await expect(
				h().call("tokens.authorizeRun", { token: t.id, client: "local", fun: "test.ping", targets: [IN] }),
			).rejects.toMatchObject({ code: 403 });
		});

		it("lets an unscoped operator run anything anywhere, and a viewer nothing (403)", async () => {
			const any = await newToken({ name: "acc-op-any", role: "operator" });
			await expect(
				h().call("tokens.authorizeRun", { token: any.id, client: "local", fun: "cmd.run", targets: [OUT] }),
			).resolves.toMatchObject({ id: any.id });
			expectEveError(await run(`hosts/${IN}`, { fun: "test.ping" }, tokens.viewer.secret), 403);
			await expect(
				h().call("tokens.authorizeRun", { token: tokens.viewer.id, client: "local", fun: "test.ping", targets: [IN] }),
			).rejects.toMatchObject({ code: 403 });
			expectEveError(
				await run(
					"tasks",
					{ name: "acc-refused", fun: "test.ping", tgt: [IN], start: "2030-01-01 00:00" },
					tokens.viewer.secret,
				),
				403,
			);
		});
	});

	describe("audit log", () => {
		const PLANTED = `hunter2-planted-${rand()}`;
		let admin: { id: string; secret: string };
		let op: { id: string; secret: string };
		let made: { id: string; secret: string };
		let group: string;
		let task: string;
		let probePath: string;

		beforeAll(async () => {
			admin = await newToken({ name: "acc-audit-admin", role: "admin" });
			op = await newToken({
				name: "acc-audit-op",
				role: "operator",
				scope: { groups: [fx.scope], functions: ["test.*"] },
			});
			// The session: reads are not audited, every write and every execution is.
			expect((await send("GET", url("groups"), as(admin.secret))).status).toBe(200);
			group = await created(
				await send("POST", url("groups"), as(admin.secret, { body: { name: "acc-audit-group", hosts: [IN] } })),
			);
			expect(
				(await send("PATCH", url(`groups/${group}`), as(admin.secret, { body: { hosts: [IN, IN_SUB] } }))).status,
			).toBe(200);
			expectEveError(
				await send(
					"POST",
					url("tasks"),
					as(op.secret, {
						body: { name: "acc-audit-refused", fun: "test.ping", tgt: [OUT], start: "2030-01-01 00:00" },
					}),
				),
				403,
			);
			expectEveError(
				await send(
					"POST",
					url(`hosts/${IN}`),
					as(op.secret, {
						body: { cm_client: "local", fun: "test.ping", arg: ["x"], kwarg: { password: PLANTED, user: "root" } },
					}),
				),
				503,
			);
			task = await created(
				await send(
					"POST",
					url("tasks"),
					as(op.secret, {
						body: {
							name: "acc-audit-task",
							fun: "test.ping",
							tgt: [IN],
							start: "2030-01-01 00:00",
							kwarg: { db_password: PLANTED },
						},
					}),
				),
			);
			const res = await send(
				"POST",
				url("tokens"),
				as(admin.secret, { body: { name: "acc-audit-made", role: "viewer" } }),
			);
			made = { id: await created(res), secret: res.body.token };
			expect((await send("GET", url("tasks"), as(op.secret))).status).toBe(200);
			// Without a token: recorded with no one's name.
			probePath = `/api/groups?acc-audit=${rand()}`;
			expectEveError(
				await send("POST", `${h().api.replace(/\/api$/, "")}${probePath}`, { token: null, body: { name: "x" } }),
				401,
			);
		});

		it("has one record per mutating request, in order, with who, from where, what, and the outcome", async () => {
			const res = await send(
				"GET",
				url("audit", { where: { token: { $in: [admin.id, op.id] } }, sort: "_id", max_results: 50 }),
			);
			expect(res.status).toBe(200);
			const who = (t: { id: string }, name: string, role: string) => ({
				token: t.id,
				name,
				role,
				source: expect.stringMatching(/127\.0\.0\.1$/),
			});
			expect(res.body._items).toEqual([
				expect.objectContaining({
					...who(admin, "acc-audit-admin", "admin"),
					method: "POST",
					path: "/api/groups",
					status: 201,
					outcome: "ok",
					fun: null,
					args: { name: "acc-audit-group", hosts: [IN] },
				}),
				expect.objectContaining({
					...who(admin, "acc-audit-admin", "admin"),
					method: "PATCH",
					path: `/api/groups/${group}`,
					status: 200,
					outcome: "ok",
					args: { hosts: [IN, IN_SUB] },
				}),
				expect.objectContaining({
					...who(op, "acc-audit-op", "operator"),
					method: "POST",
					path: "/api/tasks",
					status: 403,
					outcome: "denied",
					targets: [OUT],
					fun: "test.ping",
					message: expect.stringContaining(OUT),
				}),
				// No master here: nothing ran (runs are audited by the cm-gateway: test/run-authorization.spec.ts).
				expect.objectContaining({
					...who(op, "acc-audit-op", "operator"),
					method: "POST",
					path: `/api/hosts/${IN}`,
					status: 503,
					outcome: "failed",
					fun: null,
					args: expect.objectContaining({ arg: ["x"], kwarg: { password: MASK, user: "root" } }),
				}),
				expect.objectContaining({
					...who(op, "acc-audit-op", "operator"),
					method: "POST",
					path: "/api/tasks",
					status: 201,
					outcome: "ok",
					targets: [IN],
					fun: "test.ping",
					args: expect.objectContaining({ kwarg: { db_password: MASK } }),
				}),
				expect.objectContaining({
					...who(admin, "acc-audit-admin", "admin"),
					method: "POST",
					path: "/api/tokens",
					status: 201,
					outcome: "ok",
					args: { name: "acc-audit-made", role: "viewer" },
				}),
			]);
			for (const item of res.body._items) {
				expect(item._created).toMatch(/GMT$/);
				expect(item._id).toMatch(/^[a-f0-9]{24}$/);
			}
			expect(res.text).not.toContain(PLANTED);
			expect(res.text).not.toContain(made.secret);
			expect(res.text).not.toContain(op.secret);
			expect(res.body._items[4].path).toBe("/api/tasks");
			expect((await send("GET", url(`tasks/${task}`))).body.owner).toBe(op.id);
		});

		it("records requests without a valid token too, with no one's name", async () => {
			const res = await send("GET", url("audit", { where: { path: probePath } }));
			expect(res.body._items).toEqual([
				expect.objectContaining({
					token: null,
					name: null,
					role: null,
					method: "POST",
					status: 401,
					outcome: "denied",
				}),
			]);
		});

		it("answers the full Eve list query: where, sort, projection, paging", async () => {
			const where = { token: { $in: [admin.id, op.id] } };
			const desc = await send(
				"GET",
				url("audit", { where, sort: "-_id", max_results: 2, projection: { method: 1, path: 1 } }),
			);
			expect(desc.status).toBe(200);
			expect(desc.body._meta).toEqual({ page: 1, max_results: 2, total: 6 });
			expect(desc.body._items.map((i: any) => i.path)).toEqual(["/api/tokens", "/api/tasks"]);
			expect(Object.keys(desc.body._items[0]).filter(k => !k.startsWith("_"))).toEqual(["method", "path"]);
			const py = await send("GET", url("audit", { where: `outcome == "denied" and name == "acc-audit-op"` }));
			expect(py.body._items.map((i: any) => i.path)).toEqual(["/api/tasks"]);
			const item = await send("GET", url(`audit/${py.body._items[0]._id}`));
			expect(item.status).toBe(200);
			expect(item.body).toMatchObject({ fun: "test.ping", targets: [OUT], outcome: "denied" });
		});

		it("is append-only: no route writes it (405), and reading it is for admins only (403)", async () => {
			const first = (await send("GET", url("audit", { where: { token: admin.id }, sort: "_id", max_results: 1 }))).body
				._items[0];
			for (const [method, path] of [
				["POST", "audit"],
				["PUT", "audit"],
				["PATCH", "audit"],
				["DELETE", "audit"],
				["PATCH", `audit/${first._id}`],
				["PUT", `audit/${first._id}`],
				["DELETE", `audit/${first._id}`],
			]) {
				expectEveError(
					await send(method, url(path), { body: method === "DELETE" ? undefined : { outcome: "ok" } }),
					405,
				);
			}
			const again = await send("GET", url(`audit/${first._id}`));
			expect(again.body).toEqual({ ...first, _links: expect.anything() });
			for (const token of [tokens.viewer.secret, tokens.opIn.secret, op.secret]) {
				expectEveError(await send("GET", url("audit"), as(token)), 403);
				expectEveError(await send("GET", url(`audit/${first._id}`), as(token)), 403);
			}
		});
	});

	describe("secrets", () => {
		const s = rand();
		const planted = {
			vpnPassword: `acc-vpn-Pw-${s}`,
			authToken: `acc-org-auth-token-${s}`,
			authSecret: `acc-org-auth-secret-${s}`,
			otp: `ACCOTP${s.toUpperCase()}`,
			kwargPassword: `acc-kwarg-pw-${s}`,
		};
		let tokenSecret = "";
		let manager = "";
		let org = "";
		const HOST = "acc-secret-host";
		/** Every response of this part of the suite; `admin` when an admin asked (they alone see otp_secret). */
		const replies: Array<{ what: string; text: string; admin: boolean }> = [];
		const request = async (method: string, target: string, opts?: RequestOptions): Promise<Reply> => {
			const res = await send(method, target, opts);
			replies.push({
				what: `${method} ${target.slice(h().api.length)}`,
				text: res.text,
				admin: opts?.token === undefined,
			});
			return res;
		};
		const sim = new PritunlSimulator({ username: "acc", password: planted.vpnPassword });
		afterAll(() => sim.stop());

		beforeAll(async () => {
			const { url: simUrl } = await sim.start();
			manager = await created(
				await request("POST", url("vpn_managers"), {
					body: {
						name: "acc-vpn",
						server_address: simUrl,
						dashboard_address: `${simUrl}/`,
						username: "acc",
						password: planted.vpnPassword,
					},
				}),
			);
			// Refused by Pritunl: its 422 must not repeat the password.
			expectEveError(
				await request("POST", url("vpn_managers"), {
					body: {
						name: "acc-vpn-no",
						server_address: simUrl,
						dashboard_address: `${simUrl}/`,
						username: "acc-wrong",
						password: planted.vpnPassword,
					},
				}),
				422,
			);
			// Invalid: refused, and its 422 must not repeat the password either.
			expectEveError(
				await request("POST", url("vpn_managers"), {
					body: { name: "acc-vpn-bad", password: planted.vpnPassword, extra: 1 },
				}),
				422,
			);
			org = (
				await h().call("vpn-organizations.insertRecord", {
					record: {
						name: "acc-org",
						vpn_manager: manager,
						vpn_representation: {
							auth_api: true,
							name: "acc-org",
							auth_token: planted.authToken,
							auth_secret: planted.authSecret,
							user_count: 1,
							id: "5f00000000000000000acc01",
						},
						cipher_type: "rsa",
						type: 6,
					},
				})
			)._id;
			await h().call("hosts.upsertMany", {
				hosts: [
					{
						_id: HOST,
						status: "up",
						key: "accepted",
						vpn_organization: org,
						vpn_representation: { name: HOST, otp_secret: planted.otp, id: "acc-user-1" },
					},
				],
			});
			const res = await request("POST", url("tokens"), { body: { name: "acc-secret-token", role: "operator" } });
			expect(res.status).toBe(201);
			tokenSecret = res.body.token;
			expect((await request("GET", url(`hosts/${HOST}`), as(tokenSecret))).status).toBe(200);
			expectEveError(
				await request(
					"POST",
					url(`hosts/${HOST}`),
					as(tokenSecret, { body: { fun: "test.ping", kwarg: { password: planted.kwargPassword } } }),
				),
				503,
			);
			expectEveError(
				await request(
					"POST",
					url("tasks"),
					as(tokenSecret, {
						body: {
							name: "",
							fun: "test.ping",
							tgt: [HOST],
							start: "2030-01-01 00:00",
							kwarg: { password: planted.kwargPassword },
						},
					}),
				),
				422,
			);
		});

		it("never shows a planted secret in any response, wherever it is read from", async () => {
			const embedded = { embedded: { vpn_manager: 1, vpn_organization: 1, groups: 1 } };
			const reads = [
				url("vpn_managers", { max_results: 50 }),
				url(`vpn_managers/${manager}`),
				url(`vpn_managers/${manager}`, { projection: { password: 1 } }),
				url("vpn_organizations", { ...embedded, max_results: 50 }),
				url(`vpn_organizations/${org}`, embedded),
				url(`vpn_organizations/${org}`, { projection: { vpn_representation: 1 } }),
				url("hosts", { where: { _id: HOST }, ...embedded }),
				url(`hosts/${HOST}`, embedded),
				url(`hosts/${HOST}`, { projection: { vpn_representation: 1 } }),
				url(`hosts/${HOST}`, { projection: { "vpn_representation.otp_secret": 1 } }),
				url("tokens", { max_results: 50 }),
				url("audit", { sort: "-_id", max_results: 50 }),
				url("audit", { sort: "-_id", max_results: 50, page: 2 }),
			];
			for (const target of reads) expect((await request("GET", target)).status).toBe(200);
			for (const target of reads.filter(r => !/\/(tokens|audit)\b/.test(r)))
				expect((await request("GET", target, as(tokenSecret))).status).toBe(200);
			const host = await request("GET", url(`hosts/${HOST}`), as(tokenSecret));
			expect(host.body.vpn_representation.otp_secret).toBe(MASK);
			expect((await request("GET", url(`hosts/${HOST}`))).body.vpn_representation.otp_secret).toBe(planted.otp);
			const orgItem = await request("GET", url(`vpn_organizations/${org}`));
			expect(orgItem.body.vpn_representation).toMatchObject({ auth_token: MASK, auth_secret: MASK });

			const leaks: string[] = [];
			for (const [name, secret] of Object.entries(planted)) {
				for (const r of replies)
					if (r.text.includes(secret) && !(name === "otp" && r.admin)) leaks.push(`${name} in ${r.what}`);
			}
			// The token's secret: only in the one response that created it.
			const withToken = replies.filter(r => r.text.includes(tokenSecret)).map(r => r.what);
			expect(withToken).toEqual(["POST /tokens"]);
			expect(leaks).toEqual([]);
		});

		it("does not let a secret be found by filtering or sorting on it", async () => {
			const viewer = tokens.viewer.secret;
			for (const where of [
				{ "vpn_representation.otp_secret": planted.otp },
				{ "vpn_representation.otp_secret": { $gte: "A" } },
				{ vpn_representation: { $gt: {} } },
			]) {
				expectEveError(await request("GET", url("hosts", { where }), as(viewer)), 400);
			}
			expectEveError(await request("GET", url("hosts", { sort: "vpn_representation.otp_secret" }), as(viewer)), 400);
			for (const where of [
				{ "vpn_representation.auth_token": planted.authToken },
				{ "vpn_representation.auth_secret": { $lt: "z" } },
			]) {
				expectEveError(await request("GET", url("vpn_organizations", { where }), as(viewer)), 400);
			}
			// Other fields of the same objects can still be queried.
			expect(
				(await request("GET", url("hosts", { where: { "vpn_representation.name": HOST } }), as(viewer))).body._meta
					.total,
			).toBe(1);
		});

		it("never prints a planted secret (nor the admin token) in the logs of the service processes", () => {
			// Every leg captures what its services log (in-process legs: the logger's output; the split leg: its processes').
			const logs = h().logs?.() ?? "";
			expect(logs.length).toBeGreaterThan(0);
			const secrets = { ...planted, tokenSecret, adminToken: ADMIN_TOKEN, ...VPN_SECRETS };
			expect(
				Object.entries(secrets)
					.filter(([, secret]) => logs.includes(secret))
					.map(([name]) => name),
			).toEqual([]);
		});
	});
}
