/**
 * Limits count principals, not tokens (issue 43, docs/security.md "Principals"): a person or service account holds
 * at most STREAMS_PER_PRINCIPAL live streams on a gateway (429 beyond, naming the share; the others keep theirs),
 * and the per-minute rate limit counts every token of a principal together, so minting tokens buys no more of
 * either. Its own gateway, with low limits (the configuration is read once per process).
 */
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError } from "../support/http";

const SHARE = 3;
const LIMIT = 100;
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

describe("limits per principal", () => {
	let h: Harness;
	const open: AbortController[] = [];

	const serviceToken = async (name: string, role: string): Promise<string> => {
		const res = await request("POST", `${h.api}/tokens`, { body: { name, role } });
		if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`);
		return res.body.token;
	};
	const mint = async (maker: string, name: string): Promise<string> => {
		const res = await request("POST", `${h.api}/tokens/mine`, { token: maker, body: { name } });
		if (res.status !== 201) throw new Error(`mine: ${res.status} ${res.text}`);
		return res.body.token;
	};
	/** Opens a stream (kept open until the test aborts it): its status, and the body when refused. */
	const stream = async (
		token: string,
		path = "alerts/stream",
	): Promise<{ status: number; retryAfter: string | null; body?: any; abort: AbortController }> => {
		const abort = new AbortController();
		const res = await fetch(`${h.api}/${path}?timeout=60`, {
			headers: { authorization: `Bearer ${token}` },
			signal: abort.signal,
		});
		if (res.status === 200) {
			open.push(abort);
			return { status: 200, retryAfter: null, abort };
		}
		return { status: res.status, retryAfter: res.headers.get("retry-after"), body: await res.json(), abort };
	};

	beforeAll(async () => {
		h = await startEmbedded({ env: { RATE_LIMIT_PER_MINUTE: String(LIMIT), STREAMS_PER_PRINCIPAL: String(SHARE) } });
	});
	afterAll(async () => {
		for (const a of open) a.abort();
		await h?.stop();
	});

	it("gives each principal its share of live streams, whichever of its tokens opens them: 429 beyond it, naming the share; others unaffected", async () => {
		const viewer = await serviceToken("watcher", "viewer");
		const second = await mint(viewer, "watcher-2");
		const other = await serviceToken("other-watcher", "viewer");
		const first = await stream(viewer);
		expect(first.status).toBe(200);
		expect((await stream(viewer, "actions/stream")).status).toBe(200);
		expect((await stream(second)).status).toBe(200);
		// Every kind of stream counts, from every token of the principal.
		for (const [token, path] of [
			[second, "alerts/stream"],
			[viewer, "actions/stream"],
		]) {
			const refused = await stream(token, path);
			expect([refused.status, refused.body]).toEqual([
				429,
				{ _status: "ERR", _error: { code: 429, message: expect.any(String) } },
			]);
			expect(refused.body._error.message).toMatch(
				/too many open streams: token:[0-9a-f]{24} holds 3 .*STREAMS_PER_PRINCIPAL=3/,
			);
			expect(refused.retryAfter).toMatch(/^\d+$/);
		}
		// Another principal, and the admin, still get theirs.
		expect((await stream(other)).status).toBe(200);
		expect((await stream(process.env.FLEET_TEST_TOKEN!)).status).toBe(200);
		// A stream closed gives its slot back.
		first.abort.abort();
		let again = 0;
		for (let i = 0; i < 20 && again !== 200; i++) {
			await sleep(100);
			const res = await stream(second);
			again = res.status;
		}
		expect(again).toBe(200);
	});

	it("counts the rate limit per principal: a token minted from a limited one is limited too", async () => {
		const limited = await serviceToken("busy", "viewer");
		const other = await serviceToken("bystander", "viewer");
		// The limit counts in a fixed one-minute window per gateway (as test/e2e/access-limits.spec.ts): the burst
		// must fall in one window, so with less than half a minute of it left, its end is waited for.
		const gateway = h.broker!.getLocalService("api") as unknown as { rateWindowStart: number };
		if (gateway.rateWindowStart + 60_000 - Date.now() < 30_000)
			await sleep(gateway.rateWindowStart + 60_000 - Date.now() + 10);
		const minted = await mint(limited, "busy-2");
		const window = gateway.rateWindowStart;
		// The mint was the first request of the principal: LIMIT - 1 more are answered, from either token.
		for (let i = 2; i <= LIMIT; i++)
			expect([i, (await request("GET", `${h.api}/whoami`, { token: i % 2 ? limited : minted })).status]).toEqual([
				i,
				200,
			]);
		expectEveError(await request("GET", `${h.api}/whoami`, { token: minted }), 429);
		expectEveError(await request("GET", `${h.api}/whoami`, { token: limited }), 429);
		expect((await request("GET", `${h.api}/whoami`, { token: other })).status).toBe(200);
		expect(gateway.rateWindowStart).toBe(window);
	});
});
