/**
 * The request bodies of the routes that are not a collection's CRUD, as fastest-validator schemas: the
 * services validate with them and the OpenAPI document (lib/http/openapi.ts) describes them, from this one place.
 */

/** A Salt function's name: `module.function` (tasks' `fun` too). */
export const SALT_FUN = /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$/;

/** POST /hosts/{id}, POST /groups/{id}: a Salt function to run (docs/salt.md). */
/** The body of a run as checked (RUN_BODY), its break-glass reason apart: what salt-api is asked to run. */
export interface RunBody {
	cm_client: "local" | "local_async";
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
}

export const RUN_BODY = {
	cm_client: { type: "enum", values: ["local", "local_async"], optional: true, default: "local_async" },
	fun: { type: "string", pattern: SALT_FUN, max: 200 },
	arg: { type: "array", optional: true, max: 1000 },
	kwarg: { type: "object", optional: true },
	// An admin's reason to run outside the maintenance windows (docs/security.md, break-glass): audited and alerted.
	break_glass: { type: "string", min: 3, max: 2000, optional: true },
};

/** POST /targets/preview: a compound target (docs/targeting.md). */
export const TARGET_PREVIEW_BODY = { target: { type: "string", min: 1, max: 10_000 } };

/** POST /run: a Salt function on the hosts a compound target selects now. */
export const RUN_TARGET_BODY = { ...TARGET_PREVIEW_BODY, ...RUN_BODY };

/** POST /hosts/{id}/all_status: start or stop the live status.all_status poll. */
export const ALL_STATUS_BODY = {
	action: { type: "enum", values: ["start", "stop", "stop_all"], optional: true, default: "start" },
};

/** POST /graph: the background jobs (docs/graph.md). */
export const GRAPH_ACTIONS = ["build_graph", "request_ips"] as const;
export const GRAPH_RUN_BODY = {
	action: { type: "enum", values: [...GRAPH_ACTIONS] },
	master: { type: "string", min: 1, max: 200, optional: true },
	ip_resolver: { type: "string", min: 1, max: 2048, optional: true },
};
