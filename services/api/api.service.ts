/**
 * The API gateway: maps /api (lib/http/routes.ts) onto service actions and renders every failure in Eve's
 * error shape. It publishes only the routed actions; $node.* and internal actions are unreachable. It
 * alone decides when a read is answered 304 (see sendResponse), and passes If-Match on to the writes.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { ActionSchema, Context, Logger, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import ApiGateway from "moleculer-web";
import { configOf, type Config } from "../../lib/config";
import { COLLECTIONS, PUBLISHED_ACTIONS, type BodyKind } from "../../lib/http/routes";
import { EveError } from "../../lib/eve/errors";
import { ReadCache, READ_CACHE_MS } from "../../lib/http/read-cache";
import { hashToken, roleAllows, type Caller } from "../../lib/http/auth";
import type { AuditBegin, AuditComplete, AuditMeta, AuditResult } from "../../lib/contracts/audit";
import { GatewayUi, UI_ASSETS, securityHeaders } from "../../mixins/gateway-ui.mixin";
import { OWN_FAILURE_LOG, acceptedRequestId } from "../../lib/runtime/logging";
import { newObjectId } from "../../lib/eve/ids";
import { scopeRequests } from "../../lib/runtime/crash-guard";
import { retryRejected } from "../../lib/runtime/resilience";
import { othersStarted } from "../../lib/runtime/health";
import { aliasesFor } from "./aliases";
import { AliasLookups } from "./alias-lookups";
import { notModified, type CachedResponse } from "./conditional";
import { callerRefusal, credentialOf, type KnownCaller } from "./credentials";
import { KeptReadMetrics } from "./kept-metrics";
import { keptKey, serveKept } from "./kept-reads";
import { toEveError } from "./errors";
import { CSRF_COOKIE, SESSION_COOKIE, csrfOf, parseCookies, signInFor, type AuthMeta, type SignIn } from "./sessions";
import {
	MUTATING,
	changesState,
	discardBody,
	hasBody,
	isJson,
	jsonParser,
	queryPairs,
	userAgent,
	type JsonParser,
	type Req,
} from "./requests";

type Meta = Record<string, any>;

/** What the service keeps (created). */
interface ApiVars {
	/** The broker's configuration (lib/config.ts configOf), read in `created`. */
	config: Config;
	parseJson: JsonParser;
	readCaches: Map<string, ReadCache<CachedResponse>>;
	/** Callers by token hash: who a token is, kept until `tokens` changes. */
	callers: ReadCache<KnownCaller | null>;
	/** Whether CORS is configured, and whether requests are logged (kept-reads.ts leaves both to moleculer-web). */
	corsOn: boolean;
	logsRequests: boolean;
	rateWindows: Map<string, number>;
	rateWindowStart: number;
	/** Single sign-on (OIDC_ISSUER), or null. */
	signIn: SignIn | null;
	/** moleculer-web's HTTP server. */
	server: Server;
	/** moleculer-web's alias table (its routes' aliases, in order). */
	aliases: readonly unknown[];
	aliasLookups: AliasLookups;
	/** Kept reads counted in the request metrics (kept-metrics.ts); null when metrics are off. */
	keptMetrics: KeptReadMetrics | null;
}

interface ApiMethods {
	requireSignIn(): SignIn;
	authenticate(ctx: Context<unknown, Meta>, req: Req): Promise<Caller>;
	readBody(req: Req, res: ServerResponse): Promise<void>;
	prepareParams(req: Req): void;
	authorizeRole(ctx: Context<unknown, Meta>, req: Req): void;
	rateLimit(key: string): void;
	rateRoom(key: string): boolean;
	rateCount(key: string, take: boolean): number;
	audited(req: Req): boolean;
	audit(req: Req, status: number, message: string | null, data: unknown): Promise<void>;
	cacheKey(req: Req): string;
	readCache(service: string | undefined): ReadCache<CachedResponse>;
	sendResponse(req: Req, res: ServerResponse, data: unknown, action?: { name?: string }): void;
	httpHandler(req: Req, res: ServerResponse, next?: unknown): unknown;
	resolveAlias(url: string, method?: string): ReturnType<AliasLookups["resolve"]>;
}

type ApiThis = Service & ApiVars & ApiMethods;

const GATEWAY_CACHE_ENTRIES = 500;
/** Methods and paths whose alias the gateway remembers (alias-lookups.ts). */
const ALIAS_LOOKUPS = 2000;

