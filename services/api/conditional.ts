/**
 * Conditional reads at the gateway (docs/api.md, "ETags and conditional requests"): which responses it keeps
 * in its read cache, and when a GET or HEAD is answered 304.
 */
import type { IncomingMessage } from "node:http";
import { ifNoneMatchHits } from "../../lib/eve/etag";

export interface CachedResponse {
	body: Buffer;
	type?: string;
	headers: Record<string, string>;
	/** The action said a matching If-None-Match may be answered 304 (item reads without `embedded`). */
	conditional: boolean;
}

/**
 * Reads whose bytes never change for their URL (a media id names one upload): If-Modified-Since is a safe
 * validator for them (Eve's media endpoint honours it), and for nothing else (docs/api.md).
 */
const IMMUTABLE_READS = new Set(["media.get"]);

/**
 * Whether a GET or HEAD is answered 304 (docs/api.md, "ETags and conditional requests"): an item read
 * whose ETag an If-None-Match lists (never for `*`), or an immutable read not modified since the
 * If-Modified-Since date. Lists, embedded reads and every other response are always sent whole.
 */
export function notModified(
	method: string | undefined,
	headers: IncomingMessage["headers"],
	meta: { $conditional?: boolean; $statusCode?: number; $responseHeaders?: Record<string, string> },
	action: string | undefined,
): boolean {
	if (method !== "GET" && method !== "HEAD") return false;
	if ((meta.$statusCode ?? 200) !== 200) return false;
	const response = meta.$responseHeaders ?? {};
	const noneMatch = headers["if-none-match"];
	if (noneMatch !== undefined) {
		// RFC 9110 13.2.2: with If-None-Match, If-Modified-Since is not looked at.
		return meta.$conditional === true && typeof response.ETag === "string" && ifNoneMatchHits(noneMatch, response.ETag);
	}
	const since = headers["if-modified-since"];
	if (since === undefined || !action || !IMMUTABLE_READS.has(action)) return false;
	const modified = Date.parse(String(response["Last-Modified"] ?? ""));
	const sinceMs = Date.parse(since);
	return Number.isFinite(modified) && Number.isFinite(sinceMs) && modified <= sinceMs;
}
