/**
 * The rest_cherrypy HTTP surface on node:http: URL map, sessions and tokens, request body
 * processors, Accept negotiation, CherryPy's HTML error pages, the /events SSE stream, and the fault
 * injection the tests drive (failing, malformed or hanging responses, refusing connections).
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { type Auth, type SaltToken, sortedPermissions } from "./auth";
import { type Master, MasterUnanswering, SaltAuthError, SaltInvocationError, SaltMasterDown } from "./master";
import { yamlify } from "./modules";
import { ClientCallError, CLIENTS, type Netapi } from "./netapi";
import { UnknownFunctionError } from "./runners";
import { TargetInvocationError } from "./targeting";
import { httpDate, isPlainObject, NotJsonSerializable, pyJson, randomHex } from "./util";
import { dumpYaml, parseYaml } from "./yaml";

/** The CherryPy of the captured Salt 3006.0 install (its error pages name it). */
export const CHERRYPY_VERSION = "18.8.0";
const MAX_BODY = 1_048_576;

/** Python's reason phrases and CherryPy's default messages (`cherrypy.lib.httputil.response_codes`). */
const STATUS: Record<number, [string, string]> = {
	200: ["OK", ""],
	202: ["Accepted", ""],
	400: ["Bad Request", "Bad request syntax or unsupported method"],
	401: ["Unauthorized", "No permission -- see authorization schemes"],
	403: ["Forbidden", "Request forbidden -- authorization will not help"],
	404: ["Not Found", "Nothing matches the given URI"],
	405: ["Method Not Allowed", "Specified method is invalid for this resource"],
	406: ["Not Acceptable", "URI not available in preferred format"],
	413: ["Request Entity Too Large", "Entity is too large"],
	500: [
		"Internal Server Error",
		"The server encountered an unexpected condition which prevented it from fulfilling the request.",
	],
	502: ["Bad Gateway", "Invalid responses from another server/proxy"],
	503: [
		"Service Unavailable",
		"The server is currently unable to handle the request due to a temporary overloading or maintenance of the server.",
	],
	504: ["Gateway Timeout", "The gateway server did not receive a timely response"],
};

