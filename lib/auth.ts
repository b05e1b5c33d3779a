/** Tokens, roles and scopes: the pieces of access control that the gateway and the services share. */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

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
}

const TOKEN_PREFIX = "fct_";

/** A new bearer token: 256 random bits. Only its hash is ever stored. */
export function newToken(): string {
	return TOKEN_PREFIX + randomBytes(32).toString("base64url");
}

/** Tokens are long random strings, so a plain SHA-256 is a safe, fast lookup key (no salt or KDF needed). */
export function hashToken(token: string): string {
	return createHash("sha256").update(token).digest("hex");
}

export function sameHash(a: string, b: string): boolean {
	return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
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

export function functionAllowed(scope: Scope | undefined, fun: string): boolean {
	if (!scope?.functions) return true;
	return scope.functions.some(glob => globMatches(glob, fun));
}

export const FUNCTION_GLOB = /^[A-Za-z0-9_.*]{1,200}$/;

const SECRET_KEY = /pass(word)?|secret|token|otp|private|credential|^key$|_key$/i;
const MASK = "********";

/** A copy with every value under a secret-looking key masked, at any depth (for the audit log). */
export function redact(value: unknown, depth = 0): unknown {
	if (depth > 20) return "…";
	if (Array.isArray(value)) return value.map(v => redact(v, depth + 1));
	if (value !== null && typeof value === "object" && !(value instanceof Date) && !Buffer.isBuffer(value)) {
		const out: Record<string, unknown> = {};
		for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) && v != null ? MASK : redact(v, depth + 1);
		return out;
	}
	return value;
}
