/**
 * One webhook delivery attempt, and what keeps it safe (docs/webhooks.md):
 *  - signed: `X-Fleet-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, so a
 *    receiver checks both the body and its age (replays);
 *  - bounded: a timeout on the whole attempt, at most MAX_RESPONSE_BYTES of the answer read, no redirect
 *    followed (a 3xx is a failure);
 *  - SSRF guard: http(s) only, no credentials in the URL, and the address actually connected to is checked
 *    at connect time (the DNS answer, not the name: a name that resolves to 127.0.0.1 is refused too)
 *    against loopback, private, link-local, CGNAT, multicast and reserved ranges unless
 *    WEBHOOK_ALLOW_PRIVATE is set.
 */
import http from "node:http";
import https from "node:https";
import dns from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const MAX_RESPONSE_BYTES = 4096;

const blocked = new BlockList();
for (const [net, bits] of [
	["0.0.0.0", 8],
	["10.0.0.0", 8],
	["100.64.0.0", 10],
	["127.0.0.0", 8],
	["169.254.0.0", 16],
	["172.16.0.0", 12],
	["192.0.0.0", 24],
	["192.168.0.0", 16],
	["198.18.0.0", 15],
	["224.0.0.0", 4],
	["240.0.0.0", 4],
] as Array<[string, number]>)
	blocked.addSubnet(net, bits, "ipv4");
for (const [net, bits] of [
	["::", 128],
	["::1", 128],
	["fc00::", 7],
	["fe80::", 10],
	["ff00::", 8],
	["64:ff9b::", 96],
] as Array<[string, number]>)
	blocked.addSubnet(net, bits, "ipv6");

/** Is this address one a webhook may not reach (unless private receivers are allowed)? */
export function isPrivateAddress(ip: string): boolean {
	const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
	if (mapped) return blocked.check(mapped[1], "ipv4");
	const family = isIP(ip);
	if (family === 4) return blocked.check(ip, "ipv4");
	if (family === 6) return blocked.check(ip, "ipv6");
	return true;
}

/** A receiver URL as an admin may give it: the reason it is refused, or null. */
export function urlProblem(raw: string, allowPrivate: boolean): string | null {
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		return "must be an absolute http(s) URL";
	}
	if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http(s) URL";
	if (url.username || url.password) return "must not hold credentials";
	const host = url.hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "").toLowerCase();
	if (!allowPrivate && (host === "localhost" || host.endsWith(".localhost") || (isIP(host) && isPrivateAddress(host)))) return "must not be a loopback, private or link-local address";
	return null;
}

export function newWebhookSecret(): string {
	return "whsec_" + randomBytes(24).toString("base64url");
}

export function signature(secret: string, timestamp: number, body: string): string {
	return `t=${timestamp},v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/** What a receiver does (test/webhooks.spec.ts's receiver uses it; docs/webhooks.md shows it). */
export function verifySignature(secret: string, header: string | undefined, body: string, toleranceSeconds = 300, now = Date.now()): boolean {
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

function guardedLookup(allowPrivate: boolean): LookupFunction {
	return (hostname, options, callback) => {
		// Node asks for every address (options.all) when it may try several: each one is checked.
		dns.lookup(hostname, options, (err, address: string | dns.LookupAddress[], family?: number) => {
			if (err) return (callback as (e: Error) => void)(err);
			const addresses = Array.isArray(address) ? address.map(a => a.address) : [address];
			const bad = allowPrivate ? undefined : addresses.find(isPrivateAddress);
			if (bad !== undefined) return (callback as (e: Error) => void)(Object.assign(new Error(`the receiver's address ${bad} is not allowed (loopback, private or link-local)`), { code: "EBLOCKED" }));
			(callback as (e: null, a: unknown, f?: number) => void)(null, address, family);
		});
	};
}

/** One POST of `body`; never throws: every outcome, a refusal by the SSRF guard included, is an AttemptResult. */
export function deliver(url: string, body: string, headers: Record<string, string>, timeoutMs: number, allowPrivate: boolean): Promise<AttemptResult> {
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
		const host = target.hostname.replace(/^\[|\]$/g, "");
		if (!allowPrivate && isIP(host) && isPrivateAddress(host)) return failed(`the receiver's address ${host} is not allowed (loopback, private or link-local)`);
		const lib = target.protocol === "https:" ? https : http;
		let req: http.ClientRequest;
		try {
			req = lib.request(target, {
				method: "POST",
				headers: { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), "user-agent": "fleet-ctl-webhooks/1" },
				lookup: guardedLookup(allowPrivate),
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
			const end = () => finish({ ok: status >= 200 && status < 300, status, error: status >= 200 && status < 300 ? null : `HTTP ${status}` });
			res.on("end", end);
			res.on("close", end);
			res.on("error", end);
		});
		req.end(body);
	});
}
