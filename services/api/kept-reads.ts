/**
 * The gateway's kept reads, answered as a request arrives: a GET or HEAD whose answer the gateway keeps
 * (api.service.ts, callAction) is sent from there before moleculer-web routes the request, once everything
 * the routed path would check holds: the caller known and let in (credentials.ts), the route's role, the rate
 * limit, the action's service available, no body, no CORS to answer, no debug logging. Anything else, a miss
 * included, takes the routed path, which decides it (and answers every refusal). Both paths write the answer
 * with the same sendResponse, so status, headers and body are the same (test/api/kept-reads.spec.ts); a plain
 * GET of an answer sent before is written in one call with the head sendResponse gave it then (its own
 * request id put in). The request is counted in Moleculer's request metrics as the `rest` action, as a routed
 * one is (kept-metrics.ts).
 */
import type { ServerResponse } from "node:http";
import type { ServiceBroker } from "moleculer";
import { hashToken, roleAllows, type Role } from "../../lib/http/auth";
import type { ReadCache } from "../../lib/http/read-cache";
import { acceptedRequestId } from "../../lib/runtime/logging";
import { setSecurityHeaders } from "../../mixins/gateway-ui.mixin";
import type { CachedResponse } from "./conditional";
import type { KeptReadMetrics } from "./kept-metrics";
import { callerRefusal, credentialOf, type KnownCaller } from "./credentials";
import { hasBody, type Req } from "./requests";

/** moleculer-web's alias, with what the route table adds to it (aliases.ts). */
interface KeptAlias {
	action?: string;
	cachedBy?: string;
	role?: Role;
	audited?: boolean;
	route?: { path: string };
}

/** What a kept read needs of the gateway service. */
export interface KeptReadGateway {
	broker: ServiceBroker;
	readCaches: Map<string, ReadCache<CachedResponse>>;
	callers: ReadCache<KnownCaller | null>;
	/** Whether CORS is configured (a request with an Origin then takes the routed path, which answers it). */
	corsOn: boolean;
	/** Whether requests are logged (LOGLEVEL=debug): they then all take the routed path, which logs them. */
	logsRequests: boolean;
	resolveAlias(url: string, method: string): { alias: unknown } | false;
	/** Counts a request of `key` when it is within the rate limit; false (counting nothing) when it is not. */
	rateRoom(key: string): boolean;
	/** Where kept reads are counted in the request metrics; none when metrics are off. */
	keptMetrics: KeptReadMetrics | null;
	sendResponse(req: Req, res: ServerResponse, data: unknown, action?: { name?: string }): void;
}

/** The key of a kept answer: the caller's role and the whole URL (what a read shows may depend on the role). */
export function keptKey(role: string, url: string): string {
	return `${role}\u0000${url}`;
}

interface EndpointList {
	hasAvailable(): boolean;
	getFirst(): { action: { name: string; visibility?: string } } | null;
}

/**
 * The head of a kept answer as sendResponse wrote it to a plain GET (every header in its order, the request id's
 * value left to fill), so that the next ones are written in one call with the same bytes.
 */
interface KeptHead {
	headers: string[];
	/** Where the X-Request-ID value goes in `headers`. */
	idAt: number;
}
const heads = new WeakMap<CachedResponse, KeptHead>();

/** The head `res` was answered with, to write again; none when it had no X-Request-ID (never, from serveKept). */
function headOf(res: ServerResponse): KeptHead | undefined {
	const headers: string[] = [];
	let idAt = -1;
	// getRawHeaderNames (Node ≥ 15.13): the names as set, in order; @types/node does not list it.
	for (const name of (res as ServerResponse & { getRawHeaderNames(): string[] }).getRawHeaderNames()) {
		const value = res.getHeader(name);
		if (Array.isArray(value)) return undefined;
		headers.push(name, String(value));
		if (name.toLowerCase() === "x-request-id") idAt = headers.length - 1;
	}
	return idAt < 0 ? undefined : { headers, idAt };
}

/** Answers `req` from the kept answers when it may be (true), or leaves it untouched for the routed path (false). */
export function serveKept(gw: KeptReadGateway, req: Req, res: ServerResponse): boolean {
	const method = req.method;
	if ((method !== "GET" && method !== "HEAD") || gw.logsRequests || !gw.broker.started || hasBody(req)) return false;
	if (gw.corsOn && req.headers.origin !== undefined) return false;
	const url = req.url ?? "/";
	const q = url.indexOf("?");
	let path = q < 0 ? url : url.slice(0, q);
	if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
	let found: { alias: unknown } | false;
	try {
		found = gw.resolveAlias(path, method);
	} catch {
		// A path moleculer-web cannot decode (a lone `%`): the routed path answers it 400.
		return false;
	}
	const alias = found ? (found.alias as KeptAlias) : undefined;
	if (!alias?.action || !alias.cachedBy || alias.audited || alias.route?.path !== "/api") return false;
	const kept = gw.readCaches.get(alias.cachedBy);
	// Nothing kept for this collection yet, or nothing ever (READ_CACHE_MS=0): the token is not even hashed.
	if (!kept?.enabled || kept.size === 0) return false;

	const { token, cookieSecret } = credentialOf(req.headers);
	if (!token) return false;
	const caller = gw.callers.get(hashToken(token));
	if (!caller || callerRefusal(caller, cookieSecret !== undefined) !== null) return false;
	if (alias.role && !roleAllows(caller.role, alias.role)) return false;
	const hit = kept.get(keptKey(caller.role, url));
	if (!hit) return false;
	// The routed path answers 503 when the action's service is gone, and 404 for an action not published.
	const endpoints = (
		gw.broker.registry as unknown as { getActionEndpoints(name: string): EndpointList | null }
	).getActionEndpoints(alias.action);
	const action = endpoints?.hasAvailable() ? endpoints.getFirst()?.action : undefined;
	if (!action || (action.visibility != null && action.visibility !== "published")) return false;
	// Last, as it counts the request: from here on it is answered.
	if (!gw.rateRoom(caller.principal)) return false;

	const startedAt = performance.now();
	const requestId =
		acceptedRequestId(req.headers["x-correlation-id"] ?? req.headers["x-request-id"]) ?? gw.broker.generateUid();
	// A plain GET (no validator to weigh, nothing set on the response yet) of an answer sent before: its head again.
	const plain =
		method === "GET" &&
		req.headers["if-none-match"] === undefined &&
		req.headers["if-modified-since"] === undefined &&
		res.getHeaderNames().length === 0;
	const head = plain ? heads.get(hit) : undefined;
	if (head) {
		const headers = head.headers.slice();
		headers[head.idAt] = requestId;
		res.writeHead(200, headers);
		res.end(hit.body);
	} else {
		setSecurityHeaders(res);
		res.setHeader("X-Request-ID", requestId);
		req.originalUrl ??= url;
		// What sendResponse reads of the routed request: the kept answer's type and headers, and the route (its ETag setting).
		req.$ctx = {
			meta: { $responseType: hit.type, $responseHeaders: { ...hit.headers }, $conditional: hit.conditional },
		} as unknown as Req["$ctx"];
		(req as Req & { $route?: unknown }).$route = alias.route;
		gw.sendResponse(req, res, hit.body, action);
		if (plain && res.statusCode === 200) {
			const sent = headOf(res);
			if (sent) heads.set(hit, sent);
		}
	}
	gw.keptMetrics?.record(performance.now() - startedAt);
	return true;
}
