/**
 * Without OIDC_ISSUER nothing of single sign-on is offered (services/api/sessions.ts) and nothing changes: the API
 * tokens work as before, and a session cookie carrying an API token opens nothing. (Its own file: the gateway reads
 * its configuration once per process, and test/api/sign-in.spec.ts starts one with OIDC.)
 */
import { startEmbedded, type Harness } from "../support/harness";
import { request } from "../support/http";

describe("single sign-on not configured", () => {
	let h: Harness;
	beforeAll(async () => {
		h = await startEmbedded({});
	});
	afterAll(async () => {
		await h?.stop();
	});

	it("offers no sign-in and changes nothing: the token still works, a session cookie is no token", async () => {
		const base = h.api.replace(/\/api$/, "");
		expect(await (await fetch(`${base}/auth/config`)).json()).toMatchObject({ oidc: false });
		const login = await fetch(`${base}/auth/login`, { redirect: "manual" });
		expect(login.status).toBe(404);
		expect(((await login.json()) as { _error: { message: string } })._error.message).toMatch(
			/single sign-on is not configured/,
		);
		expect((await request("GET", `${h.api}/whoami`)).body).toMatchObject({ role: "admin", session: false });
		// An API token put in the session cookie is refused: a cookie carries only sessions.
		const res = await fetch(`${h.api}/whoami`, {
			headers: { cookie: `fleet_session=${process.env.FLEET_TEST_TOKEN}` },
		});
		expect(res.status).toBe(401);
		// A malformed cookie is no cookie: still a 401 in Eve's shape, never a 500.
		const bad = await fetch(`${h.api}/whoami`, { headers: { cookie: "fleet_session=%E0%A4%A" } });
		expect([bad.status, ((await bad.json()) as { _status: string })._status]).toEqual([401, "ERR"]);
	});
});
