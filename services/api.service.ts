/**
 * The API gateway: maps /api (lib/routes.ts) onto service actions and renders every failure in Eve's
 * error shape. It publishes only the routed actions; $node.* and internal actions are unreachable.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context, ServiceSchema } from "moleculer";
import { Errors } from "moleculer";
import ApiGateway from "moleculer-web";
import { loadConfig } from "../lib/config";
import { ROUTES, COLLECTIONS, PUBLISHED_ACTIONS, type RouteMethod, type BodyKind } from "../lib/routes";
import { DEFAULT_MESSAGES, EveError } from "../lib/eve/errors";
import { toIssues } from "../lib/eve/validation";
import type { QueryPairs } from "../lib/eve/query";
import { ReadCache, READ_CACHE_MS } from "../lib/read-cache";

interface CachedResponse {
	body: Buffer;
	type?: string;
	headers: Record<string, string>;
}

const GATEWAY_CACHE_ENTRIES = 500;

type Req = IncomingMessage & {
	$params: Record<string, any>;
	$alias?: { bodyKind?: BodyKind; cachedBy?: string };
	$endpoint?: { action: unknown };
	$cacheGeneration?: number;
	originalUrl?: string;
	$ctx?: Context<unknown, Record<string, any>>;
	body?: unknown;
};

const config = loadConfig();

/** The query string as ordered pairs; Eve's links repeat it in the client's order. */
function queryPairs(search: string): QueryPairs {
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

interface EveErrorBody {
	_status: "ERR";
	_error: { code: number; message: string };
	_issues?: unknown;
	_items?: unknown;
}

/** Any error, from any layer, as Eve's error body. Unknown errors are 500s that reveal nothing. */
export function toEveError(err: any): { code: number; body: EveErrorBody; internal: boolean } {
	let code = 500;
	let message: string | undefined;
	let extra: Partial<EveErrorBody> = {};
	let internal = false;

	if (err instanceof EveError || err?.type === "EVE") {
		code = err.code;
		message = err.message;
		if (err.data?.issues) extra._issues = err.data.issues;
		if (err.data?.items) extra._items = err.data.items;
	} else if (err?.name === "ValidationError" && err.code === 422) {
		code = 422;
		message = "invalid request parameters";
		if (Array.isArray(err.data)) extra._issues = toIssues(err.data, {});
	} else if (typeof err?.type === "string" && err.type.startsWith("entity.")) {
		// body-parser (moleculer-web passes its errors on as MoleculerErrors with the same type)
		const status = err.status ?? err.code;
		code = status === 413 ? 413 : 400;
		message = status === 413 ? `request body too large (limit ${config.maxBodyBytes} bytes)` : err.type === "entity.parse.failed" ? "malformed JSON in the request body" : "unreadable request body";
	} else if (err?.name === "ServiceUnavailableError" || err?.name === "ServiceNotAvailableError" || (err?.name === "ServiceNotFoundError" && err?.data?.action && !String(err.data.action).startsWith("$"))) {
		code = 503;
		message = "the service that handles this request is not available";
	} else if (err?.name === "RequestTimeoutError") {
		code = 504;
		message = "the request took too long to complete";
	} else if (err?.name === "NotFoundError" || err?.name === "ServiceNotFoundError") {
		code = 404;
	} else if (err?.name === "PayloadTooLarge") {
		code = 413;
	} else if (err?.name === "RateLimitExceeded") {
		code = 429;
	} else if (err?.type === "ERR_UNABLE_DECODE_PARAM") {
		code = 400;
		message = "malformed percent-encoding in the URL";
	} else if (err instanceof Errors.MoleculerError && err.code >= 400 && err.code < 500) {
		code = err.code;
		message = err.message;
	} else {
		internal = true;
	}
	if (!DEFAULT_MESSAGES[code] && (code < 400 || code > 599)) code = 500;
	if (internal) message = DEFAULT_MESSAGES[500];
	return { code, body: { _status: "ERR", _error: { code, message: message || DEFAULT_MESSAGES[code] || "Error" }, ...extra }, internal };
}

function aliasesFor(): Record<string, unknown> {
	const aliases: Record<string, unknown> = { "GET /": "api.root", "HEAD /": "api.root" };
	for (const route of ROUTES) {
		const allowed = Object.keys(route.methods);
		for (const [method, def] of Object.entries(route.methods) as Array<[string, RouteMethod]>) {
			// An object alias takes its type from `type`; a "stream:" prefix would stay in the action name.
			aliases[`${method} /${route.path}`] = { action: def.action, type: def.body === "stream" ? "stream" : "call", bodyKind: def.body ?? "none", cachedBy: def.cachedBy };
			if (method === "GET") aliases[`HEAD /${route.path}`] = { action: def.action, bodyKind: "none", cachedBy: def.cachedBy };
		}
		const allow = [...new Set([...allowed, ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"])].join(", ");
		// Whatever a path does not list: OPTIONS answers with Allow, the rest is 405 (Eve's behaviour).
		aliases[`* /${route.path}`] = (req: Req, res: ServerResponse, next: (err?: unknown) => void) => {
			res.setHeader("Allow", allow);
			if (req.method === "OPTIONS") {
				res.writeHead(200, { "Content-Length": "0" });
				res.end();
				return;
			}
			next(new EveError(405));
		};
	}
	aliases["* /"] = (req: Req, res: ServerResponse, next: (err?: unknown) => void) => {
		res.setHeader("Allow", "GET, HEAD, OPTIONS");
		if (req.method === "OPTIONS") {
			res.writeHead(200, { "Content-Length": "0" });
			res.end();
			return;
		}
		next(new EveError(405));
	};
	return aliases;
}

function isJson(req: IncomingMessage): boolean {
	const type = String(req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
	return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

function hasBody(req: IncomingMessage): boolean {
	return Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
}

const ApiService: ServiceSchema<any> = {
	name: "api",
	mixins: [ApiGateway as unknown as Partial<ServiceSchema>],

	settings: {
		port: config.port,
		ip: config.host,
		log4XXResponses: false,
		// Request logging builds strings on every request; LOGLEVEL=debug turns it on.
		logRequest: process.env.LOGLEVEL === "debug" ? "debug" : null,
		logResponse: process.env.LOGLEVEL === "debug" ? "debug" : null,
		logRequestParams: null,
		logResponseData: null,
		cors: config.corsOrigins.length
			? { origin: config.corsOrigins, methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], exposedHeaders: ["X-Total-Count", "Location"], maxAge: 21600 }
			: undefined,
		routes: [
			{
				path: "/api",
				mappingPolicy: "restrict",
				autoAliases: false,
				whitelist: PUBLISHED_ACTIONS,
				mergeParams: false,
				bodyParsers: { json: { strict: true, limit: config.maxBodyBytes } },
				aliases: aliasesFor(),
				callOptions: { timeout: 30_000 },
				onBeforeCall(this: any, ctx: Context<unknown, Record<string, any>>, _route: unknown, req: Req) {
					const kind: BodyKind = req.$alias?.bodyKind ?? "none";
					if (kind === "json" && hasBody(req) && !isJson(req)) {
						throw new EveError(400, "Unknown or no Content-Type header supplied");
					}
					const { query, body, params } = req.$params;
					const out: Record<string, unknown> = { ...(params ?? {}), query: query ?? [] };
					if (kind === "json") out.body = body;
					if (kind === "stream") out.contentType = String(req.headers["content-type"] ?? "");
					req.$params = out;
				},
				onAfterCall(this: any, ctx: Context<unknown, Record<string, any>>, _route: unknown, req: Req, _res: unknown, data: unknown) {
					if (req.$cacheGeneration !== undefined && ctx.meta.$cacheable === true && Buffer.isBuffer(data)) {
						const entry: CachedResponse = { body: data, type: ctx.meta.$responseType, headers: { ...ctx.meta.$responseHeaders } };
						this.readCache(req.$alias?.cachedBy).set(req.originalUrl, entry, req.$cacheGeneration);
					}
					const location = ctx.meta.$location;
					if (typeof location === "string" && location.startsWith("/")) {
						const proto = (req.socket as { encrypted?: boolean }).encrypted ? "https" : "http";
						ctx.meta.$location = `${proto}://${req.headers.host ?? "localhost"}${location}`;
					}
					return data;
				},
			},
		],
		onError(this: any, req: Req, res: ServerResponse, err: unknown) {
			const { code, body, internal } = toEveError(err);
			if (internal) this.logger.error("Request failed:", req.method, req.url, err);
			if (res.headersSent) {
				res.destroy();
				return;
			}
			const payload = JSON.stringify(body);
			res.statusCode = code;
			res.setHeader("Content-Type", "application/json");
			res.setHeader("Content-Length", Buffer.byteLength(payload));
			if (code === 429 && !res.getHeader("Retry-After")) res.setHeader("Retry-After", "1");
			res.end(req.method === "HEAD" ? undefined : payload);
		},
	},

	events: {
		/** A collection changed (on any node): its responses kept here are stale. */
		"eve.collectionChanged": {
			handler(this: any, ctx: Context<{ service: string }>) {
				this.readCache(ctx.params.service).clear();
			},
		},
	},

	actions: {
		/** GET /api/: the collections, as Eve's home endpoint lists them. */
		root: {
			visibility: "published",
			handler() {
				return { _links: { child: COLLECTIONS.map(c => ({ href: c, title: c })) } };
			},
		},
	},

	created(this: any) {
		this.readCaches = new Map<string, ReadCache<CachedResponse>>();
	},

	methods: {
		readCache(this: any, service: string): ReadCache<CachedResponse> {
			let cache = this.readCaches.get(service);
			if (!cache) this.readCaches.set(service, (cache = new ReadCache<CachedResponse>(READ_CACHE_MS, GATEWAY_CACHE_ENTRIES)));
			return cache;
		},

		/**
		 * Serves a cacheable read from the responses kept here (after authentication and validation,
		 * which have run by now), so repeated reads do not cross the transporter; otherwise calls on.
		 */
		callAction(this: any, route: unknown, actionName: string, req: Req, res: ServerResponse, params: unknown, isStream: boolean) {
			const service = req.$alias?.cachedBy;
			if (service && (req.method === "GET" || req.method === "HEAD")) {
				const cache: ReadCache<CachedResponse> = this.readCache(service);
				const hit = cache.get(req.originalUrl as string);
				if (hit) {
					const ctx = req.$ctx as Context<unknown, Record<string, any>>;
					ctx.meta.$responseType = hit.type;
					ctx.meta.$responseHeaders = { ...hit.headers };
					this.sendResponse(req, res, hit.body, req.$endpoint?.action);
					return Promise.resolve(true);
				}
				req.$cacheGeneration = cache.generation;
			}
			return (ApiGateway as any).methods.callAction.call(this, route, actionName, req, res, params, isStream);
		},

		/** A plain OPTIONS (no CORS preflight) must reach the "*" aliases that answer it, not the GET ones. */
		resolveAlias(url: string, method?: string) {
			return (ApiGateway as any).methods.resolveAlias.call(this, url, method ?? "OPTIONS");
		},

		parseQueryString(req: IncomingMessage) {
			const url = req.url ?? "/";
			const q = url.indexOf("?");
			if (q < 0) return { url, query: [] };
			return { url: url.slice(0, q), query: queryPairs(url.slice(q + 1)) };
		},
	},
};

export default ApiService;
