/**
 * A salt-api (rest_cherrypy; rest_tornado is wire-compatible) client, following
 * `../shared/reference/protocols.md` Part A:
 *
 *  - POST /login with eauth; the session token is reused until shortly before its `expire`.
 *  - A 401 means the session is gone (expired, master restarted, sessions cleared): log in again and
 *    send the request ONCE more. salt-api checks the session before it runs anything, so a 401 proves
 *    that the request was not executed, and re-sending a remote execution after it is safe.
 *  - A remote execution (`local`, `local_async`, or any lowstate not declared safe) is never re-sent
 *    after an ambiguous failure (timeout, connection reset, malformed or unexpected response): it may
 *    have run. Only safe calls (login, GET /jobs/<jid>, runner/wheel reads) are retried with backoff.
 *  - Each call has a timeout; at most `concurrency` calls are in flight (a small semaphore).
 *  - Non-2xx bodies are CherryPy HTML pages (or salt-api's generic 500 JSON): never JSON-parsed;
 *    the message of the HTML page is extracted for the error text.
 *  - TLS certificates are verified unless `tlsVerify` is false; `ca` adds trusted CAs (PEM).
 *
 * The event bus (`GET /events`, server-sent events; `streamEvents`) is one long-lived request outside the
 * semaphore, authenticated like the rest, re-opened by itself with backoff whenever it ends (salt-api
 * restarted, master down, token expired: a 401 logs in again at once).
 *
 * Errors are `SaltApiError`s, rendered by the gateway in Eve's shape: salt-api unreachable, a malformed
 * answer or refused credentials -> 502; a timeout (ours, or salt-api's 504) -> 504; a 500 or 503 from
 * salt-api -> 503 "the Salt master is not answering" (kind "master"): while the master is down a real
 * salt-api answers 500 after about 5 s (../shared/reference/salt-3006/README.md), and its generic 500 has no
 * other common cause on a lowstate; such a call is not retried (the master just took its timeout to say so).
 * The password never appears in an error or a log line.
 */
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import { Errors } from "moleculer";

import { ExchangeError, exchange } from "../../lib/net/http-exchange";
import { followEvents, type EventStream, type EventStreamHandlers } from "./salt-events";

export type SaltErrorKind = "unreachable" | "timeout" | "auth" | "master" | "upstream" | "malformed" | "refused";

/**
 * What went wrong talking to salt-api, with the status the caller should see (502 a bad or refused answer,
 * 503 the master not answering, 504 no answer in time). Its own type: the gateway renders it (one boundary,
 * services/api/api.service.ts), this client knows nothing of Eve.
 */
export class SaltApiError extends Errors.MoleculerError {
	readonly kind: SaltErrorKind;
	constructor(code: 502 | 503 | 504, kind: SaltErrorKind, message: string) {
		super(message, code, "SALT_API", { kind });
		this.kind = kind;
		this.name = "SaltApiError";
	}
}

export interface SaltClientOptions {
	url: string;
	username: string;
	password: string;
	eauth?: string;
	/** Per-call timeout in ms (default 30000). */
	timeoutMs?: number;
	/** Calls in flight at once (default 8). */
	concurrency?: number;
	/** Verify the server's certificate (default true). */
	tlsVerify?: boolean;
	/** Path of a PEM file with extra trusted CAs. */
	caFile?: string;
	/** Attempts of a safe call (default 3), with exponential backoff from `backoffMs` (default 200). */
	attempts?: number;
	backoffMs?: number;
	/** Told each time salt-api says the master is not answering (its 500 or 503). */
	onMasterUnanswering?: () => void;
	/** Told of each lowstate sent (before its answer): what costs the master work, for the call metrics. */
	onCall?: (client: string, fun: string) => void;
}

export interface Lowstate {
	client: string;
	fun: string;
	tgt?: string | string[];
	tgt_type?: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
	full_return?: boolean;
	timeout?: number;
	[key: string]: unknown;
}

interface RawResponse {
	status: number;
	text: string;
}

/** Raised by one attempt; `sent` says whether the request may have reached salt-api. */
class AttemptError extends Error {
	constructor(
		readonly kind: SaltErrorKind,
		message: string,
		readonly status?: number,
	) {
		super(message);
	}
}

