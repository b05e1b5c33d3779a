/**
 * What the gateway adds for people and integrations besides the collections (composed by
 * services/api/api.service.ts): the dashboard's static files at `/`, security headers on every answer,
 * `GET /api/whoami`, `GET /api/openapi.json` (lib/http/openapi.ts) and `GET /api/alerts/stream`, the
 * alerts raised anywhere in the cluster pushed to the browser as server-sent events.
 *
 * The stream authenticates like every /api route: `Authorization: Bearer <token>`. Browsers' EventSource
 * cannot send that header, so the dashboard reads the stream with fetch() (docs/dashboard.md); no token
 * ever goes into a URL, where logs and proxies would keep it.
 */
import fs from "node:fs";
import path from "node:path";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { PassThrough } from "node:stream";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { ROUTES, type RouteMethod } from "../lib/http/routes";
import { buildOpenApi, type CollectionDescription } from "../lib/http/openapi";
import { formatHttpDate } from "../lib/eve/dates";
import { EveError } from "../lib/eve/errors";
import { QueryArgs } from "../lib/eve/query";
import { readJson } from "../lib/eve/render";
import { OBJECT_ID } from "../lib/eve/ids";
import { configOf } from "../lib/config";

/** The dashboard and the docs page load nothing from elsewhere and run no inline script or style. */
const CSP =
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/**
 * moleculer-web's rootCallOptions hook, which sees every request: the security headers on every response,
 * and the request's method in the call's meta (a HEAD of the alert stream gets no body, so it must not
 * register a stream that nothing would ever read or close).
 */
export function securityHeaders(
	options: { meta?: Record<string, unknown> },
	req: IncomingMessage,
	res: ServerResponse,
): void {
	const lastEventId = req.headers["last-event-id"];
	options.meta = {
		...options.meta,
		$method: req.method,
		...(typeof lastEventId === "string" && OBJECT_ID.test(lastEventId) ? { $lastEventId: lastEventId } : {}),
	};
	setSecurityHeaders(res);
}

/** The security headers every response carries (routed or not: services/api/kept-reads.ts). */
export function setSecurityHeaders(res: ServerResponse): void {
	res.setHeader("Content-Security-Policy", CSP);
	res.setHeader("X-Content-Type-Options", "nosniff");
	res.setHeader("X-Frame-Options", "DENY");
	res.setHeader("Referrer-Policy", "no-referrer");
	res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
	res.setHeader("Cross-Origin-Resource-Policy", "same-origin");
}

/** The built dashboard (dist/ui, made by `npm run build`); from the sources (tests), the built one next to them. */
export function uiFolder(): string {
	const candidates = [path.resolve(__dirname, "..", "ui"), path.resolve(__dirname, "..", "dist", "ui")];
	return (
		candidates.find(dir => fs.existsSync(path.join(dir, "index.html")) && fs.existsSync(path.join(dir, "assets"))) ??
		candidates[0]
	);
}

/** The `assets` setting of the gateway: static files, never listing a directory, revalidated. */
export const UI_ASSETS = {
	folder: uiFolder(),
	options: { index: "index.html", maxAge: 0, dotfiles: "ignore", fallthrough: true },
};

const STREAM_MAX_SECONDS = 3600;
const HEARTBEAT_MS = 15_000;
/** A client that reads nothing does not hold alerts forever: past this many bytes waiting, it is dropped. */
const STREAM_BACKLOG_BYTES = 1024 * 1024;
/** Open streams per gateway process; more are refused with 503 (each holds a connection and a buffer). */
const STREAMS_MAX = 1000;
/** What a refused stream's client is told to wait before trying again (its other streams end when it closes them). */
const STREAM_SHARE_RETRY_S = 5;
/** A Salt job id. */
const JID = /^\d{20}$/;

function packageVersion(): string {
	for (const p of [
		path.resolve(__dirname, "..", "package.json"),
		path.resolve(__dirname, "..", "..", "package.json"),
	]) {
		try {
			return JSON.parse(fs.readFileSync(p, "utf8")).version as string;
		} catch {
			// next candidate
		}
	}
	return "0.0.0";
}

function renderAlert(alert: Record<string, any>): Record<string, unknown> {
	const out: Record<string, unknown> = { ...alert };
	for (const k of ["_created", "_updated"])
		if (alert[k] instanceof Date || typeof alert[k] === "string") out[k] = formatHttpDate(new Date(alert[k]));
	return out;
}

