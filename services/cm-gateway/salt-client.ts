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

/** One event of the master's bus: its tag and its data (`GET /events` sends `{tag, data}` as JSON). */
export interface SaltEvent {
	tag: string;
	data: Record<string, unknown>;
}

export interface EventStreamHandlers {
	onEvent(event: SaltEvent): void;
	/** The stream is open (first time and after every reconnection). */
	onConnect?(): void;
	/** The stream ended or could not be opened; it will be tried again after a backoff. */
	onDisconnect?(reason: string): void;
}

export interface EventStream {
	readonly connected: boolean;
	close(): void;
}

/**
 * Splits a server-sent-events byte stream into records and hands each record's fields on. salt-api
 * writes `tag:` and `data:` lines (and a first `retry:` line with no blank line after it).
 */
export class SseParser {
	private buffer = "";
	constructor(private readonly onRecord: (fields: { tag?: string; data: string }) => void) {}

	push(chunk: string): void {
		this.buffer += chunk;
		for (;;) {
			const m = /\r?\n\r?\n/.exec(this.buffer);
			if (!m) break;
			const block = this.buffer.slice(0, m.index);
			this.buffer = this.buffer.slice(m.index + m[0].length);
			let tag: string | undefined;
			const data: string[] = [];
			for (const line of block.split(/\r?\n/)) {
				const colon = line.indexOf(":");
				if (colon <= 0) continue; // comments (":...") and field-less lines
				const field = line.slice(0, colon);
				const value = line.slice(colon + 1).replace(/^ /, "");
				if (field === "data") data.push(value);
				else if (field === "tag") tag = value;
			}
			if (data.length) this.onRecord({ tag, data: data.join("\n") });
		}
	}
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

