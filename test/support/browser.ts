/**
 * Debian's Chromium, headless, for the browser suites (driven by playwright-core): a fresh profile; the page's
 * errors, console errors (but the 401, 422 and 503 answers a page shows on purpose: a sign-in, a form's refusal)
 * and any request to another origin (refused: a dashboard takes nothing from a CDN) noted in `problems`.
 *
 * `violations(page)` runs axe-core in the page as it is and answers its serious and critical findings.
 *
 * Without /usr/bin/chromium (CI installs it: .ci/run) a suite fails, unless SKIP_BROWSER=1 says so.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page, type Route } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const FLAGS = [
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-dev-shm-usage",
];

export const SKIP_BROWSER = process.env.SKIP_BROWSER === "1";
/** `describe`, or `describe.skip` with SKIP_BROWSER=1. */
export function describeBrowser(name: string, body: () => void): void {
	// Looked up when called: the module is also loaded outside jest (bench/ui.ts), where there is no `describe`.
	(SKIP_BROWSER ? describe.skip : describe)(name, body);
}

export interface Browser {
	context: BrowserContext;
	page: Page;
	/** What went wrong in the page, in the order it did. */
	problems: string[];
	close(): Promise<void>;
}

/** A browser with a fresh profile, at `viewport`, for pages served from 127.0.0.1. */
export async function openBrowser(viewport: { width: number; height: number }): Promise<Browser> {
	if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (or SKIP_BROWSER=1)`);
	const profile = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-ctl-chromium-"));
	const problems: string[] = [];
	const context = await chromium.launchPersistentContext(profile, {
		executablePath: CHROMIUM,
		headless: true,
		args: FLAGS,
		viewport,
	});
	const page = context.pages()[0] ?? (await context.newPage());
	page.on("console", msg => {
		if (msg.type() === "error" && !/status of (401|422|503)/.test(msg.text())) problems.push(`console: ${msg.text()}`);
	});
	page.on("pageerror", err => problems.push(`page error: ${err.message}`));
	// Anything the page asks of another origin (a CDN) is refused and noted.
	await context.route(/^(?!http:\/\/127\.0\.0\.1)/, route => {
		problems.push(`request to another origin: ${route.request().url()}`);
		return route.abort();
	});
	return {
		context,
		page,
		problems,
		close: async () => {
			await context.close();
			fs.rmSync(profile, { recursive: true, force: true });
		},
	};
}

/** Requests a test holds (holdRequests): `asked` once the first has left the page, `release()` lets them go. */
export interface Held {
	asked: Promise<void>;
	release(): void;
	/** Lets them go and stops holding. */
	stop(): Promise<void>;
}

/**
 * Holds the requests of `page` that `match` takes until `release()`, then answers each with `answer` (default: on
 * to the server). An answer to a page that has gone meanwhile (a failed test) is dropped quietly.
 */
export async function holdRequests(
	page: Page,
	match: string | RegExp | ((u: URL) => boolean),
	answer: (route: Route) => Promise<void> = route => route.continue(),
): Promise<Held> {
	let release: () => void = () => undefined;
	const held = new Promise<void>(r => (release = r));
	let asked: () => void = () => undefined;
	const first = new Promise<void>(r => (asked = r));
	await page.route(match, async route => {
		asked();
		await held;
		await answer(route).catch(() => undefined);
	});
	return {
		asked: first,
		release: () => release(),
		stop: async () => {
			release();
			await page.unroute(match);
		},
	};
}

// Run in the page (the test's own types have no DOM).
declare const axe: {
	run(
		context: unknown,
		options: unknown,
	): Promise<{
		violations: Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: unknown[] }> }>;
	}>;
};
declare const document: unknown;
let axeSource = "";

/** The serious and critical accessibility violations axe-core (4.x) finds in the page as it is, one line each. */
export async function violations(page: Page): Promise<string[]> {
	axeSource ||= fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
	// Through the DevTools protocol: the page's CSP (script-src 'self') does not apply to what the test evaluates.
	if (!(await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe !== "undefined")))
		await page.evaluate(axeSource);
	const result = await page.evaluate(() => axe.run(document, { resultTypes: ["violations"] }));
	return result.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(
			v =>
				`${v.id} (${v.impact}): ${v.help} — ${v.nodes
					.map(n => JSON.stringify(n.target))
					.slice(0, 5)
					.join(", ")}`,
		);
}
