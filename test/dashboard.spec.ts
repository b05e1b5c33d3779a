/**
 * The dashboard end to end in a real browser: Debian's Chromium, headless, driven by playwright-core,
 * against the gateway serving the built dashboard (dist/ui, `npm run build`), the cm-gateway talking
 * to the salt-api simulator and the vpn service talking to the Pritunl simulator over real HTTP, and the
 * stats service's own snapshots (taken at chosen times). Screenshots go to test-artifacts/dashboard/.
 *
 * Without /usr/bin/chromium (CI installs it: .ci/run) the suite fails, unless SKIP_BROWSER=1 says so.
 */
import fs from "node:fs";
import path from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { describeBrowser, holdRequests, openBrowser, violations, type Browser } from "./support/browser";
import { SaltApiSimulator } from "./simulators/salt-api";
import { PritunlSimulator, untar } from "./simulators/pritunl";
import { startEmbedded, ROOT, type Harness } from "./support/harness";
import { request, eventually, withQuery } from "./support/http";

// Run in the page by waitForFunction and evaluate (the test's own types have no DOM).
declare const document: any;
declare const echarts: any;
declare const location: { hash: string };
declare const sessionStorage: { getItem(k: string): string | null };
declare const history: { back(): void; forward(): void };
declare const localStorage: { removeItem(k: string): void };

const ARTIFACTS = path.join(ROOT, "test-artifacts", "dashboard");
const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const MASK = "********";