function escapeHtml(s: string): string {
	return s
		.replace(/&/g, "&amp;")
		.replace(/</g, "&lt;")
		.replace(/>/g, "&gt;")
		.replace(/"/g, "&quot;")
		.replace(/'/g, "&#x27;");
}

/** CherryPy's default error page (`cherrypy._cperror.get_error_page`), as salt-api sends for HTTPError. */
export function cherrypyErrorPage(status: number, message?: string): string {
	const [reason, dflt] = STATUS[status] ?? ["Error", ""];
	const st = `${status} ${reason}`;
	return `<!DOCTYPE html PUBLIC
"-//W3C//DTD XHTML 1.0 Transitional//EN"
"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html>
<head>
    <meta http-equiv="Content-Type" content="text/html; charset=utf-8"></meta>
    <title>${st}</title>
    <style type="text/css">
    #powered_by {
        margin-top: 20px;
        border-top: 2px solid black;
        font-style: italic;
    }

    #traceback {
        color: red;
    }
    </style>
</head>
    <body>
        <h2>${st}</h2>
        <p>${escapeHtml(message ?? dflt)}</p>
        <pre id="traceback"></pre>
    <div id="powered_by">
      <span>
        Powered by <a href="http://www.cherrypy.dev">CherryPy ${CHERRYPY_VERSION}</a>
      </span>
    </div>
    </body>
</html>
`;
}

/** cherrypy.HTTPError: answered with the HTML error page. */
class HttpError extends Error {
	constructor(
		readonly status: number,
		message?: string,
		readonly headers: Record<string, string> = {},
	) {
		super(message ?? STATUS[status]?.[1] ?? "");
	}
}

export type MalformKind = "truncated" | "garbage" | "html" | "empty" | "wrong-shape" | "reset";

export interface RequestFilter {
	method?: string;
	/** Exact path, or a RegExp tested against the path (without the query string). */
	path?: string | RegExp;
}

interface FaultRule<T> {
	remaining: number;
	value: T;
	filter?: RequestFilter;
}

export interface RequestRecord {
	method: string;
	path: string;
	status: number;
	atMs: number;
	/** The session the request carried (X-Auth-Token or cookie); for a login, the session it issued. */
	session?: string;
}

type Mode = "up" | "refuse" | "hang" | "master-down";

interface SseClient {
	res: ServerResponse;
	token: string;
	off: () => void;
}

interface Ctx {
	req: IncomingMessage;
	res: ServerResponse;
	method: string;
	path: string;
	query: URLSearchParams;
	/** Session id from X-Auth-Token or the session_id cookie. */
	sid?: string;
	/** Set-Cookie to send (CherryPy sends the session cookie on every session-enabled response). */
	cookie?: string;
	headers: Record<string, string>;
	status: number;
	body?: Buffer;
}

function parseCookies(header: string | undefined): Record<string, string> {
	const out: Record<string, string> = {};
	for (const part of (header ?? "").split(";")) {
		const i = part.indexOf("=");
		if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
	}
	return out;
}

/** `cherrypy.lib.cptools.accept`: the best offered media type, or 406. */
function negotiate(accept: string | undefined, offers: string[]): string {
	if (!accept) return offers[0];
	const ranges = accept
		.split(",")
		.map((part, i) => {
			const [type, ...params] = part.trim().split(";");
			const q = params.map(p => p.trim()).find(p => p.startsWith("q="));
			return { type: type.trim().toLowerCase(), q: q ? Number(q.slice(2)) : 1, i };
		})
		.filter(r => r.type && r.q > 0)
		.sort((a, b) => b.q - a.q || a.i - b.i);
	for (const r of ranges) {
		if (r.type === "*/*") return offers[0];
		if (r.type.endsWith("/*")) {
			const hit = offers.find(o => o.startsWith(r.type.slice(0, -1)));
			if (hit) return hit;
		} else if (offers.includes(r.type)) return r.type;
	}
	throw new HttpError(
		406,
		`Your client sent this Accept header: ${accept}. But this resource only emits these media types: ${offers.join(", ")}.`,
	);
}

export class SaltApiServer {
	private server: http.Server | null = null;
	private readonly sockets = new Set<Socket>();
	private readonly sse = new Set<SseClient>();
	private readonly hung = new Set<ServerResponse>();
	private port = 0;
	private host = "127.0.0.1";
	private mode: Mode = "up";
	private readonly failRules: FaultRule<{ status: number; message?: string }>[] = [];
	private readonly malformRules: FaultRule<MalformKind>[] = [];
	readonly log: RequestRecord[] = [];
	/** Unexpected exceptions raised while handling requests (simulator bugs), newest last. */
	readonly internalErrors: unknown[] = [];
	/** Turn off session auth on /hook (rest_cherrypy `webhook_disable_auth`). */
	webhookDisableAuth = false;

	constructor(
		private readonly master: Master,
		private readonly auth: Auth,
		private readonly netapi: Netapi,
	) {}

	// ---------------------------------------------------------------- lifecycle

	async listen(port: number, host: string): Promise<number> {
		this.host = host;
		const server = http.createServer((req, res) => void this.handle(req, res));
		server.keepAliveTimeout = 5000;
		server.on("connection", s => {
			this.sockets.add(s);
			s.on("close", () => this.sockets.delete(s));
		});
		await new Promise<void>((resolve, reject) => {
			server.once("error", reject);
			server.listen(port, host, () => {
				server.off("error", reject);
				resolve();
			});
		});
		this.server = server;
		this.port = (server.address() as AddressInfo).port;
		return this.port;
	}

	get boundPort(): number {
		return this.port;
	}

	async close(): Promise<void> {
		for (const c of this.sse) c.off();
		this.sse.clear();
		const server = this.server;
		this.server = null;
		for (const s of this.sockets) s.destroy();
		this.sockets.clear();
		this.hung.clear();
		if (server) await new Promise<void>(resolve => server.close(() => resolve()));
	}

	/**
	 * "refuse": salt-api stops listening (connection refused) and drops open connections;
	 * "hang": connections are accepted but no request is answered; "master-down": salt-api answers,
	 * but the master daemon is stopped (client calls: 500 after `masterDownAnswerMs`; /login, /token and
	 * GET /events wait for it; open event streams stay open and quiet).
	 */
	async goDown(mode: Exclude<Mode, "up">): Promise<void> {
		await this.comeBack();
		this.mode = mode;
		if (mode === "refuse") await this.close();
		if (mode === "master-down") this.master.stopMaster();
	}

	/** Undo `goDown`: after "master-down" the master starts again (see `Master.startMaster`). */
	async comeBack(opts: { late?: string[] } = {}): Promise<void> {
		const was = this.mode;
		this.mode = "up";
		if (was === "master-down") this.master.startMaster(opts);
		if (was === "hang") {
			for (const res of this.hung) res.socket?.destroy();
			this.hung.clear();
		}
		if (was === "refuse" && !this.server) await this.listen(this.port, this.host);
	}

	get currentMode(): Mode {
		return this.mode;
	}

	failNext(count: number, status: number, opts: { message?: string; filter?: RequestFilter } = {}): void {
		this.failRules.push({ remaining: count, value: { status, message: opts.message }, filter: opts.filter });
	}

	malformNext(count: number, kind: MalformKind, filter?: RequestFilter): void {
		this.malformRules.push({ remaining: count, value: kind, filter });
	}

	clearFaults(): void {
		this.failRules.length = 0;
		this.malformRules.length = 0;
	}

	/** End every /events stream (clients see the connection close and must reconnect). */
	dropEventStreams(): void {
		for (const c of [...this.sse]) this.endSse(c);
	}

	get eventStreams(): number {
		return this.sse.size;
	}

	private takeRule<T>(rules: FaultRule<T>[], method: string, path: string): T | undefined {
		for (let i = 0; i < rules.length; i++) {
			const r = rules[i];
			const f = r.filter;
			if (f?.method && f.method.toUpperCase() !== method) continue;
			if (f?.path !== undefined && (typeof f.path === "string" ? f.path !== path : !f.path.test(path))) continue;
			if (!f && path === "/events") continue;
			if (--r.remaining <= 0) rules.splice(i, 1);
			return r.value;
		}
		return undefined;
	}

	// ---------------------------------------------------------------- request handling

	private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
		const target = req.url ?? "/";
		const q = target.indexOf("?");
		const method = (req.method ?? "GET").toUpperCase();
		let path = q < 0 ? target : target.slice(0, q);
		try {
			path = decodeURIComponent(path);
		} catch {
			// Keep the raw path; it will not match a route (404).
		}
		const ctx: Ctx = {
			req,
			res,
			method,
			path,
			query: new URLSearchParams(q < 0 ? "" : target.slice(q + 1)),
			headers: this.baseHeaders(req),
			status: 200,
		};
		res.on("finish", () => {
			const session = ctx.headers["X-Auth-Token"] ?? ctx.sid;
			this.log.push({ method, path, status: res.statusCode, atMs: Date.now(), ...(session ? { session } : {}) });
			if (this.log.length > 5000) this.log.splice(0, 2500);
		});
		if (this.mode === "hang") {
			this.hung.add(res);
			req.resume();
			return;
		}
		try {
			const fail = this.takeRule(this.failRules, method, path);
			if (fail) {
				req.resume();
				if (fail.status === 500)
					return this.send(
						ctx,
						500,
						"application/json",
						pyJson({ status: 500, return: "An unexpected error occurred" }),
					);
				throw new HttpError(
					fail.status,
					fail.message ?? (fail.status === 503 ? "Salt Master is not available." : undefined),
				);
			}
			const x = req.headers["x-auth-token"];
			ctx.sid = (Array.isArray(x) ? x[0] : x) || parseCookies(req.headers.cookie).session_id || undefined;
			if (method === "OPTIONS") return this.preflight(ctx);
			await this.route(ctx);
		} catch (e) {
			this.sendError(ctx, e);
		}
	}

	private baseHeaders(req: IncomingMessage): Record<string, string> {
		return {
			Server: `CherryPy/${CHERRYPY_VERSION}`,
			"Access-Control-Allow-Origin": (req.headers.origin as string | undefined) ?? "*",
			"Access-Control-Expose-Headers": "GET, POST",
			"Access-Control-Allow-Credentials": "true",
			Vary: "Accept, Accept-Encoding",
		};
	}

	private preflight(ctx: Ctx): void {
		const m = ctx.req.headers["access-control-request-method"];
		if (m === "GET" || m === "POST") {
			ctx.headers["Access-Control-Allow-Methods"] = "GET, POST";
			ctx.headers["Access-Control-Allow-Headers"] = "Content-Type, X-Auth-Token, X-Requested-With";
			ctx.headers["Access-Control-Max-Age"] = "1400";
		}
		ctx.req.resume();
		this.send(ctx, 200, "text/html;charset=utf-8", "");
	}

	private async route(ctx: Ctx): Promise<void> {
		const { path } = ctx;
		// CherryPy's MethodDispatcher answers HEAD with the GET handler.
		const method = ctx.method === "HEAD" ? "GET" : ctx.method;
		const parts = path.split("/").filter(Boolean);
		const [head, arg, ...rest] = parts;
		const allow = (methods: string[]) => {
			if (!methods.includes(method))
				throw new HttpError(405, undefined, {
					Allow: [...methods, ...(methods.includes("GET") ? ["HEAD"] : [])].sort().join(", "),
				});
		};
		const withArg = ["minions", "jobs", "keys"];
		if (head !== "hook" && (rest.length || (arg !== undefined && !withArg.includes(head))))
			throw new HttpError(404, `The path '${path}' was not found.`);
		switch (head) {
			case undefined:
				allow(["GET", "POST"]);
				if (method === "GET") return this.reply(ctx, { return: "Welcome", clients: CLIENTS }, { sessions: false });
				return this.lowstate(ctx);
			case "login":
				allow(["GET", "POST"]);
				return method === "GET" ? this.loginForm(ctx) : this.login(ctx);
			case "logout":
				allow(["POST"]);
				return this.logout(ctx);
			case "token":
				allow(["POST"]);
				return this.token(ctx);
			case "run":
				allow(["POST"]);
				return this.run(ctx);
			case "minions":
				allow(["GET", "POST"]);
				return method === "GET" ? this.minionsGet(ctx, arg) : this.minionsPost(ctx);
			case "jobs":
				allow(["GET"]);
				return this.jobs(ctx, arg);
			case "keys":
				allow(["GET", "POST"]);
				return method === "GET" ? this.keys(ctx, arg) : this.keysPost(ctx);
			case "events":
				allow(["GET"]);
				return this.events(ctx);
			case "hook":
				allow(["POST"]);
				return this.hook(ctx, parts.slice(1));
			case "stats":
				allow(["GET"]);
				this.requireSession(ctx);
				return this.reply(ctx, {});
			default:
				throw new HttpError(404, `The path '${path}' was not found.`);
		}
	}

	// ---------------------------------------------------------------- sessions

	/** CherryPy's session cookie: the current id, or a fresh (empty) session when it is unknown. */
	private sessionCookie(ctx: Ctx, sid?: string): void {
		const known = sid ?? (ctx.sid && this.auth.sessionToken(ctx.sid) ? ctx.sid : randomHex(20));
		const tok = this.auth.getToken(this.auth.sessionToken(known));
		const timeoutMs = tok ? (tok.expire - tok.start) * 1000 : 600 * 60_000;
		ctx.cookie = `session_id=${known}; expires=${httpDate(Date.now() + timeoutMs)}; Path=/`;
	}

	/** `salt_auth_tool`: the session must exist (its Salt token may still be expired). */
	private requireSession(ctx: Ctx): string {
		const tok = this.auth.sessionToken(ctx.sid);
		if (!tok) throw new HttpError(401);
		ctx.headers["Cache-Control"] = "private";
		return tok;
	}

	// ---------------------------------------------------------------- request bodies

	private async readBody(ctx: Ctx): Promise<Buffer> {
		if (ctx.body) return ctx.body;
		const chunks: Buffer[] = [];
		let size = 0;
		for await (const chunk of ctx.req) {
			size += (chunk as Buffer).length;
			if (size > MAX_BODY) throw new HttpError(413);
			chunks.push(chunk as Buffer);
		}
		return (ctx.body = Buffer.concat(chunks));
	}

	/** `hypermedia_in` + the body processors: the unserialized body, or null when there is none. */
	private async unserialize(ctx: Ctx): Promise<unknown> {
		const raw = await this.readBody(ctx);
		// rest_cherrypy skips the body when Content-Length is absent or "0" (so chunked bodies are ignored).
		const clen = ctx.req.headers["content-length"];
		if (clen === undefined || clen === "0") return null;
		const ct = (ctx.req.headers["content-type"] ?? "application/x-www-form-urlencoded")
			.split(";")[0]
			.trim()
			.toLowerCase();
		const text = raw.toString("utf8");
		switch (ct) {
			case "application/json":
				try {
					return JSON.parse(text);
				} catch {
					throw new HttpError(400, "Invalid JSON document");
				}
			case "application/x-yaml":
			case "text/yaml":
				try {
					return parseYaml(text);
				} catch {
					throw new HttpError(500);
				}
			case "text/plain":
				try {
					return JSON.parse(text);
				} catch {
					return text;
				}
			case "application/x-www-form-urlencoded": {
				const data: Record<string, unknown> = {};
				for (const [k, v] of new URLSearchParams(text)) {
					if (k in data) data[k] = ([] as unknown[]).concat(data[k], v);
					else data[k] = v;
				}
				if ("kwarg" in data) data.kwarg = typeof data.kwarg === "string" ? yamlify(data.kwarg) : data.kwarg;
				if ("arg" in data)
					data.arg = (Array.isArray(data.arg) ? data.arg : [data.arg]).map(a =>
						typeof a === "string" ? yamlify(a) : a,
					);
				return data;
			}
			default:
				throw new HttpError(406, "Content type not supported");
		}
	}

	/** `lowdata_fmt`: a mapping becomes a one-chunk list; a scalar `arg` becomes a list. */
	private async lowstateOf(ctx: Ctx): Promise<unknown> {
		const data = await this.unserialize(ctx);
		if (isPlainObject(data) && Object.keys(data).length) {
			if ("arg" in data && !Array.isArray(data.arg)) data.arg = [data.arg];
			return [data];
		}
		return data;
	}

	/** `LowDataAdapter.exec_lowstate`. */
	private async execLowstate(lowstate: unknown, opts: { client?: string; token?: string | null }): Promise<unknown[]> {
		if (!Array.isArray(lowstate)) throw new HttpError(400, "Lowstates must be a list");
		const out: unknown[] = [];
		for (const item of lowstate) {
			const chunk: Record<string, unknown> = isPlainObject(item) ? item : {};
			if (!isPlainObject(item)) throw new ServerError(`'${typeof item}' object has no attribute 'get'`);
			if (opts.token) chunk.token = opts.token;
			if ("token" in chunk && !(typeof chunk.token === "string" && /^[0-9a-fA-F]+$/.test(chunk.token)))
				throw new HttpError(401, "Invalid token");
			if (opts.client) chunk.client = opts.client;
			if ("arg" in chunk && !Array.isArray(chunk.arg)) chunk.arg = [chunk.arg];
			out.push(...(await this.netapi.run(chunk)));
		}
		return out;
	}

	// ---------------------------------------------------------------- endpoints

	private async lowstate(ctx: Ctx): Promise<void> {
		const tok = this.requireSession(ctx);
		const low = await this.lowstateOf(ctx);
		this.sessionCookie(ctx);
		const ret = await this.execLowstate(low, { token: tok });
		return this.reply(ctx, { return: ret });
	}

	private loginForm(ctx: Ctx): void {
		ctx.headers["WWW-Authenticate"] = "Session";
		this.sessionCookie(ctx);
		return this.reply(ctx, { status: "200 OK", return: "Please log in" });
	}

	/**
	 * The eauth token is minted (and checked) by the master over its request channel: while the master is down
	 * the request waits for it, up to the channel's retries, then SaltReqTimeoutError (503).
	 */
	private async masterRequest(): Promise<void> {
		if (this.master.running) return;
		if (!(await this.master.whenRunning(this.master.config.masterReqTimeoutMs)))
			throw new SaltMasterDown("Message timed out");
	}

	private async login(ctx: Ctx): Promise<void> {
		const low = await this.lowstateOf(ctx);
		await this.masterRequest();
		const creds = Array.isArray(low) ? low[0] : low;
		if (!isPlainObject(creds)) throw new ServerError("'NoneType' object has no attribute 'get'");
		const tok = this.auth.mkToken(creds);
		if (!tok) throw new HttpError(401, "Could not authenticate using provided credentials");
		const sid = this.auth.newSession(tok);
		ctx.headers["X-Auth-Token"] = sid;
		this.sessionCookie(ctx, sid);
		return this.reply(ctx, {
			return: [
				{
					token: sid,
					expire: tok.expire,
					start: tok.start,
					user: tok.name,
					eauth: tok.eauth,
					perms: sortedPermissions(tok.perms),
				},
			],
		});
	}

	private async logout(ctx: Ctx): Promise<void> {
		this.requireSession(ctx);
		ctx.req.resume();
		this.auth.endSession(ctx.sid!);
		ctx.cookie = `session_id=${randomHex(20)}; expires=${httpDate(Date.now() - 365 * 86_400_000)}; Path=/`;
		return this.reply(ctx, { return: "Your token has been cleared" });
	}

	private async token(ctx: Ctx): Promise<void> {
		const low = await this.lowstateOf(ctx);
		if (!Array.isArray(low)) throw new HttpError(400, "Lowstates must be a list");
		const out: unknown[] = [];
		for (const creds of low) {
			if (!isPlainObject(creds) || !("username" in creds && "password" in creds && "eauth" in creds)) {
				throw new HttpError(400, 'Require "username", "password", and "eauth" params');
			}
			await this.masterRequest();
			const tok = this.auth.mkToken(creds);
			if (!tok) throw new SaltAuthError('Authentication failure of type "eauth" occurred.');
			out.push({ start: tok.start, token: tok.token, expire: tok.expire, name: tok.name, eauth: tok.eauth });
		}
		return this.reply(ctx, out, { sessions: false });
	}

	private async run(ctx: Ctx): Promise<void> {
		const low = await this.lowstateOf(ctx);
		return this.reply(ctx, { return: await this.execLowstate(low, {}) }, { sessions: false });
	}

	private async minionsGet(ctx: Ctx, mid?: string): Promise<void> {
		const tok = this.requireSession(ctx);
		ctx.req.resume();
		this.sessionCookie(ctx);
		const ret = await this.execLowstate([{ client: "local", tgt: mid || "*", fun: "grains.items" }], { token: tok });
		return this.reply(ctx, { return: ret });
	}

	private async minionsPost(ctx: Ctx): Promise<void> {
		const tok = this.requireSession(ctx);
		const low = await this.lowstateOf(ctx);
		this.sessionCookie(ctx);
		const jobs = await this.execLowstate(low, { client: "local_async", token: tok });
		ctx.status = 202;
		return this.reply(ctx, {
			return: jobs,
			_links: {
				jobs: jobs
					.filter(j => isPlainObject(j) && Object.keys(j).length)
					.map(j => ({ href: `/jobs/${(j as { jid: string }).jid}` })),
			},
		});
	}

	private async jobs(ctx: Ctx, jid?: string): Promise<void> {
		const tok = this.requireSession(ctx);
		ctx.req.resume();
		this.sessionCookie(ctx);
		const low = jid ? { client: "runner", fun: "jobs.list_job", jid } : { client: "runner", fun: "jobs.list_jobs" };
		const [info] = await this.execLowstate([low], { token: tok });
		if (!jid) return this.reply(ctx, { return: [info] });
		const result = isPlainObject(info) && isPlainObject(info.Result) ? info.Result : {};
		const minionRet: Record<string, unknown> = {};
		for (const [id, r] of Object.entries(result)) minionRet[id] = isPlainObject(r) ? r.return : undefined;
		return this.reply(ctx, { info: [info], return: [minionRet] });
	}

	private async keys(ctx: Ctx, mid?: string): Promise<void> {
		const tok = this.requireSession(ctx);
		ctx.req.resume();
		this.sessionCookie(ctx);
		const low = mid ? { client: "wheel", fun: "key.finger", match: mid } : { client: "wheel", fun: "key.list_all" };
		const [res] = await this.execLowstate([low], { token: tok });
		const data = isPlainObject(res) && isPlainObject(res.data) ? res.data : {};
		return this.reply(ctx, { return: data.return ?? {} });
	}

	/** `key.gen_accept` through POST /keys: a tar holding minion.pub and minion.pem. */
	private async keysPost(ctx: Ctx): Promise<void> {
		const low = await this.lowstateOf(ctx);
		const chunk = Array.isArray(low) && isPlainObject(low[0]) ? low[0] : {};
		if (!this.master.running && !(await this.master.whenRunning(this.master.config.masterDownAnswerMs)))
			throw new MasterUnanswering("The master is not responding.");
		if (!this.auth.check(chunk)) throw new HttpError(401, 'Authentication failure of type "eauth" occurred.');
		const id = String(chunk.mid ?? chunk.id_ ?? "");
		if (!id) throw new ServerError("gen_accept() missing 1 required positional argument: 'id_'");
		if (this.master.fleet.has(id)) this.master.setKeyState(id, "deleted");
		this.master.addMinion({ id, key: "accepted", up: false }, { fireEvents: false });
		this.master.events.fire("salt/key", { result: true, act: "accept", id });
		const pub = this.master.publicKeyPem(id);
		const priv = `-----BEGIN RSA PRIVATE KEY-----\n${randomHex(48)}\n-----END RSA PRIVATE KEY-----`;
		const tar = makeTar([
			["minion.pub", pub],
			["minion.pem", priv],
		]);
		ctx.headers["Content-Disposition"] = `attachment; filename="saltkeys-${id}.tar"`;
		ctx.headers["Cache-Control"] = "no-cache";
		this.send(ctx, 200, "application/x-tar", tar);
	}

	private async hook(ctx: Ctx, tagParts: string[]): Promise<void> {
		if (!this.webhookDisableAuth) this.requireSession(ctx);
		const data = await this.unserialize(ctx);
		const raw = ctx.body?.toString("utf8") ?? "";
		const headers: Record<string, unknown> = {};
		for (const [k, v] of Object.entries(ctx.req.headers))
			headers[k.replace(/(^|-)([a-z])/g, (_m, d: string, c: string) => d + c.toUpperCase())] = v;
		this.master.events.fire(["salt", "netapi", "hook", ...tagParts].join("/"), {
			body: raw,
			post: data ?? {},
			headers,
		});
		return this.reply(ctx, { success: true });
	}

	// ---------------------------------------------------------------- /events

	/** Is this (session or Salt) token good for the event stream? Returns the Salt token id. */
	private eventToken(authToken: string | undefined): SaltToken | null {
		if (!authToken || !/^[0-9a-fA-F]+$/.test(authToken)) return null;
		const saltToken = this.auth.sessionToken(authToken) ?? authToken;
		return this.auth.getToken(saltToken);
	}

	private async events(ctx: Ctx): Promise<void> {
		ctx.req.resume();
		const authToken = ctx.query.get("token") ?? ctx.query.get("salt_token") ?? ctx.sid;
		if (!authToken || !/^[0-9a-fA-F]+$/.test(authToken)) throw new HttpError(401);
		// The token is checked by the master (Resolver.get_token over its request channel): while it is down the
		// request waits for it; past the channel's retries the exception is CherryPy's own 500 page.
		if (!this.master.running && !(await this.master.whenRunning(this.master.config.masterReqTimeoutMs)))
			throw new HttpError(500);
		if (!this.eventToken(authToken)) throw new HttpError(401);
		const res = ctx.res;
		if (res.destroyed) return;
		res.writeHead(200, "OK", {
			...ctx.headers,
			"Content-Type": "text/event-stream;charset=utf-8",
			"Cache-Control": "no-cache",
			Connection: "keep-alive",
		});
		res.socket?.setNoDelay(true);
		res.write("retry: 400\n");
		const client: SseClient = { res, token: authToken!, off: () => undefined };
		client.off = this.master.events.subscribe(ev => {
			if (!this.eventToken(client.token)) return this.endSse(client);
			let data: string;
			try {
				data = pyJson({ data: ev.data, tag: ev.tag });
			} catch (err) {
				if (!(err instanceof NotJsonSerializable)) throw err;
				// rest_cherrypy's generator dies between the tag line and the data line (a minion's bytes `tok`, a
				// return holding a datetime): the client sees the tag, then the connection cut mid-stream.
				client.off();
				this.sse.delete(client);
				res.write(`tag: ${ev.tag}\n`, () => res.destroy());
				return;
			}
			res.write(`tag: ${ev.tag}\ndata: ${data}\n\n`);
		});
		this.sse.add(client);
		res.on("close", () => {
			client.off();
			this.sse.delete(client);
		});
	}

	private endSse(c: SseClient): void {
		c.off();
		this.sse.delete(c);
		c.res.end();
	}

	// ---------------------------------------------------------------- responses

	/** `hypermedia_handler` output: JSON or YAML by Accept, with any injected malformation. */
	private reply(ctx: Ctx, value: unknown, opts: { sessions?: boolean } = {}): void {
		if (opts.sessions !== false && !ctx.cookie) this.sessionCookie(ctx);
		const type = negotiate(ctx.req.headers.accept, ["application/json", "application/x-yaml"]);
		let body: string;
		try {
			body = type === "application/json" ? pyJson(value) : dumpYaml(value);
		} catch (err) {
			// hypermedia_out: a return json.dumps refuses (test.get_opts' datetimes) is CherryPy's 500 page.
			if (err instanceof NotJsonSerializable)
				throw new HttpError(500, "Could not serialize the return data from Salt.");
			throw err;
		}
		const malform = this.takeRule(this.malformRules, ctx.method, ctx.path);
		if (malform) return this.sendMalformed(ctx, malform, type, body);
		this.send(ctx, ctx.status, type, body);
	}

	private sendMalformed(ctx: Ctx, kind: MalformKind, type: string, body: string): void {
		switch (kind) {
			case "reset":
				ctx.res.socket?.destroy();
				return;
			case "truncated":
				return this.send(ctx, ctx.status, type, body.slice(0, Math.max(1, Math.floor(body.length / 2))));
			case "garbage":
				return this.send(ctx, ctx.status, type, "\u0000\u0013<<not a salt-api response>>\u00ff");
			case "empty":
				return this.send(ctx, ctx.status, type, "");
			case "wrong-shape":
				return this.send(ctx, ctx.status, type, pyJson({ status: "ok", data: [null] }));
			case "html":
				return this.send(
					ctx,
					200,
					"text/html;charset=utf-8",
					"<html><body><h1>Gateway</h1><p>Please log in to the proxy.</p></body></html>\n",
				);
		}
	}

	private send(ctx: Ctx, status: number, type: string, body: string | Buffer): void {
		const res = ctx.res;
		if (res.headersSent || res.destroyed) return;
		const buf = typeof body === "string" ? Buffer.from(body, "utf8") : body;
		const headers: Record<string, string | number> = {
			...ctx.headers,
			"Content-Type": type,
			"Content-Length": buf.length,
		};
		if (ctx.cookie) headers["Set-Cookie"] = ctx.cookie;
		res.writeHead(status, STATUS[status]?.[0] ?? "", headers);
		res.end(ctx.method === "HEAD" ? undefined : buf);
	}

	private sendError(ctx: Ctx, e: unknown): void {
		// Drain what is left of the body so the connection can be reused.
		if (!ctx.req.readableEnded) ctx.req.resume();
		if (e instanceof HttpError) {
			Object.assign(ctx.headers, e.headers);
			return this.send(ctx, e.status, "text/html;charset=utf-8", cherrypyErrorPage(e.status, e.message || undefined));
		}
		if (e instanceof SaltAuthError)
			return this.send(ctx, 401, "text/html;charset=utf-8", cherrypyErrorPage(401, e.message));
		if (e instanceof SaltInvocationError || e instanceof TargetInvocationError)
			return this.send(ctx, 400, "text/html;charset=utf-8", cherrypyErrorPage(400, e.message));
		if (e instanceof SaltMasterDown)
			return this.send(ctx, 503, "text/html;charset=utf-8", cherrypyErrorPage(503, e.message));
		if (e instanceof MasterUnanswering)
			return this.send(ctx, 500, "application/json", pyJson({ status: 500, return: "An unexpected error occurred" }));
		// Anything else (an unknown runner, a client call missing its arguments, a bug): the generic 500
		// that hypermedia_handler serialises as data. Unexpected ones are kept for debugging the simulator.
		if (!(e instanceof UnknownFunctionError || e instanceof ClientCallError || e instanceof ServerError)) {
			this.internalErrors.push(e);
			if (process.env.SALT_SIM_DEBUG) console.error("salt-api simulator: internal error", e);
		}
		return this.send(ctx, 500, "application/json", pyJson({ status: 500, return: "An unexpected error occurred" }));
	}
}

/** An exception inside a handler that salt-api turns into its generic JSON 500. */
class ServerError extends Error {}

/** A minimal ustar archive (for POST /keys). */
function makeTar(files: [string, string][]): Buffer {
	const blocks: Buffer[] = [];
	for (const [name, text] of files) {
		const data = Buffer.from(text, "utf8");
		const h = Buffer.alloc(512);
		h.write(name, 0, 100, "utf8");
		h.write("0000644\0", 100);
		h.write("0000000\0", 108);
		h.write("0000000\0", 116);
		h.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
		h.write(
			Math.floor(Date.now() / 1000)
				.toString(8)
				.padStart(11, "0") + "\0",
			136,
		);
		h.write("        ", 148);
		h.write("0", 156);
		h.write("ustar\0" + "00", 257);
		let sum = 0;
		for (const b of h) sum += b;
		h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
		blocks.push(h, data, Buffer.alloc((512 - (data.length % 512)) % 512));
	}
	blocks.push(Buffer.alloc(1024));
	return Buffer.concat(blocks);
}
