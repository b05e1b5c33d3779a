/**
 * Issue 43 in Chromium, as the person it is about meets it: an admin signed in with a session cookie (the readable
 * CSRF cookie beside it) opens an uploaded HTML page that loads an uploaded script. The page must be a download,
 * not a page of the dashboard's origin: its script never runs and never reads the cookie, and should something
 * render it anyway, its sandbox keeps script and cookies out. And the dashboard, signed in with that cookie, still
 * marks alerts read now that such reads need the CSRF header. The HTTP side is test/trust-surfaces.spec.ts.
 */
import fs from "node:fs";
import path from "node:path";
import { describeBrowser, openBrowser, SKIP_BROWSER, type Browser } from "./support/browser";
import { startEmbedded, ROOT, type Harness } from "./support/harness";
import { eventually, request } from "./support/http";
import { csrfOf } from "../services/api/sessions";

declare const document: { cookie: string; title: string };

describeBrowser(
	`uploads and the session's CSRF header, in Chromium${SKIP_BROWSER ? " (skipped: SKIP_BROWSER=1)" : ""}`,
	() => {
		let h: Harness;
		let browser: Browser;
		let base = "";
		let session = "";
		let pageUrl = "";
		let scriptUrl = "";

		/** An upload through the API (admin): the URL of its bytes. */
		const upload = async (filename: string, type: string, content: string): Promise<string> => {
			const form = new FormData();
			form.append("name", filename);
			form.append("data", new Blob([content], { type }), filename);
			const res = await request("POST", `${h.api}/files`, { raw: form });
			expect(res.status).toBe(201);
			return `${base}${(await request("GET", `${h.api}/files/${res.body._id}`)).body.data}`;
		};

		beforeAll(async () => {
			if (!fs.existsSync(path.join(ROOT, "dist", "ui", "index.html")))
				throw new Error("dist/ui is missing: run `npm run build` first (npm test does)");
			h = await startEmbedded();
			base = h.api.replace(/\/api$/, "");
			// An admin's session, as a sign-in opens it (services/api/sessions.ts), and its cookies in the browser.
			session = (
				await h.call<{ secret: string }>("tokens.openSession", {
					subject: "oidc:root-admin",
					name: "root admin",
					role: "admin",
					ttlS: 3600,
				})
			).secret;
			browser = await openBrowser({ width: 1280, height: 800 });
			await browser.context.addCookies([
				{ name: "fleet_session", value: session, url: base, httpOnly: true, sameSite: "Lax" },
				{ name: "fleet_csrf", value: csrfOf(session), url: base, sameSite: "Strict" },
			]);
			// The attack: a script that takes the CSRF cookie, and a page that loads it (both pass `script-src 'self'`).
			scriptUrl = await upload(
				"steal.js",
				"text/javascript",
				'document.title = "ran:" + document.cookie; fetch("/api/whoami?stolen=" + encodeURIComponent(document.cookie));',
			);
			pageUrl = await upload(
				"invoice.html",
				"text/html",
				`<!doctype html><html><head><title>upload</title><script src="${new URL(scriptUrl).pathname}"></script></head><body>hello</body></html>`,
			);
		}, 60_000);

		afterAll(async () => {
			await browser?.close();
			await h?.stop();
		});

		it("downloads an uploaded page instead of opening it: its uploaded script is never even fetched", async () => {
			const page = await browser.context.newPage();
			const asked: string[] = [];
			page.on("request", r => asked.push(r.url()));
			try {
				const downloading = page.waitForEvent("download", { timeout: 10_000 });
				// A download aborts the navigation: the page stays where it was.
				await page.goto(pageUrl).catch(() => undefined);
				const download = await downloading;
				expect(download.suggestedFilename()).toBe("invoice.html");
				// The whole page has arrived (into the download), so a page rendering it would have asked for its script by now.
				expect(fs.readFileSync((await download.path()) as string, "utf8")).toContain("<title>upload</title>");
				expect(asked).toContain(pageUrl);
				expect(asked).not.toContain(scriptUrl);
				expect(asked.filter(u => u.includes("stolen="))).toEqual([]);
				expect(page.url()).not.toBe(pageUrl);
			} finally {
				await page.close();
			}
		});

		it("rendered anyway (a proxy that drops the attachment), the sandbox runs no script and hides the cookie", async () => {
			const page = await browser.context.newPage();
			const asked: string[] = [];
			page.on("request", r => asked.push(r.url()));
			try {
				await page.route(pageUrl, async route => {
					const res = await route.fetch();
					const headers = { ...res.headers() };
					delete headers["content-disposition"];
					await route.fulfill({ response: res, headers });
				});
				// `load` comes after every script the page loads has run (none may here).
				await page.goto(pageUrl, { waitUntil: "load" });
				expect(await page.title()).toBe("upload");
				// An opaque origin: the document may not read this site's cookies.
				await expect(page.evaluate(() => document.cookie)).rejects.toThrow(/sandbox/i);
				expect(asked.filter(u => u.includes("stolen="))).toEqual([]);
			} finally {
				await page.close();
			}
		});

		it("marks alerts read from the dashboard signed in with the session cookie: its reads carry the CSRF header", async () => {
			// The browser's own page: its errors and requests to other origins are noted in `problems`.
			const page = browser.page;
			{
				const alert = (
					await h.call<{ _id: string }>("alerts.raise", {
						type: "vnc.connect",
						level: "warning",
						payload: { hostname: "web-01", status: "open" },
					})
				)._id;
				await page.goto(`${base}/#/alerts`);
				await page.waitForSelector(`#alerts-body tr.unread[data-alert="${alert}"]`, { timeout: 15_000 });
				await page.click(`#alerts-body tr[data-alert="${alert}"] button:has-text("Mark read")`);
				await page.waitForSelector(`#alerts-body tr[data-alert="${alert}"]:not(.unread)`);
				expect((await request("GET", `${h.api}/alerts/${alert}`)).body.read).toBe(true);
				await h.call("alerts.raise", {
					type: "vnc.connect",
					level: "warning",
					payload: { hostname: "web-02", status: "open" },
				});
				await page.goto(`${base}/#/alerts?page=1`);
				await page.waitForSelector("#alerts-body tr.unread");
				await page.click("#mark-all");
				await page.waitForFunction(
					() =>
						!(globalThis as unknown as { document: { querySelector(s: string): unknown } }).document.querySelector(
							"#alerts-body tr.unread",
						),
				);
				await eventually(
					async () =>
						(await request("GET", `${h.api}/alerts?where=${encodeURIComponent('{"read":false}')}`)).body._meta.total ===
						0
							? true
							: undefined,
					5000,
					"every alert read",
				);
				expect(browser.problems).toEqual([]);
			}
		});
	},
);
