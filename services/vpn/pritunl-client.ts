/**
 * A client of Pritunl's web API, following `../shared/reference/protocols.md` Part B:
 *
 *  - Session login: `POST /auth/session` with the manager's username and password, then `GET /state`
 *    for the CSRF token; every later call sends the session cookie and `Csrf-Token`. A 401 means the
 *    session is gone (expired after `session_timeout`, server restarted, client IP changed): log in
 *    again and send the call ONCE more. Pritunl checks the session before the handler runs, so a 401
 *    proves the call did nothing and re-sending even a POST after it is safe.
 *  - API-token auth (an administrator with "API access"): `Auth-Token`, `Auth-Timestamp`, `Auth-Nonce`
 *    and `Auth-Signature` = base64(HMAC-SHA256(secret, token&timestamp&nonce&METHOD&path)), the path
 *    without query string; a fresh nonce per request (Pritunl rejects a reused one).
 *  - A call that changes something (POST, PUT, DELETE) is never re-sent after an ambiguous failure
 *    (timeout, connection reset, malformed answer): it may have run. GETs are tried twice.
 *  - Each call has a timeout; TLS certificates are verified unless `tlsVerify` is false; `ca` (PEM)
 *    is trusted in addition to the system's CAs (a manager's own CA).
 *
 * Errors are `PritunlError`s (Eve errors): Pritunl unreachable, a 5xx, a malformed answer, refused
 * credentials or an address the outbound guard refuses (`outbound`, lib/security/address-guard.ts; kind
 * "blocked") -> 502; no answer in time -> 504; `status` keeps Pritunl's own status (404, 500, …) so
 * callers can tell an unknown id. The password, the API secret and the session never appear in an
 * error or a log line.
 */
import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { createHmac, randomUUID } from "node:crypto";
import { Errors } from "moleculer";
import {
	guardedLookup,
	isOutboundRefusal,
	literalHostRefusal,
	type OutboundPolicy,
} from "../../lib/security/address-guard";
import { ExchangeError, exchange } from "../../lib/net/http-exchange";

export type PritunlErrorKind = "unreachable" | "timeout" | "auth" | "upstream" | "malformed" | "refused" | "blocked";

/** What went wrong talking to Pritunl (502, or 504 without an answer in time); its own type, rendered by the gateway. */
export class PritunlError extends Errors.MoleculerError {
	readonly kind: PritunlErrorKind;
	/** Pritunl's HTTP status, when it answered. */
	readonly status?: number;
	constructor(code: 502 | 504, kind: PritunlErrorKind, message: string, status?: number) {
		super(message, code, "PRITUNL", { kind, status });
		this.kind = kind;
		this.status = status;
		this.name = "PritunlError";
	}
}

export interface PritunlClientOptions {
	/** Base URL of the Pritunl web server, e.g. https://vpn.example.org (a path, if any, is ignored). */
	url: string;
	username?: string;
	password?: string;
	/** API-token auth instead of a session, when both are given. */
	apiToken?: string;
	apiSecret?: string;
	/** PEM of extra trusted CAs. */
	ca?: string;
	/** Verify Pritunl's certificate (default true). */
	tlsVerify?: boolean;
	/** Per-call timeout in ms (default 15000). */
	timeoutMs?: number;
	/** Largest answer accepted, in bytes (default 64 MiB): a server sending more is talking nonsense. */
	maxResponseBytes?: number;
	/**
	 * Where Pritunl may be (the "pritunl" policy of lib/security/address-guard.ts), checked on every connection after
	 * DNS. The vpn service always gives it; without it (protocol tests, benchmarks) any address is reached.
	 */
	outbound?: OutboundPolicy;
}

/** `server_address` of a manager as the base URL of its API: a URL as given, `host[:port]` as https. */
export function pritunlBaseUrl(serverAddress: string): string {
	const raw = serverAddress.trim();
	const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `https://${raw}`);
	if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`not an http(s) address: ${url.protocol}`);
	return url.origin;
}

/** The request signature of Pritunl's API-token auth (pritunl/auth/app.py). */
export function pritunlSignature(
	secret: string,
	token: string,
	timestamp: string,
	nonce: string,
	method: string,
	path: string,
): string {
	return createHmac("sha256", secret)
		.update([token, timestamp, nonce, method.toUpperCase(), path].join("&"))
		.digest("base64");
}

export interface PritunlResponse {
	status: number;
	headers: http.IncomingHttpHeaders;
	body: Buffer;
}

export interface CallOptions {
	/** Expect bytes, not JSON (profile downloads). */
	raw?: boolean;
	/** Pritunl statuses the caller handles itself (answered, not thrown), e.g. [404]. */
	accept?: number[];
}

interface Session {
	cookie: string;
	csrf: string;
}

