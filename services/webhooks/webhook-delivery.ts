/**
 * One webhook delivery attempt, and what keeps it safe (docs/webhooks.md):
 *  - signed: `X-Fleet-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, so a
 *    receiver checks both the body and its age (replays);
 *  - bounded: a timeout on the whole attempt, at most MAX_RESPONSE_BYTES of the answer read, no redirect
 *    followed (a 3xx is a failure);
 *  - SSRF guard (lib/security/address-guard.ts, the "webhook" policy): http(s) only, no credentials in the URL, and
 *    the address actually connected to is checked at connect time (the DNS answer, not the name: a name
 *    that resolves to 127.0.0.1 is refused too), IPv6 forms embedding an IPv4 address included.
 */
import http from "node:http";
import https from "node:https";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { guardedLookup, literalHostRefusal, type OutboundPolicy } from "../../lib/security/address-guard";

const MAX_RESPONSE_BYTES = 4096;

export function newWebhookSecret(): string {
	return "whsec_" + randomBytes(24).toString("base64url");
}

export function signature(secret: string, timestamp: number, body: string): string {
	return `t=${timestamp},v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/** What a receiver does (test/webhooks/webhooks.spec.ts's receiver uses it; docs/webhooks.md shows it). */
export function verifySignature(
	secret: string,
	header: string | undefined,
	body: string,
	toleranceSeconds = 300,
	now = Date.now(),
): boolean {
	const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? "");
	if (!m) return false;
	const t = Number(m[1]);
	if (Math.abs(now / 1000 - t) > toleranceSeconds) return false;
	const want = Buffer.from(signature(secret, t, body).split("v1=")[1], "hex");
	return timingSafeEqual(want, Buffer.from(m[2], "hex"));
}

export interface AttemptResult {
	ok: boolean;
	status: number | null;
	error: string | null;
	durationMs: number;
}

/** One POST of `body`; never throws: every outcome, a refusal by the SSRF guard included, is an AttemptResult. */
export function deliver(
	url: string,
	body: string,
	headers: Record<string, string>,
	timeoutMs: number,
	policy: OutboundPolicy,
): Promise<AttemptResult> {
	const started = Date.now();
	return new Promise(resolve => {
		let done = false;
		// Declared before anything can call finish(): a refusal before the request exists finishes at once.
		let timer: ReturnType<typeof setTimeout> | undefined;
		const finish = (r: Omit<AttemptResult, "durationMs">) => {
			if (done) return;
			done = true;
			if (timer) clearTimeout(timer);
			resolve({ ...r, durationMs: Date.now() - started });
		};
		const failed = (error: string) => finish({ ok: false, status: null, error: error.slice(0, 300) });
		let target: URL;
		try {
			target = new URL(url);
		} catch {
			return failed("invalid URL");
		}
		const refused = literalHostRefusal(target, policy);
		if (refused) return failed(refused.message);
		const lib = target.protocol === "https:" ? https : http;
		let req: http.ClientRequest;
		try {
			req = lib.request(target, {
				method: "POST",
				headers: {
					...headers,
					"content-type": "application/json",
					"content-length": String(Buffer.byteLength(body)),
					"user-agent": "fleet-ctl-webhooks/1",
				},
				lookup: guardedLookup(policy),
				agent: false,
			});
		} catch (err) {
			// e.g. a header value Node refuses: thrown synchronously, before any connection.
			return failed((err as Error).message);
		}
		timer = setTimeout(() => {
			req.destroy();
			failed(`no answer within ${timeoutMs} ms`);
		}, timeoutMs);
		timer.unref?.();
		req.on("error", err => failed(err.message));
		req.on("response", res => {
			let read = 0;
			res.on("data", (chunk: Buffer) => {
				read += chunk.length;
				if (read > MAX_RESPONSE_BYTES) res.destroy();
			});
			const status = res.statusCode ?? 0;
			const end = () =>
				finish({
					ok: status >= 200 && status < 300,
					status,
					error: status >= 200 && status < 300 ? null : `HTTP ${status}`,
				});
			res.on("end", end);
			res.on("close", end);
			res.on("error", end);
		});
		req.end(body);
	});
}