	constructor(private readonly opts: SaltClientOptions) {
		this.base = new URL(opts.url.endsWith("/") ? opts.url : `${opts.url}/`);
		if (this.base.protocol !== "http:" && this.base.protocol !== "https:") throw new Error(`CM_API_URL must be an http(s) URL, got '${this.base.protocol}'`);
		this.timeoutMs = opts.timeoutMs ?? 30_000;
		this.attempts = Math.max(1, opts.attempts ?? 3);
		this.backoffMs = opts.backoffMs ?? 200;
		this.semaphore = new Semaphore(Math.max(1, opts.concurrency ?? 8));
		if (this.base.protocol === "https:") {
			this.transport = https;
			const tls = { rejectUnauthorized: opts.tlsVerify !== false, ca: opts.caFile ? fs.readFileSync(opts.caFile) : undefined };
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
		const body = await this.authed("POST", "", [chunk], safe, opts.timeoutMs);
		const ret = (body as { return?: unknown })?.return;
		if (!Array.isArray(ret) || ret.length < 1) throw new SaltApiError(502, "malformed", "salt-api sent a response without a `return` list");
		return ret[0] as T;
	}

	/** GET /jobs/<jid> (runner jobs.list_job): safe, retried. */
	async listJob(jid: string): Promise<{ info: Array<Record<string, any>>; return: Array<Record<string, unknown>> }> {
		if (!/^\d{20}(_\d+)?$/.test(jid)) throw new Error(`not a jid: ${jid}`);
		const body = (await this.authed("GET", `jobs/${jid}`, undefined, true)) as any;
		if (!body || !Array.isArray(body.info) || !Array.isArray(body.return)) throw new SaltApiError(502, "malformed", "salt-api sent a malformed job");
		return body;
	}

	/**
	 * Follows the master's event bus (`GET /events`) until `close()`: every event goes to
	 * `onEvent`; when the stream ends or cannot be opened it is re-opened after a backoff (from
	 * `minBackoffMs`, doubling up to `maxBackoffMs`, reset once a stream delivered events). A 401 drops
	 * the session and logs in again without waiting. Records whose data is not JSON are skipped.
	 */
	streamEvents(handlers: EventStreamHandlers, opts: { minBackoffMs?: number; maxBackoffMs?: number } = {}): EventStream {
		const minBackoff = opts.minBackoffMs ?? 250;
		const maxBackoff = Math.max(minBackoff, opts.maxBackoffMs ?? 15_000);
		let backoff = minBackoff;
		let stopped = false;
		let connected = false;
		let current: http.ClientRequest | null = null;
		let retryTimer: NodeJS.Timeout | null = null;
		/** A second 401 in a row is not an expired session but a refusal: back off like any failure. */
		let refusedBefore = false;

		const disconnected = (reason: string, delay: number) => {
			current = null;
			if (connected) {
				connected = false;
				handlers.onDisconnect?.(reason);
			} else if (delay > 0) handlers.onDisconnect?.(reason);
			if (stopped || this.closed) return;
			retryTimer = setTimeout(() => {
				retryTimer = null;
				void open();
			}, delay);
			retryTimer.unref?.();
			if (delay > 0) backoff = Math.min(maxBackoff, backoff * 2);
		};

		const open = async () => {
			if (stopped || this.closed) return;
			let token: string;
			try {
				token = await this.ensureToken();
			} catch (err) {
				return disconnected((err as Error).message, backoff);
			}
			if (stopped) return;
			const url = new URL("events", this.base);
			let delivered = false;
			let done = false;
			const end = (reason: string, delay: number) => {
				if (done) return;
				done = true;
				req.destroy();
				disconnected(reason, delivered ? minBackoff : delay);
				if (delivered) backoff = minBackoff;
			};
			const req = this.transport.request(url, { method: "GET", agent: this.streamAgent, headers: { Accept: "text/event-stream", "X-Auth-Token": token } }, res => {
				clearTimeout(headersTimer);
				if (res.statusCode === 401) {
					res.resume();
					if (this.token === token) this.token = null;
					const delay = refusedBefore ? backoff : 0;
					refusedBefore = true;
					return end("salt-api refused the event stream's session (check the eauth permissions of CM_API_USER)", delay);
				}
				if (res.statusCode !== 200) {
					res.resume();
					return end(`salt-api answered ${res.statusCode} to GET /events`, backoff);
				}
				res.socket?.setKeepAlive(true, 30_000);
				refusedBefore = false;
				connected = true;
				handlers.onConnect?.();
				const parser = new SseParser(({ tag, data }) => {
					let parsed: unknown;
					try {
						parsed = JSON.parse(data);
					} catch {
						return;
					}
					const p = parsed as { tag?: unknown; data?: unknown };
					const eventTag = typeof p?.tag === "string" ? p.tag : tag;
					if (!eventTag || !p.data || typeof p.data !== "object") return;
					delivered = true;
					handlers.onEvent({ tag: eventTag, data: p.data as Record<string, unknown> });
				});
				res.setEncoding("utf8");
				res.on("data", (chunk: string) => parser.push(chunk));
				res.on("end", () => end("salt-api closed the event stream", backoff));
				res.on("error", () => end("the event stream was cut off", backoff));
				res.on("aborted", () => end("the event stream was cut off", backoff));
			});
			current = req;
			const headersTimer = setTimeout(() => end(`salt-api did not open the event stream within ${this.timeoutMs} ms`, backoff), this.timeoutMs);
			headersTimer.unref?.();
			req.on("error", (err: NodeJS.ErrnoException) => {
				clearTimeout(headersTimer);
				end(`salt-api's event stream is unreachable (${err.code || err.message})`, backoff);
			});
			req.on("close", () => clearTimeout(headersTimer));
			req.end();
		};

		void open();
		return {
			get connected() {
				return connected;
			},
			close: () => {
				stopped = true;
				if (retryTimer) clearTimeout(retryTimer);
				current?.destroy();
				connected = false;
			},
		};
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
				throw new SaltApiError(502, "auth", `salt-api refused the login of user '${username}' with eauth '${eauth}' (check CM_API_USER, CM_API_PASSWORD, CM_API_EAUTH and the master's external_auth)`);
			}
			return this.parse(res);
		});
		const entry = (body as { return?: Array<{ token?: unknown; expire?: unknown; start?: unknown }> })?.return?.[0];
		if (!entry || typeof entry.token !== "string" || !entry.token) throw new SaltApiError(502, "malformed", "salt-api sent a login response without a token");
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
	private async authed(method: string, path: string, payload: unknown, safe: boolean, timeoutMs = this.timeoutMs): Promise<unknown> {
		return this.withRetries(safe, async () => {
			for (let attempt = 0; ; attempt++) {
				const token = await this.ensureToken();
				const res = await this.send(method, path, payload, token, timeoutMs);
				if (res.status === 401) {
					if (this.token === token) this.token = null;
					if (attempt === 0) continue;
					throw new SaltApiError(502, "auth", "salt-api refused the session right after a fresh login (check the eauth permissions of CM_API_USER)");
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
				const retryable = err instanceof SaltApiError && (err.kind === "unreachable" || err.kind === "upstream" || err.kind === "malformed");
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
		if (res.status === 504) throw new SaltApiError(504, "timeout", `salt-api timed out waiting for the master or the minions${detail ? `: ${detail}` : ""}`);
		if (res.status === 500 || res.status === 503) {
			this.opts.onMasterUnanswering?.();
			throw new SaltApiError(503, "master", `the Salt master is not answering (salt-api answered ${res.status}${detail ? `: ${detail}` : ""})`);
		}
		if (res.status >= 500) throw new SaltApiError(502, "upstream", `salt-api failed with status ${res.status}${detail ? `: ${detail}` : ""}`);
		throw new SaltApiError(502, "refused", `salt-api refused the request with status ${res.status}${detail ? `: ${detail}` : ""}`);
	}

	/** One HTTP exchange, under the semaphore, with a timeout. */
	private async send(method: string, path: string, payload: unknown, token: string | undefined, timeoutMs: number): Promise<RawResponse> {
		if (this.closed) throw new SaltApiError(502, "unreachable", "the salt-api client is closed");
		const release = await this.semaphore.acquire();
		try {
			return await this.exchange(method, path, payload, token, timeoutMs);
		} catch (err) {
			if (err instanceof AttemptError) throw new SaltApiError(err.kind === "timeout" ? 504 : 502, err.kind, err.message);
			throw err;
		} finally {
			release();
		}
	}

	private exchange(method: string, path: string, payload: unknown, token: string | undefined, timeoutMs: number): Promise<RawResponse> {
		const url = new URL(path, this.base);
		const body = payload === undefined ? undefined : Buffer.from(JSON.stringify(payload));
		const headers: Record<string, string> = { Accept: "application/json" };
		if (body) {
			headers["Content-Type"] = "application/json";
			headers["Content-Length"] = String(body.length);
		}
		if (token) headers["X-Auth-Token"] = token;
		return new Promise<RawResponse>((resolve, reject) => {
			let settled = false;
			const finish = (err: Error | null, res?: RawResponse) => {
				if (settled) return;
				settled = true;
				clearTimeout(timer);
				if (err) reject(err);
				else resolve(res as RawResponse);
			};
			const req = this.transport.request(url, { method, headers, agent: this.agent }, res => {
				const chunks: Buffer[] = [];
				res.on("data", (c: Buffer) => chunks.push(c));
				res.on("end", () => finish(null, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
				res.on("error", () => finish(new AttemptError("malformed", "salt-api's response was cut off")));
				res.on("aborted", () => finish(new AttemptError("malformed", "salt-api's response was cut off")));
			});
			const timer = setTimeout(() => {
				finish(new AttemptError("timeout", `salt-api did not answer within ${timeoutMs} ms`));
				req.destroy();
			}, timeoutMs);
			req.on("error", (err: NodeJS.ErrnoException) => {
				const code = err.code ?? "";
				if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code) || /certificate/i.test(err.message)) {
					finish(new AttemptError("unreachable", `salt-api's TLS certificate was not accepted (${code || err.message}); set CM_API_CA, or CM_API_TLS_VERIFY=false for tests`));
				} else {
					finish(new AttemptError("unreachable", `salt-api at ${this.base.host} is unreachable (${code || err.message})`));
				}
			});
			req.end(body);
		});
	}
}
