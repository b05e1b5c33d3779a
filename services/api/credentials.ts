/**
 * Who a request says it is, and whether a known caller is let in: an API token in the Authorization header,
 * else a signed-in browser's session cookie (services/api/sessions.ts); a caller refused when unknown,
 * expired or revoked, or when a cookie carries something else than a session. Authentication
 * (api.service.ts) and the gateway's kept reads (kept-reads.ts) decide with these same functions.
 */
import type { IncomingHttpHeaders } from "node:http";
import { bearerToken, type Caller } from "../../lib/http/auth";
import { SESSION_COOKIE, parseCookies } from "./sessions";

/** A caller as the gateway keeps it (tokens.verify's answer). */
export type KnownCaller = Caller & { expires?: Date };

export interface Credential {
	/** The secret to look up, or null when the request carries none that is well formed. */
	token: string | null;
	/** The session cookie's value when the secret came from it (no Authorization header). */
	cookieSecret?: string;
}

/** The request's secret: the Authorization header when there is one (even a malformed one), else the session cookie. */
export function credentialOf(headers: IncomingHttpHeaders): Credential {
	const header = headers.authorization;
	if (header !== undefined) return { token: bearerToken(header) };
	const cookieSecret = parseCookies(headers.cookie)[SESSION_COOKIE];
	return cookieSecret === undefined ? { token: null } : { token: bearerToken(`Bearer ${cookieSecret}`), cookieSecret };
}

/** Why this caller is not let in (the 401's message), or null when it is. */
export function callerRefusal(
	caller: KnownCaller | null | undefined,
	fromCookie: boolean,
	now = Date.now(),
): string | null {
	if (!caller || (caller.expires && new Date(caller.expires).getTime() <= now))
		return "the API token is invalid, expired or revoked";
	// A cookie carries only a session (never an API token): another site can make the browser send it, not read it.
	if (fromCookie && !caller.session) return "the session cookie does not hold a session: sign in again";
	return null;
}
