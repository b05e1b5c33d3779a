/**
 * One HTTP exchange with an outside system, as every client of one needs it (salt-api, Pritunl): the request
 * sent, the whole answer read (at most `maxBytes`), one deadline over both, and every way it can fail told
 * apart (ExchangeError.kind) — so each client words its own errors and none re-implements the settling.
 */
import type http from "node:http";
import type https from "node:https";

export type ExchangeFailure = "timeout" | "tls" | "reset" | "unreachable" | "cut" | "too-large" | "setup";

export class ExchangeError extends Error {
	constructor(
		readonly kind: ExchangeFailure,
		/** What Node said, when it said something. */
		readonly reason: NodeJS.ErrnoException | null,
	) {
		super(reason?.message ?? kind);
		this.name = "ExchangeError";
	}

	/** Node's error code, or its message when it has none: what the clients put in brackets. */
	get detail(): string {
		return this.reason?.code || this.reason?.message || this.kind;
	}
}

export interface ExchangeRequest {
	transport: typeof http | typeof https;
	url: URL;
	method: string;
	headers: Record<string, string>;
	agent: http.Agent;
	body?: Buffer;
	timeoutMs: number;
	/** The longest answer taken (default: no limit). */
	maxBytes?: number;
	/** A DNS lookup of the caller's (the outbound address guard's). */
	lookup?: http.RequestOptions["lookup"];
	/** Errors of the request the caller words itself (the address guard's refusals): rejected as they are. */
	ownError?: (err: Error) => boolean;
	/** Aborts the request (its client closed): it fails at once rather than at its timeout. */
	signal?: AbortSignal;
}

export interface ExchangeResponse {
	status: number;
	headers: http.IncomingHttpHeaders;
	body: Buffer;
}

const TLS_CODE = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY/;
const RESET_CODES = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/** What a failed request's error was. */
export function failureOf(err: NodeJS.ErrnoException): ExchangeFailure {
	const code = err.code ?? "";
	if (TLS_CODE.test(code) || /certificate/i.test(err.message)) return "tls";
	if (RESET_CODES.has(code)) return "reset";
	return "unreachable";
}

export function exchange(r: ExchangeRequest): Promise<ExchangeResponse> {
	return new Promise<ExchangeResponse>((resolve, reject) => {
		let settled = false;
		let timer: NodeJS.Timeout | undefined;
		const finish = (err: Error | null, res?: ExchangeResponse) => {
			if (settled) return;
			settled = true;
			clearTimeout(timer);
			if (err) reject(err);
			else resolve(res as ExchangeResponse);
		};
		let req: http.ClientRequest;
		const onResponse = (res: http.IncomingMessage) => {
			const chunks: Buffer[] = [];
			let size = 0;
			res.on("data", (c: Buffer) => {
				size += c.length;
				if (r.maxBytes !== undefined && size > r.maxBytes) {
					finish(new ExchangeError("too-large", null));
					req.destroy();
					return;
				}
				chunks.push(c);
			});
			res.on("end", () =>
				finish(null, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
			);
			const cut = () => finish(new ExchangeError("cut", null));
			res.on("error", cut);
			res.on("aborted", cut);
		};
		try {
			req = r.transport.request(
				r.url,
				{
					method: r.method,
					headers: r.headers,
					agent: r.agent,
					...(r.lookup ? { lookup: r.lookup } : {}),
					...(r.signal ? { signal: r.signal } : {}),
				},
				onResponse,
			);
		} catch (err) {
			// Options Node refuses before connecting (an unusable CA).
			return finish(new ExchangeError("setup", err as NodeJS.ErrnoException));
		}
		timer = setTimeout(() => {
			finish(new ExchangeError("timeout", null));
			req.destroy();
		}, r.timeoutMs);
		req.on("error", (err: NodeJS.ErrnoException) =>
			finish(r.ownError?.(err) ? err : new ExchangeError(failureOf(err), err)),
		);
		req.end(r.body);
	});
}
