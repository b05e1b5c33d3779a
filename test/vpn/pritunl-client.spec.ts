/**
 * The Pritunl client (services/vpn/pritunl-client.ts) against the Pritunl simulator over real HTTP: both ways of
 * logging in, the exact HMAC signature (checked by the simulator), sessions that end, Pritunl's quirks,
 * and failures (502 unreachable or nonsense, 504 no answer, no POST sent twice, TLS with a manager's CA).
 */
import { createHmac } from "node:crypto";
import { PritunlClient, PritunlError, pritunlBaseUrl, pritunlSignature } from "../../services/vpn/pritunl-client";
import { PritunlSimulator, untar } from "../simulators/pritunl";
import { opensslAvailable, selfSignedCert } from "../support/tls";

describe("Pritunl client against the simulator", () => {
	let sim: PritunlSimulator;
	let url: string;
	const clients: PritunlClient[] = [];
	const session = (opts: Partial<ConstructorParameters<typeof PritunlClient>[0]> = {}) => {
		const c = new PritunlClient({ url, username: sim.username, password: sim.password, timeoutMs: 1000, ...opts });
		clients.push(c);
		return c;
	};
	const token = (opts: Partial<ConstructorParameters<typeof PritunlClient>[0]> = {}) =>
		session({ username: undefined, password: undefined, apiToken: sim.apiToken, apiSecret: sim.apiSecret, ...opts });
	const failure = async (p: Promise<unknown>): Promise<PritunlError> => {
		try {
			await p;
		} catch (err) {
			expect(err).toBeInstanceOf(PritunlError);
			return err as PritunlError;
		}
		throw new Error("expected a failure");
	};

	beforeAll(async () => {
		sim = new PritunlSimulator({ username: "admin", password: "S3cret-pritunl-pw" });
		({ url } = await sim.start());
	});
	afterEach(() => sim.clearFaults());
	afterAll(async () => {
		for (const c of clients) c.close();
		await sim.stop();
	});

	it("reads server_address as host[:port] (https) or as a URL", () => {
		expect(pritunlBaseUrl("vpn.example.org:443")).toBe("https://vpn.example.org");
		expect(pritunlBaseUrl("vpn.example.org:8443")).toBe("https://vpn.example.org:8443");
		expect(pritunlBaseUrl("http://127.0.0.1:9700/ignored")).toBe("http://127.0.0.1:9700");
		expect(() => pritunlBaseUrl("ftp://x")).toThrow();
	});

	it("signs as Pritunl computes it: base64 HMAC-SHA256 of token&timestamp&nonce&METHOD&path", () => {
		const expected = createHmac("sha256", "secret")
			.update("tok&1700000000&abcdef0123456789&GET&/user/5f1c")
			.digest("base64");
		expect(pritunlSignature("secret", "tok", "1700000000", "abcdef0123456789", "get", "/user/5f1c")).toBe(expected);
	});

	it("logs in with a session (cookie + CSRF token from /state) and reuses it", async () => {
		const c = session();
		const before = sim.logins;
		const created = await c.json<any>("POST", "/organization", { name: "c-org-1", auth_api: false });
		expect(created.body).toEqual({
			id: expect.stringMatching(/^[a-f0-9]{24}$/),
			name: "c-org-1",
			auth_api: false,
			auth_token: null,
			auth_secret: null,
			user_count: 0,
		});
		const list = await c.json<any[]>("GET", "/organization");
		expect(list.body.map(o => o.name)).toContain("c-org-1");
		expect(sim.logins - before).toBe(1);
		expect(
			sim
				.requests()
				.slice(-2)
				.map(r => r.auth),
		).toEqual(["session", "session"]);
	});

	it("refuses a call without the CSRF token even with a live session (plain-text 401)", async () => {
		const login = await fetch(`${url}/auth/session`, {
			method: "POST",
			headers: { "content-type": "application/json" },
			body: JSON.stringify({ username: "admin", password: "S3cret-pritunl-pw" }),
		});
		const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0];
		const noCsrf = await fetch(`${url}/organization`, { headers: { cookie } });
		expect(noCsrf.status).toBe(401);
		expect(await noCsrf.text()).toBe("401: Unauthorized");
		expect((await fetch(`${url}/state`, { headers: { cookie } })).status).toBe(200);
	});

	it("says why a login was refused, without the password", async () => {
		const err = await failure(session({ password: "wrong-password-123" }).check());
		expect(err).toMatchObject({ code: 502, kind: "auth", status: 401 });
		expect(err.message).toMatch(
			/Pritunl refused the login of 'admin': auth_invalid: Authentication credentials are not valid/,
		);
		expect(err.message).not.toContain("wrong-password-123");
	});

	it("logs in again when the session ends, even in the middle of a series of calls", async () => {
		const c = session();
		const org = (await c.json<any>("POST", "/organization", { name: "c-org-expiry" })).body;
		sim.expireSessionsAfter(1);
		const before = sim.logins;
		for (let i = 0; i < 4; i++)
			expect((await c.json<any>("GET", `/organization/${org.id}`)).body.name).toBe("c-org-expiry");
		expect(sim.logins - before).toBe(1);
		const statuses = sim
			.requests()
			.slice(-7)
			.map(r => `${r.method} ${r.path} ${r.status}`);
		expect(statuses).toContain(`GET /organization/${org.id} 401`);
	});

	it("signs every request with the API token; the simulator checks each signature and refuses reused nonces", async () => {
		const c = token();
		const checked = sim.signaturesChecked;
		const org = (await c.json<any>("POST", "/organization", { name: "c-org-token", auth_api: true })).body;
		expect(org.auth_token).toMatch(/^[A-Za-z0-9]{32}$/);
		const users = await c.json<any[]>("POST", `/user/${org.id}`, { name: "web-01", yubico_id: "ccccccbcgujhXXXX" });
		expect(users.body).toHaveLength(1);
		expect(users.body[0].yubico_id).toBe("ccccccbcgujh");
		expect((await c.json<any[]>("GET", `/user/${org.id}?page=0`)).body).toMatchObject({
			page: 0,
			users: [{ name: "web-01" }],
		});
		expect(sim.signaturesChecked - checked).toBe(3);
		expect(sim.logins).toBeGreaterThan(0);
		expect(
			sim
				.requests()
				.slice(-3)
				.map(r => r.auth),
		).toEqual(["token", "token", "token"]);

		// The same headers twice: the nonce is refused the second time.
		const ts = String(Math.floor(Date.now() / 1000));
		const headers = {
			"Auth-Token": sim.apiToken,
			"Auth-Timestamp": ts,
			"Auth-Nonce": "0123456789abcdef0123456789abcdef",
			"Auth-Signature": pritunlSignature(
				sim.apiSecret,
				sim.apiToken,
				ts,
				"0123456789abcdef0123456789abcdef",
				"GET",
				"/organization",
			),
		};
		expect((await fetch(`${url}/organization`, { headers })).status).toBe(200);
		const again = await fetch(`${url}/organization`, { headers });
		expect(again.status).toBe(401);
		expect(await again.text()).toBe("401: Unauthorized");
		// Signed for another path, or with the query string, or too old: refused.
		const sign = (p: string, t = ts, nonce = `n${Math.random().toString(16).slice(2)}xxxxxxxx`) => ({
			"Auth-Token": sim.apiToken,
			"Auth-Timestamp": t,
			"Auth-Nonce": nonce,
			"Auth-Signature": pritunlSignature(sim.apiSecret, sim.apiToken, t, nonce, "GET", p),
		});
		expect((await fetch(`${url}/organization`, { headers: sign("/user") })).status).toBe(401);
		expect((await fetch(`${url}/organization?page=0`, { headers: sign("/organization?page=0") })).status).toBe(401);
		expect((await fetch(`${url}/organization?page=0`, { headers: sign("/organization") })).status).toBe(200);
		expect(
			(
				await fetch(`${url}/organization`, {
					headers: sign("/organization", String(Math.floor(Date.now() / 1000) - 43_300)),
				})
			).status,
		).toBe(401);
		expect((await fetch(`${url}/organization`, { headers: sign("/organization", ts, "short") })).status).toBe(401);
	});

	it("reports a wrong API secret as refused credentials (502), never sending the secret", async () => {
		const failures = sim.signatureFailures;
		const err = await failure(token({ apiSecret: "not-the-secret-at-all" }).json("GET", "/organization"));
		expect(err).toMatchObject({ code: 502, kind: "auth" });
		expect(sim.signatureFailures - failures).toBe(1);
		expect(err.message).not.toContain("not-the-secret-at-all");
	});

	it("shows Pritunl's quirks: 500 for an unknown organization, 404 for its users, PUT resets omitted booleans", async () => {
		const c = token();
		const unknown = "0123456789abcdef01234567";
		const err = await failure(c.json("GET", `/organization/${unknown}`));
		expect(err).toMatchObject({ code: 502, status: 500, kind: "upstream" });
		expect(err.message).toContain("500: Internal Server Error");
		expect((await c.json("GET", `/user/${unknown}`, undefined, { accept: [404] })).status).toBe(404);
		const org = (await c.json<any>("POST", "/organization", { name: "c-org-quirks" })).body;
		const [user] = (
			await c.json<any[]>("POST", `/user/${org.id}`, {
				name: "db-01",
				disabled: true,
				client_to_client: true,
				pin: "123456",
			})
		).body;
		expect(user).toMatchObject({ disabled: true, client_to_client: true, pin: true });
		const put = (
			await c.json<any>("PUT", `/user/${org.id}/${user.id}`, { name: "db-01", email: "ops@example.org", pin: true })
		).body;
		expect(put).toMatchObject({ disabled: false, client_to_client: false, email: "ops@example.org", pin: true });
		expect(Object.keys(put)).toHaveLength(18);
		const pinErr = await failure(c.json("POST", `/user/${org.id}`, { name: "x", pin: "12ab" }));
		expect(pinErr).toMatchObject({ code: 502, status: 400, kind: "refused" });
		expect(pinErr.message).toContain("pin_not_digits");
	});

	it("downloads a profile archive as bytes", async () => {
		const c = session();
		const org = sim.addOrg("c-org-key");
		const user = sim.addUser(org.id, { name: "web-02" });
		const res = await c.call("GET", `/key/${org.id}/${user.id}.tar`, undefined, { raw: true });
		expect(res.headers["content-disposition"]).toBe('attachment; filename="web-02.tar"');
		expect(untar(res.body)).toEqual(untar(sim.profile(org.id, user.id))); // the tar headers carry the time of download
		expect(untar(res.body).map(f => f.name)).toEqual(["c-org-key_web-02_vpn-1.ovpn"]);
	});

	it("never sends a POST twice after an ambiguous failure, but tries a GET again", async () => {
		const c = token();
		sim.malformNext(1, "reset", { method: "POST", path: /^\/organization$/ });
		const err = await failure(c.json("POST", "/organization", { name: "c-org-once" }));
		expect(err).toMatchObject({ code: 502, kind: "malformed" });
		expect(sim.orgList().filter(o => o.name === "c-org-once")).toHaveLength(1);
		expect(sim.requests().filter(r => r.method === "POST" && r.path === "/organization").length).toBeGreaterThan(0);
		sim.malformNext(1, "garbage", { method: "POST" });
		expect(await failure(c.json("POST", "/organization", { name: "c-org-once-2" }))).toMatchObject({
			code: 502,
			kind: "malformed",
		});
		sim.delayNext(1, 1500, { method: "GET" });
		expect((await c.json<any[]>("GET", "/organization")).body.length).toBeGreaterThan(0);
	});

	it("gives 502 when Pritunl is unreachable and 504 when it does not answer", async () => {
		const c = token();
		await sim.goDown("refuse");
		try {
			expect(await failure(c.json("GET", "/organization"))).toMatchObject({ code: 502, kind: "unreachable" });
		} finally {
			await sim.comeBack();
		}
		await sim.goDown("hang");
		try {
			const started = Date.now();
			const err = await failure(c.json("POST", "/organization", { name: "c-org-hang" }));
			expect(err).toMatchObject({ code: 504, kind: "timeout" });
			expect(Date.now() - started).toBeLessThan(1900); // one attempt: a POST is not re-sent
		} finally {
			await sim.comeBack();
		}
		expect((await c.json<any[]>("GET", "/organization")).status).toBe(200);
	});

	it("refuses an answer larger than the limit (502), and an unusable CA without throwing", async () => {
		const c = token({ maxResponseBytes: 2000 });
		for (let i = 0; i < 40; i++) sim.addOrg(`c-org-big-${i}`);
		expect(await failure(c.json("GET", "/organization"))).toMatchObject({ code: 502, kind: "malformed" });
		expect((await token().json<any[]>("GET", "/organization")).body.length).toBeGreaterThan(40);
		const badCa = session({
			url: "https://127.0.0.1:1",
			ca: "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
		});
		expect(await failure(badCa.check())).toMatchObject({ code: 502, kind: "unreachable" });
	});

	(opensslAvailable ? it : it.skip)(
		`verifies TLS by default and trusts a manager's own CA${opensslAvailable ? "" : " (skipped: no openssl to make a certificate)"}`,
		async () => {
			const { key, cert } = selfSignedCert("pritunl-tls");
			const tls = new PritunlSimulator({ username: "admin", password: "pw-tls-123", tls: { key, cert } });
			const { url: tlsUrl } = await tls.start();
			try {
				expect(tlsUrl).toMatch(/^https:/);
				const refused = await failure(session({ url: tlsUrl, password: "pw-tls-123" }).check());
				expect(refused).toMatchObject({ code: 502, kind: "unreachable" });
				expect(refused.message).toMatch(/TLS certificate/);
				await session({ url: tlsUrl, password: "pw-tls-123", ca: cert.toString("utf8") }).check();
				expect(tls.logins).toBe(1);
			} finally {
				await tls.stop();
			}
		},
	);
});
