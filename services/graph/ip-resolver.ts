/**
 * The IP resolver protocol (docs/graph.md), client side. fleet-ctl asks
 *
 *     POST <resolver>/resolve   Content-Type: application/json
 *     {"hosts": ["web-01.example", ...]}                 (at most RESOLVE_BATCH names)
 *
 * and expects 200 with
 *
 *     {"addresses": {"web-01.example": {"ip": "203.0.113.7", "gateway": "203.0.113.1"}, ...}}
 *
 * where names the resolver does not know are left out and `gateway` is optional. Everything the resolver
 * sends is untrusted: the answer must be JSON (no `__proto__`/`constructor` keys) of at most
 * MAX_ANSWER_BYTES, within the timeout; an entry counts only for a name that was asked, with `ip` (and
 * `gateway`, if given) a valid IPv4 or IPv6 address; anything else in an entry is ignored, and a bad entry is
 * counted as rejected, not stored.
 *
 * Where the resolver may be is the "ip-resolver" policy of lib/security/address-guard.ts (private addresses yes;
 * loopback, link-local and unspecified only when OUTBOUND_ALLOW names them), checked on the URL when it is
 * given and on every address the name resolves to when connecting.
 */
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { rejectProtoKeys } from "../../lib/eve/query";
import {
	guardedLookup,
	isOutboundRefusal,
	literalHostRefusal,
	outboundUrlProblem,
	type OutboundPolicy,
} from "../../lib/security/address-guard";

export const RESOLVE_BATCH = 500;
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

export interface ResolvedAddress {
	ip: string;
	gateway?: string;
}

export interface BatchResult {
	addresses: Map<string, ResolvedAddress>;
	/** Entries that were not usable: a name not asked, or an address that is not an IP. */
	rejected: number;
}

export class ResolverError extends Error {}

/** The resolver's URL as given: http(s) only, no credentials in it, at an address the policy allows. */
export function checkResolverUrl(raw: string, policy: OutboundPolicy): URL {
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		throw new ResolverError(`'${raw.slice(0, 200)}' is not a URL`);
	}
	if (url.protocol !== "http:" && url.protocol !== "https:")
		throw new ResolverError("the IP resolver must be an http(s) URL");
	if (url.username || url.password) throw new ResolverError("the IP resolver URL must not hold credentials");
	const problem = outboundUrlProblem(raw, policy);
	if (problem) throw new ResolverError(problem);
	return url;
}

/** One POST /resolve. */
export async function resolveBatch(
	base: URL,
	hosts: string[],
	timeoutMs: number,
	policy: OutboundPolicy,
): Promise<BatchResult> {
	const target = new URL("resolve", base.href.endsWith("/") ? base : new URL(`${base.href}/`));
	const text = await post(target, JSON.stringify({ hosts }), timeoutMs, policy);
	let parsed: unknown;
	try {
		parsed = JSON.parse(text, rejectProtoKeys);
	} catch (err) {
		throw new ResolverError(
			`the IP resolver answered something that is not JSON (${(err as Error).message.slice(0, 100)})`,
		);
	}
	const addresses = (parsed as { addresses?: unknown })?.addresses;
	if (
		!parsed ||
		typeof parsed !== "object" ||
		!addresses ||
		typeof addresses !== "object" ||
		Array.isArray(addresses)
	) {
		throw new ResolverError("the IP resolver's answer has no `addresses` object");
	}
	const asked = new Set(hosts);
	const out = new Map<string, ResolvedAddress>();
	let rejected = 0;
	for (const [name, entry] of Object.entries(addresses as Record<string, unknown>)) {
		const e = entry as { ip?: unknown; gateway?: unknown } | null;
		const ok =
			asked.has(name) &&
			e &&
			typeof e === "object" &&
			typeof e.ip === "string" &&
			isIP(e.ip) !== 0 &&
			(e.gateway === undefined || e.gateway === null || (typeof e.gateway === "string" && isIP(e.gateway) !== 0));
		if (!ok) {
			rejected++;
			continue;
		}
		out.set(name, { ip: e!.ip as string, ...(typeof e!.gateway === "string" ? { gateway: e!.gateway } : {}) });
	}
	return { addresses: out, rejected };
}

function post(url: URL, body: string, timeoutMs: number, policy: OutboundPolicy): Promise<string> {
	const transport = url.protocol === "https:" ? https : http;
	const payload = Buffer.from(body);
	const refused = literalHostRefusal(url, policy);
	if (refused) return Promise.reject(new ResolverError(refused.message));
	return new Promise((resolve, reject) => {
		let done = false;
		const fail = (message: string) => {
			if (done) return;
			done = true;
			clearTimeout(timer);
			req.destroy();
			reject(new ResolverError(message));
		};
		const req = transport.request(
			url,
			{
				method: "POST",
				agent: false,
				lookup: guardedLookup(policy),
				headers: {
					"Content-Type": "application/json",
					"Content-Length": String(payload.length),
					Accept: "application/json",
				},
			},
			res => {
				if (res.statusCode !== 200) {
					res.resume();
					return fail(`the IP resolver answered ${res.statusCode}`);
				}
				const chunks: Buffer[] = [];
				let size = 0;
				res.on("data", (c: Buffer) => {
					size += c.length;
					if (size > MAX_ANSWER_BYTES) return fail(`the IP resolver's answer is larger than ${MAX_ANSWER_BYTES} bytes`);
					chunks.push(c);
				});
				res.on("end", () => {
					if (done) return;
					done = true;
					clearTimeout(timer);
					resolve(Buffer.concat(chunks).toString("utf8"));
				});
				res.on("error", () => fail("the IP resolver's answer was cut off"));
				res.on("aborted", () => fail("the IP resolver's answer was cut off"));
			},
		);
		const timer = setTimeout(() => fail(`the IP resolver did not answer within ${timeoutMs} ms`), timeoutMs);
		req.on("error", (err: NodeJS.ErrnoException) =>
			fail(isOutboundRefusal(err) ? err.message : `the IP resolver is unreachable (${err.code || err.message})`),
		);
		req.end(payload);
	});
}