/** What the mixin keeps on the gateway service. */
interface UiVars {
	/** The alert streams open on this gateway. */
	alertStreams: Set<PassThrough>;
	/** The approval streams open on this gateway. */
	approvalStreams: Set<PassThrough>;
	/** The job-return streams open on this gateway, each with the job it follows (null: every job). */
	returnStreams: Map<PassThrough, string | null>;
	/** Open streams by principal, every kind together (a principal without any is not kept). */
	streamShares: Map<string, number>;
	/**
	 * Open streams of one principal on this gateway, every kind together (STREAMS_PER_PRINCIPAL): more are its own
	 * doing, refused with 429, so that no one person or service account takes the process's slots from the others.
	 */
	streamsPerPrincipal: number;
	packageVersion: string;
	heartbeat: NodeJS.Timeout;
	/** moleculer-web's HTTP server (undefined before it listens). */
	server?: Server;
	/** The server's open connections (for the stop: those no request ever came on are closed, closeIdleConnections leaves them). */
	connections?: Set<Socket>;
}

type UiThis = Service &
	UiVars & {
		replayAlerts(ctx: Context, stream: PassThrough, lastId: string): Promise<void>;
		openStream(
			ctx: Context<{ query?: unknown }, Record<string, any>>,
			streams: Set<PassThrough>,
			kind: string,
			replay?: (stream: PassThrough) => Promise<void>,
		): Promise<PassThrough>;
		pushToStreams(streams: Set<PassThrough>, text: string): void;
	};

