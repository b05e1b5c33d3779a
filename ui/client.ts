/**
 * The dashboard's way to the API: the token (sessionStorage, gone with the tab), JSON requests with the
 * Authorization header, Eve errors as exceptions, and the alert stream read with fetch() — EventSource
 * cannot send the header, and the token never goes into a URL. Signed in through single sign-on instead, there
 * is no token here: the browser sends the http-only session cookie, and every request carries the CSRF token the
 * readable `fleet_csrf` cookie holds (X-CSRF-Token): writes and reads that mark alerts read need it.
 */

const KEY = "fleet-ctl.token";

export interface Me {
	_id: string;
	name: string;
	role: "viewer" | "operator" | "admin";
	scope: { groups?: string[]; functions?: string[] } | null;
	/** Signed in through single sign-on (a session cookie), not with a pasted token. */
	session?: boolean;
}

/** The CSRF token of the signed-in session (the readable cookie the sign-in set), or "". */
export function csrfToken(): string {
	const m = /(?:^|;\s*)fleet_csrf=([^;]*)/.exec(document.cookie);
	return m ? decodeURIComponent(m[1]) : "";
}

/**
 * The headers that say who asks: the pasted token, or (signed in) the CSRF token. A write needs it with the cookie,
 * and so does a read that changes state (`mark_as_read`): every request carries it, so no read can be forgotten.
 */
function who(): Record<string, string> {
	const t = token.get();
	if (t) return { Authorization: `Bearer ${t}` };
	return { "X-CSRF-Token": csrfToken() };
}

export class ApiError extends Error {
	constructor(
		readonly status: number,
		message: string,
		readonly issues?: unknown,
	) {
		super(message);
	}
}

export const token = {
	get: (): string | null => sessionStorage.getItem(KEY),
	set: (t: string) => sessionStorage.setItem(KEY, t),
	clear: () => sessionStorage.removeItem(KEY),
};

/**
 * Tabs of this dashboard share a signed-in token on request: a tab opened without one (the API page, a link opened
 * in a new tab) asks the others over a BroadcastChannel (this origin's pages only), and a signed-in tab answers.
 * The token stays in each tab's sessionStorage, gone when the tab closes; it is never written anywhere shared.
 */
const TABS = "fleet-ctl.tabs";

/** Answers other tabs' requests for the token while this tab holds one; returns how to stop. */
export function shareToken(): () => void {
	if (typeof BroadcastChannel === "undefined") return () => undefined;
	const channel = new BroadcastChannel(TABS);
	channel.onmessage = (ev: MessageEvent<{ ask?: string }>) => {
		const held = token.get();
		if (ev.data?.ask && held) channel.postMessage({ answer: ev.data.ask, token: held });
	};
	return () => channel.close();
}

/** The token of another signed-in tab of this dashboard, or null when none answers within `waitMs`. */
export function borrowToken(waitMs = 400): Promise<string | null> {
	if (typeof BroadcastChannel === "undefined") return Promise.resolve(null);
	return new Promise(resolve => {
		const channel = new BroadcastChannel(TABS);
		const ask = crypto.randomUUID();
		const done = (t: string | null) => {
			clearTimeout(timer);
			channel.close();
			resolve(t);
		};
		const timer = setTimeout(() => done(null), waitMs);
		channel.onmessage = (ev: MessageEvent<{ answer?: string; token?: string }>) => {
			if (ev.data?.answer === ask && typeof ev.data.token === "string") done(ev.data.token);
		};
		channel.postMessage({ ask });
	});
}

/** `path?k=v` with objects as JSON and arrays as repeated `k[]`. */
export function q(path: string, query: Record<string, unknown> = {}): string {
	const parts: string[] = [];
	for (const [k, v] of Object.entries(query)) {
		if (v === undefined || v === null || v === "") continue;
		if (Array.isArray(v) && k.endsWith("[]"))
			for (const item of v) parts.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(item))}`);
		else
			parts.push(
				`${encodeURIComponent(k)}=${encodeURIComponent(typeof v === "string" || typeof v === "number" ? String(v) : JSON.stringify(v))}`,
			);
	}
	return parts.length ? `${path}?${parts.join("&")}` : path;
}

function send(method: string, path: string, accept: string, body?: unknown): Promise<Response> {
	const headers: Record<string, string> = { Accept: accept, ...who() };
	if (body !== undefined) headers["Content-Type"] = "application/json";
	return fetch(`/api/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

function parse(text: string): any {
	try {
		return text ? JSON.parse(text) : null;
	} catch {
		return null;
	}
}

/** An Eve error answer as an exception (a 401 also brings the sign-in back). */
async function failure(res: Response): Promise<ApiError> {
	const parsed = parse(await res.text());
	if (res.status === 401) window.dispatchEvent(new CustomEvent("fleet:unauthorized"));
	return new ApiError(res.status, parsed?._error?.message ?? `HTTP ${res.status}`, parsed?._issues);
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
	const res = await send(method, path, "application/json", body);
	if (!res.ok) throw await failure(res);
	return parse(await res.text()) as T;
}

