/** Tokens, roles and scopes: the pieces of access control that the gateway and the services share. */
import { hash, randomBytes } from "node:crypto";

export const ROLES = ["viewer", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

export function roleAllows(have: Role, need: Role): boolean {
	return ROLES.indexOf(have) >= ROLES.indexOf(need);
}

/** Limits on what an (operator) token may run, like a Salt eauth ACL entry. */
export interface Scope {
	/** Group ids: only hostnames these groups resolve to may be targeted. Absent: any host. */
	groups?: string[];
	/** Salt function globs (`test.*`, `state.apply`). Absent: any function. */
	functions?: string[];
}

/** Who made a request, as the gateway puts it in ctx.meta.user. */
export interface Caller {
	id: string;
	name: string;
	role: Role;
	scope?: Scope;
	/** The person the token was made for (`oidc:<sub>`: a signed-in session, or a token they made for themselves). */
	subject?: string;
	/**
	 * Who acts, whatever token they use (docs/security.md, "Principals"): the person (`oidc:<sub>`) or the service
	 * account (`token:<id>` of the token an admin made) every token minted from theirs shares. Approvals, "one vote
	 * per person", rate limits and stream shares count principals, never tokens.
	 */
	principal: string;
	/** A signed-in browser session (cookie), not an API token: its writes need the CSRF header. */
	session?: boolean;
}

/**
 * Why `wanted` is not within `have` (a token a caller makes for themselves may not reach further than the caller),
 * or null when it is: without a scope the caller may give any; with one, the new token needs one as narrow — its
 * groups among the caller's, each of its function globs one of the caller's globs matches.
 */
export function scopeExceeds(have: Scope | undefined, wanted: Scope | undefined): string | null {
	if (!have) return null;
	if (have.groups) {
		if (!wanted?.groups) return "your scope limits the groups: give scope.groups, among yours";
		const outside = wanted.groups.filter(g => !have.groups!.includes(g));
		if (outside.length) return `groups outside your scope: ${outside.join(", ")}`;
	}
	if (have.functions) {
		if (!wanted?.functions) return "your scope limits the functions: give scope.functions, among yours";
		const outside = wanted.functions.filter(f => !have.functions!.some(glob => globMatches(glob, f)));
		if (outside.length) return `functions outside your scope: ${outside.join(", ")}`;
	}
	return null;
}

const TOKEN_PREFIX = "fct_";

/** A new bearer token: 256 random bits. Only its hash is ever stored. */
export function newToken(): string {
	return TOKEN_PREFIX + randomBytes(32).toString("base64url");
}

/**
 * Tokens are long random strings, so a plain SHA-256 is a safe, fast lookup key (no salt or KDF needed). Every
 * request hashes its token: node:crypto's one-shot `hash` makes no Hash object (264 against 610 ns per call).
 */
export function hashToken(token: string): string {
	return hash("sha256", token, "hex");
}

/** `Authorization: Bearer <token>` (also `Token <token>`, as Eve's TokenAuth accepts); null when absent or malformed. */
export function bearerToken(header: string | undefined): string | null {
	if (!header) return null;
	const m = /^(?:Bearer|Token)\s+([A-Za-z0-9._~+/=-]{16,512})\s*$/i.exec(header);
	return m ? m[1] : null;
}

const compiledGlobs = new Map<string, RegExp>();

/** Whether `value` matches a glob whose only wildcard is `*` (scopes' functions, webhooks' alert types); compiled once. */
export function globMatches(glob: string, value: string): boolean {
	let re = compiledGlobs.get(glob);
	if (!re) {
		re = new RegExp("^" + glob.split("*").map(part => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*") + "$");
		// Globs come from token scopes and webhooks: few, but bounded anyway.
		if (compiledGlobs.size >= 10_000) compiledGlobs.clear();
		compiledGlobs.set(glob, re);
	}
	return re.test(value);
}

export const FUNCTION_GLOB = /^[A-Za-z0-9_.*]{1,200}$/;

/** The Salt clients a run may use: minion execution only (never runner, wheel or ssh, which act on the master). */
export const RUN_CLIENTS = ["local", "local_async"] as const;
export type RunClient = (typeof RUN_CLIENTS)[number];

/**
 * Functions that run other functions, named in their arguments, on this or other minions (or on the master).
 * A glob in a scope never grants them (`saltutil.*` does not allow `saltutil.cmd`): only the literal name does.
 */
export const RELAY_FUNCTIONS = new Set([
	"saltutil.cmd",
	"saltutil.cmd_iter",
	"saltutil.cmd_iter_no_block",
	"saltutil.runner",
	"saltutil.wheel",
	"publish.publish",
	"publish.full_data",
	"publish.runner",
]);

/** The complete call a run makes, as the cm-gateway hands it to salt-api. */
export interface RunCall {
	client: string;
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
	/** Hostnames, resolved: what salt-api is asked to target. */
	targets: string[];
}

/**
 * Why `scope` does not allow this call, or null when it does. `allowedHosts` is what the scope's groups
 * resolve to now (null: the scope does not restrict hosts). Deny by default: every reason is named.
 */
export function runDenial(role: Role, scope: Scope | undefined, call: RunCall, allowedHosts: Set<string> | null): string | null {
	if (!roleAllows(role, "operator")) return `a ${role} token cannot run functions`;
	if (!(RUN_CLIENTS as readonly string[]).includes(call.client)) return `client '${call.client}' is not allowed (only ${RUN_CLIENTS.join(", ")})`;
	if (!functionAllowed(scope, call.fun)) return `function '${call.fun}' is outside the token's scope`;
	if (allowedHosts) {
		const outside = call.targets.filter(t => !allowedHosts.has(t));
		if (outside.length) return `targets outside the token's scope: ${outside.slice(0, 20).join(", ")}${outside.length > 20 ? ", …" : ""}`;
	}
	return null;
}

export function functionAllowed(scope: Scope | undefined, fun: string): boolean {
	if (!scope?.functions) return true;
	if (RELAY_FUNCTIONS.has(fun)) return scope.functions.includes(fun);
	return scope.functions.some(glob => globMatches(glob, fun));
}

/**
 * A copy with every secret masked, at any depth (the audit log, approvals): the one rule of lib/security/masking.ts,
 * which also masks `key=value` strings as Salt splits them.
 */
export { maskSecrets as redact } from "../security/masking";