/** The /auth route's actions (single sign-on), the only ones reached without a token. */
const AUTH_ACTIONS = new Set(["api.authConfig", "api.authLogin", "api.authCallback", "api.authLogout"]);

/** moleculer-web's own methods, which the ones below wrap. */
const gatewayMethods = (
	ApiGateway as unknown as {
		methods: Record<
			"httpHandler" | "sendResponse" | "sendError" | "aliasHandler" | "callAction" | "resolveAlias",
			(this: unknown, ...args: unknown[]) => unknown
		>;
	}
).methods;

/**
 * moleculer-web warns, with the error's stack, when a client closes a streamed answer before its end: for a live
 * event stream that is how it ends, so that one case is logged at debug; every other stream error still warns.
 */
function clientCloseAtDebug(logger: Logger): Logger {
	const warn = logger.warn.bind(logger);
	return {
		...logger,
		warn(...args: unknown[]) {
			const about = args[1] as { err?: { code?: unknown }; url?: unknown } | undefined;
			if (args[0] === "Stream got an error." && about?.err?.code === "ERR_STREAM_PREMATURE_CLOSE")
				return logger.debug("The client closed its stream:", about.url);
			return warn(...args);
		},
	};
}

/** The port opens once every other service of this process has started: no request is answered 503 meanwhile. */
const OpensLast: Partial<ServiceSchema> = {
	started(this: Service) {
		return othersStarted(this);
	},
};

/** The settings from the broker's configuration (lib/config.ts configOf). */
const FromConfig = {
	/**
	 * The settings moleculer-web reads in its own `created` (the port, CORS, request logs), from the broker's
	 * configuration (lib/config.ts configOf): merged runs after the mixins are applied and before any `created`.
	 */
	merged(this: Service, schema: ServiceSchema) {
		const config = configOf(this.broker);
		// Request logging builds strings on every request; LOGLEVEL=debug turns it on.
		const logRequests = config.broker.logLevel === "debug" ? "debug" : null;
		const cors = config.corsOrigins.length
			? {
					origin: config.corsOrigins,
					methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
					exposedHeaders: ["X-Total-Count", "Location"],
					maxAge: 21600,
				}
			: undefined;
		Object.assign(schema.settings ?? {}, {
			port: config.port,
			ip: config.host,
			logRequest: logRequests,
			logResponse: logRequests,
			cors,
		});
	},
} as Partial<ServiceSchema>;

const ApiService: ServiceSchema<
	ServiceSettingSchema & Record<string, unknown>,
	Record<string, never>,
	ApiVars,
	ApiThis
