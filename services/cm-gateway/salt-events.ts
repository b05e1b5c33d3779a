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
	/** An event longer than MAX_RECORD_CHARS was skipped (its tag, if it came before the limit, and its length). */
	onDropped?(tag: string | undefined, chars: number): void;
	/**
	 * The stream ended between an event's tag and its data: salt-api could not encode that event (a datetime, a
	 * minion's bytes `tok`) and died there. Its tag, before `onDisconnect`.
	 */
	onCut?(tag: string): void;
}

export interface EventStream {
	readonly connected: boolean;
	close(): void;
}

/** The longest record the parser keeps, in characters (a longer one is dropped): far below V8's longest string. */
export const MAX_RECORD_CHARS = 128 * 1024 * 1024;

/**
 * Splits a server-sent-events stream into records and hands each record's fields on. salt-api writes `tag:` and
 * `data:` lines (and a first `retry:` line with no blank line after it); a blank line ends a record.
 *
 * It works line by line and looks for line ends only in the text just received: one event can be tens of
 * megabytes (the return of `cache.grains` over a whole fleet arrives in thousands of chunks), and searching the
 * whole record again for its end at every chunk made reading it quadratic (a 10,000-minion sync spent 38 of its
 * 51 s there). A record longer than `maxRecordChars` is dropped (`onDropped`), the records after it delivered.
 */
export class SseParser {
	/** The line being received: its pieces, joined once its end arrives (none kept while dropping). */
	private partial: string[] = [];
	/** Characters of the line being received, and its first one. */
	private lineChars = 0;
	private lineHead = "";
	private tag: string | undefined;
	private data: string[] = [];
	/** Characters of the current record's complete lines. */
	private held = 0;
	/** The current record passed the limit: its lines are skipped until the blank line that ends it. */
	private dropping = false;

	constructor(
		private readonly onRecord: (fields: { tag?: string; data: string }) => void,
		private readonly opts: {
			maxRecordChars?: number;
			onDropped?: (tag: string | undefined, chars: number) => void;
		} = {},
	) {}

	push(chunk: string): void {
		const max = this.opts.maxRecordChars ?? MAX_RECORD_CHARS;
		let from = 0;
		for (;;) {
			const nl = chunk.indexOf("\n", from);
			const end = nl < 0 ? chunk.length : nl;
			if (end > from) {
				if (this.lineChars === 0) this.lineHead = chunk[from];
				this.lineChars += end - from;
				if (!this.dropping) {
					this.partial.push(from === 0 && end === chunk.length ? chunk : chunk.slice(from, end));
					if (this.held + this.lineChars > max) this.drop();
				}
			}
			if (nl < 0) return;
			from = nl + 1;
			const blank = this.lineChars === 0 || (this.lineChars === 1 && this.lineHead === "\r");
			const line = blank || this.dropping ? "" : this.partial.join("");
			this.held += this.lineChars;
			this.partial = [];
			this.lineChars = 0;
			if (blank) this.endRecord();
			else if (!this.dropping) this.field(line.endsWith("\r") ? line.slice(0, -1) : line);
		}
	}

	private drop(): void {
		this.dropping = true;
		this.partial = [];
		this.data = [];
	}

	/** The tag of a record begun and not ended (the stream ends: that record was cut), if any. */
	cutTag(): string | undefined {
		return this.tag;
	}

	private endRecord(): void {
		if (this.dropping) this.opts.onDropped?.(this.tag, this.held);
		else if (this.data.length) this.onRecord({ tag: this.tag, data: this.data.join("\n") });
		this.tag = undefined;
		this.data = [];
		this.held = 0;
		this.dropping = false;
	}

	private field(line: string): void {
		const colon = line.indexOf(":");
		if (colon <= 0) return; // comments (":...") and field-less lines
		const field = line.slice(0, colon);
		const value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
		if (field === "data") this.data.push(value);
		else if (field === "tag") this.tag = value;
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
export function followEvents(
	conn: StreamConnection,
	handlers: EventStreamHandlers,
	opts: { minBackoffMs?: number; maxBackoffMs?: number } = {},
): EventStream {
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
		const req = conn.transport.request(
			conn.url,
			{ method: "GET", agent: conn.agent, headers: { Accept: "text/event-stream", "X-Auth-Token": token } },
			res => {
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
				const parser = new SseParser(
					({ tag, data }) => {
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
					},
					{ onDropped: (tag, chars) => handlers.onDropped?.(tag, chars) },
				);
				res.setEncoding("utf8");
				res.on("data", (chunk: string) => parser.push(chunk));
				const ended = (reason: string) => {
					const cut = done ? undefined : parser.cutTag();
					if (cut !== undefined) handlers.onCut?.(cut);
					end(
						cut === undefined ? reason : `${reason} in the middle of event ${JSON.stringify(cut.slice(0, 200))}`,
						backoff,
					);
				};
				res.on("end", () => ended("salt-api closed the event stream"));
				res.on("error", () => ended("the event stream was cut off"));
				res.on("aborted", () => ended("the event stream was cut off"));
			},
		);
		current = req;
		const headersTimer = setTimeout(
			() => end(`salt-api did not open the event stream within ${conn.timeoutMs} ms`, backoff),
			conn.timeoutMs,
		);
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
