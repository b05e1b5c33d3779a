/**
 * The REPL's only door into fleet-ctl: the HTTP API of a running instance (CTL_API_URL), the same door curl
 * and the dashboard use, with the operator's token. So the REPL attaches to whatever runs — the embedded
 * default, a NATS cluster, Kubernetes behind its gateway — never opens the data itself, and every command is
 * authorized, scoped and audited by the gateway like any API request (its User-Agent names the REPL).
 * Owns: building requests (Eve query parameters as JSON), and turning every failure — an Eve error, no
 * answer, a timeout — into an ApiError with the code and the reason to print.
 */
import os from "node:os";

export class ApiError extends Error {
	/** The HTTP status, or 0 when fleet-ctl did not answer. */
	constructor(
		readonly code: number,
		message: string,
	) {
		super(message);
		this.name = "ApiError";
	}
}

/** Query parameters: values that are not strings go as JSON (`where`, `projection`); an array value repeats the key (`range[]`). */
export type Query = Record<string, unknown>;

export interface ApiClientOptions {
	/** e.g. http://127.0.0.1:3000/api */
	url: string;
	token: string;
	/** How long one request may take (default 30 s, the gateway's own deadline). */
	timeoutMs?: number;
}

/** The User-Agent of the REPL's requests: the audit log tells them apart by it. */
export const REPL_AGENT = `fleet-ctl-repl (${os.hostname()})`;

function encodeQuery(query: Query): string {
	const params = new URLSearchParams();
	for (const [key, value] of Object.entries(query)) {
		if (value === undefined) continue;
		for (const v of Array.isArray(value) && key.endsWith("[]") ? value : [value])
			params.append(key, typeof v === "string" ? v : JSON.stringify(v));
	}
	const text = params.toString();
	return text ? `?${text}` : "";
}

/** Eve's error body, else the status line. */
function eveMessage(status: number, text: string): string {
	try {
		const body = JSON.parse(text) as { _error?: { message?: string }; _issues?: Record<string, unknown> };
		const issues = body._issues
			? ` (${Object.entries(body._issues)
					.map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
					.join("; ")})`
			: "";
		if (body._error?.message) return `${body._error.message}${issues}`;
	} catch {
		// not JSON: the status says it
	}
	return `HTTP ${status}`;
}

export class ApiClient {
	token: string;
	readonly url: string;
	private readonly timeoutMs: number;

	constructor(opts: ApiClientOptions) {
		this.url = opts.url.replace(/\/+$/, "");
		this.token = opts.token;
		this.timeoutMs = opts.timeoutMs ?? 30_000;
	}

	get<T>(path: string, query: Query = {}): Promise<T> {
		return this.request<T>("GET", `${path}${encodeQuery(query)}`);
	}

	send<T>(method: "POST" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<T> {
		return this.request<T>(method, path, body);
	}

	private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
		const headers: Record<string, string> = { "User-Agent": REPL_AGENT, Accept: "application/json" };
		if (this.token) headers.Authorization = `Bearer ${this.token}`;
		if (body !== undefined) headers["Content-Type"] = "application/json";
		let res: Response;
		try {
			res = await fetch(`${this.url}/${path}`, {
				method,
				headers,
				body: body === undefined ? undefined : JSON.stringify(body),
				signal: AbortSignal.timeout(this.timeoutMs),
			});
		} catch (err) {
			const e = err as Error & { cause?: { code?: string; message?: string } };
			if (e.name === "TimeoutError")
				throw new ApiError(504, `fleet-ctl at ${this.url} did not answer within ${this.timeoutMs} ms`);
			throw new ApiError(
				0,
				`fleet-ctl does not answer at ${this.url} (${e.cause?.code ?? e.cause?.message ?? e.message}): start it (npm start), or point CTL_API_URL at its API`,
			);
		}
		const text = await res.text();
		if (!res.ok) throw new ApiError(res.status, eveMessage(res.status, text));
		return (text ? JSON.parse(text) : undefined) as T;
	}
}
