/**
 * The master's event bus as salt-api streams it (`GET /events`, server-sent events): the parser of the
 * stream, and the follower that keeps it open — re-opened after a backoff whenever it ends or cannot be
 * opened, logging in again on a 401 — handing every `{tag, data}` event on. Used by SaltClient.streamEvents.
 */
import type http from "node:http";
import type https from "node:https";

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

/** What the follower needs of the client: where, how, and the session. */
export interface StreamConnection {
	url: URL;
	transport: typeof http | typeof https;
	/** An agent of its own: the stream holds its connection for hours. */
	agent: http.Agent;
	/** How long salt-api may take to open the stream. */
	timeoutMs: number;
	/** The session token (logging in when there is none). */
	token(): Promise<string>;
	/** salt-api refused this token: the next `token()` logs in again. */
	dropToken(token: string): void;
	/** The client was closed: stop for good. */
	closed(): boolean;
}

/**
 * Follows the master's event bus (`GET /events`) until `close()`: every event goes to
 * `onEvent`; when the stream ends or cannot be opened it is re-opened after a backoff (from
 * `minBackoffMs`, doubling up to `maxBackoffMs`, reset once a stream delivered events). A 401 drops
 * the session and logs in again without waiting. Records whose data is not JSON are skipped.
 */
export function followEvents(conn: StreamConnection, handlers: EventStreamHandlers, opts: { minBackoffMs?: number; maxBackoffMs?: number } = {}): EventStream {
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
		if (stopped || conn.closed()) return;
		retryTimer = setTimeout(() => {
			retryTimer = null;
			void open();
		}, delay);
		retryTimer.unref?.();
		if (delay > 0) backoff = Math.min(maxBackoff, backoff * 2);
	};

	const open = async () => {
		if (stopped || conn.closed()) return;
		let token: string;
		try {
			token = await conn.token();
		} catch (err) {
			return disconnected((err as Error).message, backoff);
		}
		if (stopped) return;
					let delivered = false;
		let done = false;
		const end = (reason: string, delay: number) => {
			if (done) return;
			done = true;
			req.destroy();
			disconnected(reason, delivered ? minBackoff : delay);
			if (delivered) backoff = minBackoff;
		};
		const req = conn.transport.request(conn.url, { method: "GET", agent: conn.agent, headers: { Accept: "text/event-stream", "X-Auth-Token": token } }, res => {
			clearTimeout(headersTimer);
			if (res.statusCode === 401) {
				res.resume();
				conn.dropToken(token);
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
		const headersTimer = setTimeout(() => end(`salt-api did not open the event stream within ${conn.timeoutMs} ms`, backoff), conn.timeoutMs);
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