/** A file the API answers (GET), with the name its Content-Disposition gives. */
export async function download(path: string): Promise<{ data: Blob; filename: string }> {
	const res = await send("GET", path, "*/*");
	if (!res.ok) throw await failure(res);
	const named = /filename="([^"]+)"/.exec(res.headers.get("content-disposition") ?? "");
	return { data: await res.blob(), filename: named?.[1] ?? path.split("/").pop() ?? "download" };
}

/** One server-sent event: its name, its id (when it has one), its data. */
interface SseEvent {
	event: string;
	id: string;
	data: string;
}

/**
 * Reads a server-sent event stream of the API (`path`) and calls `onEvent` for each event; `onState` when it is
 * (re)connected (`ready`) or lost; `headers` are asked again at every connection (Last-Event-ID). Reconnects after a
 * pause until `stop()`. fetch(), not EventSource: EventSource cannot send the Authorization header.
 */
function followEvents(
	path: string,
	onEvent: (e: SseEvent) => void,
	onState: (connected: boolean) => void,
	headers: () => Record<string, string> = () => ({}),
): { stop(): void } {
	let stopped = false;
	let controller: AbortController | null = null;
	const loop = async () => {
		while (!stopped) {
			controller = new AbortController();
			try {
				const res = await fetch(`/api/${path}`, {
					headers: { ...who(), Accept: "text/event-stream", ...headers() },
					signal: controller.signal,
				});
				if (res.status === 401) {
					window.dispatchEvent(new CustomEvent("fleet:unauthorized"));
					return;
				}
				if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
				const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
				let buffer = "";
				for (;;) {
					const { value, done } = await reader.read();
					if (done) break;
					buffer += value;
					let cut: number;
					while ((cut = buffer.indexOf("\n\n")) >= 0) {
						const block = buffer.slice(0, cut);
						buffer = buffer.slice(cut + 2);
						const e: SseEvent = { event: "message", id: "", data: "" };
						const data: string[] = [];
						for (const line of block.split("\n")) {
							if (line.startsWith("event:")) e.event = line.slice(6).trim();
							else if (line.startsWith("id:")) e.id = line.slice(3).trim();
							else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
						}
						e.data = data.join("\n");
						if (e.event === "ready") onState(true);
						else onEvent(e);
					}
				}
			} catch {
				// dropped or refused: try again below
			}
			onState(false);
			if (!stopped) await new Promise(r => setTimeout(r, 3000));
		}
	};
	void loop();
	return {
		stop() {
			stopped = true;
			controller?.abort();
		},
	};
}

/**
 * Reads GET /api/alerts/stream and calls `onAlert` for each alert; after a reconnection the server replays what was
 * raised since the last alert seen (Last-Event-ID), from that alert's second: the ones already shown are recognised
 * by their ids.
 */
export function followAlerts(onAlert: (alert: any) => void, onState: (connected: boolean) => void): { stop(): void } {
	let lastId = "";
	const seen = new Set<string>();
	return followEvents(
		"alerts/stream",
		({ event, id, data }) => {
			if (event !== "alert" || !data || (id && seen.has(id))) return;
			if (id) {
				seen.add(id);
				lastId = id;
				if (seen.size > 1000) seen.delete(seen.values().next().value as string);
			}
			onAlert(JSON.parse(data));
		},
		onState,
		(): Record<string, string> => (lastId ? { "Last-Event-ID": lastId } : {}),
	);
}

/** Reads a stream of the API (`path`) and calls `onEvent` with each `event`'s data; `onOpen` at every (re)connection, so that a page reads again what it may have missed. */
export function followStream(
	path: string,
	event: string,
	onEvent: (data: any) => void,
	onOpen: () => void,
): { stop(): void } {
	return followEvents(
		path,
		e => {
			if (e.event === event && e.data) onEvent(JSON.parse(e.data));
		},
		connected => {
			if (connected) onOpen();
		},
	);
}

/** What the gateway offers for signing in (GET /auth/config). */
export async function signInOptions(): Promise<{ oidc: boolean; name?: string }> {
	try {
		const res = await fetch("/auth/config", { headers: { Accept: "application/json" } });
		return res.ok ? await res.json() : { oidc: false };
	} catch {
		return { oidc: false };
	}
}

/** Ends the single sign-on session here, then goes where the gateway says (the provider's logout). */
export async function signOutSession(): Promise<void> {
	const res = await fetch("/auth/logout", {
		method: "POST",
		headers: { Accept: "application/json", "X-CSRF-Token": csrfToken() },
	});
	const body = res.ok ? await res.json() : null;
	location.href = body?.redirect ?? "/";
}
