/**
 * Single sign-on end to end (services/api/sessions.ts, docs/security.md "Single sign-on"): a real OpenID Connect
 * provider (oidc-provider, OpenID Certified, started here: test/support/oidc-provider.ts), fleet-ctl as its client,
 * and Debian's Chromium driving the dashboard through the provider's own login, consent and logout pages. What is
 * checked is what a person sees and what the browser holds: the role their groups give, an http-only session
 * cookie, writes refused without the CSRF token, an API token made for themselves, sign-out at both ends, an
 * expired session, a group taken away. Without OIDC configured nothing of this is offered.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { describeBrowser, openBrowser, type Browser } from "../support/browser";
import { startEmbedded, ROOT, type Harness } from "../support/harness";
import { request } from "../support/http";
import { freePort } from "../support/net";
import { startOidcProvider, type TestProvider } from "../support/oidc-provider";
import type { Store } from "../../lib/storage/store";
import { FleetRepl } from "../../lib/repl/commands";

declare const document: any;

const ARTIFACTS = path.join(ROOT, "test-artifacts", "sign-in");

const ROLES = [
	{ group: "fleet-admins", role: "admin" },
	{ group: "fleet-ops", role: "operator", scope: { functions: ["test.*"] } },
	{ group: "staff", role: "viewer" },
];

describeBrowser(
	`single sign-on through a real OpenID provider, in Chromium${process.env.SKIP_BROWSER === "1" ? " (skipped: SKIP_BROWSER=1)" : ""}`,
	() => {
		let op: TestProvider;
		let h: Harness;
		let context: BrowserContext;
		let page: Page;
		let base = "";
		let browser: Browser;
		let aliceToken = "";
		let problems: string[] = [];
		/** The authorization requests the browser sent to the provider. */
		const authorizations: URL[] = [];

		const tokens = (): Store => (h.broker!.getLocalService("tokens") as unknown as { store: Store }).store;
		const inPage = <T>(fn: (arg: any) => Promise<T>, arg?: unknown): Promise<T> => page.evaluate(fn, arg);
		/** A request from the page, as the dashboard makes them (its cookies; the CSRF header when asked). */
		const pageFetch = (
			method: string,
			p: string,
			body?: unknown,
			csrf = true,
		): Promise<{ status: number; body: any }> =>
			inPage(
				async ({ method, p, body, csrf }: any) => {
					const m = /(?:^|;\s*)fleet_csrf=([^;]*)/.exec(document.cookie);
					const headers: Record<string, string> = {
						Accept: "application/json",
						...(body ? { "Content-Type": "application/json" } : {}),
						...(csrf && m ? { "X-CSRF-Token": decodeURIComponent(m[1]) } : {}),
					};
					const res = await fetch(p, { method, headers, body: body ? JSON.stringify(body) : undefined });
					return { status: res.status, body: await res.json().catch(() => null) };
				},
				{ method, p, body, csrf },
			);
		const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

		/** Through the provider's own pages: its login form (when it has no session), its consent (the first time), back to the dashboard. */
		const signInAs = async (login: string) => {
			await page.goto(`${base}/`);
			await page.click("#sso-signin");
			await page.waitForURL(url => url.href.startsWith(op.issuer) || url.href.startsWith(base));
			if (page.url().startsWith(op.issuer)) {
				if (await page.locator('input[name="login"]').count()) {
					await page.fill('input[name="login"]', login);
					await page.fill('input[name="password"]', "any password");
					await page.click('button:has-text("Sign-in")');
				}
				await page.waitForURL(url => url.href.startsWith(base) || url.href.includes("/interaction/"));
				if (page.url().startsWith(op.issuer)) await page.click('button:has-text("Continue")');
			}
			await page.waitForURL(url => url.href.startsWith(base));
		};

		beforeAll(async () => {
			if (!fs.existsSync(path.join(ROOT, "dist", "ui", "index.html")))
				throw new Error("dist/ui is missing: run `npm run build` first (npm test does)");
			fs.mkdirSync(ARTIFACTS, { recursive: true });
			// fleet-ctl's address is the provider's redirect URI: chosen first.
			const port = await freePort();
			base = `http://127.0.0.1:${port}`;
			op = await startOidcProvider({
				clientId: "fleet-ctl",
				clientSecret: "fleet-ctl-client-secret",
				rpUrl: base,
				accounts: {
					alice: { name: "Alice Admin", email: "alice@example.org", groups: ["fleet-admins", "staff"] },
					bob: { name: "Bob Ops", email: "bob@example.org", groups: ["fleet-ops"] },
					eve: { name: "Eve Contractor", email: "eve@example.org", groups: ["contractors"] },
				},
			});
			h = await startEmbedded({
				env: {
					PORT: String(port),
					CTL_PUBLIC_URL: base,
					OIDC_ISSUER: op.issuer,
					OIDC_CLIENT_ID: "fleet-ctl",
					OIDC_CLIENT_SECRET: "fleet-ctl-client-secret",
					OIDC_ALLOW_HTTP: "true",
					OIDC_ROLES: JSON.stringify(ROLES),
					OIDC_NAME: "Example SSO",
					OIDC_SESSION_TTL_S: "900",
				},
			});
			browser = await openBrowser({ width: 1280, height: 860 });
			({ context, page, problems } = browser);
			page.on("request", req => {
				if (req.url().startsWith(`${op.issuer}/auth?`)) authorizations.push(new URL(req.url()));
			});
		}, 60_000);

		afterAll(async () => {
			await browser?.close();
			await h?.stop();
			await op?.close();
		});

		it("signs in through the provider (authorization code with PKCE) as the role the groups give, in an http-only cookie", async () => {
			await page.goto(`${base}/`);
			await page.waitForSelector("#sso-signin");
			expect(await page.textContent("#sso-signin")).toBe("Sign in with Example SSO");
			await shot("sign-in-page");
			await signInAs("alice");
			await page.waitForSelector("#who:has-text('Alice Admin (session)')");
			expect(await page.textContent("#who")).toContain("admin");
			await shot("signed-in-as-admin");
			const [auth] = authorizations;
			expect(auth.searchParams.get("code_challenge_method")).toBe("S256");
			expect(auth.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
			expect(auth.searchParams.get("redirect_uri")).toBe(`${base}/auth/callback`);
			expect(auth.searchParams.get("state")).toBeTruthy();
			expect(auth.searchParams.get("nonce")).toBeTruthy();
			const cookies = await context.cookies(base);
			const session = cookies.find(c => c.name === "fleet_session")!;
			expect(session).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
			expect(session.expires - Date.now() / 1000).toBeLessThanOrEqual(900);
			expect(cookies.find(c => c.name === "fleet_csrf")).toMatchObject({ httpOnly: false, sameSite: "Strict" });
			// The page cannot read the session's secret.
			expect(await inPage(async () => document.cookie)).not.toContain("fleet_session");
			expect((await pageFetch("GET", "/api/whoami")).body).toMatchObject({
				name: "Alice Admin (session)",
				role: "admin",
				subject: "oidc:alice",
				session: true,
			});
			const signedIn = (
				await request("GET", `${h.api}/audit?where=${encodeURIComponent(JSON.stringify({ path: "/auth/callback" }))}`)
			).body._items;
			expect(signedIn[0]).toMatchObject({
				outcome: "ok",
				role: "admin",
				message: expect.stringContaining("signed in as oidc:alice"),
			});
			expect(problems).toEqual([]);
		});

		it("refuses a write made with the cookie but without its CSRF token, and takes it with", async () => {
			const refused = await pageFetch("POST", "/api/groups", { name: "sso-made" }, false);
			expect(refused.status).toBe(403);
			expect(refused.body._error.message).toMatch(/CSRF token/);
			const made = await pageFetch("POST", "/api/groups", { name: "sso-made" });
			expect(made.status).toBe(201);
			const audited = (
				await request(
					"GET",
					`${h.api}/audit?where=${encodeURIComponent(JSON.stringify({ path: "/api/groups", method: "POST", status: 201 }))}&sort=-_id`,
				)
			).body._items[0];
			expect(audited.name).toBe("Alice Admin (session)");
		});

		it("lets a signed-in person make an API token for themselves, which scripts use with a header", async () => {
			const made = await pageFetch("POST", "/api/tokens/mine", { name: "alice-ci" });
			expect(made.status).toBe(201);
			expect(made.body).toMatchObject({ name: "alice-ci", role: "admin", token: expect.stringMatching(/^fct_/) });
			aliceToken = made.body.token;
			const who = await request("GET", `${h.api}/whoami`, { token: aliceToken });
			expect(who.body).toMatchObject({ name: "alice-ci", role: "admin", subject: "oidc:alice", session: false });
			expect((await pageFetch("GET", "/api/tokens/mine")).body._items.map((t: { name: string }) => t.name)).toEqual([
				"alice-ci",
			]);
			// …and the REPL, as any API token.
			expect(await new FleetRepl({ url: h.api, token: aliceToken }).run("whoami")).toBe(`alice-ci (admin) at ${h.api}`);
		});

		it("signs out at fleet-ctl (the session revoked) and at the provider", async () => {
			const secret = (await context.cookies(base)).find(c => c.name === "fleet_session")!.value;
			await page.click("#signout");
			await page.waitForURL(url => url.href.startsWith(op.issuer));
			await page.click('button:has-text("Yes, sign me out")');
			await page.waitForURL(url => url.href.startsWith(base));
			await page.waitForSelector("#sso-signin");
			expect((await context.cookies(base)).map(c => c.name)).not.toContain("fleet_session");
			// The old cookie, replayed, opens nothing.
			expect((await fetch(`${h.api}/whoami`, { headers: { cookie: `fleet_session=${secret}` } })).status).toBe(401);
			// One record, from the one audit builder, as the sign-in has.
			const signedOut = (
				await request("GET", `${h.api}/audit?where=${encodeURIComponent(JSON.stringify({ path: "/auth/logout" }))}`)
			).body._items;
			expect(signedOut).toEqual([
				expect.objectContaining({ method: "POST", status: 200, outcome: "ok", message: "signed out" }),
			]);
		});

		it("gives another group's role and scope, and a token made by it reaches no further", async () => {
			await signInAs("bob");
			await page.waitForSelector("#who:has-text('Bob Ops (session)')");
			expect((await pageFetch("GET", "/api/whoami")).body).toMatchObject({
				role: "operator",
				scope: { functions: ["test.*"] },
			});
			expect((await pageFetch("POST", "/api/tokens/mine", { name: "bob-admin", role: "admin" })).status).toBe(403);
			const wider = await pageFetch("POST", "/api/tokens/mine", { name: "bob-cmd", scope: { functions: ["cmd.run"] } });
			expect([wider.status, wider.body._error.message]).toEqual([
				403,
				expect.stringContaining("functions outside your scope: cmd.run"),
			]);
			expect(
				(await pageFetch("POST", "/api/tokens/mine", { name: "bob-ping", scope: { functions: ["test.ping"] } })).status,
			).toBe(201);
			// An operator's session may not read the admin collections.
			expect((await pageFetch("GET", "/api/audit")).status).toBe(403);
		});

		it("ends an expired session: the next request brings the sign-in back, saying so", async () => {
			await tokens().updateMany(
				{ session: true, subject: "oidc:bob" },
				{ $set: { expires: new Date(Date.now() - 1000) } },
			);
			// What the gateways keep of the token goes with a change of the collection.
			h.broker!.broadcast("eve.collectionChanged", { service: "tokens" });
			expect((await pageFetch("GET", "/api/whoami")).status).toBe(401);
			await page.evaluate(() => (document.location.hash = "#/groups"));
			await page.waitForSelector("#signin:has-text('Your session ended')");
			expect(await page.isVisible("#sso-signin")).toBe(true);
			await shot("session-expired");
		});

		it("takes the role away with the group at the next sign-in, with the tokens that reached further; no group with a role, no sign-in", async () => {
			op.accounts.get("alice")!.groups = ["staff"];
			// Bob's session at the provider is still open (his ended here only): alice signs in anew there.
			await context.clearCookies({ name: /^op_/ });
			await signInAs("alice");
			await page.waitForSelector("#who:has-text('Alice Admin (session)')");
			expect((await pageFetch("GET", "/api/whoami")).body).toMatchObject({ role: "viewer" });
			// Her admin token for scripts went with the role.
			expect((await request("GET", `${h.api}/whoami`, { token: aliceToken })).status).toBe(401);
			expect((await pageFetch("POST", "/api/groups", { name: "not-any-more" })).status).toBe(403);
			await page.click("#signout");
			await page.waitForURL(url => url.href.startsWith(op.issuer));
			await page.click('button:has-text("Yes, sign me out")');
			await page.waitForSelector("#sso-signin");

			await signInAs("eve");
			await page.waitForSelector(
				"#signin:has-text('Sign-in failed: your groups (contractors) give no role in fleet-ctl')",
			);
			expect((await context.cookies(base)).map(c => c.name)).not.toContain("fleet_session");
			await shot("sign-in-refused");
			// The 403s are the writes this test had refused on purpose.
			expect(problems.filter(p => !/status of 403/.test(p))).toEqual([]);
		});
	},
);
