/**
 * The gateway's kept reads (services/api/kept-reads.ts) with CORS configured (CORS_ORIGINS): a read from an
 * allowed origin gets the same CORS headers whether its answer is kept or not (moleculer-web answers CORS, so
 * such a read is routed); without an Origin the kept answer is sent at once. In a file of its own: the gateway
 * reads its configuration once, when its module loads. Over real HTTP to the embedded services.
 */
import { startEmbedded, ADMIN_TOKEN, type Harness } from "../support/harness";
import { raw, routedCounter } from "../support/raw-http";

describe("kept reads with CORS configured", () => {
	let h: Harness;
	const ORIGIN = "https://console.example.org";
	beforeAll(async () => {
		h = await startEmbedded({ env: { CORS_ORIGINS: ORIGIN, READ_CACHE_MS: "60000" } });
	});
	afterAll(() => h?.stop());

	it("answers a kept read from an allowed origin with the CORS headers of the routed answer", async () => {
		const routed = routedCounter(h);
		const url = `${h.api}/settings/0`;
		const headers = { authorization: `Bearer ${ADMIN_TOKEN}`, origin: ORIGIN, "x-request-id": "kept-cors" };
		const first = await raw("GET", url, headers);
		expect(first.status).toBe(200);
		expect(Object.fromEntries(first.headers)).toMatchObject({ "Access-Control-Allow-Origin": ORIGIN });
		const again = await raw("GET", url, headers);
		expect(again).toEqual(first);
		expect(routed.count()).toBe(2);
		// Without an Origin the kept answer is sent at once, the same but for CORS.
		const plain = await raw("GET", url, { authorization: `Bearer ${ADMIN_TOKEN}`, "x-request-id": "kept-cors" });
		expect(routed.count()).toBe(2);
		expect(plain.body).toBe(first.body);
		expect(plain.headers.filter(([k]) => !k.toLowerCase().startsWith("access-control-") && k !== "Vary")).toEqual(
			first.headers.filter(([k]) => !k.toLowerCase().startsWith("access-control-") && k !== "Vary"),
		);
	});
});