export const GatewayUi: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, UiVars, UiThis>> = {
	actions: {
		/** GET /api/whoami: who the token belongs to, so that clients offer only what the role allows. */
		whoami: {
			handler(ctx: Context<unknown, Record<string, any>>) {
				const user = ctx.meta.user ?? {};
				return {
					_id: user.id,
					name: user.name,
					role: user.role,
					scope: user.scope ?? null,
					principal: user.principal,
					...(user.subject ? { subject: user.subject } : {}),
					session: user.session === true,
				};
			},
		},

		/** GET /api/openapi.json */
		openapi: {
			async handler(this: UiThis, ctx: Context) {
				const services = [
					...new Set(
						ROUTES.flatMap(r => (Object.values(r.methods) as RouteMethod[]).map(m => m.action.split(".")))
							.filter(([, verb]) => verb === "list" || verb === "get")
							.map(([service]) => service),
					),
				];
				const collections = new Map<string, CollectionDescription>();
				await Promise.all(
					services.map(async service => {
						try {
							collections.set(
								service,
								await ctx.call<CollectionDescription, Record<string, never>>(
									`${service}.eveSchema`,
									{},
									{ timeout: 5000 },
								),
							);
						} catch {
							// not running: documented without its fields
						}
					}),
				);
				return buildOpenApi(collections, this.packageVersion);
			},
		},

		/**
		 * GET /api/alerts/stream: server-sent events, one `alert` per alert raised from now on; a client that
		 * reconnects with `Last-Event-ID` first gets the alerts raised since that one's second (the client
		 * drops those it has already seen by their ids).
		 */
		alertStream: {
			async handler(this: UiThis, ctx: Context<{ query?: unknown }, Record<string, any>>) {
				return this.openStream(ctx, this.alertStreams, "alert", stream =>
					ctx.meta.$lastEventId ? this.replayAlerts(ctx, stream, ctx.meta.$lastEventId) : Promise.resolve(),
				);
			},
		},

		/**
		 * GET /api/actions/stream?jid=<jid>: server-sent events, one `returns` event `{"jid"}` each time returns of the
		 * job (without `jid`: of any job) are recorded, so that a page showing a job reads its `actions` again then,
		 * instead of polling. The returns themselves are read through GET /api/actions (they can be large).
		 */
		returnStream: {
			async handler(this: UiThis, ctx: Context<{ query?: unknown }, Record<string, any>>) {
				const jid = QueryArgs.from(ctx.params.query).get("jid");
				if (jid !== undefined && !JID.test(jid)) throw new EveError(400, "jid must be a Salt job id (20 digits)");
				if (this.returnStreams.size >= STREAMS_MAX)
					throw new EveError(503, `too many open job-return streams on this gateway (${STREAMS_MAX}); try again later`);
				// openStream keeps its streams in a set; these are kept with the job each follows.
				const stream = await this.openStream(ctx, new Set<PassThrough>(), "job-return");
				if (stream.writableEnded) return stream;
				this.returnStreams.set(stream, jid ?? null);
				stream.once("close", () => this.returnStreams.delete(stream));
				return stream;
			},
		},

		/**
		 * GET /api/approvals/stream: server-sent events, one `approval` per request made or changed from now on (a vote,
		 * a decision, its dry run's predictions, its run), each the request as GET /api/approvals/{id} shows it.
		 */
		approvalStream: {
			async handler(this: UiThis, ctx: Context<{ query?: unknown }, Record<string, any>>) {
				return this.openStream(ctx, this.approvalStreams, "approval");
			},
		},
	},

	methods: {
		/**
		 * An event stream (`?timeout=<seconds>` ends it sooner) kept in `streams` until it closes, with `replay` written
		 * first (a reconnecting client's missed events).
		 */
		async openStream(
			this: UiThis,
			ctx: Context<{ query?: unknown }, Record<string, any>>,
			streams: Set<PassThrough>,
			kind: string,
			replay?: (stream: PassThrough) => Promise<void>,
		) {
			const raw = QueryArgs.from(ctx.params.query).get("timeout");
			const seconds = raw === undefined || raw === "" ? STREAM_MAX_SECONDS : Number(raw);
			if (!Number.isInteger(seconds) || seconds < 0)
				throw new EveError(400, "timeout must be a whole number of seconds");
			const principal = String(ctx.meta.user?.principal ?? "");
			const held = this.streamShares.get(principal) ?? 0;
			if (held >= this.streamsPerPrincipal) {
				throw new EveError(
					429,
					`too many open streams: ${principal} holds ${held} on this gateway, its share (STREAMS_PER_PRINCIPAL=${this.streamsPerPrincipal}); close one first`,
					{ retryAfter: STREAM_SHARE_RETRY_S } as never,
				);
			}
			if (streams.size >= STREAMS_MAX)
				throw new EveError(503, `too many open ${kind} streams on this gateway (${STREAMS_MAX}); try again later`);
			const stream = new PassThrough();
			ctx.meta.$responseType = "text/event-stream; charset=utf-8";
			ctx.meta.$responseHeaders = { "Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no" };
			stream.write(`retry: 3000\nevent: ready\ndata: {}\n\n`);
			if (seconds === 0 || ctx.meta.$method === "HEAD") {
				stream.end();
				return stream;
			}
			let counted = true;
			this.streamShares.set(principal, held + 1);
			const close = () => {
				clearTimeout(timer);
				streams.delete(stream);
				if (counted) {
					counted = false;
					const left = (this.streamShares.get(principal) ?? 1) - 1;
					if (left > 0) this.streamShares.set(principal, left);
					else this.streamShares.delete(principal);
				}
				if (!stream.destroyed) stream.end();
			};
			const timer = setTimeout(close, Math.min(seconds, STREAM_MAX_SECONDS) * 1000);
			timer.unref?.();
			streams.add(stream);
			if (replay) await replay(stream);
			// The response closed (client gone): pipe() unpipes us.
			stream.on("unpipe", close);
			stream.on("close", close);
			stream.on("error", close);
			return stream;
		},

		/** Writes `text` to every stream of `streams`; a stream too far behind is dropped (its client reconnects). */
		pushToStreams(this: UiThis, streams: Set<PassThrough>, text: string) {
			for (const stream of streams) {
				if (stream.writableLength > STREAM_BACKLOG_BYTES) stream.destroy();
				else stream.write(text);
			}
		},

		/** The alerts since the second of alert `lastId` (ids begin with their second), the newest 50, oldest first. */
		async replayAlerts(this: UiThis, ctx: Context, stream: PassThrough, lastId: string) {
			try {
				const since = `${lastId.slice(0, 8)}${"0".repeat(16)}`;
				const page = readJson<{ _items: Array<Record<string, any>> }>(
					await ctx.call("alerts.list", {
						query: [
							["where", JSON.stringify({ _id: { $gte: since } })],
							["sort", "-_id"],
							["max_results", "50"],
						],
					}),
				);
				stream.write(
					[...page._items]
						.reverse()
						.map(a => `id: ${a._id}\nevent: alert\ndata: ${JSON.stringify(a)}\n\n`)
						.join(""),
				);
			} catch (err) {
				this.logger.warn("Could not replay the alerts a reconnecting stream missed:", (err as Error).message);
			}
		},
	},

	events: {
		/** Alerts raised on any node (services/alerts.service.ts broadcasts them to every gateway). */
		"alerts.raised": {
			handler(this: UiThis, ctx: Context<{ alerts: Array<Record<string, any>> }>) {
				if (!this.alertStreams.size) return;
				this.pushToStreams(
					this.alertStreams,
					ctx.params.alerts
						.map(a => `id: ${a._id}\nevent: alert\ndata: ${JSON.stringify(renderAlert(a))}\n\n`)
						.join(""),
				);
			},
		},
		/** Returns recorded on any node (services/cm-gateway/returns.ts): the jobs they belong to. */
		"actions.returned": {
			handler(this: UiThis, ctx: Context<{ jids: string[] }>) {
				if (!this.returnStreams.size) return;
				for (const [stream, jid] of this.returnStreams) {
					const jids = jid === null ? ctx.params.jids : ctx.params.jids.filter(j => j === jid);
					if (!jids.length) continue;
					if (stream.writableLength > STREAM_BACKLOG_BYTES) stream.destroy();
					else stream.write(jids.map(j => `event: returns\ndata: ${JSON.stringify({ jid: j })}\n\n`).join(""));
				}
			},
		},
		/** Approval requests made or changed on any node (services/governance/approvals.service.ts), as clients see them. */
		"approvals.changed": {
			handler(this: UiThis, ctx: Context<{ approvals: Array<Record<string, any>> }>) {
				if (!this.approvalStreams.size) return;
				this.pushToStreams(
					this.approvalStreams,
					ctx.params.approvals.map(a => `event: approval\ndata: ${JSON.stringify(a)}\n\n`).join(""),
				);
			},
		},
	},

	created(this: UiThis) {
		this.alertStreams = new Set<PassThrough>();
		this.approvalStreams = new Set<PassThrough>();
		this.returnStreams = new Map<PassThrough, string | null>();
		this.streamShares = new Map<string, number>();
		this.streamsPerPrincipal = configOf(this.broker).streamsPerPrincipal;
		this.packageVersion = packageVersion();
		this.heartbeat = setInterval(() => {
			for (const stream of [...this.alertStreams, ...this.approvalStreams, ...this.returnStreams.keys()])
				stream.write(": keep-alive\n\n");
		}, HEARTBEAT_MS);
		this.heartbeat.unref?.();
	},

	/** Before moleculer-web's `started` listens (its `created` made the server, kept across restarts). */
	started(this: UiThis) {
		if (this.connections || !this.server) return;
		const connections = (this.connections = new Set<Socket>());
		this.server.on("connection", (socket: Socket) => {
			connections.add(socket);
			socket.once("close", () => connections.delete(socket));
		});
	},

	stopped(this: UiThis) {
		clearInterval(this.heartbeat);
		for (const stream of [...this.alertStreams, ...this.approvalStreams, ...this.returnStreams.keys()]) stream.end();
		this.alertStreams.clear();
		this.approvalStreams.clear();
		this.returnStreams.clear();
		this.streamShares.clear();
		// server.close() (moleculer-web's stop, next) closes the connections idle when it is called; those whose
		// answer ends afterwards (the streams just ended, a last request) would keep it waiting for the keep-alive
		// timeout (HTTP_KEEPALIVE_MS, 65 s): each is closed as soon as it goes idle. closeIdleConnections leaves a
		// connection no request ever came on (a browser's speculative connection, a client that connected and said
		// nothing): close() would wait for it until the client gives up, a minute or more, past the pod's grace period.
		const server = this.server;
		if (server?.listening) {
			const closeUnused = () => {
				server.closeIdleConnections();
				for (const socket of this.connections ?? []) if (socket.bytesRead === 0) socket.destroy();
			};
			closeUnused();
			const closer = setInterval(closeUnused, 100);
			closer.unref?.();
			server.once("close", () => clearInterval(closer));
		}
	},
};
