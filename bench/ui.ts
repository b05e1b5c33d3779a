/**
 * The hosts page at fleet scale (issue 24): BENCH_UI_HOSTS (default 50,000) hosts seeded into NeDB files, the
 * production command in one process with its read caches off (every page computed), the built dashboard in
 * Debian's Chromium. Measured in the browser, rounds interleaved with their baseline in the same page:
 *
 *   first rows      from asking for the hosts page (another page shown) to its 25 rows on screen;
 *                   baseline: the same GET /api/hosts the page makes, fetched and parsed in the page (no render)
 *   filtered page   from choosing "down" in the status filter to the filtered rows and their total on screen;
 *                   baseline: the filtered GET /api/hosts, fetched and parsed in the page
 *
 * Invalid (exit 1) when a page shows other rows or another total than the API answers for the same query.
 */
import fs from "node:fs";
import path from "node:path";
import { envInt, fmt, quantile } from "./support";
import { seed, startDeployment } from "./reads";
import { hostId } from "./hosts";
import { openBrowser } from "../test/support/browser";

const HOSTS = envInt("BENCH_UI_HOSTS", 50_000);
const ROUNDS = envInt("BENCH_UI_ROUNDS", 15);
/** Goals: what "stays responsive" means here, p50 in ms. */
const GOAL_MS = { first: 500, filtered: 500 };

// Run in the page (the bench's own types have no DOM).
declare const document: any;
declare const location: { hash: string };
declare const requestAnimationFrame: (f: () => void) => number;
declare const sessionStorage: { setItem(k: string, v: string): void; getItem(k: string): string | null };

