/**
 * What the gateway reads of an HTTP request: the request as moleculer-web hands it over (Req), its JSON body
 * (size and nesting bounded before parsing), its query string as ordered pairs, its content type, the
 * client's User-Agent.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context } from "moleculer";
import ApiGateway from "moleculer-web";
import type { BodyKind } from "../../lib/http/routes";
import type { Role } from "../../lib/http/auth";
import { EveError } from "../../lib/eve/errors";
import type { QueryPairs } from "../../lib/eve/query";
import { MAX_JSON_DEPTH, tooDeep } from "../../lib/eve/json-depth";

export type Req = IncomingMessage & {
	$params: Record<string, any>;
	$alias?: {
		action?: string;
		unavailable?: string;
		bodyKind?: BodyKind;
		cachedBy?: string;
		role?: Role;
		audited?: boolean;
		computes?: boolean;
		writesWith?: string;
	};
	$endpoint?: { action: unknown };
	$cacheGeneration?: number;
	/** Bytes of the JSON body as received (0 for an empty body), set while it is read. */
	$bodyBytes?: number;
	originalUrl?: string;
	$ctx?: Context<unknown, Record<string, any>>;
	body?: unknown;
};

export const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Notes how many bytes the body had (an empty one is no body: 400, as in Eve, not `{}`), and refuses a body
 * nested deeper than MAX_JSON_DEPTH on its raw bytes, before JSON.parse (lib/eve/json-depth.ts).
 */
function verifyDepth(req: IncomingMessage, _res: ServerResponse, buf: Buffer): void {
	(req as Req).$bodyBytes = buf.length;
	if (tooDeep(buf)) throw new EveError(400, `the JSON body is nested more than ${MAX_JSON_DEPTH} levels deep`);
}

export type JsonParser = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void;

/** The JSON body parser of bodies of at most `limit` bytes (MAX_BODY_BYTES). */
export function jsonParser(limit: number): JsonParser {
	return (ApiGateway as unknown as { bodyParser: { json(opts: unknown): JsonParser } }).bodyParser.json({
		strict: true,
		limit,
		verify: verifyDepth,
	});
}

/** The query string as ordered pairs; Eve's links repeat it in the client's order. */
export function queryPairs(search: string): QueryPairs {
	const pairs: QueryPairs = [];
	for (const part of search.split("&")) {
		if (!part) continue;
		const eq = part.indexOf("=");
		const rawKey = eq < 0 ? part : part.slice(0, eq);
		const rawValue = eq < 0 ? "" : part.slice(eq + 1);
		pairs.push([decode(rawKey), decode(rawValue)]);
	}
	return pairs;
}

function decode(s: string): string {
	try {
		return decodeURIComponent(s.replace(/\+/g, " "));
	} catch {
		throw new EveError(400, "malformed percent-encoding in the query string");
	}
}

/**
 * Whether a request may change state: a write, or a read whose route changes state with a query parameter it names
 * (alerts' `mark_as_read`), whatever that parameter's value. A session cookie's such requests need the CSRF header.
 */
export function changesState(req: Req): boolean {
	if (MUTATING.has(req.method as string)) return true;
	const param = req.$alias?.writesWith;
	const url = req.originalUrl ?? req.url ?? "";
	const at = url.indexOf("?");
	return param !== undefined && at >= 0 && queryPairs(url.slice(at + 1)).some(([k]) => k === param);
}

/** The client's User-Agent for the audit record (at most 200 characters), undefined when it sent none. */
export function userAgent(req: IncomingMessage): string | undefined {
	const ua = req.headers["user-agent"];
	return typeof ua === "string" && ua ? ua.slice(0, 200) : undefined;
}

export function isJson(req: IncomingMessage): boolean {
	const type = String(req.headers["content-type"] ?? "")
		.split(";")[0]
		.trim()
		.toLowerCase();
	return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

/**
 * Reads and drops the body of a request whose route takes none (Eve ignores it). Left unread, Node cuts the
 * answer short: a server that answers a large response to a client still sending its body destroys the
 * connection partway (a GET /api/openapi.json with a megabyte of body got 127 KB of its document, then
 * "aborted"). Past `limit` bytes it answers 413, still reading what follows, so the 413 itself arrives whole.
 */
export function discardBody(req: IncomingMessage, limit: number): Promise<void> {
	return new Promise((resolve, reject) => {
		let bytes = 0;
		let settled = false;
		const settle = (err?: unknown) => {
			if (settled) return;
			settled = true;
			if (err) reject(err);
			else resolve();
		};
		req.on("data", (chunk: Buffer) => {
			bytes += chunk.length;
			if (bytes > limit) settle(new EveError(413, `request body too large (limit ${limit} bytes)`));
		});
		req.on("end", () => settle());
		req.on("error", err => settle(new EveError(400, `unreadable request body: ${err.message}`)));
	});
}

export function hasBody(req: IncomingMessage): boolean {
	return Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
}
