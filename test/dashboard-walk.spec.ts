/**
 * Every page of the dashboard, as each role (viewer, operator, admin), in headless Chromium against the salt-api and
 * Pritunl simulators: each page the role's menu offers (and a host's, a group's, a job's) is opened, checked with
 * axe-core (no serious or critical accessibility violation), and kept as screenshots at 1400 px and 390 px in
 * test-artifacts/walk/; the forms and buttons each page offers are noted, and a role is offered none it may not use
 * (lib/http/routes.ts). Then each role does through the forms what it may: the viewer its own token; an operator runs
 * a function on a group and watches the returns arrive, makes, changes and deletes a task, starts, pauses and resumes
 * a rollout, loads the patches; an admin adds and deletes a VPN manager and an organization in it, adds, disables,
 * enables and deletes an approval policy and a maintenance window, revokes someone's token, and is told why a graph
 * build without a master is refused. axe-core runs with those forms open and their refusals shown. What the admin does
 * with the other forms (groups, tasks, webhooks…) is tested in test/dashboard.spec.ts.
 */
import fs from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import { describeBrowser, openBrowser, violations, type Browser } from "./support/browser";
import { SaltApiSimulator } from "./simulators/salt-api";
import { PritunlSimulator } from "./simulators/pritunl";
import { startEmbedded, ROOT, type Harness } from "./support/harness";
import { request, eventually } from "./support/http";

// Run in the page (the test's own types have no DOM).
declare const document: any;

const ARTIFACTS = path.join(ROOT, "test-artifacts", "walk");
const WIDTHS = [1400, 390];
type Role = "viewer" | "operator" | "admin";

/**
 * The forms and the buttons a role may be offered, beyond which a page shows a write it may not do: a form by its id
 * (or its section's), a button by its words. Pagers, filters and reading aids are offered to everyone.
 */
const MAY: Record<Role, { forms: string[]; buttons: string[] }> = {
	viewer: { forms: ["new-my-token"], buttons: ["Mark all read", "Mark read", "Make a token", "Revoke"] },
	operator: {
		forms: ["new-my-token", "run", "new-rollout", "job-load-updates-form", "task-form"],
		buttons: [
			"Mark all read",
			"Mark read",
			"Make a token",
			"Revoke",
			"Run on host",
			"Run on group",
			"Start",
			"Abort",
			"Load patches from the master",
			"New task",
			"Pause",
			"Resume",
			"Edit",
			"Delete",
			"Sync",
			"Fix what drifted",
			"Download VPN profile",
		],
	},
	admin: { forms: [], buttons: [] },
};
/** What only an admin may be offered: were one of these shown to another role, the test above would say which. */
const ADMIN_ONLY_FORMS = [
	"new-group",
	"edit-group",
	"new-window",
	"new-policy",
	"new-manager",
	"new-organization",
	"wh-form",
	"job-build-graph-form",
	"job-request-ips-form",
];