export async function benchUi(dir: string, log: (m: string) => void): Promise<{ report: string; valid: boolean }> {
	fs.mkdirSync(dir, { recursive: true });
	log(`ui: seeding ${HOSTS} hosts ...`);
	const seeded = await seed(path.join(dir, "seed"), HOSTS);
	log(
		`ui: seeded in ${seeded.seconds.toFixed(1)} s (${seeded.down} down); starting the production command (caches off) ...`,
	);
	const running = await startDeployment(
		"inproc",
		"off",
		seeded.dir,
		`ui-${process.pid}-${Date.now().toString(36)}`,
		null,
		hostId(42),
	);
	const browser = await openBrowser({ width: 1400, height: 900 });
	const problems: string[] = [];
	const times = {
		first: [] as number[],
		firstBase: [] as number[],
		filtered: [] as number[],
		filteredBase: [] as number[],
	};
	try {
		const { page } = browser;
		await page.goto(`${running.base}/`);
		await page.evaluate(t => sessionStorage.setItem("fleet-ctl.token", t), process.env.BENCH_TOKEN as string);
		await page.goto(`${running.base}/#/tokens`);
		await page.reload();
		await page.waitForSelector("h1");
		const listUrl = `/api/hosts?sort=_id&page=1&max_results=25&projection=${encodeURIComponent(JSON.stringify({ status: 1, ip: 1, version: 1, key: 1, _updated: 1 }))}`;
		const filteredUrl = `/api/hosts?where=${encodeURIComponent(JSON.stringify({ status: "down" }))}&sort=_id&page=1&max_results=25&projection=${encodeURIComponent(JSON.stringify({ status: 1, ip: 1, version: 1, key: 1, _updated: 1 }))}`;
		/** A GET of the API in the page, as the page makes it: ms until its JSON is parsed, and the answer. */
		const baseline = (url: string) =>
			page.evaluate(async u => {
				const t0 = performance.now();
				const res = await fetch(u, {
					headers: { Authorization: `Bearer ${sessionStorage.getItem("fleet-ctl.token")}`, Accept: "application/json" },
				});
				const body = (await res.json()) as { _items: Array<{ _id: string }>; _meta: { total: number } };
				return {
					ms: performance.now() - t0,
					ids: body._items.map((i: { _id: string }) => i._id),
					total: body._meta.total,
				};
			}, url);
		const onScreen = () =>
			page.evaluate(() => ({
				ids: [...document.querySelectorAll("#hosts tbody tr")].map((tr: any) => tr.getAttribute("data-host")),
				page: document.querySelector("#host-page")?.textContent ?? "",
			}));
		for (let round = 0; round < ROUNDS; round++) {
			// The page, from another one: until its rows are on screen.
			await page.evaluate(() => (location.hash = "#/tokens"));
			await page.waitForSelector("#tokens, .empty, h1");
			const first = await page.evaluate(
				() =>
					new Promise<number>(resolve => {
						const t0 = performance.now();
						location.hash = "#/hosts";
						const look = () =>
							document.querySelectorAll("#hosts tbody tr").length === 25
								? resolve(performance.now() - t0)
								: requestAnimationFrame(look);
						look();
					}),
			);
			const shown = await onScreen();
			const base = await baseline(listUrl);
			if (JSON.stringify(shown.ids) !== JSON.stringify(base.ids) || !shown.page.includes(`· ${base.total} hosts`))
				problems.push(
					`first rows: the page shows ${shown.ids.length} rows (${shown.page}), the API ${base.ids.length} of ${base.total}`,
				);
			times.first.push(first);
			times.firstBase.push(base.ms);
			// The status filter: until the filtered rows and total are on screen.
			const filtered = await page.evaluate(
				n =>
					new Promise<number>(resolve => {
						const select = document.querySelector("#host-status");
						const t0 = performance.now();
						select.value = "down";
						select.dispatchEvent(new Event("change", { bubbles: true }));
						const look = () =>
							document.querySelector("#host-page")?.textContent?.includes(`· ${n} hosts`)
								? resolve(performance.now() - t0)
								: requestAnimationFrame(look);
						look();
					}),
				seeded.down,
			);
			const shownDown = await onScreen();
			const baseDown = await baseline(filteredUrl);
			if (JSON.stringify(shownDown.ids) !== JSON.stringify(baseDown.ids) || baseDown.total !== seeded.down)
				problems.push(
					`filtered page: the page shows ${shownDown.ids.join(",").slice(0, 80)}…, the API ${baseDown.ids.join(",").slice(0, 80)}… (${baseDown.total} of ${seeded.down} down)`,
				);
			times.filtered.push(filtered);
			times.filteredBase.push(baseDown.ms);
			await page.evaluate(() => {
				const select = document.querySelector("#host-status");
				select.value = "";
				select.dispatchEvent(new Event("change", { bubbles: true }));
			});
			await page.waitForFunction(
				n => document.querySelector("#host-page")?.textContent?.includes(`· ${n} hosts`),
				HOSTS,
			);
		}
		problems.push(...browser.problems);
	} finally {
		await browser.close();
		await running.stop();
	}
	const row = (what: string, xs: number[], base: number[], goal?: number) => {
		const p50 = quantile(xs, 0.5);
		return `${what.padEnd(16)} ${fmt(p50, 1).padStart(8)} ${fmt(Math.max(...xs), 1).padStart(8)}   ${fmt(quantile(base, 0.5), 1).padStart(8)} ${fmt(Math.max(...base), 1).padStart(8)}   ${goal === undefined ? "" : `p50 < ${goal} ms: ${p50 < goal ? "MET" : "NOT MET"}`}`;
	};
	const lines = [
		`${HOSTS.toLocaleString("en-US")} hosts (${seeded.down.toLocaleString("en-US")} down), ${ROUNDS} rounds, read caches off, Chromium ${browser.context.browser()?.version() ?? ""}`,
		"",
		`${"".padEnd(16)} ${"page, ms".padStart(17)}   ${"API alone, ms".padStart(17)}`,
		`${"".padEnd(16)} ${"p50".padStart(8)} ${"max".padStart(8)}   ${"p50".padStart(8)} ${"max".padStart(8)}`,
		row("first rows", times.first, times.firstBase, GOAL_MS.first),
		row("filtered page", times.filtered, times.filteredBase, GOAL_MS.filtered),
	];
	if (problems.length)
		lines.push(
			"",
			"!!! INVALID RUN: what the page showed is not what the API answers, or the page failed:",
			...problems.slice(0, 10).map(p => `!!!   ${p}`),
		);
	return { report: lines.join("\n"), valid: problems.length === 0 && times.first.length === ROUNDS };
}
