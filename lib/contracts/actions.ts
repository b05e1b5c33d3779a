/**
 * The internal actions' contracts: each action's params schema (the one its service declares, so validation and
 * types are one declaration) and its result type. Callers reach them through `call` (./call.ts), services declare
 * them through `action`: a wrong param, a missing one or a misread result fails `tsc`.
 * Adding an action: its schema here `as const`, its name in PARAMS, its result in Results.
 */
import type { Caller } from "../http/auth";

/** hosts.resolveTarget: the live hosts a compound target selects; `field` names the caller's field for a 422. */
export const hostsResolveTarget = { target: { type: "string", min: 1, max: 10_000 }, field: { type: "string", optional: true } } as const;

/** groups.hostnames: every live host the group selects (its own, its rule's, its subgroups'). */
export const groupsHostnames = { id: "string", query: { type: "any", optional: true } } as const;

/** groups.expandTargets: a task's `tgt` as hostnames, group ids expanded. */
export const groupsExpandTargets = { tgt: { type: "array", items: "string", max: 100_000 } } as const;

/** tokens.authorizeRun: may this token run this complete call on these hosts, now. */
export const tokensAuthorizeRun = {
	token: { type: "string" },
	client: { type: "string", max: 50 },
	fun: { type: "string", min: 1, max: 200 },
	arg: { type: "array", optional: true },
	kwarg: { type: "object", optional: true },
	targets: { type: "array", items: "string", max: 100_000 },
} as const;

/** Every contracted action's params schema, by action name. */
export const PARAMS = {
	"hosts.resolveTarget": hostsResolveTarget,
	"groups.hostnames": groupsHostnames,
	"groups.expandTargets": groupsExpandTargets,
	"tokens.authorizeRun": tokensAuthorizeRun,
} as const;

/** Every contracted action's result, by action name. */
export interface Results {
	"hosts.resolveTarget": { /** The live hosts it selects, sorted. */ hosts: string[]; /** Ids it names that are no live host. */ missing: string[] };
	"groups.hostnames": string[];
	"groups.expandTargets": string[];
	"tokens.authorizeRun": Caller;
}