> = {
	name: "api",
	// GatewayUi: the dashboard at /, security headers, whoami, openapi.json, the alert stream. Listed first so
	// that its `stopped` (ending the open streams) runs before moleculer-web's waits for the connections to close.
	// OpensLast last: Moleculer runs the `started` of the last mixin first, so it waits before moleculer-web's opens the port.
	mixins: [
		GatewayUi as unknown as Partial<ServiceSchema>,
		ApiGateway as unknown as Partial<ServiceSchema>,
		OpensLast,
		FromConfig,
	],

	settings: {
		log4XXResponses: false,
		// The route and alias listing (some 250 lines) only at LOGLEVEL=debug: a start stays readable.
		logRouteRegistration: "debug",
		assets: UI_ASSETS,
		// Security headers on every answer; X-Request-Id (or X-Correlation-Id) from the client when it is a plain
		// token, else a new one: it is ctx.requestID in every service the request reaches, and comes back as X-Request-ID.
		rootCallOptions(
			this: ApiThis,
			options: { requestID?: string; meta?: Record<string, unknown> },
			req: IncomingMessage,
			res: ServerResponse,
		) {
			securityHeaders(options, req, res);
			options.requestID = acceptedRequestId(req.headers["x-correlation-id"] ?? req.headers["x-request-id"]);
		},
		logRequestParams: null,
		logResponseData: null,
		routes: [
			{
				// Single sign-on (services/api/sessions.ts): no token needed, cookies read.
				path: "/auth",
				mappingPolicy: "restrict",
				autoAliases: false,
				whitelist: [...AUTH_ACTIONS],
				mergeParams: false,
				bodyParsers: false,
				aliases: {
					"GET config": "api.authConfig",
					"GET login": "api.authLogin",
					"GET callback": "api.authCallback",
					"POST logout": "api.authLogout",
				},
				callOptions: { timeout: 30_000 },
				onBeforeCall(ctx: Context<unknown, AuthMeta>, _route: unknown, req: Req) {
					ctx.meta.cookies = parseCookies(req.headers.cookie);
					ctx.meta.url = (req.originalUrl ?? req.url ?? "/").slice(0, 8192);
					ctx.meta.source = req.socket.remoteAddress ?? "";
					ctx.meta.agent = userAgent(req);
					const csrf = req.headers["x-csrf-token"];
					if (typeof csrf === "string") ctx.meta.csrfHeader = csrf;
				},
			},
			{
				path: "/api",
				mappingPolicy: "restrict",
				autoAliases: false,
				whitelist: PUBLISHED_ACTIONS,
				mergeParams: false,
				// JSON bodies are read in aliasHandler, once the caller is known (see readBody).
				bodyParsers: false,
				aliases: aliasesFor(),
				callOptions: { timeout: 30_000 },
				// Authentication, authorization and the parameters' shape: see aliasHandler below.
				async onAfterCall(
					this: ApiThis,
					ctx: Context<unknown, Record<string, any>>,
					_route: unknown,
					req: Req,
					res: ServerResponse,
					data: unknown,
				) {
					if (this.audited(req)) await this.audit(req, ctx.meta.$statusCode ?? res.statusCode ?? 200, null, data);
					if (req.$cacheGeneration !== undefined && ctx.meta.$cacheable === true && Buffer.isBuffer(data)) {
						const entry: CachedResponse = {
							body: data,
							type: ctx.meta.$responseType,
							headers: { ...ctx.meta.$responseHeaders },
							conditional: ctx.meta.$conditional === true,
						};
						this.readCache(req.$alias?.cachedBy).set(this.cacheKey(req), entry, req.$cacheGeneration);
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
		onError(this: ApiThis, req: Req, res: ServerResponse, err: any) {
			const { code, body, internal } = toEveError(err, req.$alias?.unavailable);
			if (internal) this.logger.error("Request failed:", req.method, req.url, err);
			// An expected refusal (no master configured, a service not running, salt-api down): one line, no stack.
			else if (code >= 500)
				this.logger.warn(
					`${code} ${req.method} ${(req.originalUrl ?? req.url ?? "").split("?")[0]}: ${body._error.message}`,
				);
			const send = () => {
				if (res.headersSent) {
					res.destroy();
					return;
				}
				const payload = JSON.stringify(body);
				res.statusCode = code;
				res.setHeader("Content-Type", "application/json");
				res.setHeader("Content-Length", Buffer.byteLength(payload));
				if (code === 429) res.setHeader("Retry-After", String(err?.data?.retryAfter ?? 1));
				if (code === 401) res.setHeader("WWW-Authenticate", 'Bearer realm="fleet-ctl"');
				res.end(req.method === "HEAD" ? undefined : payload);
			};
			// Audited before the answer, as successful writes are: a client sees its own request in the log.
			if (this.audited(req)) void this.audit(req, code, body._error.message, null).then(send);
			else send();
		},
	},

	events: {
		/** A collection changed (on any node): its responses kept here are stale. */
		"eve.collectionChanged": {
			handler(this: ApiThis, ctx: Context<{ service: string }>) {
				this.readCache(ctx.params.service).clear();
				// A revoked or changed token must stop working at once.
				if (ctx.params.service === "tokens") this.callers.clear();
			},
		},
	},

	actions: {
		// moleculer-web's HTTP handler: a breaker on it would refuse every request for a while after a burst
		// of failures behind it (those have their own breakers, per endpoint).
		// Its failures are each request's, logged once by onError with the method and path (not by RequestLog).
		rest: { circuitBreaker: { enabled: false }, [OWN_FAILURE_LOG]: true } as ActionSchema,

		/** GET /auth/config: whether the dashboard offers single sign-on, and what its button says. */
		authConfig: {
			visibility: "published",
			handler(this: ApiThis) {
				return {
					oidc: this.signIn !== null,
					...(this.signIn ? { name: this.signIn.name } : {}),
					cookies: { session: SESSION_COOKIE, csrf: CSRF_COOKIE },
				};
			},
		},
		/** GET /auth/login: to the provider (services/api/sessions.ts). */
		authLogin: {
			visibility: "published",
			async handler(this: ApiThis, ctx: Context<unknown, AuthMeta>) {
				await this.requireSignIn().login(ctx.meta);
				return null;
			},
		},
		/** GET /auth/callback: back from the provider; the session opened, to the dashboard. */
		authCallback: {
			visibility: "published",
			async handler(this: ApiThis, ctx: Context<unknown, AuthMeta>) {
				await this.requireSignIn().callback(ctx, ctx.meta);
				return null;
			},
		},
		/** POST /auth/logout: the session revoked; answers where the browser goes next (the provider's logout). */
		authLogout: {
			visibility: "published",
			handler(this: ApiThis, ctx: Context<unknown, AuthMeta>) {
				return this.requireSignIn().logout(ctx, ctx.meta);
			},
		},

		/** GET /api/: the collections, as Eve's home endpoint lists them. */
		root: {
			visibility: "published",
			handler() {
				return { _links: { child: COLLECTIONS.map(c => ({ href: c, title: c })) } };
			},
		},
	},

	started(this: ApiThis) {
		// A kept read is counted as the `rest` action's request, as a routed one is (kept-reads.ts).
		this.keptMetrics = this.broker.isMetricsEnabled() ? new KeptReadMetrics(this.broker, this.fullName) : null;
		// Longer than the idle timeout of the proxies in front (ingress-nginx keeps upstream connections 60 s):
		// a proxy must never send a request on a connection this server is closing.
		this.server.keepAliveTimeout = this.config.httpKeepAliveMs;
		// Slow clients: the headers, and the whole request with its body, must arrive in time (else 408).
		// Node checks both every 30 s (its connectionsCheckingInterval); idle keep-alive connections are not counted.
		this.server.headersTimeout = this.config.httpHeadersTimeoutMs;
		this.server.requestTimeout = this.config.httpRequestTimeoutMs;
		// Once a shutdown began, every answer closes its connection: clients reconnect, to another replica.
		this.server.prependListener("request", (_req: IncomingMessage, res: ServerResponse) => {
			if (!this.broker.started) res.setHeader("Connection", "close");
		});
		// What Node's HTTP parser refuses itself (headers too large, a malformed message) gets Eve's shape too.
		this.server.on("clientError", (err: NodeJS.ErrnoException, socket: Socket) => {
			if (err.code === "ECONNRESET" || !socket.writable) {
				socket.destroy();
				return;
			}
			const [code, reason, message] =
				err.code === "HPE_HEADER_OVERFLOW"
					? [431, "Request Header Fields Too Large", "request header fields too large"]
					: err.code === "ERR_HTTP_REQUEST_TIMEOUT"
						? [408, "Request Timeout", "the request took too long to arrive"]
						: [400, "Bad Request", "malformed HTTP request"];
			const payload = JSON.stringify({ _status: "ERR", _error: { code, message } });
			socket.end(
				`HTTP/1.1 ${code} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
			);
		});
		// Last: every request runs in the crash guard's scope, so an error nothing caught answers it 500.
		scopeRequests(this.server);
	},

	stopped(this: ApiThis) {
		this.keptMetrics?.stop();
		this.keptMetrics = null;
	},

	created(this: ApiThis) {
		this.config = configOf(this.broker);
		this.logger = clientCloseAtDebug(this.logger);
		this.keptMetrics = null;
		this.readCaches = new Map<string, ReadCache<CachedResponse>>();
		this.aliasLookups = new AliasLookups(ALIAS_LOOKUPS);
		this.callers = new ReadCache<KnownCaller | null>(READ_CACHE_MS, 10_000);
		this.corsOn = this.config.corsOrigins.length > 0;
		this.logsRequests = this.config.broker.logLevel === "debug";
		this.parseJson = jsonParser(this.config.maxBodyBytes);
		this.rateWindows = new Map<string, number>();
		this.rateWindowStart = Date.now();
		this.signIn = signInFor(this.config, (what, why) => this.logger.warn(what, why));
	},

	methods: {
		/** The sign-in flow, or a 404 when OIDC is not configured. */
		requireSignIn(this: ApiThis): SignIn {
			if (!this.signIn)
				throw new EveError(404, "single sign-on is not configured here (OIDC_ISSUER): use an API token");
			return this.signIn;
		},

		/** Bearer token (or a session cookie) -> caller (ctx.meta.user). Every /api route needs one. */
		async authenticate(this: ApiThis, ctx: Context<unknown, Record<string, any>>, req: Req): Promise<Caller> {
			// An API token in the header; else a signed-in browser's session cookie (services/api/sessions.ts).
			const { token, cookieSecret } = credentialOf(req.headers);
			if (!token)
				throw new EveError(
					401,
					this.signIn
						? "sign in (GET /auth/login), or send an API token: Authorization: Bearer <token>"
						: "an API token is required: Authorization: Bearer <token>",
				);
			const hash = hashToken(token);
			let caller: KnownCaller | null | undefined = this.callers.get(hash);
			if (caller === undefined) {
				const generation = this.callers.generation;
				caller = await retryRejected(() => ctx.call<Caller | null, { hash: string }>("tokens.verify", { hash }));
				this.callers.set(hash, caller, generation);
			}
			const refused = callerRefusal(caller, cookieSecret !== undefined);
			if (refused !== null || !caller) throw new EveError(401, refused ?? "");
			const user: Caller = {
				id: caller.id,
				name: caller.name,
				role: caller.role,
				scope: caller.scope,
				principal: caller.principal,
				...(caller.subject ? { subject: caller.subject } : {}),
				...(cookieSecret !== undefined ? { session: true } : {}),
			};
			// Set before the rate limit, so that the audit record of a refused write says whose it was.
			ctx.meta.user = user;
			// Another site can make the browser send the cookie, not read the CSRF token: no state changes without it (a GET with mark_as_read included).
			if (cookieSecret !== undefined && changesState(req) && req.headers["x-csrf-token"] !== csrfOf(cookieSecret)) {
				throw new EveError(403, "the request lacks its CSRF token (X-CSRF-Token, the value of the fleet_csrf cookie)");
			}
			// Counted per principal: the tokens a caller mints from theirs share its count (docs/security.md, "Principals").
			this.rateLimit(caller.principal);
			return user;
		},

		/**
		 * moleculer-web parses bodies, resolves the action's endpoint (503 when its service is down) and runs
		 * onBeforeCall before it authenticates. Here who asks and whether they may come first: no answer but
		 * 401 without a valid token, and 403 for a role that does not allow the request before its body is
		 * even read. The token's scope is not checked here: what a run does is decided where it starts, on the
		 * hosts it resolves to (the cm-gateway for runs, the tasks service for task writes).
		 */
		async aliasHandler(this: ApiThis, req: Req, res: ServerResponse, alias: unknown) {
			const ctx = req.$ctx as Context<unknown, Record<string, any>>;
			// /auth (single sign-on: services/api/sessions.ts) is how one gets a session: no token asked for.
			if (AUTH_ACTIONS.has(req.$alias?.action ?? "")) return gatewayMethods.aliasHandler.call(this, req, res, alias);
			// The request's audit record id, made here for every audited request (refused ones too), so that the
			// records of one gateway sort by _id in the order their requests arrived; a run of the routed action
			// writes under it (lib/contracts/audit.ts).
			if (this.audited(req)) (ctx.meta as AuditMeta).audit = { id: newObjectId(), action: req.$alias?.action ?? "" };
			ctx.meta.user = await this.authenticate(ctx, req);
			this.authorizeRole(ctx, req);
			// The writes compare it with the record they change (412 when it names another version).
			const ifMatch = req.headers["if-match"];
			if (MUTATING.has(req.method as string) && typeof ifMatch === "string") ctx.meta.ifMatch = ifMatch;
			await this.readBody(req, res);
			this.prepareParams(req);
			// Runs are authorized where they start (the cm-gateway, the tasks service), on what they resolve
			// to; they write their audit record under this id before anything runs, and answer what they ran.
			ctx.meta.request = {
				source: req.socket.remoteAddress ?? "",
				agent: userAgent(req),
				method: req.method,
				path: (req.originalUrl ?? req.url ?? "").slice(0, 4096),
			};
			// No service has the action (no master configured, its service not running): the 503 moleculer-web would
			// answer, without the broker's warning about each such request (onError logs it once).
			const action = req.$alias?.action;
			if (
				action &&
				!(this.broker.registry as unknown as { getActionEndpoints(name: string): unknown }).getActionEndpoints(action)
			)
				throw new ApiGateway.Errors.ServiceUnavailableError("SERVICE_UNAVAILABLE", { action });
			return gatewayMethods.aliasHandler.call(this, req, res, alias);
		},

		/** moleculer-web's own logs every 5xx with its stack; onError logs each failure once (an expected refusal in one line). */
		errorHandler(this: ApiThis, req: Req, res: ServerResponse, err: unknown) {
			gatewayMethods.sendError.call(this, req, res, err);
		},

		/** The JSON body of a route that takes one (other content types are left for prepareParams to refuse). */
		readBody(this: ApiThis, req: Req, res: ServerResponse): Promise<void> {
			const kind = req.$alias?.bodyKind;
			// A stream is the action's to read; a body a route does not take is read and dropped.
			if (kind === "stream") return Promise.resolve();
			if (kind !== "json") return hasBody(req) ? discardBody(req, this.config.maxBodyBytes) : Promise.resolve();
			return new Promise((resolve, reject) =>
				this.parseJson(req, res, err => {
					if (err) return reject(err);
					// No bytes is no body (body-parser would make it `{}`): the actions answer 400, as Eve does.
					req.$params.body = req.$bodyBytes ? req.body : undefined;
					resolve();
				}),
			);
		},

		/** What the action gets: the path parameters, `query` as ordered pairs, and the body its kind allows. */
		prepareParams(this: ApiThis, req: Req) {
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

		/** The route's role. */
		authorizeRole(this: ApiThis, ctx: Context<unknown, Record<string, any>>, req: Req) {
			const caller: Caller = ctx.meta.user;
			const need = req.$alias?.role;
			if (need && !roleAllows(caller.role, need))
				throw new EveError(403, `the ${caller.role} role may not ${req.method} ${req.originalUrl?.split("?")[0]}`);
		},

		/** A fixed one-minute window per principal; RATE_LIMIT_PER_MINUTE=0 turns it off. A request over the limit is counted too. */
		rateLimit(this: ApiThis, key: string) {
			const limit = this.config.rateLimitPerMinute;
			if (limit && this.rateCount(key, true) > limit) {
				throw new EveError(429, "Rate limit exceeded", {
					retryAfter: Math.max(1, Math.ceil((this.rateWindowStart + 60_000 - Date.now()) / 1000)),
				} as never);
			}
		},

		/** Counts a request of `key` when the limit has room for it (kept-reads.ts); false, counting nothing, when not. */
		rateRoom(this: ApiThis, key: string): boolean {
			const limit = this.config.rateLimitPerMinute;
			if (!limit) return true;
			if (this.rateCount(key, false) >= limit) return false;
			this.rateCount(key, true);
			return true;
		},

		/** The requests of `key` in the current window, this one counted when `take`. */
		rateCount(this: ApiThis, key: string, take: boolean): number {
			if (!this.config.rateLimitPerMinute) return 0;
			const now = Date.now();
			if (now - this.rateWindowStart >= 60_000) {
				this.rateWindowStart = now;
				this.rateWindows.clear();
			}
			const count = (this.rateWindows.get(key) ?? 0) + (take ? 1 : 0);
			if (take) this.rateWindows.set(key, count);
			return count;
		},

		/**
		 * Every mutating request is audited (not a POST that only computes an answer, as a target preview), and
		 * the reads the route table marks (they hand out secrets).
		 */
		audited(this: ApiThis, req: Req): boolean {
			return (MUTATING.has(req.method as string) && req.$alias?.computes !== true) || req.$alias?.audited === true;
		},

		/**
		 * One audit record per audited request, built by the audit service from what the gateway knows of it. A run's
		 * record was begun under the request's id by the run door (meta.auditBegun): this completes it; any other
		 * request's record is written whole now.
		 */
		async audit(this: ApiThis, req: Req, status: number, message: string | null, data: unknown) {
			const meta = (req.$ctx?.meta ?? {}) as AuditMeta & { user?: Caller };
			const id = meta.audit?.id ?? newObjectId();
			const response = (Buffer.isBuffer(data) ? null : data) as Record<string, any> | null;
			const result: AuditResult = {
				status,
				// A run held for approval (202) ran nothing: its record says so, as the run door wrote it.
				...(response?.status === "pending_approval" ? { outcome: "held" as const } : {}),
				...(message ? { message } : {}),
				jid: response?.task_id ?? response?.jid ?? null,
			};
			const method = req.method ?? "";
			const path = req.originalUrl ?? req.url ?? "";
			try {
				if (meta.auditBegun === id) await this.broker.call<unknown, AuditComplete>("audit.complete", { id, result });
				else {
					const caller = meta.user;
					// What a task write leaves to run (the tasks service says it), for the record.
					const run = meta.auditRun;
					const body = req.$params?.body;
					await this.broker.call<unknown, AuditBegin>("audit.begin", {
						id,
						who: { token: caller?.id ?? null, name: caller?.name ?? null, role: caller?.role ?? null },
						request: {
							source: req.socket.remoteAddress ?? "",
							...(userAgent(req) ? { agent: userAgent(req) } : {}),
							method,
							path,
						},
						...(run ? { run: { targets: run.targets, fun: run.fun } } : {}),
						...(body !== undefined ? { body } : {}),
						result,
					});
				}
			} catch (err) {
				this.logger.error("Could not write an audit record:", (err as Error).message, method, path);
			}
		},

		/** A kept read is served to callers of the same role only: what a read shows may depend on it (hosts' otp_secret). */
		cacheKey(this: ApiThis, req: Req): string {
			return keptKey((req.$ctx?.meta.user as Caller | undefined)?.role ?? "", req.originalUrl ?? "");
		},

		/** A read whose answer is kept here is sent at once (kept-reads.ts); everything else is routed by moleculer-web. */
		httpHandler(this: ApiThis, req: Req, res: ServerResponse, next?: unknown) {
			if (serveKept(this, req, res)) return;
			return gatewayMethods.httpHandler.call(this, req, res, next);
		},

		readCache(this: ApiThis, service: string): ReadCache<CachedResponse> {
			let cache = this.readCaches.get(service);
			if (!cache)
				this.readCaches.set(
					service,
					(cache = new ReadCache<CachedResponse>(this.config.readCacheMs, GATEWAY_CACHE_ENTRIES)),
				);
			return cache;
		},

		/**
		 * Serves a cacheable read from the responses kept here (after authentication and validation,
		 * which have run by now), so repeated reads do not cross the transporter; otherwise calls on.
		 */
		callAction(
			this: ApiThis,
			route: unknown,
			actionName: string,
			req: Req,
			res: ServerResponse,
			params: unknown,
			isStream: boolean,
		) {
			const service = req.$alias?.cachedBy;
			if (service && (req.method === "GET" || req.method === "HEAD")) {
				const cache: ReadCache<CachedResponse> = this.readCache(service);
				const hit = cache.get(this.cacheKey(req));
				if (hit) {
					const ctx = req.$ctx as Context<unknown, Record<string, any>>;
					ctx.meta.$responseType = hit.type;
					ctx.meta.$responseHeaders = { ...hit.headers };
					ctx.meta.$conditional = hit.conditional;
					this.sendResponse(req, res, hit.body, req.$endpoint?.action as { name?: string } | undefined);
					return Promise.resolve(true);
				}
				req.$cacheGeneration = cache.generation;
			}
			const call = () =>
				gatewayMethods.callAction.call(this, route, actionName, req, res, params, isStream) as Promise<unknown>;
			// Reads are idempotent: one whose node left before answering (a crash, NATS lost) is sent again.
			return req.method === "GET" || req.method === "HEAD" ? retryRejected(call) : call();
		},

		/**
		 * moleculer-web's sendResponse, with the conditional-request decision taken here (notModified):
		 * its own check (`fresh`) would answer 304 to any 2xx whose Last-Modified an If-Modified-Since
		 * covers, lists included, and to `If-None-Match: *` whatever the request (a POST too).
		 */
		sendResponse(this: unknown, req: Req, res: ServerResponse, data: unknown, action?: { name?: string }): void {
			const ctx = req.$ctx;
			if (ctx && notModified(req.method, req.headers, ctx.meta, action?.name ?? req.$alias?.action))
				ctx.meta.$statusCode = 304;
			delete req.headers["if-none-match"];
			delete req.headers["if-modified-since"];
			gatewayMethods.sendResponse.call(this, req, res, data, action);
		},

		/** A plain OPTIONS (no CORS preflight) must reach the "*" aliases that answer it, not the GET ones. */
		resolveAlias(this: ApiThis, url: string, method?: string) {
			const m = method ?? "OPTIONS";
			return this.aliasLookups.resolve(
				this.aliases,
				url,
				m,
				() => gatewayMethods.resolveAlias.call(this, url, m) as ReturnType<AliasLookups["resolve"]>,
			);
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
