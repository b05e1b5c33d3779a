/**
 * The gateway's kept reads (services/api/kept-reads.ts): a read whose answer the gateway keeps is sent before
 * moleculer-web routes it, with the status, headers and body the routed path gives, counted in the request
 * metrics as a routed one; whatever the routed path would refuse (a revoked or expired token, the rate limit,
 * another role, a service gone) still takes the routed path and is refused there. CORS:
 * test/api/kept-reads-cors.spec.ts. Over real HTTP to the embedded services.
 */
import { startEmbedded, ADMIN_TOKEN, type Harness } from "../support/harness";
import { raw, routedCounter } from "../support/raw-http";
import { expectEveError, request } from "../support/http";
import { parsePrometheus, total } from "../support/prometheus";
import { ScrapedPrometheusReporter } from "../../lib/runtime/metrics";

const HOSTS = Array.from({ length: 30 }, (_, i) => ({
	_id: `kept-${String(i).padStart(2, "0")}.example.org`,
	key: "accepted",
	status: i % 3 ? "up" : "down",
}));

describe("kept reads", () => {
	const LIMIT = 40;
	const reporter = new ScrapedPrometheusReporter();
	let h: Harness;
	let routed: { count(): number };
	const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
	const newToken = async (name: string, role: string, extra: Record<string, unknown> = {}) => {
		const made = await request("POST", `${h.api}/tokens`, { body: { name, role, ...extra } });
		expect(made.status).toBe(201);
		return made.body as { _id: string; token: string };
	};

	beforeAll(async () => {
		h = await startEmbedded({
			env: { RATE_LIMIT_PER_MINUTE: String(LIMIT), READ_CACHE_MS: "60000" },
			broker: { metrics: { enabled: true, reporter: [reporter as never] } },
		});
		await h.call("hosts.upsertMany", { hosts: HOSTS });
		routed = routedCounter(h);
	});
	afterAll(() => h?.stop());

	it("answers a kept read without routing it, with the status, headers and body of the routed answer (GET, HEAD, a list, an item, a 304)", async () => {
		const reader = await newToken("kept-reader", "viewer");
		const item = `${h.api}/hosts/${HOSTS[4]._id}`;
		const list = `${h.api}/hosts?where=${encodeURIComponent('{"status":"down"}')}&sort=-_id&max_results=4`;
		const cases: Array<[string, string, Record<string, string>]> = [
			["GET", item, {}],
			["HEAD", `${h.api}/hosts/${HOSTS[5]._id}`, {}],
			["GET", list, {}],
			["HEAD", `${h.api}/hosts?max_results=2`, {}],
		];
		const etag = async () =>
			(await raw("GET", item, bearer(reader.token))).headers.find(([k]) => k === "ETag")?.[1] ?? "";
		for (let i = 0; i < cases.length + 1; i++) {
			// Last, the item again with its ETag in If-None-Match: a 304 either way.
			const [method, url, extra] = cases[i] ?? ["GET", item, { "if-none-match": await etag() }];
			const headers = { ...bearer(reader.token), "x-request-id": `kept-case-${i}`, ...extra };
			// The first time routed (the URL's answer not kept yet, or kept by the ETag's read), then kept.
			const first = await raw(method, url, headers);
			expect([method, url, first.status]).toEqual([method, url, extra["if-none-match"] ? 304 : 200]);
			const before = routed.count();
			const kept = await raw(method, url, headers);
			// Sent again, a plain GET's kept answer is written from the head the first one was sent with.
			const again = await raw(method, url, headers);
			expect(routed.count()).toBe(before);
			expect([method, url, again]).toEqual([method, url, first]);
			// With the request's own id.
			const otherId = await raw(method, url, { ...headers, "x-request-id": `kept-case-${i}-other` });
			expect(otherId.headers).toEqual(
				first.headers.map(([k, v]) => [k, k === "X-Request-ID" ? `kept-case-${i}-other` : v]),
			);
			expect(otherId.body).toBe(first.body);
			// The same request with a body (which the gateway reads and drops) takes the routed path to the same kept answer.
			const routedHit = await raw(method, url, headers, "{}");
			expect(routed.count()).toBe(before + 1);
			expect([method, url, kept]).toEqual([method, url, first]);
			expect([method, url, routedHit]).toEqual([method, url, first]);
		}
		// The answers are the fleet's: the list filtered and sorted as asked, with the gateway's security headers.
		const down = await raw("GET", list, bearer(reader.token));
		expect(JSON.parse(down.body)._items.map((x: { _id: string }) => x._id)).toEqual(
			HOSTS.filter(x => x.status === "down")
				.map(x => x._id)
				.reverse()
				.slice(0, 4),
		);
		expect(Object.fromEntries(down.headers)).toMatchObject({
			"X-Content-Type-Options": "nosniff",
			"X-Frame-Options": "DENY",
			"X-Request-ID": expect.stringMatching(/^[\w-]{8,}$/),
		});
	});

	it("counts a kept read in the request metrics as the routed one", async () => {
		const url = `${h.api}/hosts?max_results=3`;
		const scrape = () => parsePrometheus(reporter.text());
		const rest = { name: "moleculer_request_total", labels: { action: "api.rest" } };
		expect((await raw("GET", url, bearer(ADMIN_TOKEN))).status).toBe(200);
		const before = scrape();
		const series = before
			.filter(s => s.name === rest.name && s.labels.action === "api.rest")
			.map(s => JSON.stringify(s.labels));
		const routedBefore = routed.count();
		for (let i = 0; i < 3; i++) expect((await raw("GET", url, bearer(ADMIN_TOKEN))).status).toBe(200);
		expect(routed.count()).toBe(routedBefore);
		const after = scrape();
		expect(total(after, rest.name, rest.labels) - total(before, rest.name, rest.labels)).toBe(3);
		// The same series (labels) as the routed requests', and their durations observed.
		expect(
			after.filter(s => s.name === rest.name && s.labels.action === "api.rest").map(s => JSON.stringify(s.labels)),
		).toEqual(series);
		const observed = (s: typeof after) => total(s, "moleculer_request_time_bucket", { action: "api.rest", le: "+Inf" });
		expect(observed(after) - observed(before)).toBe(3);
		// In their buckets too (each took well under a second), as the routed ones are.
		const underASecond = (s: typeof after) =>
			total(s, "moleculer_request_time_bucket", { action: "api.rest", le: "1000" });
		expect(underASecond(after) - underASecond(before)).toBe(3);
	});

	it("refuses what the routed path refuses: a revoked token, an expired one, another role's answer", async () => {
		const url = `${h.api}/hosts/${HOSTS[7]._id}`;
		const revoked = await newToken("kept-revoked", "viewer");
		for (let i = 0; i < 2; i++) expect((await raw("GET", url, bearer(revoked.token))).status).toBe(200);
		expect((await request("DELETE", `${h.api}/tokens/${revoked._id}`)).status).toBe(204);
		expectEveError(await request("GET", url, { token: revoked.token }), 401);

		const expires = new Date(Math.ceil(Date.now() / 1000) * 1000 + 2000);
		const expiring = await newToken("kept-expiring", "viewer", { expires: expires.toUTCString() });
		for (let i = 0; i < 2; i++) expect((await raw("GET", url, bearer(expiring.token))).status).toBe(200);
		await new Promise(r => setTimeout(r, expires.getTime() - Date.now() + 50));
		expectEveError(await request("GET", url, { token: expiring.token }), 401);

		// The admin's answer to GET /tokens is kept; a viewer is refused it, by the routed path.
		const tokensUrl = `${h.api}/tokens?max_results=1`;
		for (let i = 0; i < 2; i++) expect((await raw("GET", tokensUrl, bearer(ADMIN_TOKEN))).status).toBe(200);
		const viewer = await newToken("kept-viewer", "viewer");
		const before = routed.count();
		expectEveError(await request("GET", tokensUrl, { token: viewer.token }), 403);
		expect(routed.count()).toBe(before + 1);
		expectEveError(await request("GET", url, { token: "fct_not-a-token-of-this-fleet-0000" }), 401);
		// A path moleculer-web cannot decode is the routed path's to refuse.
		expectEveError(await request("GET", `${h.api}/hosts/%`), 400);
	});

	it("counts kept reads toward the token's rate limit and answers the one past it 429, audited as the routed path does", async () => {
		const limited = await newToken("kept-limited", "viewer");
		const url = `${h.api}/hosts?max_results=1`;
		const gateway = h.broker!.getLocalService("api") as unknown as { rateWindowStart: number };
		// All in one one-minute window (see test/e2e/access-limits.spec.ts): wait for a fresh one when little is left.
		if (gateway.rateWindowStart + 60_000 - Date.now() < 20_000)
			await new Promise(r => setTimeout(r, gateway.rateWindowStart + 60_000 - Date.now() + 10));
		const before = routed.count();
		for (let i = 1; i <= LIMIT; i++)
			expect([i, (await raw("GET", url, bearer(limited.token))).status]).toEqual([i, 200]);
		// The first was routed (and kept), the other 39 answered from the kept answer.
		expect(routed.count()).toBe(before + 1);
		const over = await request("GET", url, { token: limited.token });
		expect(expectEveError(over, 429)).toEqual({
			_status: "ERR",
			_error: { code: 429, message: "Rate limit exceeded" },
		});
		expect(Number(over.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
		expect(routed.count()).toBe(before + 2);
	});

	it("answers 503 when the service behind a kept read is gone, as the routed path does", async () => {
		const url = `${h.api}/hosts/${HOSTS[9]._id}`;
		for (let i = 0; i < 2; i++) expect((await raw("GET", url, bearer(ADMIN_TOKEN))).status).toBe(200);
		const hosts = h.broker!.getLocalService("hosts");
		await h.broker!.destroyService(hosts as never);
		expectEveError(await request("GET", url), 503);
	});
});
