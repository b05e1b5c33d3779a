/**
 * Every page of the dashboard, as each role (viewer, operator, admin), in headless Chromium against the salt-api
 * simulator: each page the role's menu offers (and a host's, a group's, a job's) is opened, checked with axe-core
 * (no serious or critical accessibility violation), and kept as screenshots at 1400 px and 390 px in
 * test-artifacts/walk/. What each role may do on the pages is tested in test/dashboard.spec.ts.
 */
import fs from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { describeBrowser, openBrowser, type Browser } from "./support/browser";
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, ROOT, type Harness } from "./support/harness";
import { request, eventually } from "./support/http";

// Run in the page (the test's own types have no DOM).
declare const document: any;
declare const axe: { run(context: unknown, options: unknown): Promise<{ violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }> }> };

const ARTIFACTS = path.join(ROOT, "test-artifacts", "walk");
const AXE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const WIDTHS = [1400, 390];

/** The serious and critical violations axe-core finds in the page as it is, one line each. */
async function violations(page: Page): Promise<string[]> {
	// Through the DevTools protocol: the page's CSP (script-src 'self') does not apply to what the test evaluates.
	if (!(await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe !== "undefined"))) await page.evaluate(AXE);
	const result = await page.evaluate(() => axe.run(document, { resultTypes: ["violations"] }));
	return result.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map(n => JSON.stringify(n.target)).slice(0, 5).join(", ")}`);
}

describeBrowser(`every page as each role, axe-core and screenshots${process.env.SKIP_BROWSER === "1" ? " (skipped: SKIP_BROWSER=1)" : ""}`, () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let browser: Browser;
	let base = "";
	let host = "";
	let group = "";
	let jid = "";
	const tokens: Record<string, string> = {};
	const url = (p: string) => `${h.api}/${p}`;

	beforeAll(async () => {
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		sim = new SaltApiSimulator({ minions: 6, timeout: 4, gatherJobTimeout: 0, presenceEvents: false, downFraction: 0 });
		await sim.start();
		h = await startEmbedded({ env: { ...sim.cmApiEnv, CM_JOB_POLL_MS: "200", CM_JOB_TIMEOUT_MS: "5000", CM_SYNC_INTERVAL_MS: "0", VPN_SYNC_INTERVAL_MS: "0" } });
		base = h.api.replace(/\/api$/, "");
		await h.call("cm-gateway.sync");
		const hosts = await eventually(async () => {
			const res = await request("GET", `${url("hosts")}?max_results=50`);
			return res.body?._meta?.total >= 3 ? (res.body._items as Array<{ _id: string }>).map(x => x._id).sort() : undefined;
		}, 15_000, "the inventory sync");
		host = hosts[0];
		const made = await request("POST", url("groups"), { body: { name: "walk-web", type: 0, hosts: hosts.slice(0, 3) } });
		expect(made.status).toBe(201);
		group = made.body._id;
		expect((await request("POST", url("tasks"), { body: { name: "walk nightly", fun: "test.ping", tgt: [group], start: "2031-01-01 00:00", interval: 86400 } })).status).toBe(201);
		const window = { name: "walk nights", targets: { groups: [group] }, functions: ["state.apply"], rrule: "FREQ=DAILY", start: "2026-01-01T22:00", timezone: "UTC", duration: "PT2H" };
		expect((await request("POST", url("maintenance_windows"), { body: window })).status).toBe(201);
		jid = (await request("POST", url(`groups/${group}`), { body: { cm_client: "local_async", fun: "test.ping" } })).body.task_id;
		await h.call("alerts.raise", { type: "key.new", level: "warning", payload: { hostname: host } });
		for (const role of ["viewer", "operator"]) tokens[role] = (await request("POST", url("tokens"), { body: { name: `walk-${role}`, role } })).body.token;
		tokens.admin = process.env.FLEET_TEST_TOKEN as string;
		browser = await openBrowser({ width: WIDTHS[0], height: 900 });
	}, 60_000);

	afterAll(async () => {
		await browser?.close();
		await h?.stop();
		await sim?.stop();
	});

	for (const role of ["viewer", "operator", "admin"]) {
		it(`walks every page the ${role} is offered: no serious accessibility violation, screenshots at ${WIDTHS.join(" and ")} px`, async () => {
			const { page, problems } = browser;
			await page.setViewportSize({ width: WIDTHS[0], height: 900 });
			// Signed in as the role: its token in the tab's storage, then the dashboard loaded afresh.
			await page.goto(`${base}/`);
			await page.evaluate(t => sessionStorage.setItem("fleet-ctl.token", t), tokens[role]);
			await page.goto(`${base}/#/hosts`);
			await page.reload();
			await page.waitForSelector("#hosts tbody tr");
			expect(await page.locator("#who").textContent()).toContain(role);
			const offered: string[] = await page.evaluate(() => [...document.querySelectorAll("#nav a")].map((a: any) => a.getAttribute("href")).filter((href: string) => href.startsWith("#/")));
			expect(offered.length).toBeGreaterThan(8);
			const pages: Array<[string, string]> = [...offered.map(o => [o, o.slice(2)] as [string, string]), [`#/hosts/${host}`, "a-host"], [`#/groups/${group}`, "a-group"], [`#/history/${jid}`, "a-job"]];
			const found: string[] = [];
			for (const [hash, shotName] of pages) {
				await page.evaluate(h => (location.hash = h), hash);
				await page.waitForSelector("main h1");
				// The page's reads answered (nothing says "Loading…" any more).
				await page.waitForFunction(() => !document.querySelector("main")?.textContent?.includes("Loading…"), undefined, { timeout: 10_000 });
				const name = `${role}-${shotName}`;
				for (const width of WIDTHS) {
					await page.setViewportSize({ width, height: 900 });
					await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
					for (const v of await violations(page)) found.push(`${hash} at ${width} px: ${v}`);
				}
				await page.setViewportSize({ width: WIDTHS[0], height: 900 });
			}
			expect(found).toEqual([]);
			expect(problems).toEqual([]);
		}, 180_000);
	}
});

declare const sessionStorage: { setItem(k: string, v: string): void };
declare const location: { hash: string };