describeBrowser(
	`dashboard in headless Chromium${process.env.SKIP_BROWSER === "1" ? " (skipped: SKIP_BROWSER=1)" : ""}`,
	() => {
		let sim: SaltApiSimulator;
		let pritunl: PritunlSimulator;
		/** The Pritunl organization and user behind the first host's VPN identity. */
		const vpn = { org: "", user: "", otp: "" };
		let h: Harness;
		let context: BrowserContext;
		let page: Page;
		let base = "";
		let browser: Browser;
		let problems: string[] = [];
		let hosts: string[] = [];
		let web = "";
		let task = "";
		let viewerToken = "";
		let operatorToken = "";
		const url = (p: string) => `${h.api}/${p}`;
		const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
		const vpnField = (key: string) => page.locator(`#host-vpn dd[data-key="${key}"]`).textContent();

		/** Clicks "Download VPN profile" on the open host page: the request the page made, what it got, the file saved. */
		const downloadProfile = async (bearer: string) => {
			await page.waitForSelector("#vpn-profile");
			const [response, file] = await Promise.all([
				page.waitForResponse(r => r.url().includes("/vpn_profile")),
				page.waitForEvent("download"),
				page.click("#vpn-profile"),
			]);
			expect(new URL(response.url()).pathname).toBe(`/api/hosts/${hosts[0]}/vpn_profile`);
			expect(response.url()).not.toContain(bearer);
			expect(response.request().headers().authorization).toBe(`Bearer ${bearer}`);
			expect(response.status()).toBe(200);
			expect(response.headers()["content-type"]).toBe("application/x-tar");
			expect(file.suggestedFilename()).toBe(`${hosts[0]}.tar`);
			const saved = fs.readFileSync((await file.path()) as string);
			expect(untar(saved)).toEqual(untar(pritunl.profile(vpn.org, vpn.user))); // the tar headers carry the time of download
			expect(untar(saved).map(f => f.name)).toEqual([`dash-site_${hosts[0]}_vpn-1.ovpn`]);
			await page.waitForSelector(`#vpn-profile-result:has-text("Saved ${hosts[0]}.tar")`);
		};

		/**
		 * On a list that keeps its view in the URL: off to the first row's job and back, then forward and back again; the
		 * URL's view and the number of rows are as they were.
		 */
		const toAJobAndBack = async (list: string) => {
			await page.waitForSelector(`${list} tbody tr`);
			const view = await page.evaluate(() => location.hash);
			const rows = await page.locator(`${list} tbody tr`).count();
			await page.locator(`${list} tbody tr:first-child a[href^='#/history/']`).click();
			await page.waitForSelector("#job-counts");
			await page.evaluate(() => history.back());
			await page.waitForFunction(([l, n]) => document.querySelectorAll(`${l} tbody tr`).length === n, [
				list,
				rows,
			] as const);
			expect(await page.evaluate(() => location.hash)).toBe(view);
			await page.evaluate(() => history.forward());
			await page.waitForSelector("#job-counts");
			await page.evaluate(() => history.back());
			await page.waitForFunction(([l, n]) => document.querySelectorAll(`${l} tbody tr`).length === n, [
				list,
				rows,
			] as const);
			expect(await page.evaluate(() => location.hash)).toBe(view);
		};

		beforeAll(async () => {
			if (!fs.existsSync(path.join(ROOT, "dist", "ui", "index.html")))
				throw new Error("dist/ui is missing: run `npm run build` first (npm test does)");
			fs.mkdirSync(ARTIFACTS, { recursive: true });
			// Returns take up to a few seconds, so that the page shows hosts still running before they answer.
			sim = new SaltApiSimulator({
				minions: 12,
				timeout: 6,
				gatherJobTimeout: 0,
				latencyMs: [1500, 4000],
				presenceEvents: false,
				downFraction: 0,
			});
			await sim.start();
			// The online chart's snapshots are taken by the test at chosen times (as the e2e statistics suite does).
			h = await startEmbedded({
				env: {
					...sim.cmApiEnv,
					CM_API_TIMEOUT_MS: "5000",
					CM_JOB_POLL_MS: "200",
					CM_JOB_TIMEOUT_MS: "5000",
					CM_SYNC_INTERVAL_MS: "0",
					STATS_SNAPSHOTS: "false",
					VPN_SYNC_INTERVAL_MS: "0",
				},
			});
			base = h.api.replace(/\/api$/, "");
			// A reconciliation brings the simulator's minions in, with their grains (recorded as the inventory_sync job).
			const synced = await h.call("cm-gateway.sync");
			expect(synced.hosts).toBeGreaterThanOrEqual(3);
			hosts = await eventually(
				async () => {
					const res = await request(
						"GET",
						`${url("hosts")}?max_results=50&where=${encodeURIComponent('{"status":"up"}')}`,
					);
					return res.body?._meta?.total >= 3
						? (res.body._items as Array<{ _id: string }>).map(x => x._id).sort()
						: undefined;
				},
				15_000,
				"the inventory sync",
			);
			// More hosts than one page holds (25): retired ones, down, named after the simulator's.
			await h.call("hosts.upsertMany", {
				hosts: Array.from({ length: 30 }, (_, i) => ({
					_id: `zz-retired-${String(i).padStart(2, "0")}.site-a.example`,
					status: "down",
					key: "accepted",
				})),
			});
			const sub = await request("POST", url("groups"), { body: { name: "web-edge", type: 0, hosts: [hosts[2]] } });
			const g = await request("POST", url("groups"), {
				body: { name: "web", type: 0, hosts: hosts.slice(0, 2), subgroups: [sub.body._id] },
			});
			expect(g.status).toBe(201);
			web = g.body._id;
			const t = await request("POST", url("tasks"), {
				body: { name: "nightly ping", fun: "test.ping", tgt: [hosts[0]], start: "2030-01-01 00:00", interval: 3600 },
			});
			expect(t.status).toBe(201);
			task = t.body._id;
			viewerToken = (await request("POST", url("tokens"), { body: { name: "dash-viewer", role: "viewer" } })).body
				.token;
			operatorToken = (await request("POST", url("tokens"), { body: { name: "dash-operator", role: "operator" } })).body
				.token;
			// A failed patch run on the first host, as the cm-gateway records one.
			const step = (id: string, result: boolean, stderr = "") => ({
				__id__: id,
				__run_num__: 0,
				__sls__: "patches.fix1",
				name: id,
				comment: result ? "ok" : "Command failed",
				result,
				start_time: "10:00:00.000000",
				duration: 1,
				cmd: id,
				changes: { pid: 1, retcode: result ? 0 : 1, stdout: "", stderr },
			});
			await h.call("failed-patches.record", {
				returns: [
					{
						jid: "20260101000000000001",
						host: hosts[0],
						action: "state.apply",
						state: "finished",
						patch: "patches.fix1",
						return: [step("apt-update", true), step("apt-upgrade", false, "E: dpkg was interrupted")],
					},
				],
			});
			// The first host's VPN identity: a manager and an organization made through the API in the Pritunl
			// simulator, the host's Pritunl user (named after it) brought in by the sync.
			pritunl = new PritunlSimulator({ username: "fleet", password: "Pw-dash-4c1e9b!" });
			const { url: pritunlUrl } = await pritunl.start();
			const manager = await request("POST", url("vpn_managers"), {
				body: {
					name: "dash-vpn",
					server_address: pritunlUrl,
					dashboard_address: `${pritunlUrl}/`,
					username: "fleet",
					password: "Pw-dash-4c1e9b!",
				},
			});
			expect(manager.status).toBe(201);
			const org = await request("POST", url("vpn_organizations"), {
				body: {
					name: "dash-site",
					vpn_representation: { name: "dash-site", cipher_type: "rsa" },
					cipher_type: "rsa",
					vpn_manager: manager.body._id,
					type: 6,
				},
			});
			expect(org.status).toBe(201);
			vpn.org = pritunl.orgList().find(o => o.name === "dash-site")!.id;
			const user = pritunl.addUser(vpn.org, { name: hosts[0], yubico_id: "cccccchwdash", email: "ops@example.org" });
			vpn.user = user.id;
			vpn.otp = user.otp_secret;
			expect((await h.call("vpn.sync", {})).failed).toEqual([]);

			browser = await openBrowser({ width: 1360, height: 900 });
			({ context, page, problems } = browser);
		}, 60_000);

		afterAll(async () => {
			await browser?.close();
			await h?.stop();
			await sim?.stop();
			await pritunl?.stop();
		});

		it("serves the dashboard with a strict CSP and security headers, from this origin only", async () => {
			const res = await fetch(`${base}/`);
			expect(res.status).toBe(200);
			const csp = res.headers.get("content-security-policy") ?? "";
			expect(csp).toContain("script-src 'self'");
			expect(csp).not.toContain("unsafe-inline");
			expect(res.headers.get("x-content-type-options")).toBe("nosniff");
			expect((await fetch(`${base}/vendor/echarts.min.js`)).status).toBe(200);
			// API errors carry the headers too.
			expect((await fetch(`${h.api}/hosts`)).headers.get("content-security-policy")).toBe(csp);
		});

		it("signs in with a token kept in sessionStorage and shows the hosts", async () => {
			await page.goto(`${base}/`);
			await page.fill("#token", "fct_not-a-real-token-at-all");
			await page.click("#signin button[type=submit]");
			await page.waitForSelector("#signin .error");
			await page.fill("#token", process.env.FLEET_TEST_TOKEN as string);
			await page.click("#signin button[type=submit]");
			await page.waitForSelector("#hosts tbody tr");
			expect(await page.evaluate(() => sessionStorage.getItem("fleet-ctl.token"))).toBe(process.env.FLEET_TEST_TOKEN);
			expect(await page.locator("#who").textContent()).toContain("admin");
			await shot("01-hosts");
		});

		it("keeps the token through a load the gateway does not answer (503), says so and tries again", async () => {
			// Twice refused as the gateway does while it starts; then let through.
			let refused = 0;
			const whoami = (u: URL) => u.pathname === "/api/whoami";
			await page.route(whoami, async route => {
				if (refused++ < 2)
					await route
						.fulfill({
							status: 503,
							contentType: "application/json",
							body: '{"_status":"ERR","_error":{"code":503,"message":"not ready"}}',
						})
						.catch(() => undefined);
				else await route.continue().catch(() => undefined);
			});
			try {
				await page.goto(`${base}/#/hosts`);
				await page.reload();
				await page.waitForSelector('#loading:has-text("fleet-ctl did not answer (not ready): trying again in")');
				expect(await page.evaluate(() => sessionStorage.getItem("fleet-ctl.token"))).toBe(process.env.FLEET_TEST_TOKEN);
				await page.waitForSelector("#hosts tbody tr", { timeout: 15_000 });
				expect(refused).toBeGreaterThanOrEqual(3);
				expect(await page.locator("#who").textContent()).toContain("admin");
			} finally {
				await page.unroute(whoami);
			}
		});

		it("filters, sorts and pages the hosts through the API", async () => {
			const total = await page.locator("#hosts tbody tr").count();
			expect(total).toBe(25);
			const all = (await request("GET", `${url("hosts")}?max_results=1`)).body._meta.total;
			expect(await page.locator("#host-page").textContent()).toBe(`page 1 of 2 · ${all} hosts`);
			await page.fill("#host-filter", hosts[1]);
			await page.waitForFunction(() => document.querySelectorAll("#hosts tbody tr").length === 1);
			expect(await page.locator("#hosts tbody tr").first().getAttribute("data-host")).toBe(hosts[1]);
			await page.fill("#host-filter", "");
			await page.waitForFunction(n => document.querySelectorAll("#hosts tbody tr").length === n, total);
			await page.click('#hosts th[data-field="_id"]');
			await page.waitForFunction(() =>
				document.querySelector('#hosts th[data-field="_id"]')?.textContent?.includes("▼"),
			);
			const first = await page.locator("#hosts tbody tr").first().getAttribute("data-host");
			const sorted = (await request("GET", `${url("hosts")}?sort=-_id&max_results=1`)).body._items[0]._id;
			expect(first).toBe(sorted);
			await shot("02-hosts-sorted");
			// The next page holds the rest, in the same order.
			await page.click("#host-page + button");
			await page.waitForFunction(() => document.querySelector("#host-page")?.textContent?.startsWith("page 2 of 2"));
			expect(await page.locator("#hosts tbody tr").count()).toBe(all - 25);
			const last = (await request("GET", `${url("hosts")}?sort=_id&max_results=1`)).body._items[0]._id;
			expect(await page.locator("#hosts tbody tr").last().getAttribute("data-host")).toBe(last);
			// The status filter goes back to page 1 and narrows to the hosts down.
			await page.selectOption("#host-status", "down");
			await page.waitForFunction(() =>
				document.querySelector("#host-page")?.textContent?.includes("page 1 of 2 · 30 hosts"),
			);
			await page.selectOption("#host-status", "");
			await page.click('#hosts th[data-field="_id"]');
			await page.waitForFunction(() =>
				document.querySelector('#hosts th[data-field="_id"]')?.textContent?.includes("▲"),
			);
		});

		it("filters hosts by group (by name) and key state, keeps the view in the URL and the columns chosen across a reload, says when nothing matches, and fits 390 px", async () => {
			const inWeb = (
				await request(
					"GET",
					`${url("hosts")}?where=${encodeURIComponent(JSON.stringify({ groups: web }))}&max_results=50`,
				)
			).body;
			expect(inWeb._meta.total).toBeGreaterThanOrEqual(2);
			await page.evaluate(() => (location.hash = "#/hosts"));
			await page.waitForSelector("#host-group option:has-text('web-edge')", { state: "attached" });
			await page.selectOption("#host-group", { label: "web" });
			await page.waitForFunction(
				n => document.querySelector("#host-page")?.textContent?.includes(`· ${n} hosts`),
				inWeb._meta.total,
			);
			expect(await page.evaluate(() => location.hash)).toContain(`group=${web}`);
			// The Groups column, by name: chosen here, kept in this browser.
			await page.click("details.columns summary");
			await page.check("#host-columns label:has-text('Groups') input");
			await page.waitForSelector('#hosts th[data-field="groups"]');
			const column =
				(await page.locator("#hosts thead th").allTextContents()).findIndex(t => t.startsWith("Groups")) + 1;
			// The rows asked for again with the new column: until they have come.
			await page.waitForFunction(
				n =>
					[...document.querySelectorAll(`#hosts tbody tr td:nth-child(${n})`)].every(
						(td: any) => td.textContent !== "–",
					),
				column,
			);
			const cells = await page.locator(`#hosts tbody tr td:nth-child(${column})`).allTextContents();
			expect(cells.every(c => c.split(", ").includes("web"))).toBe(true);
			expect(cells.join(" ")).not.toContain(web);
			await page.reload();
			await page.waitForSelector('#hosts th[data-field="groups"]');
			await page.waitForFunction(
				n => document.querySelector("#host-page")?.textContent?.includes(`· ${n} hosts`),
				inWeb._meta.total,
			);
			expect(await page.locator("#host-group").inputValue()).toBe(web);
			// Nothing matches: the page says so, and what to do.
			await page.selectOption("#host-key", "rejected");
			await page.waitForSelector("#hosts-empty");
			expect(await page.locator("#hosts-empty").textContent()).toContain("No host matches these filters");
			await page.selectOption("#host-key", "");
			await page.selectOption("#host-group", "");
			await page.waitForSelector("#hosts tbody tr");
			// At a phone's width the table scrolls inside its box: the page does not, and no host name breaks.
			await page.setViewportSize({ width: 390, height: 800 });
			await page.waitForTimeout(100);
			const layout = await page.evaluate(() => {
				const box = document.querySelector(".table-scroll");
				const names = [...document.querySelectorAll("#hosts td.host-name a")];
				return {
					page: document.documentElement.scrollWidth,
					box: box.scrollWidth > box.clientWidth,
					wrapped: names.filter((a: any) => a.getClientRects().length > 1).length,
				};
			});
			expect(layout.page).toBeLessThanOrEqual(390);
			expect(layout.box).toBe(true);
			expect(layout.wrapped).toBe(0);
			await shot("02b-hosts-390px");
			await page.setViewportSize({ width: 1360, height: 900 });
			await page.evaluate(() => localStorage.removeItem("fleet-ctl.hosts.columns"));
		});

		it("never takes the URL back to a page that keeps its view in it (hosts, alerts, actions) once another page was asked for, however soon after", async () => {
			// The page left, written as its view is not (so that it writes it), then where the user went and what shows it.
			const races: Array<[string, string, string]> = [
				["#/hosts", "#/alerts", "#alerts"],
				["#/alerts?page=1", "#/jobs", "main h1:has-text('Jobs')"],
				["#/actions?page=1", "#/jobs", "main h1:has-text('Jobs')"],
			];
			for (const [left, next, shown] of races)
				for (const delay of [0, 1, 2, 4, 8, 16, 24, 32, 48, 64]) {
					await page.evaluate(() => (location.hash = "#/tokens"));
					await page.waitForSelector("h1:has-text('Tokens')");
					await page.evaluate(
						([from, to, ms]) => {
							location.hash = from;
							setTimeout(() => (location.hash = to), ms);
						},
						[left, next, delay] as const,
					);
					await page.waitForSelector(shown);
					await page.waitForTimeout(150);
					expect({
						left,
						delay,
						hash: await page.evaluate(() => location.hash),
						shown: await page.locator(shown).count(),
					}).toEqual({ left, delay, hash: next, shown: 1 });
				}
			await page.evaluate(() => (location.hash = "#/hosts"));
			await page.waitForSelector("#hosts tbody tr");
		});

		it("opens a host: identity, keys, VPN identity, grains, recent actions", async () => {
			await page.click(`#hosts a[href="#/hosts/${hosts[0]}"]`);
			await page.waitForSelector("#host-title");
			expect(await page.locator("#host-title").textContent()).toContain(hosts[0]);
			expect(await page.locator("#host-keys").textContent()).toContain("accepted");
			// The Pritunl identity the sync brought in; an admin reads the otp_secret in clear.
			expect(await vpnField("name")).toBe(hosts[0]);
			expect(await vpnField("organization_name")).toBe("dash-site");
			expect(await vpnField("hwtoken_id")).toBe("cccccchwdash");
			expect(await vpnField("otp_secret")).toBe(vpn.otp);
			expect(await page.locator("#host-grains tbody tr").count()).toBeGreaterThan(5);
			// Its groups by name, linked; its failed patch with the step that failed and why.
			await page.waitForSelector('#host-identity dd[data-key="groups"] a:has-text("web")');
			await page.waitForSelector("#failed-patches");
			const failedRow = await page.locator("#failed-patches tbody tr").first().textContent();
			expect(failedRow).toContain("patches.fix1");
			expect(failedRow).toContain("apt-upgrade: Command failed — E: dpkg was interrupted");
			expect(failedRow).not.toContain("apt-update");
			// Grains found by name or value; the windows and conformity the host has (none yet) said in words.
			const allGrains = await page.locator("#host-grains tbody tr").count();
			await page.fill("#grain-filter", "kernel");
			await page.waitForFunction(n => document.querySelectorAll("#host-grains tbody tr").length < n, allGrains);
			const found = await page.locator("#host-grains tbody tr").allTextContents();
			expect(found.length).toBeGreaterThan(0);
			expect(found.every(r => r.toLowerCase().includes("kernel"))).toBe(true);
			expect(await page.locator("#host-grains h2").textContent()).toBe(`Grains (${found.length} of ${allGrains})`);
			await page.fill("#grain-filter", "");
			await page.waitForSelector("#host-windows:has-text('No maintenance window governs this host')");
			await page.waitForSelector("#host-conformity:has-text('Never checked')");
			await shot("03-host");
		});

		it("downloads the host's VPN profile archive (admin), with the token in the header and never in the URL", async () => {
			await downloadProfile(process.env.FLEET_TEST_TOKEN as string);
			await shot("03-host-vpn-profile");
		});

		it("says a host without a VPN identity has none, and offers no download", async () => {
			await page.goto(`${base}/#/hosts/${hosts[1]}`);
			await page.waitForSelector("#host-vpn .unavailable");
			expect(await page.locator("#vpn-profile").count()).toBe(0);
		});

		it("draws a group's graph with ECharts from /api/graph/{id}", async () => {
			await page.goto(`${base}/#/groups/${web}`);
			await page.waitForSelector('#graph[data-drawn="1"] canvas', { timeout: 15_000 });
			expect(await page.locator("#graph").getAttribute("data-nodes")).toBe("2");
			expect(await page.locator("#graph").getAttribute("data-edges")).toBe("1");
			// The hosts each group lists are in the graph too; each node's colour is its kind's in the legend.
			expect(await page.locator("#graph").getAttribute("data-hosts")).toBe("3");
			const drawnGraph = await page.evaluate(() => {
				const o = echarts.getInstanceByDom(document.querySelector("#graph")).getOption();
				const s = o.series[0];
				return {
					legend: o.legend[0].data,
					categories: s.categories.map((c: any) => [c.name, c.itemStyle.color]),
					nodes: s.data.map((n: any) => [n.name, s.categories[n.category].name]),
					links: s.links.length,
				};
			});
			expect(drawnGraph.legend).toEqual(drawnGraph.categories.map((c: string[]) => c[0]));
			expect(Object.fromEntries(drawnGraph.nodes)).toEqual({
				web: "static group",
				"web-edge": "static group",
				[hosts[0]]: "host",
				[hosts[1]]: "host",
				[hosts[2]]: "host",
			});
			expect(drawnGraph.links).toBe(1 + 3);
			// Kinds in words, subgroups and hosts by name, the hosts it resolves to listed whole.
			expect(await page.locator('#group-facts dd[data-key="type"]').textContent()).toBe("static");
			expect(await page.locator('#group-facts dd[data-key="subgroups"]').textContent()).toBe("web-edge");
			expect((await page.locator("#group-hosts li").allTextContents()).sort()).toEqual(hosts.slice(0, 3).sort());
			await shot("04-group-graph");
		});

		it("runs test.ping on the group and shows the returns as they arrive", async () => {
			await page.fill("#run-fun", "test.ping");
			// The page follows the job's returns on the gateway's stream, not by polling.
			const streamed = page.waitForRequest(r => /\/api\/actions\/stream\?jid=\d{20}$/.test(r.url()));
			await page.click("#run-go");
			await page.waitForSelector("#run-summary");
			await streamed;
			// Hosts appear running first, then answer one by one.
			await page.waitForSelector("#run-returns .pill.running", { timeout: 10_000 });
			await shot("05-group-run-running");
			const members = 3;
			await page.waitForFunction(
				n => document.querySelector("#run-summary")?.textContent?.includes(`${n} of ${n} host(s) answered`),
				members,
				{ timeout: 20_000 },
			);
			const states = await page.locator("#run-returns tbody tr td:nth-child(2)").allTextContents();
			expect(states).toEqual(Array(members).fill("finished"));
			expect(await page.locator("#run-returns tbody").textContent()).toContain("true");
			await shot("05-group-run");
			// Quoted words stay whole, as in the REPL.
			await page.fill("#run-fun", "test.arg");
			await page.fill("#run-args", `'one two' note="a b"`);
			await page.click("#run-go");
			await page.waitForFunction(
				n =>
					document.querySelector("#run-summary")?.textContent?.includes(`${n} of ${n} host(s) answered`) &&
					document.querySelector("#run-returns")?.textContent?.includes("one two"),
				members,
				{ timeout: 20_000 },
			);
			expect(await page.locator("#run-returns tbody").textContent()).toContain("a b");
			await page.fill("#run-args", "");
		});

		it("lists the jobs run, newest first, filtered by the server, and opens one with its hosts' returns", async () => {
			const latest = (await request("GET", `${url("salt_jobs")}?sort=-started&max_results=1`)).body._items[0];
			expect(latest.fun).toBe("test.arg");
			await page.goto(`${base}/#/history`);
			await page.waitForSelector(`#history tbody tr[data-jid="${latest._id}"]`);
			expect(await page.locator("#history tbody tr").first().getAttribute("data-jid")).toBe(latest._id);
			await page.selectOption("#history-origin", "task");
			await page.waitForSelector("#history-empty");
			await page.selectOption("#history-origin", "");
			await page.fill("#history-fun", "test.ping");
			await page.waitForFunction(
				() =>
					[...document.querySelectorAll("#history tbody tr td:nth-child(2)")].every(
						(td: any) => td.textContent === "test.ping",
					) && document.querySelectorAll("#history tbody tr").length > 0,
			);
			await page.fill("#history-fun", "");
			await page.click(`#history tbody tr[data-jid="${latest._id}"] a`);
			await page.waitForSelector("#job-counts");
			expect(await page.locator("#job-counts").textContent()).toContain(`${latest.returned}/${latest.expected}`);
			await page.waitForFunction(n => document.querySelectorAll("#run-returns tbody tr").length === n, latest.expected);
			expect(await page.locator("#run-summary").textContent()).toContain(
				`${latest.expected} of ${latest.expected} host(s) answered`,
			);
			await shot("05b-job");
		});

		it("shows a job's target in names: a group's id as its name (linked), an L@ list's hosts by name, the first three then how many more, the expression as recorded kept", async () => {
			const listed = hosts.slice(0, 5);
			const target = `L@${listed.join(",")} or F@${web}`;
			const run = await request("POST", url("run"), { body: { target, fun: "test.ping", cm_client: "local_async" } });
			expect(run.status).toBe(200);
			const jobOf = (t: string) =>
				eventually(
					async () =>
						(await request("GET", withQuery(url("salt_jobs"), { where: { target: t }, max_results: 1 }))).body
							._items[0] as { _id: string } | undefined,
					10_000,
					`a job on ${t}`,
				);
			const [job, onGroup] = [await jobOf(target), await jobOf(`F@${web}`)];
			// A group named by its name (F@web-edge): linked to that group's page as well.
			expect(
				(
					await request("POST", url("run"), {
						body: { target: "F@web-edge", fun: "test.ping", cm_client: "local_async" },
					})
				).status,
			).toBe(200);
			const byName = await jobOf("F@web-edge");
			const edge = (await request("GET", withQuery(url("groups"), { where: { name: "web-edge" } }))).body._items[0]
				._id as string;
			await page.goto(`${base}/#/history`);
			const cell = (jid: string) => `#history tbody tr[data-jid="${jid}"] td:nth-child(3)`;
			await page.waitForSelector(`${cell(job._id)} a[href="#/groups/${web}"]:has-text("web")`);
			expect(await page.textContent(cell(job._id))).toBe(`${listed.slice(0, 3).join(", ")} and 2 more or group web`);
			expect(await page.getAttribute(`${cell(job._id)} .target`, "title")).toBe(target);
			expect(await page.locator(`${cell(job._id)} a[href^="#/hosts/"]`).allTextContents()).toEqual(listed.slice(0, 3));
			await page.waitForSelector(`${cell(onGroup._id)} a[href="#/groups/${web}"]`);
			expect(await page.textContent(cell(onGroup._id))).toBe("group web");
			await page.waitForSelector(`${cell(byName._id)} a[href="#/groups/${edge}"]:has-text("web-edge")`);
			expect(await page.textContent(cell(byName._id))).toBe("group web-edge");
			// No id on screen in the targets, only in what was recorded.
			expect(await page.locator("#history tbody td:nth-child(3)").allTextContents()).not.toContainEqual(
				expect.stringContaining(web),
			);
			// A job's page: every host of a short list, the expression as recorded in a details element.
			await page.goto(`${base}/#/history/${job._id}`);
			await page.waitForSelector(`#job-target a[href="#/groups/${web}"]:has-text("web")`);
			expect(await page.textContent("#job-target .target")).toBe(`${listed.join(", ")} or group web`);
			expect(await page.textContent("#job-target details code")).toBe(target);
			await shot("05d-job-target");
		});

		it("keeps the job history's filters and page in the URL: a shared link, back and forward come back to them", async () => {
			const where = { fun: { $gte: "test.ping", $lt: "test.ping\uffff" }, origin: "api" };
			const expected = (await request("GET", withQuery(url("salt_jobs"), { where, max_results: 1 }))).body._meta.total;
			expect(expected).toBeGreaterThanOrEqual(1);
			// A shared link: the filters it names, asked of the server.
			await page.goto(`${base}/#/history?fun=test.ping&origin=api`);
			await page.waitForSelector(`#history-page:has-text("page 1 of 1 · ${expected} jobs")`);
			expect([
				await page.inputValue("#history-fun"),
				await page.inputValue("#history-origin"),
				await page.inputValue("#history-state"),
			]).toEqual(["test.ping", "api", ""]);
			expect(new Set(await page.locator("#history tbody td:nth-child(2)").allTextContents())).toEqual(
				new Set(["test.ping"]),
			);
			// Another filter: in the URL, no new history entry.
			await page.selectOption("#history-state", "finished");
			await page.waitForFunction(() => location.hash === "#/history?fun=test.ping&origin=api&state=finished");
			await toAJobAndBack("#history");
			expect([
				await page.inputValue("#history-fun"),
				await page.inputValue("#history-origin"),
				await page.inputValue("#history-state"),
			]).toEqual(["test.ping", "api", "finished"]);
			// A link naming an origin there is not: every origin.
			await page.goto(`${base}/#/history?origin=loud`);
			await page.waitForFunction(() => location.hash === "#/history");
			expect(await page.inputValue("#history-origin")).toBe("");
		});

		it("lists each host's part of the jobs, filtered by host, function and state and paged by the server, hosts and jobs linked", async () => {
			const all = (await request("GET", `${url("actions")}?max_results=1`)).body._meta.total;
			await page.goto(`${base}/#/actions`);
			await page.waitForSelector("#actions tbody tr");
			expect(await page.locator("#actions-page").textContent()).toBe(
				`page 1 of ${Math.ceil(all / 25)} · ${all} actions`,
			);
			// The function and the host as prefixes, asked of the server: the page shows what the API counts.
			const where = {
				action: { $gte: "test.arg", $lt: "test.arg\uffff" },
				host: { $gte: hosts[0], $lt: `${hosts[0]}\uffff` },
			};
			const expected = (await request("GET", withQuery(url("actions"), { where, max_results: 1 }))).body._meta.total;
			expect(expected).toBe(1);
			const asked = page.waitForRequest(
				r => r.url().includes("/api/actions?") && decodeURIComponent(r.url()).includes('"host":{"$gte"'),
			);
			await page.fill("#actions-fun", "test.arg");
			await page.fill("#actions-host", hosts[0]);
			await asked;
			await page.waitForFunction(
				() => document.querySelector("#actions-page")?.textContent === "page 1 of 1 · 1 actions",
			);
			const row = page.locator("#actions tbody tr");
			expect(await row.count()).toBe(1);
			expect(await row.locator("td:nth-child(3)").textContent()).toBe("test.arg");
			expect(await row.locator("td:nth-child(4)").textContent()).toBe("finished");
			// Nothing timed out: the page says so, and what the filters do.
			await page.selectOption("#actions-state", "timeout");
			await page.waitForSelector("#actions-empty:has-text('No action matches these filters')");
			await page.selectOption("#actions-state", "");
			await row.waitFor();
			// The host by name, the job by its id, each a link to its page.
			const jid = (await request("GET", withQuery(url("actions"), { where, max_results: 1 }))).body._items[0].jid;
			expect(await row.locator(`a[href="#/hosts/${hosts[0]}"]`).textContent()).toBe(hosts[0]);
			await row.locator(`a[href="#/history/${jid}"]`).click();
			await page.waitForSelector("#job-counts");
			expect(await page.locator("h1").textContent()).toContain(jid);
			await shot("05c-actions");
		});

		it("keeps the actions' filters in the URL: a shared link, back and forward come back to them", async () => {
			const where = { host: { $gte: hosts[0], $lt: `${hosts[0]}\uffff` }, state: "finished" };
			const expected = (await request("GET", withQuery(url("actions"), { where, max_results: 1 }))).body._meta.total;
			expect(expected).toBeGreaterThanOrEqual(1);
			// A shared link: the filters it names, asked of the server.
			await page.goto(`${base}/#/actions?host=${encodeURIComponent(hosts[0])}&state=finished`);
			await page.waitForSelector(`#actions-page:has-text("page 1 of 1 · ${expected} actions")`);
			expect(await page.inputValue("#actions-host")).toBe(hosts[0]);
			expect(await page.inputValue("#actions-state")).toBe("finished");
			expect(
				(await page.locator("#actions tbody td:nth-child(2)").allTextContents()).every(name =>
					name.startsWith(hosts[0]),
				),
			).toBe(true);
			// A filter typed: in the URL as it is typed, no new history entry.
			await page.fill("#actions-fun", "test.");
			await page.waitForFunction(
				h => location.hash === `#/actions?host=${encodeURIComponent(h)}&fun=test.&state=finished`,
				hosts[0],
			);
			await toAJobAndBack("#actions");
			expect([
				await page.inputValue("#actions-host"),
				await page.inputValue("#actions-fun"),
				await page.inputValue("#actions-state"),
			]).toEqual([hosts[0], "test.", "finished"]);
			// Every filter cleared: the URL is the page's alone.
			await page.fill("#actions-host", "");
			await page.fill("#actions-fun", "");
			await page.selectOption("#actions-state", "");
			await page.waitForFunction(() => location.hash === "#/actions");
		});

		it("shows an alert live as it is raised, and marks it read", async () => {
			await page.goto(`${base}/#/alerts`);
			await page.waitForSelector("#alerts");
			await page.waitForFunction(() => document.body.getAttribute("data-live") === "on");
			await h.call("alerts.raise", {
				type: "vnc.connect",
				level: "warning",
				payload: { hostname: hosts[0], status: "open" },
			});
			await page.waitForSelector(`#alerts-body tr.unread:has-text("vnc.connect")`, { timeout: 10_000 });
			await page.waitForSelector(`.toast:has-text("vnc.connect")`);
			await page.waitForSelector("#unread");
			await shot("06-alert-live");
			// One alert marked read by its own button, then the rest at once.
			const one = await page.getAttribute(`#alerts-body tr.unread:has-text("vnc.connect")`, "data-alert");
			await page.click(`#alerts-body tr[data-alert="${one}"] button:has-text("Mark read")`);
			await page.waitForSelector(`#alerts-body tr[data-alert="${one}"]:not(.unread)`);
			expect((await request("GET", url(`alerts/${one}`))).body.read).toBe(true);
			await page.click("#mark-all");
			await page.waitForFunction(() => !document.querySelector("#alerts-body tr.unread"));
			expect(
				(await request("GET", `${url("alerts")}?where=${encodeURIComponent('{"read":false}')}`)).body._meta.total,
			).toBe(0);
		});

		it("keeps an alert that came live when a list read started before it lands after it", async () => {
			// The page's list read is answered with the list as it was before the alert (a slow read, or a cached one),
			// and only once the alert has come on the stream.
			const before = (await request("GET", `${url("alerts")}?sort=-_created&max_results=50`)).text;
			// The alert is raised once the page's list read has left: the page listens for live alerts from then on.
			// Raised before it (the page not yet drawn), no page would have been there to show it live.
			const listRead = await holdRequests(
				page,
				(u: URL) => u.pathname === "/api/alerts" && u.searchParams.has("sort"),
				route => route.fulfill({ status: 200, contentType: "application/json", body: before }),
			);
			try {
				await page.goto(`${base}/#/hosts`);
				await page.goto(`${base}/#/alerts`);
				await listRead.asked;
				await page.waitForFunction(() => document.body.getAttribute("data-live") === "on");
				await h.call("alerts.raise", { type: "key.conflict", level: "warning", payload: { hostname: hosts[1] } });
				await page.waitForSelector(`#alerts-body tr:has-text("key.conflict")`, { timeout: 10_000 });
				listRead.release();
				// The stale answer has landed and been rendered: the live row is still there.
				await page.waitForFunction(
					n => document.querySelectorAll("#alerts-body tr").length >= n,
					JSON.parse(before)._items.length + 1,
				);
				expect(await page.locator(`#alerts-body tr:has-text("key.conflict")`).count()).toBe(1);
			} finally {
				await listRead.stop();
			}
		});

		it("filters the alerts by level and read state on the server, pages them, and adds a live one only where the filters take it", async () => {
			await page.goto(`${base}/#/hosts`);
			await h.call("alerts.raiseMany", {
				alerts: [
					...Array.from({ length: 52 }, (_, i) => ({
						type: "patch.failed",
						level: "info",
						payload: { hostname: hosts[i % 3] },
					})),
					...Array.from({ length: 2 }, () => ({
						type: "host.down",
						level: "critical",
						payload: { hostname: hosts[2] },
					})),
				],
			});
			const total = (await request("GET", `${url("alerts")}?max_results=1`)).body._meta.total;
			await page.goto(`${base}/#/alerts`);
			await page.waitForSelector(`#alerts-page:has-text("page 1 of ${Math.ceil(total / 50)} · ${total} alerts")`);
			expect(await page.locator("#alerts-body tr").count()).toBe(50);
			await page.click("#alerts-page + button");
			await page.waitForSelector("#alerts-page:has-text('page 2 of')");
			expect(await page.locator("#alerts-body tr").count()).toBe(total - 50);
			// Critical ones only, asked of the server.
			await page.selectOption("#alerts-level", "critical");
			await page.waitForSelector("#alerts-page:has-text('page 1 of 1 · 2 alerts')");
			expect(await page.locator("#alerts-body td:nth-child(2)").allTextContents()).toEqual(["critical", "critical"]);
			// Live: an info alert is not for this list, a critical one is (at its top).
			await page.waitForFunction(() => document.body.getAttribute("data-live") === "on");
			await h.call("alerts.raise", { type: "patch.failed", level: "info", payload: { hostname: hosts[0] } });
			await h.call("alerts.raise", { type: "key.rejected", level: "critical", payload: { hostname: hosts[1] } });
			await page.waitForSelector('#alerts-body tr:first-child:has-text("key.rejected")');
			expect(await page.locator("#alerts-body td:nth-child(2)").allTextContents()).toEqual([
				"critical",
				"critical",
				"critical",
			]);
			// The host in its details is a link by name.
			expect(await page.locator(`#alerts-body tr:first-child a[href="#/hosts/${hosts[1]}"]`).textContent()).toBe(
				hosts[1],
			);
			// Read ones, once all are read: the unread badge goes with them.
			await page.selectOption("#alerts-level", "");
			await page.selectOption("#alerts-read", "unread");
			await page.waitForSelector("#alerts-body tr.unread");
			await page.waitForSelector("#unread");
			await page.click("#mark-all");
			await page.waitForSelector("#alerts-empty:has-text('No alert matches these filters')");
			await page.waitForSelector("#unread", { state: "detached" });
			expect(
				(await request("GET", `${url("alerts")}?where=${encodeURIComponent('{"read":false}')}&max_results=1`)).body
					._meta.total,
			).toBe(0);
			await page.selectOption("#alerts-read", "read");
			await page.waitForSelector(`#alerts-page:has-text("· ${total + 2} alerts")`);
			await shot("06b-alerts-filtered");
		});

		it("keeps the alerts' filters and page in the URL: a shared link, back and forward come back to them", async () => {
			const info = (await request("GET", withQuery(url("alerts"), { where: { level: "info" }, max_results: 1 }))).body
				._meta.total;
			expect(info).toBeGreaterThan(50);
			const pages = Math.ceil(info / 50);
			// A shared link: the level and the page it names.
			await page.goto(`${base}/#/alerts?level=info&page=2`);
			await page.waitForSelector(`#alerts-page:has-text("page 2 of ${pages} · ${info} alerts")`);
			expect(await page.inputValue("#alerts-level")).toBe("info");
			expect(await page.locator("#alerts-body tr").count()).toBe(Math.min(50, info - 50));
			// Another filter: in the URL, and back to the first page; then the next page, in the URL too.
			await page.selectOption("#alerts-read", "read");
			await page.waitForFunction(() => location.hash === "#/alerts?level=info&read=read");
			await page.waitForSelector(`#alerts-page:has-text("page 1 of ${pages}")`);
			await page.click("#alerts-page + button");
			await page.waitForFunction(() => location.hash === "#/alerts?level=info&read=read&page=2");
			await page.waitForSelector(`#alerts-page:has-text("page 2 of ${pages}")`);
			// Off to a host of the list, and back: the same filters and page; forward and back again.
			await page.locator("#alerts-body tr:first-child a[href^='#/hosts/']").click();
			await page.waitForSelector("#host-title");
			await page.evaluate(() => history.back());
			await page.waitForSelector(`#alerts-page:has-text("page 2 of ${pages} · ${info} alerts")`);
			expect([await page.inputValue("#alerts-level"), await page.inputValue("#alerts-read")]).toEqual(["info", "read"]);
			await page.evaluate(() => history.forward());
			await page.waitForSelector("#host-title");
			await page.evaluate(() => history.back());
			await page.waitForSelector(`#alerts-page:has-text("page 2 of ${pages}")`);
			expect(await page.evaluate(() => location.hash)).toBe("#/alerts?level=info&read=read&page=2");
			// A link naming a level there is not: every level.
			await page.goto(`${base}/#/alerts?level=loud`);
			await page.waitForFunction(() => location.hash === "#/alerts");
			expect(await page.inputValue("#alerts-level")).toBe("");
		});

		it("pauses and resumes a task", async () => {
			await page.goto(`${base}/#/tasks`);
			await page.click(`#tasks button[data-task="${task}"]`);
			await page.waitForFunction(() => document.querySelector("#tasks tbody")?.textContent?.includes("paused"));
			expect((await request("GET", url(`tasks/${task}`))).body.status).toBe("paused");
			await shot("07-task-paused");
			await page.click(`#tasks button[data-task="${task}"]:has-text("Resume")`);
			await page.waitForFunction(() => document.querySelector("#tasks tbody")?.textContent?.includes("scheduled"));
			expect((await request("GET", url(`tasks/${task}`))).body.status).toBe("scheduled");
		});

		it("makes a task from its form, its next runs previewed as the schedule is typed, then changes and deletes it", async () => {
			await page.goto(`${base}/#/tasks`);
			await page.click("#task-new");
			await page.fill("#task-name", "dash patch window");
			await page.fill("#task-fun", "test.ping");
			await page.fill("#task-hosts", hosts[0]);
			await page.selectOption("#task-groups", { label: "web" });
			await page.fill("#task-start", "2031-03-01 02:00");
			await page.selectOption("#task-every", "interval");
			await page.fill("#task-interval", "5400");
			await page.waitForFunction(() =>
				/Sat, 01 Mar 2031 02:00:00 GMT · Sat, 01 Mar 2031 03:30:00 GMT/.test(
					document.querySelector("#task-next")?.textContent ?? "",
				),
			);
			// A schedule the server refuses says why, before anything is saved.
			await page.selectOption("#task-every", "cron");
			await page.fill("#task-cron", "61 * * * *");
			await page.waitForSelector("#task-next .error");
			expect(await page.locator("#task-next .error").textContent()).toContain("cron");
			await page.selectOption("#task-every", "interval");
			await page.waitForFunction(() => document.querySelector("#task-next")?.textContent?.includes("every 1 h 30 min"));
			await shot("07b-task-form");
			await page.click("#task-form button[type=submit]");
			const row = page.locator("#tasks tbody tr", { hasText: "dash patch window" });
			await row.waitFor();
			expect(await row.textContent()).toContain("group web");
			expect(await row.textContent()).toContain("every 1 h 30 min from Sat, 01 Mar 2031 02:00:00 GMT");
			const made = (
				await request(
					"GET",
					`${url("tasks")}?where=${encodeURIComponent(JSON.stringify({ name: "dash patch window" }))}`,
				)
			).body._items[0];
			expect(made).toMatchObject({
				fun: "test.ping",
				tgt: [hosts[0], web],
				interval: 5400,
				start: "Sat, 01 Mar 2031 02:00:00 GMT",
				status: "scheduled",
			});
			// Changed: hourly now, and on its group alone.
			await row.locator("button:has-text('Edit')").click();
			expect(await page.locator("#task-name").inputValue()).toBe("dash patch window");
			await page.fill("#task-hosts", "");
			await page.fill("#task-interval", "3600");
			await page.waitForFunction(() =>
				document.querySelector("#task-next")?.textContent?.includes("Sat, 01 Mar 2031 03:00:00 GMT"),
			);
			await page.click("#task-form button[type=submit]");
			await page.waitForFunction(() =>
				document.querySelector("#tasks tbody")?.textContent?.includes("every 1 h from Sat, 01 Mar 2031"),
			);
			expect((await request("GET", url(`tasks/${made._id}`))).body).toMatchObject({ tgt: [web], interval: 3600 });
			await page
				.locator("#tasks tbody tr", { hasText: "dash patch window" })
				.locator("button:has-text('Delete')")
				.click();
			await page.waitForFunction(
				() => !document.querySelector("#tasks tbody")?.textContent?.includes("dash patch window"),
			);
			expect((await request("GET", url(`tasks/${made._id}`))).status).toBe(404);
		});

		it("changes a task whose kwarg holds secrets from its form: the masks sent back keep them, a dict stays a dict", async () => {
			const kwarg = {
				mods: "db",
				password: "dash-task-pw",
				pillar: { db: { password: "dash-db-pw", host: "db-01" }, note: "two words" },
			};
			const made = await request("POST", url("tasks"), {
				body: { name: "dash secret task", fun: "state.apply", kwarg, tgt: [hosts[0]], start: "2031-01-01 00:00" },
			});
			expect(made.status).toBe(201);
			try {
				// The list as it is now (the page may be showing it from before the task was made).
				await page.goto(`${base}/#/tasks`);
				await page.reload();
				await page
					.locator("#tasks tbody tr", { hasText: "dash secret task" })
					.locator("button:has-text('Edit')")
					.click();
				const shown = await page.locator("#task-kwarg").inputValue();
				expect(shown).toContain(`password=${MASK}`);
				expect(shown).not.toMatch(/dash-task-pw|dash-db-pw/);
				await page.fill("#task-name", "dash secret task, renamed");
				await page.click("#task-form button[type=submit]");
				await page.locator("#tasks tbody tr", { hasText: "dash secret task, renamed" }).waitFor();
				// What the scheduler will run, as stored: the secrets whole, the pillar still a dict.
				const tasks = h.broker!.getLocalService("tasks") as unknown as {
					store: { findOne(q: object): Promise<{ kwarg: unknown } | null> };
				};
				expect((await tasks.store.findOne({ _id: made.body._id }))?.kwarg).toEqual(kwarg);
			} finally {
				await request("DELETE", url(`tasks/${made.body._id}`));
			}
		});

		it("fits the tasks' table in a 1400 px window, its buttons in view, and scrolls it in its own box at 390 px", async () => {
			const long = await request("POST", url("tasks"), {
				body: {
					name: "dash weekly patch of the edge and web fleet",
					fun: "state.apply",
					kwarg: { mods: "patches.weekly" },
					tgt: [...hosts.slice(0, 6), web],
					target: `${hosts[6]} or ${hosts[7]}`,
					start: "2030-01-01 00:00",
					cron: "0 3 * * 1",
					timezone: "Europe/Paris",
				},
			});
			expect(long.status).toBe(201);
			const layout = () =>
				page.evaluate(() => {
					const box = document.querySelector("#tasks").closest(".table-scroll");
					const right = box.getBoundingClientRect().right;
					const buttons = [...document.querySelectorAll("#tasks tbody button")];
					return {
						scrolls: box.scrollWidth > box.clientWidth,
						outside: buttons
							.filter((b: any) => b.getBoundingClientRect().right > right + 0.5)
							.map((b: any) => b.textContent),
						pageFits: document.documentElement.scrollWidth <= document.documentElement.clientWidth,
						boxed: box.tabIndex === 0,
					};
				});
			try {
				await page.setViewportSize({ width: 1400, height: 900 });
				// From another page: the tasks page, shown afresh, reads the new task.
				await page.goto(`${base}/#/hosts`);
				await page.goto(`${base}/#/tasks`);
				await page.waitForSelector(`#tasks tbody tr[data-id="${long.body._id}"] button:has-text("Delete")`);
				expect(await layout()).toEqual({ scrolls: false, outside: [], pageFits: true, boxed: true });
				await shot("07c-tasks-1400px");
				await page.setViewportSize({ width: 390, height: 800 });
				expect(await layout()).toMatchObject({ scrolls: true, pageFits: true, boxed: true });
				await shot("07c-tasks-390px");
			} finally {
				await page.setViewportSize({ width: 1360, height: 900 });
				expect((await request("DELETE", url(`tasks/${long.body._id}`))).status).toBe(204);
			}
		});

		it("charts the hosts up, down and unknown from the stats service's snapshots, on an axis that is the range picked", async () => {
			// Snapshots at chosen times (20 h, 50, 40 and 30 minutes ago), hosts changing between them; what each
			// holds is what the hosts API says at that moment: up, down, and the rest (unknown: never seen up).
			const minute = 60_000;
			const now = Math.floor(Date.now() / minute) * minute;
			const count = async (where: Record<string, unknown>) =>
				(await request("GET", withQuery(url("hosts"), { where, max_results: 1 }))).body._meta.total as number;
			const held: Array<{ up: number; down: number; unknown: number }> = [];
			const snapshot = async (minutesAgo: number) => {
				const [all, up, down] = [await count({}), await count({ status: "up" }), await count({ status: "down" })];
				held.push({ up, down, unknown: all - up - down });
				expect(await h.call("stats.snapshot", { at: new Date(now - minutesAgo * minute) })).toMatchObject({
					index: held.length - 1,
				});
			};
			const retired = (from: number, to: number, status: string) =>
				h.call("hosts.upsertMany", {
					hosts: Array.from({ length: to - from }, (_, i) => ({
						_id: `zz-retired-${String(from + i).padStart(2, "0")}.site-a.example`,
						status,
					})),
				});
			await snapshot(20 * 60);
			await retired(0, 6, "up");
			await snapshot(50);
			await retired(0, 3, "down");
			await retired(10, 18, "up");
			await snapshot(40);
			await h.call("hosts.upsertMany", { hosts: [{ _id: hosts[1], status: "down" }] });
			await retired(10, 20, "down");
			await snapshot(30);
			expect(new Set(held.map(x => x.up)).size).toBe(4);
			// Hosts never seen up are there, and are not counted as down.
			expect(held.every(x => x.unknown > 0)).toBe(true);

			type Api = Array<{ timestamp: string; hostnames: { up: number; down: number } }>;
			/** The page's two requests for the chart (all hosts, hosts down), and what it drew. */
			const drawn = async (pick: () => Promise<unknown>, interval: number) => {
				const asked = (down: boolean) =>
					page.waitForResponse(
						r => r.url().includes("/api/hosts/statistics/online") && r.url().includes("where") === down,
					);
				const [all, down] = await Promise.all([asked(false), asked(true), pick()]);
				// The new chart (each range has its own interval), not the one it replaces.
				await page.waitForSelector(`#online-chart[data-interval="${interval}"][data-drawn="1"] canvas`);
				const option = await page.evaluate(() => {
					const o = echarts.getInstanceByDom(document.querySelector("#online-chart")).getOption();
					return { series: o.series.map((x: any) => [x.name, x.data]), min: o.xAxis[0].min, max: o.xAxis[0].max };
				});
				const rows = await page
					.locator("#online-points tbody tr")
					.evaluateAll(trs => trs.map((tr: any) => [...tr.querySelectorAll("td")].map((td: any) => td.textContent)));
				return { all, down, option, rows, summary: await page.locator("#online-summary").textContent() };
			};
			/** The points must be the API's answers to the same queries, drawn at their buckets' ends on an axis that is the range. */
			const matchesApi = async (got: Awaited<ReturnType<typeof drawn>>, seconds: number) => {
				const interval = Number(await page.locator("#online-chart").getAttribute("data-interval"));
				const asked = new URL(got.all.url());
				const range = asked.searchParams.getAll("range[]");
				expect(range).toHaveLength(2);
				for (const r of range) expect(r).toMatch(HTTP_DATE);
				const [begin, end] = range.map(r => Date.parse(r));
				expect(end - begin).toBe(seconds * 1000);
				expect(Math.abs(end - Date.now())).toBeLessThan(60_000);
				expect(asked.searchParams.get("interval")).toBe(String(interval));
				expect(JSON.parse(new URL(got.down.url()).searchParams.get("where") as string)).toEqual({ status: "down" });
				expect([got.option.min, got.option.max]).toEqual([begin, end]);
				const all = (await request("GET", `${url("hosts/statistics/online")}${asked.search}`)).body as Api;
				const down = (await request("GET", `${url("hosts/statistics/online")}${new URL(got.down.url()).search}`))
					.body as Api;
				expect(await got.all.json()).toEqual(all);
				const downAt = new Map(down.map(p => [p.timestamp, p.hostnames.down]));
				const at = (p: Api[number]) => Math.min(Date.parse(p.timestamp) + interval * 1000, end);
				expect(got.option.series).toEqual([
					["up", all.map(p => [at(p), p.hostnames.up])],
					["down", all.map(p => [at(p), downAt.get(p.timestamp) ?? 0])],
					["unknown", all.map(p => [at(p), p.hostnames.down - (downAt.get(p.timestamp) ?? 0)])],
				]);
				// Nothing is drawn outside the range.
				for (const [, data] of got.option.series)
					for (const [x] of data as Array<[number]>) expect(x >= begin && x <= end).toBe(true);
				expect(got.rows).toEqual(
					all.map(p => [
						p.timestamp,
						new Date(at(p)).toUTCString(),
						String(p.hostnames.up),
						String(downAt.get(p.timestamp) ?? 0),
						String(p.hostnames.down - (downAt.get(p.timestamp) ?? 0)),
					]),
				);
				return all.map(p => ({
					timestamp: p.timestamp,
					counts: {
						up: p.hostnames.up,
						down: downAt.get(p.timestamp) ?? 0,
						unknown: p.hostnames.down - (downAt.get(p.timestamp) ?? 0),
					},
				}));
			};

			// Last 24 hours (the default): quarter-hour points; the first holds the old snapshot, the last the newest.
			const day = await drawn(() => page.goto(`${base}/#/stats`), 900);
			const dayPoints = await matchesApi(day, 86_400);
			expect(dayPoints.length).toBeGreaterThanOrEqual(3);
			expect(dayPoints[0].counts).toEqual(held[0]);
			expect(dayPoints[dayPoints.length - 1].counts).toEqual(held[3]);
			expect(day.summary).toContain(`${held[3].up} up, ${held[3].down} down, ${held[3].unknown} unknown`);
			await shot("08-online-day");
			// Last hour: one-minute points, one per snapshot of the hour, with exactly what each held.
			const hour = await drawn(() => page.selectOption("#range", "0"), 60);
			const hourPoints = await matchesApi(hour, 3600);
			expect(hourPoints.map(p => p.counts)).toEqual(held.slice(1));
			hourPoints.forEach((p, i) => {
				const start = Date.parse(p.timestamp);
				const taken = now - [50, 40, 30][i] * minute;
				expect(taken - start).toBeGreaterThanOrEqual(0);
				expect(taken - start).toBeLessThan(60_000);
			});
			expect(hour.summary).toContain("3 point(s), one per 1 min");
			await shot("08-online-hour");
			// A week and a month: hours, and four hours, still the newest snapshot last.
			for (const [pick, seconds, interval] of [
				["2", 7 * 86_400, 3600],
				["3", 30 * 86_400, 4 * 3600],
			] as const) {
				const points = await matchesApi(await drawn(() => page.selectOption("#range", pick), interval), seconds);
				expect(points[points.length - 1].counts).toEqual(held[3]);
			}
			await h.call("hosts.upsertMany", { hosts: [{ _id: hosts[1], status: "up" }] });
		});

		it("shows the progress of long work (jobs)", async () => {
			// The reconciliation in beforeAll was recorded as the inventory_sync job.
			await page.goto(`${base}/#/jobs`);
			await page.waitForSelector("#jobs");
			expect(await page.locator("#jobs tbody").textContent()).toContain("inventory_sync");
			expect(await page.locator("#jobs tbody").textContent()).toContain("100%");
			// Starting a patch load from the page: its record appears and reaches 100 % on its own.
			await page.click("#job-load-updates");
			await page.waitForFunction(
				() => /load_updates\s*finished\s*100%/.test(document.querySelector("#jobs tbody")?.textContent ?? ""),
				undefined,
				{ timeout: 15_000 },
			);
			expect((await request("GET", url("jobs/load_updates"))).body).toMatchObject({ status: "finished", percent: 100 });
			expect((await request("GET", `${url("updates")}?max_results=1`)).body._meta.total).toBeGreaterThan(0);
			await shot("09-jobs");
		});

		it("subscribes a webhook to chosen types and levels, pauses and deletes it (admin)", async () => {
			await page.goto(`${base}/#/webhooks`);
			await page.waitForSelector("#wh-form");
			await page.fill("#wh-url", "https://hooks.example.com/dash");
			await page.fill("#wh-types", "host.* patch.failed");
			for (const level of ["error", "critical"]) await page.check(`#wh-form input[data-level="${level}"]`);
			await page.click("#wh-form button[type=submit]");
			await page.waitForSelector("#wh-secret code");
			const listed = async () =>
				(
					await request(
						"GET",
						`${url("webhooks")}?where=${encodeURIComponent('{"url":"https://hooks.example.com/dash"}')}`,
					)
				).body._items;
			const [hook] = await listed();
			expect(hook).toMatchObject({ types: ["host.*", "patch.failed"], levels: ["error", "critical"], active: true });
			expect(hook.secret).not.toBe(await page.locator("#wh-secret code").textContent()); // shown once, masked after
			await page.waitForSelector(`#webhooks button[data-webhook="${hook._id}"][data-do="toggle"]:has-text("Pause")`);
			await shot("10-webhooks");
			// Changed through its form: other types, every level, a description.
			await page.click(`#webhooks tr[data-id="${hook._id}"] button:has-text("Edit")`);
			await page.waitForSelector("#wh-edit");
			expect(await page.locator("#wh-edit-types").inputValue()).toBe("host.* patch.failed");
			await page.fill("#wh-edit-types", "key.*");
			for (const level of ["error", "critical"]) await page.uncheck(`#wh-edit input[data-level="${level}"]`);
			await page.fill("#wh-edit-description", "the key desk");
			await page.click("#wh-edit button[type=submit]");
			await page.waitForSelector(`#webhooks tr[data-id="${hook._id}"]:has-text("the key desk")`);
			expect((await listed())[0]).toMatchObject({
				types: ["key.*"],
				levels: [],
				description: "the key desk",
				active: true,
			});
			// A refused change says why, by field.
			await page.click(`#webhooks tr[data-id="${hook._id}"] button:has-text("Edit")`);
			await page.fill("#wh-edit-types", "no spaces/allowed");
			await page.click("#wh-edit button[type=submit]");
			await page.waitForSelector("#wh-edit .error:has-text('types')");
			await page.click("#wh-edit button:has-text('Cancel')");
			// Its delivery log: an alert it listens to, delivered (or being retried: the receiver does not exist).
			await h.call("alerts.raise", { type: "key.rejected", level: "warning", payload: { hostname: hosts[2] } });
			await page.click(`#webhooks tr[data-id="${hook._id}"] a:has-text("log")`);
			await page.waitForSelector("h1:has-text('Deliveries to https://hooks.example.com/dash')");
			await page.waitForSelector("#deliveries tbody tr:has-text('key.rejected')");
			await page.goto(`${base}/#/webhooks`);
			await page.waitForSelector(`#webhooks tr[data-id="${hook._id}"]`);
			await page.click(`#webhooks button[data-webhook="${hook._id}"][data-do="toggle"]`);
			await page.waitForSelector(`#webhooks button[data-webhook="${hook._id}"][data-do="toggle"]:has-text("Activate")`);
			expect((await listed())[0].active).toBe(false);
			await page.click(`#webhooks button[data-webhook="${hook._id}"][data-do="delete"]`);
			await page.waitForFunction(id => !document.querySelector(`#webhooks button[data-webhook="${id}"]`), hook._id);
			expect(await listed()).toEqual([]);
		});

		it("shows approval requests as they are made and lets an approver decide, with a comment (a Preact page)", async () => {
			await page.goto(`${base}/#/approvals`);
			await page.waitForSelector("p.empty:has-text('No request waits for a decision')");
			// The policy, added through its form (admins).
			await page.waitForSelector("p.empty:has-text('No approval policy')");
			await page.fill("#policy-name", "echo needs an admin");
			await page.fill("#policy-functions", "test.echo");
			// A threshold counts one person's asks within its window (issue 43): the form sets it, the table says it.
			await page.fill("#policy-window", "600");
			await page.click("#new-policy button[type=submit]");
			await page.waitForSelector('#policies tr:has-text("echo needs an admin"):has-text("10 minutes")');
			expect(
				(await request("GET", url("approval_policies"))).body._items.map((p: { window?: number }) => p.window),
			).toEqual([600]);
			// An operator asks (through the API): held, and on the page without a reload.
			const held = await request("POST", url(`hosts/${hosts[0]}`), {
				token: operatorToken,
				body: { fun: "test.echo", arg: ["hello from the dashboard"] },
			});
			expect(held.status).toBe(202);
			const id = held.body.approval._id;
			const row = `#approvals tr[data-id="${id}"]`;
			await page.waitForSelector(`${row}:has-text("test.echo hello from the dashboard")`);
			expect(await page.textContent(row)).toContain("dash-operator");
			await shot("12-approvals");
			await page.fill(`${row} input`, "looks harmless");
			await page.click(`${row} button:has-text("Approve")`);
			// Gone from the pending list as soon as the stream says it is approved (then running, then done).
			await page.waitForSelector(row, { state: "detached" });
			const done = await eventually(
				async () => {
					const a = (await request("GET", url(`approvals/${id}`))).body;
					return a.status === "done" ? a : undefined;
				},
				10_000,
				"the approved request carried out",
			);
			expect(done).toMatchObject({
				status: "done",
				votes: [expect.objectContaining({ decision: "approved", comment: "looks harmless" })],
				run: { jid: expect.stringMatching(/^\d{20}$/) },
			});
			await page.check("text=show decided requests too");
			await page.waitForSelector(`${row} .pill.done`);
			await page.click('#policies tr:has-text("echo needs an admin") button:has-text("Delete")');
			await page.waitForSelector("p.empty:has-text('No approval policy')");
			expect((await request("GET", url("approval_policies"))).body._items).toEqual([]);
		});

		it("lists maintenance windows with their next opening, adds one through a form that shows the API's refusals by field, disables and deletes it (admin)", async () => {
			await page.goto(`${base}/#/windows`);
			await page.waitForSelector("p.empty:has-text('No maintenance window')");
			await page.fill("#window-name", "web saturday nights");
			await page.fill("#window-target", "web-*");
			await page.fill("#window-rrule", "FREQ=SECONDLY");
			await page.fill("#window-start", "2026-01-03T02:00");
			await page.fill("#window-timezone", "Europe/Paris");
			await page.click("#new-window button[type=submit]");
			await page.waitForSelector("#new-window .error:has-text('at most hourly')");
			expect(await page.getAttribute("#window-rrule", "aria-invalid")).toBe("true");
			await page.fill("#window-rrule", "FREQ=WEEKLY;BYDAY=SA");
			await page.click("#new-window button[type=submit]");
			await page.waitForSelector("#windows tr:has-text('web saturday nights')");
			const [w] = (await request("GET", url("maintenance_windows"))).body._items;
			const next = (await request("GET", url(`maintenance_windows/${w._id}/preview?count=1`))).body;
			const row = `#windows tr[data-id="${w._id}"]`;
			// The row comes with the list and its state with the window's preview, read after it: never a guess meanwhile.
			await page.waitForSelector(`${row}:has-text("${next.next[0].start}")`);
			expect(await page.textContent(row)).toContain(next.next[0].start);
			expect(await page.textContent(row)).toContain(next.open ? "open until" : "closed");
			await shot("13-windows");
			// While the preview is on its way the row says it does not know yet, not "closed" or "none within ten years".
			const preview = await holdRequests(page, (u: URL) => u.pathname === `/api/maintenance_windows/${w._id}/preview`);
			try {
				await page.reload();
				await preview.asked;
				await page.waitForSelector(row);
				const waiting = await page.textContent(row);
				expect(waiting).toContain("…");
				expect(waiting).not.toContain("closed");
				expect(waiting).not.toContain("none within ten years");
				preview.release();
				await page.waitForSelector(`${row}:has-text("${next.next[0].start}")`);
			} finally {
				await preview.stop();
			}
			await page.click(`${row} button:has-text("Disable")`);
			await page.waitForSelector(`${row} .pill:has-text("disabled")`);
			expect((await request("GET", url(`maintenance_windows/${w._id}`))).body.enabled).toBe(false);
			await page.click(`${row} button:has-text("Delete")`);
			await page.waitForSelector("p.empty:has-text('No maintenance window')");
		});

		it("makes an API token for oneself, shows its secret once, revokes it; an admin sees every token", async () => {
			await page.goto(`${base}/#/tokens`);
			await page.waitForSelector("p.empty:has-text('You have no API token')");
			await page.fill("#my-token-name", "dash-script");
			await page.selectOption("#my-token-role", "operator");
			await page.click("#new-my-token button[type=submit]");
			await page.waitForSelector("#new-token input");
			const secret = await page.inputValue("#new-token input");
			expect((await request("GET", url("whoami"), { token: secret })).body).toMatchObject({
				name: "dash-script",
				role: "operator",
			});
			const row = '#my-tokens tr:has-text("dash-script")';
			await page.waitForSelector(`${row} .pill:has-text("active")`);
			expect(await page.textContent("#all-tokens")).toContain("dash-viewer");
			// What a token can do is said where it is listed: an operator without a function limit runs any command.
			expect(await page.textContent('#all-tokens tr:has-text("dash-operator")')).toContain(
				"this token can run any command as root on its hosts",
			);
			expect(await page.textContent('#all-tokens tr:has-text("dash-viewer")')).not.toContain("any command");
			await shot("14-tokens");
			await page.click(`${row} button:has-text("Revoke")`);
			await page.waitForSelector(`${row} .pill:has-text("revoked")`);
			expect((await request("GET", url("whoami"), { token: secret })).status).toBe(401);
		});

		it("shows a principal's tokens as a tree (each under the token that made it) and revokes a branch with its maker", async () => {
			const ci = (await request("POST", url("tokens"), { body: { name: "dash-ci", role: "operator" } })).body;
			const job = (await request("POST", url("tokens/mine"), { token: ci.token, body: { name: "dash-ci-job" } })).body;
			const step = (
				await request("POST", url("tokens/mine"), { token: job.token, body: { name: "dash-ci-step", role: "viewer" } })
			).body;
			// Already on the page (the test before): loaded again, to read the tokens made since.
			await page.goto(`${base}/#/tokens`);
			await page.reload();
			const family = [ci, job, step].map(t => `#all-tokens tr[data-id="${t._id}"]`);
			await page.waitForSelector(family[2]);
			// In tree order, one generation deeper each, every one naming the service account they act for.
			const rows = await page.$$eval("#all-tokens tbody tr", trs =>
				trs.map(tr => [tr.getAttribute("data-id"), tr.getAttribute("data-depth"), tr.children[2].textContent]),
			);
			const start = rows.findIndex(r => r[0] === ci._id);
			expect(rows.slice(start, start + 3)).toEqual([
				[ci._id, "0", `token:${ci._id}`],
				[job._id, "1", `token:${ci._id}`],
				[step._id, "2", `token:${ci._id}`],
			]);
			expect(await page.getAttribute(`${family[2]} td.token-name`, "title")).toBe("made by dash-ci-job");
			await shot("14b-token-tree");
			await page.click(`${family[0]} button:has-text("Revoke")`);
			for (const row of family) await page.waitForSelector(`${row} .pill:has-text("revoked")`);
			expect((await request("GET", url("whoami"), { token: step.token })).status).toBe(401);
		});

		it("reads the audit log, filtered on the server, a record's call opened in place (admin)", async () => {
			await page.goto(`${base}/#/audit`);
			await page.waitForSelector("#audit tbody tr");
			await page.selectOption("#audit-outcome", "held");
			await page.waitForFunction(() =>
				[...document.querySelectorAll("#audit tbody tr")].every((tr: any) => tr.textContent.includes("held")),
			);
			const row = '#audit tbody tr:has-text("dash-operator")';
			expect(await page.textContent(row)).toContain(`POST /api/hosts/${hosts[0]}`);
			await page.click(row);
			expect(await page.textContent(`${row} pre`)).toContain("hello from the dashboard");
			await page.fill("#audit-path", "/api/nothing-here");
			await page.press("#audit-path", "Enter");
			await page.waitForSelector("p.empty:has-text('No record matches')");
			await shot("15-audit");
		});

		it("says what an audit record's path names by its id: the task's or the group's name, or that it is gone, the exact path kept (admin)", async () => {
			await page.goto(`${base}/#/audit`);
			await page.waitForSelector("#audit-path");
			await page.selectOption("#audit-outcome", "");
			await page.fill("#audit-path", `/api/tasks/${task}`);
			await page.press("#audit-path", "Enter");
			const paused = `#audit tbody tr:has-text("PATCH /api/tasks/${task}/paused")`;
			await page.waitForSelector(`${paused} .path-name`);
			expect(await page.textContent(`${paused} .path-name`)).toBe("task “nightly ping”");
			expect(await page.textContent(`${paused} td:nth-child(3) .mono`)).toBe(`PATCH /api/tasks/${task}/paused`);
			// A task has no page of its own: its name links to the tasks' page.
			expect(await page.getAttribute(`${paused} .path-name a`, "href")).toBe("#/tasks");
			// The task the form made, then deleted: its name is gone with it.
			await page.fill("#audit-path", "/api/tasks/");
			await page.press("#audit-path", "Enter");
			const deleted = '#audit tbody tr:has-text("DELETE /api/tasks/")';
			await page.waitForSelector(`${deleted} .path-name`);
			expect(await page.locator(`${deleted} .path-name`).allTextContents()).toContain("a task no longer there");
			// A record no longer there links nowhere.
			expect(await page.locator(`${deleted} .path-name:has-text("no longer there") a`).count()).toBe(0);
			// The group run on the group's page: the group by name.
			await page.fill("#audit-path", `/api/groups/${web}`);
			await page.press("#audit-path", "Enter");
			const run = `#audit tbody tr:has-text("POST /api/groups/${web}")`;
			await page.waitForSelector(`${run} .path-name`);
			expect(await page.textContent(`${run} .path-name`)).toBe("group “web”");
			await shot("15b-audit-names");
			// Each name links to where the dashboard shows the record: here the group's own page.
			expect(await page.getAttribute(`${run} .path-name a`, "href")).toBe(`#/groups/${web}`);
			await page.click(`${run} .path-name a`);
			await page.waitForSelector("#group-title:has-text('web')");
			expect(await page.evaluate(() => location.hash)).toBe(`#/groups/${web}`);
		});

		it("keeps what one types in an audit filter while the answer to another filter arrives, and applies it on Enter (admin)", async () => {
			// A fresh page: out and back in.
			await page.goto(`${base}/#/hosts`);
			await page.goto(`${base}/#/audit`);
			await page.waitForSelector("#audit tbody tr");
			// The answer to the outcome chosen is held until the path has been typed, then let through.
			const list = await holdRequests(page, /\/api\/audit\?/);
			try {
				await page.selectOption("#audit-outcome", "held");
				await page.fill("#audit-path", `/api/tasks/${task}`);
				list.release();
				await page.waitForFunction(() => {
					const rows = [...document.querySelectorAll("#audit tbody tr")];
					return rows.length > 0 && rows.every(tr => tr.textContent?.includes("held"));
				});
			} finally {
				await list.stop();
			}
			// The page showed the held records; what was typed is still there, not yet applied.
			expect(await page.inputValue("#audit-path")).toBe(`/api/tasks/${task}`);
			await page.selectOption("#audit-outcome", "");
			await page.press("#audit-path", "Enter");
			// The answer to the path applied: every row names the task (the list shown before may hold one such row too).
			await page.waitForFunction(t => {
				const rows = [...document.querySelectorAll("#audit tbody tr td:nth-child(3) .mono")];
				return rows.length > 0 && rows.every(td => td.textContent?.includes(`/api/tasks/${t}`));
			}, task);
			await page.waitForSelector(`#audit tbody tr:has-text("PATCH /api/tasks/${task}/paused")`);
			const paths = await page.locator("#audit tbody tr td:nth-child(3) .mono").allTextContents();
			expect(paths.length).toBeGreaterThan(0);
			for (const p of paths) expect(p).toContain(`/api/tasks/${task}`);
		});

		it("is driven from the keyboard: g then a letter goes to a page, / puts the cursor in its filter, ? shows the shortcuts in a dialog that Escape closes, the focus back where it was; nothing fires while typing", async () => {
			await page.goto(`${base}/#/hosts`);
			await page.waitForSelector("#hosts tbody tr");
			await page.keyboard.press("g");
			await page.keyboard.press("a");
			await page.waitForSelector("main h1:has-text('Alerts')");
			expect(await page.evaluate(() => location.hash)).toBe("#/alerts");
			await page.keyboard.press("g");
			await page.keyboard.press("j");
			await page.waitForSelector("main h1:has-text('Job history')");
			// Back works as after a click.
			await page.evaluate(() => history.back());
			await page.waitForSelector("main h1:has-text('Alerts')");
			// "/" puts the cursor in the page's filter; typing there is typing, not shortcuts.
			await page.keyboard.press("g");
			await page.keyboard.press("x");
			await page.waitForSelector("#actions-host");
			await page.keyboard.press("/");
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("actions-host");
			await page.keyboard.type("g?a/");
			expect(await page.inputValue("#actions-host")).toBe("g?a/");
			// Still the actions page: the URL only holds what was typed (the page's view).
			await page.waitForFunction(() => location.hash === "#/actions?host=g%3Fa%2F");
			expect(await page.locator("dialog").count()).toBe(0);
			await page.fill("#actions-host", "");
			await page.evaluate(() => document.activeElement.blur());
			await page.keyboard.press("g");
			await page.keyboard.press("h");
			await page.waitForSelector("#hosts tbody tr");
			await page.keyboard.press("/");
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("host-filter");
			// A letter after "g" that names no page does nothing, nor does the next one alone.
			await page.evaluate(() => document.activeElement.blur());
			await page.keyboard.press("g");
			await page.keyboard.press("z");
			await page.keyboard.press("a");
			expect(await page.evaluate(() => location.hash)).toMatch(/^#\/hosts/);
			// "?" from a link of the menu: a modal dialog named by its heading, the focus in it; Escape closes it and
			// gives the focus back to the link.
			await page.focus('#nav a[href="#/tasks"]');
			await page.keyboard.press("?");
			const dialog = page.getByRole("dialog", { name: "Keyboard shortcuts" });
			await dialog.waitFor();
			expect(await page.evaluate(() => document.querySelector("#shortcuts-help").matches(":modal"))).toBe(true);
			expect(await page.evaluate(() => !!document.activeElement?.closest("#shortcuts-help"))).toBe(true);
			const help = await dialog.textContent();
			for (const line of [
				"g then h",
				"Go to Hosts",
				"g then a",
				"Go to Alerts",
				"Go to Audit",
				"Go to Webhooks",
				"Put the cursor in the page's filter",
				"Close this help",
			])
				expect(help).toContain(line);
			expect(await violations(page)).toEqual([]);
			await shot("19-shortcuts");
			// While it is open, the page's shortcuts do not fire.
			await page.keyboard.press("g");
			await page.keyboard.press("t");
			expect(await page.evaluate(() => location.hash)).toMatch(/^#\/hosts/);
			await page.keyboard.press("Escape");
			await dialog.waitFor({ state: "detached" });
			expect(await page.evaluate(() => document.activeElement?.getAttribute("href"))).toBe("#/tasks");
			// The header's button opens it too; its Close button gives the focus back to that button.
			await page.click("#shortcuts");
			await dialog.waitFor();
			await dialog.locator("button:has-text('Close')").click();
			await dialog.waitFor({ state: "detached" });
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("shortcuts");
		});

		it("takes the focus to the new page's heading at each navigation, never from where the user moved it or is typing", async () => {
			/** Whether the focus is on the main heading of the page shown, saying `text`. */
			const onHeading = (text: string) =>
				page.waitForFunction(t => {
					const el = document.activeElement;
					return (
						!!el &&
						el === document.querySelector("main h1") &&
						el.textContent.trim() === t &&
						el.getAttribute("tabindex") === "-1"
					);
				}, text);
			await page.goto(`${base}/#/hosts`);
			await page.waitForSelector("#hosts tbody tr");
			// A click in the menu, a shortcut, Back.
			await page.click('#nav a[href="#/alerts"]');
			await onHeading("Alerts");
			await page.keyboard.press("g");
			await page.keyboard.press("x");
			await onHeading("Actions");
			await page.evaluate(() => history.back());
			await onHeading("Alerts");
			// A page whose heading is drawn again once its data came (a host's): the heading it ends with.
			await page.evaluate(h => (location.hash = `#/hosts/${h}`), hosts[0]);
			await page.waitForSelector("#host-title");
			await page.waitForFunction(() => document.activeElement?.id === "host-title");
			// The user moved on (to the menu) while the page was still loading: the focus stays where they put it.
			const hostRead = await holdRequests(page, (u: URL) => u.pathname === `/api/hosts/${hosts[1]}`);
			try {
				await page.evaluate(h => (location.hash = `#/hosts/${h}`), hosts[1]);
				await onHeading(hosts[1]);
				await page.focus('#nav a[href="#/tasks"]');
				hostRead.release();
				await page.waitForSelector(`#host-title:has-text("${hosts[1]}")`);
				expect(await page.evaluate(() => document.activeElement?.getAttribute("href"))).toBe("#/tasks");
			} finally {
				await hostRead.stop();
			}
			// Typing in a filter that writes the URL as it goes (hosts, actions) is not a navigation: the cursor stays.
			await page.click('#nav a[href="#/hosts"]');
			await onHeading("Hosts");
			await page.click("#host-filter");
			await page.keyboard.type(hosts[1]);
			await page.waitForFunction(
				() => document.querySelectorAll("#hosts tbody tr").length === 1 && location.hash.includes("name="),
			);
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("host-filter");
			await page.keyboard.press("Backspace");
			expect(await page.inputValue("#host-filter")).toBe(hosts[1].slice(0, -1));
			await page.goto(`${base}/#/actions`);
			await onHeading("Actions");
			await page.click("#actions-fun");
			await page.keyboard.type("test.");
			await page.waitForFunction(() => location.hash === "#/actions?fun=test.");
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("actions-fun");
		});

		it("starts a rollout from its form, follows its waves, pauses and resumes it until it finishes", async () => {
			await page.goto(`${base}/#/rollouts`);
			await page.waitForSelector("p.empty:has-text('No rollout yet')");
			// A target that selects nothing is refused, saying so.
			await page.fill("#rollout-name", "dash-rollout");
			await page.fill("#rollout-target", "L@no-such-host");
			await page.fill("#rollout-call", "test.ping");
			await page.click("#new-rollout button[type=submit]");
			await page.waitForSelector("#new-rollout .error");
			await page.fill("#rollout-target", `L@${hosts.slice(0, 3).join(",")}`);
			await page.fill("#rollout-batch", "1");
			await page.fill("#rollout-wait_s", "1");
			await page.click("#new-rollout button[type=submit]");
			await page.waitForSelector('#rollout[data-status="running"]');
			expect(await page.locator("#batches tbody tr").count()).toBe(3);
			await page.click('#rollout button:has-text("Pause")');
			await page.waitForSelector('#rollout[data-status="paused"]');
			await shot("16-rollout-paused");
			await page.click('#rollout button:has-text("Resume")');
			await page.waitForSelector('#rollout[data-status="finished"]', { timeout: 45_000 });
			expect(await page.locator('#batches .pill:has-text("finished")').count()).toBe(3);
			expect(await page.textContent("#rollout")).toContain("3 of 3 host(s) done");
		});

		it("lists groups by what they resolve to and makes one from its form, the rule's hosts previewed as it is typed (admin)", async () => {
			await page.goto(`${base}/#/groups`);
			// "web" lists two hosts and has a subgroup with a third: it resolves to three.
			const webRow = `#groups tr[data-id="${web}"]`;
			await page.waitForSelector(webRow);
			await page.waitForFunction(sel => document.querySelector(sel)?.children[2]?.textContent === "3", webRow);
			expect(await page.textContent(webRow)).toContain("static");
			expect(await page.textContent(webRow)).toContain("web-edge");
			await page.fill("#group-name", "dash-rule");
			await page.fill("#group-target", `L@${hosts[0]},${hosts[1]},no-such-host`);
			await page.waitForSelector("#group-preview:has-text('selects 2 host(s) now')");
			expect(await page.textContent("#group-preview")).toContain("named but not in the fleet: no-such-host");
			await page.click("#new-group button[type=submit]");
			const made = '#groups tr:has-text("dash-rule")';
			await page.waitForSelector(made);
			expect(await page.textContent(made)).toContain("automatic (rule)");
			await shot("17-groups");
			// Changed on its page: another rule (previewed as it is typed), then no rule but a listed host.
			const id = (
				await request("GET", `${url("groups")}?where=${encodeURIComponent(JSON.stringify({ name: "dash-rule" }))}`)
			).body._items[0]._id;
			await page.click(`${made} a`);
			await page.waitForSelector("#edit-group");
			await page.fill("#edit-group-target", `L@${hosts[2]}`);
			await page.waitForSelector("#edit-group-preview:has-text('selects 1 host(s) now')");
			await page.click("#edit-group button[type=submit]");
			await page.waitForFunction(
				h => [...document.querySelectorAll("#group-hosts li")].map((li: any) => li.textContent).join() === h,
				hosts[2],
			);
			expect((await request("GET", url(`groups/${id}`))).body.info).toEqual({ target: `L@${hosts[2]}` });
			await page.fill("#edit-group-target", "");
			await page.fill("#edit-group-hosts", hosts[3]);
			await page.click("#edit-group button[type=submit]");
			await page.waitForFunction(
				() => document.querySelector('#group-facts dd[data-key="type"]')?.textContent === "static",
			);
			expect(await page.locator("#group-hosts li").allTextContents()).toEqual([hosts[3]]);
			expect((await request("GET", url(`groups/${id}`))).body).toMatchObject({
				type: 0,
				hosts: [hosts[3]],
				info: { target: null },
			});
			await shot("17b-group-edited");
			await page.goto(`${base}/#/groups`);
			await page.waitForSelector(made);
			await page.click(`${made} button:has-text("Delete")`);
			await page.waitForSelector(made, { state: "detached" });
		});

		it("shows the VPN managers and organizations by name, syncs one, and creates an organization in a manager (admin)", async () => {
			await page.goto(`${base}/#/vpn`);
			await page.waitForSelector('#vpn-managers tr:has-text("dash-vpn")');
			// The manager's password is never shown back.
			expect(await page.textContent("#vpn-managers")).not.toContain("Pw-dash-4c1e9b!");
			const dashSite = '#vpn-organizations tr:has-text("dash-site")';
			expect(await page.textContent(dashSite)).toContain("dash-vpn");
			await page.click(`${dashSite} button:has-text("Sync")`);
			await page.waitForSelector("p[role=status]:has-text('dash-site read again')");
			await page.fill("#organization-name", "dash-made");
			await page.click("#new-organization button[type=submit]");
			await page.waitForSelector('#vpn-organizations tr:has-text("dash-made")');
			expect(pritunl.orgList().map(o => o.name)).toContain("dash-made");
			await shot("18-vpn");
			await page.click('#vpn-organizations tr:has-text("dash-made") button:has-text("Delete")');
			await page.waitForSelector('#vpn-organizations tr:has-text("dash-made")', { state: "detached" });
			expect(pritunl.orgList().map(o => o.name)).not.toContain("dash-made");
		});

		it("fits each list in a phone's width (390 px): a table wider than the screen scrolls in its own box, never the page (admin)", async () => {
			await page.setViewportSize({ width: 390, height: 800 });
			try {
				for (const [path, table] of [
					["groups", "#groups"],
					["vpn", "#vpn-managers"],
					["vpn", "#vpn-organizations"],
					["tokens", "#all-tokens"],
					["audit", "#audit"],
					["rollouts", "#rollouts"],
				]) {
					await page.evaluate(p => (location.hash = `#/${p}`), path);
					await page.waitForSelector(`${table} tbody tr`);
					const layout = await page.evaluate(t => {
						const box = document.querySelector(t).closest(".table-scroll");
						return {
							fits: document.documentElement.scrollWidth <= document.documentElement.clientWidth,
							boxed: !!box && box.tabIndex === 0,
						};
					}, table);
					expect({ table, ...layout }).toEqual({ table, fits: true, boxed: true });
					await shot(`23-${path}-390px`);
				}
			} finally {
				await page.setViewportSize({ width: 1360, height: 900 });
			}
		});

		it("shows an operator the VPN identity with the otp_secret masked, and lets it download the profile", async () => {
			await page.click("#signout");
			await page.fill("#token", operatorToken);
			await page.click("#signin button[type=submit]");
			await page.waitForSelector("#hosts tbody tr");
			await page.goto(`${base}/#/hosts/${hosts[0]}`);
			await page.waitForSelector("#host-vpn dl");
			expect(await vpnField("otp_secret")).toBe(MASK);
			expect(await page.locator("#host-vpn").textContent()).not.toContain(vpn.otp);
			await downloadProfile(operatorToken);
		});

		it("offers a viewer nothing it may not do", async () => {
			await page.click("#signout");
			await page.fill("#token", viewerToken);
			await page.click("#signin button[type=submit]");
			await page.waitForSelector("#hosts tbody tr");
			expect(await page.locator('#nav a[href="#/webhooks"]').count()).toBe(0);
			expect(await page.locator('#nav a[href="#/approvals"]').count()).toBe(0);
			await page.goto(`${base}/#/windows`);
			await page.waitForSelector("p.empty:has-text('Admins add them')");
			expect(await page.locator("#new-window").count()).toBe(0);
			// The VPN identity with the otp_secret masked, and no profile to download.
			await page.goto(`${base}/#/hosts/${hosts[0]}`);
			await page.waitForSelector("#host-vpn dl");
			expect(await vpnField("name")).toBe(hosts[0]);
			expect(await vpnField("otp_secret")).toBe(MASK);
			expect(await page.locator("#vpn-profile").count()).toBe(0);
			await page.goto(`${base}/#/groups/${web}`);
			await page.waitForSelector('#graph[data-drawn="1"]', { timeout: 15_000 });
			expect(await page.locator("#run").count()).toBe(0);
			await page.goto(`${base}/#/tasks`);
			await page.waitForSelector("#tasks");
			expect(await page.locator("#tasks button").count()).toBe(0);
			await page.goto(`${base}/#/jobs`);
			await page.waitForSelector("#jobs");
			expect(await page.locator("main button").count()).toBe(0);
			await shot("10-viewer");
		});

		it("browses the API documentation generated from the routes", async () => {
			await page.goto(`${base}/docs.html`);
			await page.waitForSelector('[data-op="GET /hosts"]');
			expect(await page.locator("details.op").count()).toBeGreaterThan(60);
			// Summaries in words, not the internal action behind the route.
			expect(await page.textContent('[data-op="PATCH /groups/{id}"] > summary')).toContain("Change a group");
			// "Try it" on a read, as the signed-in caller (the viewer, here).
			await page.click('[data-op="GET /whoami"] > summary');
			await page.click('[data-op="GET /whoami"] button:has-text("Try it")');
			await page.waitForSelector('[data-op="GET /whoami"] pre.try-answer:has-text("dash-viewer")');
			expect(await page.locator('[data-op="POST /groups"] button:has-text("Try it")').count()).toBe(0);
			await shot("11-api-docs");
		});

		it("opens the API page and the dashboard in new tabs signed in, with the token a signed-in tab lends (never stored beyond the tab)", async () => {
			await page.goto(`${base}/#/hosts`);
			await page.waitForSelector("#hosts tbody tr");
			for (const [path, ready] of [
				["/docs.html", '[data-op="GET /hosts"]'],
				["/#/hosts", "#hosts tbody tr"],
			]) {
				const tab = await context.newPage();
				try {
					await tab.goto(`${base}${path}`);
					await tab.waitForSelector(ready);
					expect(await tab.locator("#token").count()).toBe(0);
					// The viewer's token, now in that tab's own sessionStorage; nothing in localStorage or cookies.
					expect(await tab.evaluate(() => sessionStorage.getItem("fleet-ctl.token"))).toBe(viewerToken);
					expect(await tab.evaluate(() => JSON.stringify({ ...(localStorage as object) }))).not.toContain(viewerToken);
					expect((await context.cookies()).map(c => c.value)).not.toContain(viewerToken);
				} finally {
					await tab.close();
				}
			}
		});

		it("had no script error, no CSP violation and no request to another origin", () => {
			expect(problems).toEqual([]);
		});
	},
);
