/**
 * Tokens, roles and scopes: the pieces of access control that the gateway and the services share. Masking secrets is
 * lib/security/masking.ts (`maskSecrets`), the one rule, applied by the audit service and wherever a run is shown.
 */
import { hash, randomBytes } from "node:crypto";
import { effectiveCall } from "../security/effective-call";
import { entryOf } from "../security/catalogue";
import { callDenial, functionsExceed, grantsArbitrary, grantsName, type CallMatcher } from "../security/scopes";

export const ROLES = ["viewer", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

export function roleAllows(have: Role, need: Role): boolean {
	return ROLES.indexOf(have) >= ROLES.indexOf(need);
}

/** Limits on what an (operator) token may run, like a Salt eauth ACL entry. */
export interface Scope {
	/** Group ids: only hostnames these groups resolve to may be targeted. Absent: any host. */
	groups?: string[];
	/**
	 * Exact names (that function, whatever its class), globs (`test.*`: only catalogued functions that read or
	 * change) or classes (`@read`, `@change`, `@secrets`, `@arbitrary`). Absent: any function.
	 */
	functions?: string[];
	/** Argument matchers by function name or glob (lib/security/scopes.ts). */
	calls?: Record<string, CallMatcher>;
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
 * groups among the caller's, every function it grants granted by the caller's scope (compared by what the entries
 * grant, not by their text), the caller's argument matchers kept.
 */
export function scopeExceeds(have: Scope | undefined, wanted: Scope | undefined): string | null {
	if (!have) return null;
	if (have.groups) {
		if (!wanted?.groups) return "your scope limits the groups: give scope.groups, among yours";
		const outside = wanted.groups.filter(g => !have.groups!.includes(g));
		if (outside.length) return `groups outside your scope: ${outside.join(", ")}`;
	}
	return functionsExceed(have, wanted);
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
		re = new RegExp(
			"^" +
				glob
					.split("*")
					.map(part => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
					.join(".*") +
				"$",
		);
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
 * resolve to now (null: the scope does not restrict hosts). The function and its arguments are judged on the
 * effective call (lib/security/effective-call.ts) by the scope rules of lib/security/scopes.ts. Deny by
 * default: every reason is named.
 */
export function runDenial(
	role: Role,
	scope: Scope | undefined,
	call: RunCall,
	allowedHosts: Set<string> | null,
): string | null {
	if (!roleAllows(role, "operator")) return `a ${role} token cannot run functions`;
	if (!(RUN_CLIENTS as readonly string[]).includes(call.client))
		return `client '${call.client}' is not allowed (only ${RUN_CLIENTS.join(", ")})`;
	const denial = callDenial(scope, effectiveCall(call.fun, call.arg, call.kwarg));
	if (denial) return denial;
	if (allowedHosts) {
		if (entryOf(call.fun)?.beyondHost)
			return `function '${call.fun}' acts beyond the hosts it runs on (other minions through the master, or the master itself): a token limited to groups never runs it`;
		const outside = call.targets.filter(t => !allowedHosts.has(t));
		if (outside.length)
			return `targets outside the token's scope: ${outside.slice(0, 20).join(", ")}${outside.length > 20 ? ", …" : ""}`;
	}
	return null;
}

/** Whether the scope grants `fun` by name (a relay's inner function and the arguments are runDenial's). */
export function functionAllowed(scope: Scope | undefined, fun: string): boolean {
	return !scope?.functions || grantsName(scope.functions, fun);
}

/**
 * What a token of `role` with `scope` can do that its record must say (tokens API, `arbitrary_code`): whether it
 * may run arbitrary code — a role that runs and a scope that grants a function of that class, or no function limit.
 */
export function runsArbitraryCode(role: Role, scope: Scope | undefined): boolean {
	return roleAllows(role, "operator") && grantsArbitrary(scope?.functions);
}

/** The sentence a token's record shows when it runs arbitrary code. */
export const ARBITRARY_CODE_WARNING = "this token can run any command as root on its hosts";

/** `arbitrary_code` (and its `warning`) as the tokens API shows them on a token (docs/security.md, "Scopes"). */
export function arbitraryCodeFields(
	role: Role,
	scope: Scope | undefined,
): { arbitrary_code: boolean; warning?: string } {
	return runsArbitraryCode(role, scope)
		? { arbitrary_code: true, warning: ARBITRARY_CODE_WARNING }
		: { arbitrary_code: false };
}