describeBrowser(
	`every page as each role, axe-core and screenshots${process.env.SKIP_BROWSER === "1" ? " (skipped: SKIP_BROWSER=1)" : ""}`,
	() => {
		let sim: SaltApiSimulator;
		let pritunl: PritunlSimulator;
		let pritunlUrl = "";
		let h: Harness;
		let browser: Browser;
		let page: Page;
		let base = "";
		let hosts: string[] = [];
		let host = "";
		let group = "";
		let jid = "";
		const tokens: Record<string, string> = {};
		const url = (p: string) => `${h.api}/${p}`;
		/** Accessibility violations found while a test's forms were open, by where they were. */
		const axeFindings = async (where: string) => (await violations(page)).map(v => `${where}: ${v}`);

		/** Signed in as the role: its token in the tab's storage, then the dashboard loaded afresh on the hosts. */
		const signInAs = async (role: Role) => {
			await page.setViewportSize({ width: WIDTHS[0], height: 900 });
			await page.goto(`${base}/`);
			// Once the page has settled (signed in with the token it had, or on its sign-in): a page still booting without a
			// token ends by clearing the tab's token, which would drop the one set below (a loaded run failed that way).
			await page.waitForSelector("#signin, #who");
			await page.evaluate(t => sessionStorage.setItem("fleet-ctl.token", t), tokens[role]);
			await page.goto(`${base}/#/hosts`);
			await page.reload();
			try {
				await page.waitForSelector("#hosts tbody tr");
			} catch (err) {
				// What the page showed instead, for the log of a run that fails here.
				const shown = await page.evaluate(
					() =>
						`${location.hash}: ${(document.querySelector("main")?.textContent ?? "(no main)").replace(/\s+/g, " ").slice(0, 600)}`,
				);
				throw new Error(
					`${(err as Error).message}\nthe page: ${shown}\nbrowser problems: ${browser.problems.join("; ") || "none"}`,
				);
			}
			expect(await page.locator("#who").textContent()).toContain(role);
		};
		/** Fills a form's fields, each `#<prefix>-<name>`. */
		const fill = async (prefix: string, values: Record<string, string>) => {
			for (const [name, value] of Object.entries(values)) await page.fill(`#${prefix}-${name}`, value);
		};
		const go = async (hash: string, ready: string) => {
			await page.evaluate(h => (location.hash = h), hash);
			await page.waitForSelector(ready);
		};

		beforeAll(async () => {
			fs.mkdirSync(ARTIFACTS, { recursive: true });
			sim = new SaltApiSimulator({
				minions: 6,
				timeout: 4,
				gatherJobTimeout: 0,
				presenceEvents: false,
				downFraction: 0,
			});
			await sim.start();
			pritunl = new PritunlSimulator({ username: "fleet", password: "Pw-walk-7d2a!" });
			pritunlUrl = (await pritunl.start()).url;
			h = await startEmbedded({
				env: {
					...sim.cmApiEnv,
					CM_JOB_POLL_MS: "200",
					CM_JOB_TIMEOUT_MS: "5000",
					CM_SYNC_INTERVAL_MS: "0",
					VPN_SYNC_INTERVAL_MS: "0",
				},
			});
			base = h.api.replace(/\/api$/, "");
			await h.call("cm-gateway.sync");
			hosts = await eventually(
				async () => {
					// Hosts up, so that a run or a rollout on the first three has them all answer.
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
			host = hosts[0];
			const made = await request("POST", url("groups"), {
				body: { name: "walk-web", type: 0, hosts: hosts.slice(0, 3) },
			});
			expect(made.status).toBe(201);
			group = made.body._id;
			expect(
				(
					await request("POST", url("tasks"), {
						body: { name: "walk nightly", fun: "test.ping", tgt: [group], start: "2031-01-01 00:00", interval: 86400 },
					})
				).status,
			).toBe(201);
			const window = {
				name: "walk nights",
				targets: { groups: [group] },
				functions: ["state.apply"],
				rrule: "FREQ=DAILY",
				start: "2026-01-01T22:00",
				timezone: "UTC",
				duration: "PT2H",
			};
			expect((await request("POST", url("maintenance_windows"), { body: window })).status).toBe(201);
			jid = (await request("POST", url(`groups/${group}`), { body: { cm_client: "local_async", fun: "test.ping" } }))
				.body.task_id;
			await h.call("alerts.raise", { type: "key.new", level: "warning", payload: { hostname: host } });
			for (const role of ["viewer", "operator"])
				tokens[role] = (await request("POST", url("tokens"), { body: { name: `walk-${role}`, role } })).body.token;
			tokens.admin = process.env.FLEET_TEST_TOKEN as string;
			browser = await openBrowser({ width: WIDTHS[0], height: 900 });
			page = browser.page;
		}, 60_000);

		afterAll(async () => {
			await browser?.close();
			await h?.stop();
			await sim?.stop();
			await pritunl?.stop();
		});

		for (const role of ["viewer", "operator", "admin"] as const) {
			it(`walks every page the ${role} is offered: no serious accessibility violation, screenshots at ${WIDTHS.join(" and ")} px, no form or button it may not use, the shortcuts' help listing its pages`, async () => {
				await signInAs(role);
				const offered: string[] = await page.evaluate(() =>
					[...document.querySelectorAll("#nav a")]
						.map((a: any) => a.getAttribute("href"))
						.filter((href: string) => href.startsWith("#/")),
				);
				expect(offered.length).toBeGreaterThan(8);
				const pages: Array<[string, string]> = [
					...offered.map(o => [o, o.slice(2)] as [string, string]),
					[`#/hosts/${host}`, "a-host"],
					[`#/groups/${group}`, "a-group"],
					[`#/history/${jid}`, "a-job"],
				];
				const found: string[] = [];
				/** The writes each page offers: its forms (by id, or their section's), its buttons (by their words). */
				const writes: Array<{ hash: string; forms: string[]; buttons: string[] }> = [];
				for (const [hash, shotName] of pages) {
					await go(hash, "main h1");
					// The page's reads answered (nothing says "Loading…" any more).
					await page.waitForFunction(
						() => !document.querySelector("main")?.textContent?.includes("Loading…"),
						undefined,
						{ timeout: 10_000 },
					);
					writes.push({
						hash,
						...(await page.evaluate(() => ({
							forms: [...document.querySelectorAll("main form")]
								.filter((f: any) => f.getAttribute("role") !== "search" && !f.classList.contains("filters"))
								.map((f: any) => f.id || f.parentElement.closest("[id]")?.id || "?"),
							// Reading aids (a sortable column's heading, a pager) are offered to everyone.
							buttons: [...document.querySelectorAll("main button")]
								.filter((b: any) => !b.closest("thead, .pager"))
								.map((b: any) => b.textContent.trim()),
						}))),
					});
					const name = `${role}-${shotName}`;
					for (const width of WIDTHS) {
						await page.setViewportSize({ width, height: 900 });
						await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}.png`), fullPage: true });
						for (const v of await violations(page)) found.push(`${hash} at ${width} px: ${v}`);
					}
					await page.setViewportSize({ width: WIDTHS[0], height: 900 });
				}
				if (role !== "admin") {
					const beyond = writes
						.map(w => ({
							hash: w.hash,
							forms: w.forms.filter(f => !MAY[role].forms.includes(f)),
							buttons: w.buttons.filter(b => !MAY[role].buttons.includes(b)),
						}))
						.filter(w => w.forms.length + w.buttons.length > 0);
					expect(beyond).toEqual([]);
				}
				// Every admin form is somewhere on the admin's pages (so that the check above can see them), and nowhere else.
				const formsSeen = new Set(writes.flatMap(w => w.forms));
				for (const f of [
					"new-group",
					"edit-group",
					"new-window",
					"new-policy",
					"new-manager",
					"wh-form",
					"job-build-graph-form",
					"job-request-ips-form",
				])
					expect({ role, form: f, shown: formsSeen.has(f) }).toEqual({ role, form: f, shown: role === "admin" });
				expect(ADMIN_ONLY_FORMS.filter(f => formsSeen.has(f) && role !== "admin")).toEqual([]);
				// The shortcuts' help: a modal dialog listing the pages of this role's menu, each with its key.
				await page.keyboard.press("?");
				const dialog = page.getByRole("dialog", { name: "Keyboard shortcuts" });
				await dialog.waitFor();
				const listed = (await dialog.locator("tr td:nth-child(2)").allTextContents()).filter(t =>
					t.startsWith("Go to "),
				);
				const menu = await page
					.locator("#nav a[href^='#/']")
					.evaluateAll(as => as.map((a: any) => `Go to ${a.firstChild.textContent}`));
				expect(listed).toEqual(menu);
				for (const v of await violations(page)) found.push(`the shortcuts' help: ${v}`);
				await page.screenshot({ path: path.join(ARTIFACTS, `${role}-shortcuts-1400.png`) });
				await page.keyboard.press("Escape");
				await dialog.waitFor({ state: "detached" });
				expect(found).toEqual([]);
				expect(browser.problems).toEqual([]);
			}, 180_000);
		}

		it("the viewer makes an API token for itself through the one form it is offered, and revokes it", async () => {
			await signInAs("viewer");
			await go("#/tokens", "#new-my-token");
			// Its own role at most.
			expect(await page.locator("#my-token-role option").allTextContents()).toEqual(["viewer"]);
			await page.fill("#my-token-name", "walk-viewer-script");
			await page.click("#new-my-token button[type=submit]");
			await page.waitForSelector("#new-token input");
			const secret = await page.inputValue("#new-token input");
			expect((await request("GET", url("whoami"), { token: secret })).body).toMatchObject({
				name: "walk-viewer-script",
				role: "viewer",
			});
			const found = await axeFindings("#/tokens with a new token shown");
			await page.click('#my-tokens tr:has-text("walk-viewer-script") button:has-text("Revoke")');
			await page.waitForSelector('#my-tokens tr:has-text("walk-viewer-script") .pill:has-text("revoked")');
			expect((await request("GET", url("whoami"), { token: secret })).status).toBe(401);
			expect(found).toEqual([]);
		});

		it("an operator runs a function on a group and watches the returns arrive, makes, changes and deletes a task, starts, pauses and resumes a rollout, loads the patches", async () => {
			await signInAs("operator");
			const found: string[] = [];
			// A run on the group: each host appears, then its return.
			await go(`#/groups/${group}`, "#run-fun");
			await page.fill("#run-fun", "test.ping");
			await page.click("#run-go");
			await page.waitForFunction(
				() => document.querySelector("#run-summary")?.textContent?.includes("3 of 3 host(s) answered"),
				undefined,
				{ timeout: 20_000 },
			);
			expect(await page.locator("#run-returns tbody tr td:nth-child(2)").allTextContents()).toEqual([
				"finished",
				"finished",
				"finished",
			]);
			found.push(...(await axeFindings("a group's page with a run's returns")));
			const ran = (await request("GET", `${url("salt_jobs")}?sort=-started&max_results=1`)).body._items[0];
			expect(ran).toMatchObject({ fun: "test.ping", user: "walk-operator", returned: 3 });

			// A task: made through its form, changed, deleted.
			await go("#/tasks", "#task-new");
			await page.click("#task-new");
			await fill("task", { name: "walk operator task", fun: "test.ping" });
			await page.selectOption("#task-groups", { label: "walk-web" });
			await page.fill("#task-start", "2032-05-01 03:00");
			await page.selectOption("#task-every", "interval");
			await page.fill("#task-interval", "7200");
			await page.waitForFunction(() => document.querySelector("#task-next")?.textContent?.includes("every 2 h"));
			found.push(...(await axeFindings("the task form")));
			await page.click("#task-form button[type=submit]");
			const row = page.locator("#tasks tbody tr", { hasText: "walk operator task" });
			await row.waitFor();
			expect(await row.textContent()).toContain("group walk-web");
			await row.locator("button:has-text('Edit')").click();
			await page.fill("#task-interval", "3600");
			await page.click("#task-form button[type=submit]");
			await page.waitForFunction(() => document.querySelector("#tasks tbody")?.textContent?.includes("every 1 h from"));
			const task = (
				await request(
					"GET",
					`${url("tasks")}?where=${encodeURIComponent(JSON.stringify({ name: "walk operator task" }))}`,
				)
			).body._items[0];
			expect(task).toMatchObject({ fun: "test.ping", tgt: [group], interval: 3600 });
			await page
				.locator("#tasks tbody tr", { hasText: "walk operator task" })
				.locator("button:has-text('Delete')")
				.click();
			await page.waitForFunction(
				() => !document.querySelector("#tasks tbody")?.textContent?.includes("walk operator task"),
			);
			expect((await request("GET", url(`tasks/${task._id}`))).status).toBe(404);

			// A rollout: a refusal said by field, then started, paused, resumed until it finishes.
			await go("#/rollouts", "#new-rollout");
			await fill("rollout", {
				name: "walk rollout",
				target: "L@no-such-host",
				call: "test.ping",
				batch: "1",
				wait_s: "2",
			});
			await page.click("#new-rollout button[type=submit]");
			await page.waitForSelector("#new-rollout .error");
			found.push(...(await axeFindings("the rollout form with a refusal")));
			await page.fill("#rollout-target", `L@${hosts.slice(0, 3).join(",")}`);
			await page.click("#new-rollout button[type=submit]");
			await page.waitForSelector('#rollout[data-status="running"]');
			await page.click('#rollout button:has-text("Pause")');
			await page.waitForSelector('#rollout[data-status="paused"]');
			const rollout = (
				await request("GET", `${url("rollouts")}?where=${encodeURIComponent(JSON.stringify({ name: "walk rollout" }))}`)
			).body._items[0];
			expect(rollout.status).toBe("paused");
			await page.screenshot({ path: path.join(ARTIFACTS, "operator-rollout-paused-1400.png"), fullPage: true });
			await page.click('#rollout button:has-text("Resume")');
			await page.waitForSelector('#rollout[data-status="finished"]', { timeout: 45_000 });
			expect(await page.textContent("#rollout")).toContain("3 of 3 host(s) done");

			// The patches loaded from the master: the work's record appears and reaches 100 %.
			await go("#/jobs", "#job-load-updates");
			await page.click("#job-load-updates");
			await page.waitForFunction(
				() => /load_updates\s*finished\s*100%/.test(document.querySelector("#jobs tbody")?.textContent ?? ""),
				undefined,
				{ timeout: 15_000 },
			);
			expect(found).toEqual([]);
			expect(browser.problems).toEqual([]);
		}, 120_000);

		it("an admin adds a VPN manager and an organization in it, an approval policy and a maintenance window through their forms, disables and enables them, deletes them all, revokes someone's token, and is told why a graph build is refused", async () => {
			await signInAs("admin");
			const found: string[] = [];
			// A VPN manager, then an organization in it (made in Pritunl too), both deleted again.
			await go("#/vpn", "#new-manager");
			const manager = {
				name: "walk-vpn",
				server_address: pritunlUrl,
				dashboard_address: `${pritunlUrl}/`,
				username: "fleet",
				password: "Pw-walk-7d2a!",
			};
			await fill("manager", manager);
			await page.click("#new-manager button[type=submit]");
			await page.waitForSelector('#vpn-managers tr:has-text("walk-vpn")');
			expect(await page.textContent("#vpn-managers")).not.toContain(manager.password);
			await page.fill("#organization-name", "walk-site");
			await page.click("#new-organization button[type=submit]");
			await page.waitForSelector('#vpn-organizations tr:has-text("walk-site")');
			expect(await page.textContent('#vpn-organizations tr:has-text("walk-site")')).toContain("walk-vpn");
			expect(pritunl.orgList().map(o => o.name)).toContain("walk-site");
			found.push(...(await axeFindings("the VPN page with a manager and an organization")));
			await page.click('#vpn-organizations tr:has-text("walk-site") button:has-text("Delete")');
			await page.waitForSelector('#vpn-organizations tr:has-text("walk-site")', { state: "detached" });
			await page.click('#vpn-managers tr:has-text("walk-vpn") button:has-text("Delete")');
			await page.waitForSelector('#vpn-managers tr:has-text("walk-vpn")', { state: "detached" });
			expect((await request("GET", url("vpn_managers"))).body._meta.total).toBe(0);

			// An approval policy: added, disabled, enabled, deleted.
			await go("#/approvals", "#new-policy");
			await fill("policy", { name: "walk reboots", functions: "system.reboot" });
			await page.click("#new-policy button[type=submit]");
			const policy = '#policies tr:has-text("walk reboots")';
			await page.waitForSelector(`${policy} .pill:has-text("enabled")`);
			await page.click(`${policy} button:has-text("Disable")`);
			await page.waitForSelector(`${policy} .pill:has-text("disabled")`);
			const [stored] = (await request("GET", url("approval_policies"))).body._items;
			expect(stored).toMatchObject({ name: "walk reboots", functions: ["system.reboot"], enabled: false });
			await page.click(`${policy} button:has-text("Enable")`);
			await page.waitForSelector(`${policy} .pill:has-text("enabled")`);
			await page.click(`${policy} button:has-text("Delete")`);
			await page.waitForSelector(policy, { state: "detached" });
			expect((await request("GET", url("approval_policies"))).body._items).toEqual([]);

			// A maintenance window: a refusal shown by its field, then added, disabled, enabled, deleted.
			await go("#/windows", "#new-window");
			await fill("window", {
				name: "walk sundays",
				target: "web-*",
				rrule: "FREQ=WEEKLY;BYDAY=SU",
				start: "2026-01-04T03:00",
				timezone: "Mars/Olympus",
			});
			await page.click("#new-window button[type=submit]");
			await page.waitForSelector('#window-timezone[aria-invalid="true"]');
			found.push(...(await axeFindings("the window form with a refusal")));
			await page.fill("#window-timezone", "UTC");
			await page.click("#new-window button[type=submit]");
			const window = '#windows tr:has-text("walk sundays")';
			await page.waitForSelector(window);
			await page.click(`${window} button:has-text("Disable")`);
			await page.waitForSelector(`${window} button:has-text("Enable")`);
			await page.click(`${window} button:has-text("Enable")`);
			await page.waitForSelector(`${window} button:has-text("Disable")`);
			expect(
				(
					await request(
						"GET",
						`${url("maintenance_windows")}?where=${encodeURIComponent(JSON.stringify({ name: "walk sundays" }))}`,
					)
				).body._items[0],
			).toMatchObject({ enabled: true, rrule: "FREQ=WEEKLY;BYDAY=SU" });
			await page.click(`${window} button:has-text("Delete")`);
			await page.waitForSelector(window, { state: "detached" });

			// Someone's token, revoked from the list of every token.
			const other = (await request("POST", url("tokens"), { body: { name: "walk-leaver", role: "operator" } })).body
				.token;
			await go("#/tokens", '#all-tokens tr:has-text("walk-leaver")');
			await page.click('#all-tokens tr:has-text("walk-leaver") button:has-text("Revoke")');
			await page.waitForSelector('#all-tokens tr:has-text("walk-leaver") .pill:has-text("revoked")');
			expect((await request("GET", url("whoami"), { token: other })).status).toBe(401);

			// A graph build with no master named (nor one in the settings): refused, and why, next to its button.
			await go("#/jobs", "#job-build-graph");
			await page.click("#job-build-graph");
			await page.waitForSelector("#job-build-graph-form .error:has-text('master')");
			found.push(...(await axeFindings("the jobs page with a refusal")));
			expect(found).toEqual([]);
			expect(browser.problems.filter(p => !/status of 4(00|09)/.test(p))).toEqual([]);
		}, 120_000);
	},
);

declare const sessionStorage: { setItem(k: string, v: string): void };
declare const location: { hash: string };
