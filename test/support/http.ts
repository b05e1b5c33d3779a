/** A small HTTP client for the suites: JSON in, status + headers + parsed body out. */
export interface Reply {
	status: number;
	headers: Headers;
	text: string;
	body: any;
}

export interface RequestOptions {
	body?: unknown;
	/** Sent as is (malformed JSON, other content types). */
	raw?: string | Uint8Array | FormData;
	headers?: Record<string, string>;
	/** Bearer token to send; default the harness's admin token (FLEET_TEST_TOKEN), null for none. */
	token?: string | null;
}

export async function request(method: string, url: string, opts: RequestOptions = {}): Promise<Reply> {
	const headers: Record<string, string> = { ...opts.headers };
	const token = opts.token === undefined ? process.env.FLEET_TEST_TOKEN : opts.token;
	if (token && !Object.keys(headers).some(h => h.toLowerCase() === "authorization"))
		headers.authorization = `Bearer ${token}`;
	let body: RequestInit["body"];
	if (opts.raw !== undefined) body = opts.raw as RequestInit["body"];
	else if (opts.body !== undefined) {
		body = JSON.stringify(opts.body);
		headers["content-type"] ??= "application/json";
	}
	const res = await fetch(url, { method, headers, body });
	const text = await res.text();
	let parsed: any;
	if (text && (res.headers.get("content-type") ?? "").includes("json")) {
		try {
			parsed = JSON.parse(text);
		} catch {
			parsed = undefined;
		}
	}
	return { status: res.status, headers: res.headers, text, body: parsed };
}

/** Builds `path?k=v&...` with each value URL-encoded (objects as JSON). */
export function withQuery(path: string, query: Record<string, unknown>): string {
	const parts = Object.entries(query).map(
		([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(typeof v === "string" ? v : JSON.stringify(v))}`,
	);
	return parts.length ? `${path}?${parts.join("&")}` : path;
}

/**
 * Asserts Eve's error shape and returns the body. The checks throw with the whole reply in the message, then
 * the shape is asserted once more through expect(), so a test made only of these counts as asserting
 * (test/support/assertions.ts).
 */
export function expectEveError(reply: Reply, code: number): any {
	if (reply.status !== code) throw new Error(`expected ${code}, got ${reply.status}: ${reply.text}`);
	if (
		reply.body?._status !== "ERR" ||
		reply.body._error?.code !== code ||
		typeof reply.body._error?.message !== "string"
	) {
		throw new Error(`not an Eve error body: ${reply.text}`);
	}
	expect(reply.body).toMatchObject({ _status: "ERR", _error: { code, message: expect.any(String) } });
	return reply.body;
}

/** Polls `fn` until it gives something other than undefined; fails after `timeoutMs`. */
export async function eventually<T>(
	fn: () => Promise<T | undefined>,
	timeoutMs = 5000,
	what = "a condition",
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await fn();
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
		await new Promise(r => setTimeout(r, 50));
	}
}