/** A counting semaphore: at most `limit` holders, the others wait in order. */
export class Semaphore {
	private active = 0;
	private readonly waiting: Array<() => void> = [];
	constructor(private readonly limit: number) {}

	async acquire(): Promise<() => void> {
		if (this.active >= this.limit) await new Promise<void>(resolve => this.waiting.push(resolve));
		else this.active++;
		let released = false;
		return () => {
			if (released) return;
			released = true;
			const next = this.waiting.shift();
			if (next) next();
			else this.active--;
		};
	}
}

const sleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms).unref?.());

/** The message of CherryPy's HTML error page (`<p>...</p>`), unescaped, shortened. */
function htmlMessage(text: string): string {
	// salt-api's generic error is JSON: {"status": 500, "return": "An unexpected error occurred"}.
	if (text.startsWith("{")) {
		try {
			const ret = (JSON.parse(text) as { return?: unknown }).return;
			if (typeof ret === "string") return ret.replace(/\s+/g, " ").trim().slice(0, 300);
		} catch {
			// not JSON after all: read as HTML below
		}
	}
	const m = /<p>([\s\S]*?)<\/p>/i.exec(text) ?? /<title>([\s\S]*?)<\/title>/i.exec(text);
	const raw = (m ? m[1] : text).replace(/<[^>]*>/g, "");
	return raw
		.replace(/&lt;/g, "<")
		.replace(/&gt;/g, ">")
		.replace(/&quot;/g, '"')
		.replace(/&#0?39;/g, "'")
		.replace(/&amp;/g, "&")
		.replace(/\s+/g, " ")
		.trim()
		.slice(0, 300);
}

export class SaltClient {
	private readonly base: URL;
	private readonly agent: http.Agent;
	/** A separate agent for the event stream: it holds its connection for hours. */
	private readonly streamAgent: http.Agent;
	private readonly transport: typeof http | typeof https;
	private readonly semaphore: Semaphore;
	private readonly timeoutMs: number;
	private readonly attempts: number;
	private readonly backoffMs: number;
	private token: string | null = null;
	/** When the token stops being used (ms epoch): a minute before salt's `expire`. */
	private tokenUntil = 0;
	private loggingIn: Promise<string> | null = null;
	private closed = false;
	private readonly closing = new AbortController();

	constructor(private readonly opts: SaltClientOptions) {
		this.base = new URL(opts.url.endsWith("/") ? opts.url : `${opts.url}/`);
		if (this.base.protocol !== "http:" && this.base.protocol !== "https:")
			throw new Error(`CM_API_URL must be an http(s) URL, got '${this.base.protocol}'`);
		this.timeoutMs = opts.timeoutMs ?? 30_000;
		this.attempts = Math.max(1, opts.attempts ?? 3);
		this.backoffMs = opts.backoffMs ?? 200;
		this.semaphore = new Semaphore(Math.max(1, opts.concurrency ?? 8));
		if (this.base.protocol === "https:") {
			this.transport = https;
			const tls = {
				rejectUnauthorized: opts.tlsVerify !== false,
				ca: opts.caFile ? fs.readFileSync(opts.caFile) : undefined,
			};
			this.agent = new https.Agent({ keepAlive: true, ...tls });
			this.streamAgent = new https.Agent({ keepAlive: false, ...tls });
		} else {
			this.transport = http;
			this.agent = new http.Agent({ keepAlive: true });
			this.streamAgent = new http.Agent({ keepAlive: false });
		}
	}

	/** Closes the kept-alive connections; later calls fail. */
	close(): void {
		this.closed = true;
		// Calls in flight, and those that were waiting for their turn, fail now rather than at their timeout.
		this.closing.abort();
		this.agent.destroy();
		this.streamAgent.destroy();
	}

	// ---------------------------------------------------------------- public calls

	/**
	 * POST / with one lowstate chunk; resolves to its element of `return`. Not re-sent after an ambiguous
	 * failure unless `safe` (a read: runner or wheel functions that change nothing).
	 */
	async lowstate<T = unknown>(chunk: Lowstate, opts: { safe?: boolean; timeoutMs?: number } = {}): Promise<T> {
		const safe = opts.safe === true && chunk.client !== "local" && chunk.client !== "local_async";
		this.opts.onCall?.(chunk.client, chunk.fun);
		const body = await this.authed("POST", "", [chunk], safe, opts.timeoutMs);
		const ret = (body as { return?: unknown })?.return;
		if (!Array.isArray(ret) || ret.length < 1)
			throw new SaltApiError(502, "malformed", "salt-api sent a response without a `return` list");
		return ret[0] as T;
	}

	/** GET /jobs/<jid> (runner jobs.list_job): safe, retried. */
	async listJob(jid: string): Promise<{ info: Array<Record<string, any>>; return: Array<Record<string, unknown>> }> {
		if (!/^\d{20}(_\d+)?$/.test(jid)) throw new Error(`not a jid: ${jid}`);
		const body = (await this.authed("GET", `jobs/${jid}`, undefined, true)) as any;
		if (!body || !Array.isArray(body.info) || !Array.isArray(body.return))
			throw new SaltApiError(502, "malformed", "salt-api sent a malformed job");
		return body;
	}

	/**
	 * Follows the master's event bus (`GET /events`) until `close()` (salt-events.ts): every event goes to
	 * `onEvent`; the stream is re-opened after a backoff whenever it ends.
	 */
	streamEvents(
		handlers: EventStreamHandlers,
		opts: { minBackoffMs?: number; maxBackoffMs?: number } = {},
	): EventStream {
		return followEvents(
			{
				url: new URL("events", this.base),
				transport: this.transport,
				agent: this.streamAgent,
				timeoutMs: this.timeoutMs,
				token: () => this.ensureToken(),
				dropToken: token => {
					if (this.token === token) this.token = null;
				},
				closed: () => this.closed,
			},
			handlers,
			opts,
		);
	}

	// ---------------------------------------------------------------- sessions

	private async ensureToken(): Promise<string> {
		if (this.token && Date.now() < this.tokenUntil) return this.token;
		if (!this.loggingIn) {
			this.loggingIn = this.login().finally(() => {
				this.loggingIn = null;
			});
		}
		return this.loggingIn;
	}

	private async login(): Promise<string> {
		const { username, password } = this.opts;
		const eauth = this.opts.eauth ?? "pam";
		const body = await this.withRetries(true, async () => {
			const res = await this.send("POST", "login", { username, password, eauth }, undefined, this.timeoutMs);
			if (res.status === 401 || res.status === 403) {
				throw new SaltApiError(
					502,
					"auth",
					`salt-api refused the login of user '${username}' with eauth '${eauth}' (check CM_API_USER, CM_API_PASSWORD, CM_API_EAUTH and the master's external_auth)`,
				);
			}
			return this.parse(res);
		});
		const entry = (body as { return?: Array<{ token?: unknown; expire?: unknown; start?: unknown }> })?.return?.[0];
		if (!entry || typeof entry.token !== "string" || !entry.token)
			throw new SaltApiError(502, "malformed", "salt-api sent a login response without a token");
		const expire = typeof entry.expire === "number" ? entry.expire * 1000 : Date.now() + 3600_000;
		const start = typeof entry.start === "number" ? entry.start * 1000 : Date.now();
		// Salt's clock may differ from ours: use the lifetime it granted, minus a margin.
		const lifetime = Math.max(0, expire - start);
		this.token = entry.token;
		this.tokenUntil = Date.now() + Math.max(lifetime - Math.min(60_000, lifetime / 10), 0);
		return entry.token;
	}

	// ---------------------------------------------------------------- the call path

	/**
	 * A call with the session token: a 401 forgets the token, logs in again and sends once more (the
	 * 401 proves the request did not run). Other failures are retried only when `safe`.
	 */
	private async authed(
		method: string,
		path: string,
		payload: unknown,
		safe: boolean,
		timeoutMs = this.timeoutMs,
	): Promise<unknown> {
		return this.withRetries(safe, async () => {
			for (let attempt = 0; ; attempt++) {
				const token = await this.ensureToken();
				const res = await this.send(method, path, payload, token, timeoutMs);
				if (res.status === 401) {
					if (this.token === token) this.token = null;
					if (attempt === 0) continue;
					throw new SaltApiError(
						502,
						"auth",
						"salt-api refused the session right after a fresh login (check the eauth permissions of CM_API_USER)",
					);
				}
				return this.parse(res);
			}
		});
	}

	/**
	 * Runs `fn`; when `safe`, again after fast failures (unreachable, a 502/504-like 5xx, malformed), with
	 * backoff. Not after a timeout: the call already took the whole per-call time, and a second one would
	 * outlast the caller (a real salt-api holds a runner call ~180 s while the master is down); not after the
	 * master said it is not answering.
	 */
	private async withRetries<T>(safe: boolean, fn: () => Promise<T>): Promise<T> {
		for (let attempt = 1; ; attempt++) {
			try {
				return await fn();
			} catch (err) {
				const retryable =
					err instanceof SaltApiError &&
					(err.kind === "unreachable" || err.kind === "upstream" || err.kind === "malformed");
				if (!safe || !retryable || attempt >= this.attempts || this.closed) throw err;
				await sleep(this.backoffMs * 2 ** (attempt - 1));
			}
		}
	}

	/** A 2xx body as JSON; anything else a typed error (non-2xx bodies are HTML and not parsed). */
	private parse(res: RawResponse): unknown {
		if (res.status >= 200 && res.status < 300) {
			try {
				return JSON.parse(res.text);
			} catch {
				throw new SaltApiError(502, "malformed", `salt-api sent a malformed response (status ${res.status}, not JSON)`);
			}
		}
		const detail = htmlMessage(res.text);
		if (res.status === 504)
			throw new SaltApiError(
				504,
				"timeout",
				`salt-api timed out waiting for the master or the minions${detail ? `: ${detail}` : ""}`,
			);
		if (res.status === 500 || res.status === 503) {
			this.opts.onMasterUnanswering?.();
			throw new SaltApiError(
				503,
				"master",
				`the Salt master is not answering (salt-api answered ${res.status}${detail ? `: ${detail}` : ""})`,
			);
		}
		if (res.status >= 500)
			throw new SaltApiError(
				502,
				"upstream",
				`salt-api failed with status ${res.status}${detail ? `: ${detail}` : ""}`,
			);
		throw new SaltApiError(
			502,
			"refused",
			`salt-api refused the request with status ${res.status}${detail ? `: ${detail}` : ""}`,
		);
	}

	private refuseWhenClosed(): void {
		if (this.closed) throw new SaltApiError(502, "unreachable", "the salt-api client is closed");
	}

	/** One HTTP exchange, under the semaphore, with a timeout. */
	private async send(
		method: string,
		path: string,
		payload: unknown,
		token: string | undefined,
		timeoutMs: number,
	): Promise<RawResponse> {
		this.refuseWhenClosed();
		const release = await this.semaphore.acquire();
		try {
			// Again once its turn came: the client may have been closed meanwhile.
			this.refuseWhenClosed();
			return await this.exchange(method, path, payload, token, timeoutMs);
		} catch (err) {
			if (err instanceof AttemptError)
				throw new SaltApiError(err.kind === "timeout" ? 504 : 502, err.kind, err.message);
			throw err;
		} finally {
			release();
		}
	}

	private async exchange(
		method: string,
		path: string,
		payload: unknown,
		token: string | undefined,
		timeoutMs: number,
	): Promise<RawResponse> {
		const url = new URL(path, this.base);
		const body = payload === undefined ? undefined : Buffer.from(JSON.stringify(payload));
		const headers: Record<string, string> = { Accept: "application/json" };
		if (body) {
			headers["Content-Type"] = "application/json";
			headers["Content-Length"] = String(body.length);
		}
		if (token) headers["X-Auth-Token"] = token;
		try {
			const res = await exchange({
				transport: this.transport,
				url,
				method,
				headers,
				agent: this.agent,
				body,
				timeoutMs,
				signal: this.closing.signal,
			});
			return { status: res.status, text: res.body.toString("utf8") };
		} catch (err) {
			if (!(err instanceof ExchangeError)) throw err;
			if (err.kind === "timeout") throw new AttemptError("timeout", `salt-api did not answer within ${timeoutMs} ms`);
			if (err.kind === "cut") throw new AttemptError("malformed", "salt-api's response was cut off");
			if (err.kind === "tls")
				throw new AttemptError(
					"unreachable",
					`salt-api's TLS certificate was not accepted (${err.detail}); set CM_API_CA, or CM_API_TLS_VERIFY=false for tests`,
				);
			throw new AttemptError("unreachable", `salt-api at ${this.base.host} is unreachable (${err.detail})`);
		}
	}
}