/** One short line of a Pritunl error body: `{"error","error_msg"}` or the plain text `401: Unauthorized`. */
function errorText(body: Buffer): string {
	const text = body.toString("utf8").slice(0, 2000);
	try {
		const parsed = JSON.parse(text) as { error?: unknown; error_msg?: unknown };
		if (parsed && typeof parsed === "object") {
			const parts = [parsed.error, parsed.error_msg].filter(v => typeof v === "string" && v);
			if (parts.length) return parts.join(": ").slice(0, 300);
		}
	} catch {
		// plain text
	}
	return text
		.replace(/<[^>]*>/g, " ")
		.replace(/\s+/g, " ")
		.trim()
		.slice(0, 200);
}

export class PritunlClient {
	private readonly base: URL;
	private readonly agent: http.Agent;
	private readonly transport: typeof http | typeof https;
	private readonly timeoutMs: number;
	private session: Session | null = null;
	private loggingIn: Promise<Session> | null = null;
	private closed = false;
	/** Logins made so far (tests and the docs' claim that a session is reused). */
	logins = 0;

	constructor(private readonly opts: PritunlClientOptions) {
		this.base = new URL(pritunlBaseUrl(opts.url));
		this.timeoutMs = opts.timeoutMs ?? 15_000;
		if (this.base.protocol === "https:") {
			this.transport = https;
			// A manager's CA is trusted besides the usual ones, not instead of them.
			const ca = opts.ca ? [...tls.rootCertificates, opts.ca] : undefined;
			// No kept-alive sockets: a socket the server closed meanwhile would fail a POST that must not be re-sent.
			this.agent = new https.Agent({ keepAlive: false, rejectUnauthorized: opts.tlsVerify !== false, ca });
		} else {
			this.transport = http;
			this.agent = new http.Agent({ keepAlive: false });
		}
	}

	get tokenAuth(): boolean {
		return Boolean(this.opts.apiToken && this.opts.apiSecret);
	}

	close(): void {
		this.closed = true;
		this.agent.destroy();
	}

	/** Checks that the credentials work: a login (session) or an authenticated read (token). */
	async check(): Promise<void> {
		if (this.tokenAuth) await this.json("GET", "/organization");
		else {
			this.session = null;
			await this.ensureSession();
		}
	}

	/** A call answered with JSON. */
	async json<T = unknown>(
		method: string,
		path: string,
		payload?: unknown,
		opts: CallOptions = {},
	): Promise<{ status: number; body: T }> {
		const res = await this.call(method, path, payload, opts);
		if (opts.accept?.includes(res.status) && (res.status < 200 || res.status >= 300))
			return { status: res.status, body: undefined as T };
		try {
			return { status: res.status, body: JSON.parse(res.body.toString("utf8")) as T };
		} catch {
			throw new PritunlError(
				502,
				"malformed",
				`Pritunl sent a malformed answer to ${method} ${path} (status ${res.status}, not JSON)`,
				res.status,
			);
		}
	}

	/** A call; a non-2xx status not in `accept` is thrown. */
	async call(method: string, path: string, payload?: unknown, opts: CallOptions = {}): Promise<PritunlResponse> {
		const safe = method === "GET";
		for (let attempt = 1; ; attempt++) {
			try {
				const res = await this.authed(method, path, payload);
				if (res.status >= 200 && res.status < 300) return res;
				if (opts.accept?.includes(res.status)) return res;
				throw this.statusError(method, path, res);
			} catch (err) {
				const retry =
					safe &&
					attempt < 2 &&
					err instanceof PritunlError &&
					(err.kind === "unreachable" || err.kind === "timeout") &&
					!this.closed;
				if (!retry) throw err;
			}
		}
	}

	// ---------------------------------------------------------------- authentication

	/** A call with credentials: a 401 on a session drops it, logs in again and sends once more. */
	private async authed(method: string, path: string, payload: unknown): Promise<PritunlResponse> {
		if (this.tokenAuth) {
			const res = await this.send(method, path, payload, this.signedHeaders(method, path));
			if (res.status === 401)
				throw new PritunlError(
					502,
					"auth",
					"Pritunl refused the API token (check the manager's api_token and api_secret, that the administrator has API access, and that this machine's clock is right)",
					401,
				);
			return res;
		}
		for (let attempt = 0; ; attempt++) {
			const session = await this.ensureSession();
			const res = await this.send(method, path, payload, { Cookie: session.cookie, "Csrf-Token": session.csrf });
			if (res.status !== 401) return res;
			if (this.session === session) this.session = null;
			if (attempt > 0)
				throw new PritunlError(502, "auth", "Pritunl refused the session right after a fresh login", 401);
		}
	}

	private signedHeaders(method: string, path: string): Record<string, string> {
		const token = this.opts.apiToken as string;
		const timestamp = String(Math.floor(Date.now() / 1000));
		const nonce = randomUUID().replace(/-/g, "");
		const pathOnly = path.split("?")[0];
		return {
			"Auth-Token": token,
			"Auth-Timestamp": timestamp,
			"Auth-Nonce": nonce,
			"Auth-Signature": pritunlSignature(this.opts.apiSecret as string, token, timestamp, nonce, method, pathOnly),
		};
	}

	private ensureSession(): Promise<Session> {
		if (this.session) return Promise.resolve(this.session);
		this.loggingIn ??= this.login().finally(() => {
			this.loggingIn = null;
		});
		return this.loggingIn;
	}

