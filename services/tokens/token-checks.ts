/**
 * The checks the tokens service makes on one token record (docs/security.md, "API tokens"): whether it acts now
 * (neither revoked nor expired), the caller it is for the gateway and for a run, why it may not authorize a run, and
 * the expiry a client sends. Pure: the record and the time are given; the rule on the call itself is
 * lib/http/auth.ts `runDenial`.
 */
import { parseHttpDate } from "../../lib/eve/dates";
import type { Issues } from "../../lib/eve/errors";
import type { Caller } from "../../lib/http/auth";
import type { Doc } from "../../lib/storage/store";

/** Whether a token record acts at `now` (ms): it exists, is not revoked, and its expiry (if any) is later than now. */
export function usable(doc: Doc | null, now: number): boolean {
	return !!doc && doc.revoked !== true && !(doc.expires instanceof Date && doc.expires.getTime() <= now);
}

/** The caller a usable record is for the gateway (tokens.verify): its expiry included, and whether it is a session. */
export function verifiedCaller(doc: Doc, principal: string): Caller & { expires?: Date } {
	return {
		id: String(doc._id),
		name: doc.name,
		role: doc.role,
		scope: doc.scope,
		expires: doc.expires,
		principal,
		...(doc.subject ? { subject: doc.subject } : {}),
		...(doc.session ? { session: true } : {}),
	};
}

/** The caller a run is audited as (tokens.authorizeRun). */
export function runCaller(doc: Doc, principal: string): Caller {
	return {
		id: String(doc._id),
		name: doc.name,
		role: doc.role,
		principal,
		...(doc.scope ? { scope: doc.scope } : {}),
		...(doc.subject ? { subject: doc.subject } : {}),
	};
}

/** Why the token record found (null: none) authorizes no run at `now`, before what it may run is looked at; null when it may. */
export function tokenRefusal(doc: Doc | null, now: number): string | null {
	if (!doc) return "no token authorizes it (unknown token)";
	if (!usable(doc, now)) return "the token that authorizes it is revoked or expired";
	return null;
}

/** A write's `expires` as sent (an HTTP-date or ISO 8601 string) made a Date, or the issue saying what it must be. */
export function parseExpires(doc: Doc): { doc: Doc; issues?: Issues } {
	if (!("expires" in doc) || doc.expires instanceof Date) return { doc };
	const when =
		typeof doc.expires === "string"
			? (parseHttpDate(doc.expires) ?? (/^\d{4}-\d{2}-\d{2}T/.test(doc.expires) ? new Date(doc.expires) : null))
			: null;
	if (!when || Number.isNaN(when.getTime()))
		return { doc, issues: { expires: "must be of datetime type (an HTTP-date or ISO 8601)" } };
	return { doc: { ...doc, expires: when } };
}

/** The issue of a token made to expire at or before `now`, else null. */
export function expiryIssue(doc: Doc, now: number): Issues | null {
	return doc.expires instanceof Date && doc.expires.getTime() <= now ? { expires: "must be in the future" } : null;
}