	private async login(): Promise<Session> {
		const username = this.opts.username ?? "";
		const res = await this.send("POST", "/auth/session", { username, password: this.opts.password ?? "" }, {});
		if (res.status === 401 || res.status === 402 || res.status === 400 || res.status === 403) {
			const why = errorText(res.body);
			const reason =
				res.status === 402
					? "the administrator needs two-factor authentication, which fleet-ctl cannot answer (use API-token auth)"
					: why || `status ${res.status}`;
			throw new PritunlError(502, "auth", `Pritunl refused the login of '${username}': ${reason}`, res.status);
		}
		if (res.status < 200 || res.status >= 300) throw this.statusError("POST", "/auth/session", res);
		const cookies = (res.headers["set-cookie"] ?? []).map(c => c.split(";")[0].trim()).filter(c => /^[^=]+=/.test(c));
		if (!cookies.length)
			throw new PritunlError(502, "malformed", "Pritunl accepted the login but set no session cookie", res.status);
		const cookie = cookies.join("; ");
		const state = await this.send("GET", "/state", undefined, { Cookie: cookie });
		if (state.status === 401)
			throw new PritunlError(502, "auth", "Pritunl dropped the session right after the login", 401);
		if (state.status < 200 || state.status >= 300) throw this.statusError("GET", "/state", state);
		let csrf: unknown;
		try {
			csrf = (JSON.parse(state.body.toString("utf8")) as { csrf_token?: unknown })?.csrf_token;
		} catch {
			csrf = undefined;
		}
		if (typeof csrf !== "string" || !csrf)
			throw new PritunlError(502, "malformed", "Pritunl's /state has no csrf_token", state.status);
		this.logins++;
		this.session = { cookie, csrf };
		return this.session;
	}

	private statusError(method: string, path: string, res: PritunlResponse): PritunlError {
		const detail = errorText(res.body);
		const what = `${method} ${path.split("?")[0]}`;
		if (res.status === 504) return new PritunlError(504, "timeout", `Pritunl timed out on ${what}`, res.status);
		if (res.status >= 500)
			return new PritunlError(
				502,
				"upstream",
				`Pritunl failed on ${what} with status ${res.status}${detail ? `: ${detail}` : ""}`,
				res.status,
			);
		return new PritunlError(
			502,
			"refused",
			`Pritunl refused ${what} with status ${res.status}${detail ? `: ${detail}` : ""}`,
			res.status,
		);
	}

	// ---------------------------------------------------------------- one exchange

	private async send(
		method: string,
		path: string,
		payload: unknown,
		headers: Record<string, string>,
	): Promise<PritunlResponse> {
		if (this.closed) throw new PritunlError(502, "unreachable", "the Pritunl client is closed");
		const url = new URL(path, this.base);
		const refused = this.opts.outbound ? literalHostRefusal(url, this.opts.outbound) : null;
		if (refused) throw new PritunlError(502, "blocked", refused.message);
		const body = payload === undefined ? undefined : Buffer.from(JSON.stringify(payload));
		const all: Record<string, string> = { Accept: "application/json", ...headers };
		if (body) {
			all["Content-Type"] = "application/json";
			all["Content-Length"] = String(body.length);
		}
		const limit = this.opts.maxResponseBytes ?? 64 * 1024 * 1024;
		const what = `${method} ${url.pathname}`;
		const host = this.base.host;
		try {
			const lookup = this.opts.outbound ? guardedLookup(this.opts.outbound) : undefined;
			return await exchange({
				transport: this.transport,
				url,
				method,
				headers: all,
				agent: this.agent,
				body,
				timeoutMs: this.timeoutMs,
				maxBytes: limit,
				lookup,
				ownError: isOutboundRefusal,
			});
		} catch (err) {
			if (isOutboundRefusal(err as Error)) throw new PritunlError(502, "blocked", (err as Error).message);
			if (!(err instanceof ExchangeError)) throw err;
			switch (err.kind) {
				case "timeout":
					throw new PritunlError(
						504,
						"timeout",
						`Pritunl at ${host} did not answer ${what} within ${this.timeoutMs} ms`,
					);
				case "too-large":
					throw new PritunlError(502, "malformed", `Pritunl's answer to ${what} is larger than ${limit} bytes`);
				case "cut":
					throw new PritunlError(502, "malformed", `Pritunl's answer to ${what} was cut off`);
				case "setup":
					throw new PritunlError(502, "unreachable", `cannot connect to Pritunl at ${host} (${err.message})`);
				case "tls":
					throw new PritunlError(
						502,
						"unreachable",
						`Pritunl's TLS certificate at ${host} was not accepted (${err.detail}); give the manager its ca_certificate`,
					);
				case "reset":
					throw new PritunlError(502, "malformed", `Pritunl at ${host} dropped the connection during ${what}`);
				default:
					throw new PritunlError(502, "unreachable", `Pritunl at ${host} is unreachable (${err.detail})`);
			}
		}
	}
}
