/**
 * A filter no index serves, end to end (issue 45, part `unindexed`): `GET /api/hosts?where={"status":"up","ip":{"$ne":V}}
 * &max_results=25&projection={"grain":0}` with a new V on every request, at BENCH_HOSTS (10,000) hosts, in one process
 * with the read caches off, against the work's own limit: the same hosts held in memory by a bare node:http server
 * (bench/limit-server.ts) that writes the filter by hand, counts the matches and keeps the page, answering the same
 * bytes. The two are measured in turn, BENCH_UNINDEXED_ROUNDS rounds (default 3, the order swapped each round), with
 * BENCH_FILTER_CONNECTIONS (32) connections for throughput, then one connection for latency. The ratio is taken per
 * round (the two runs next to each other in time, on a machine whose speed drifts), then its median.
 *
 * Goals: requests/s at least 0.2 of the limit's; one-connection p50 at most 2 ms. Any answer that is not the expected
 * body for its value (checked on every request, both servers), an error or a timeout invalidates the run; so does a
 * limit server that does not answer what fleet-ctl answers before the load.
 */
import fs from "node:fs";
import path from "node:path";
import { hostId } from "./hosts";
import { envInt, fmt, rawGet, sleep, spawnNode, stopProc, type Proc } from "./support";
import { load, seed, startDeployment } from "./reads";
import type { LoadResult } from "./load";
import { LIMIT_MARKS, type LimitSpec } from "./limit-server";

const ROUNDS = envInt("BENCH_UNINDEXED_ROUNDS", 3);
const CONNECTIONS = envInt("BENCH_FILTER_CONNECTIONS", 32);
const PAGE = 25;
/** Stands for the new value of each request, in the URL and the expected body (bench/load.ts `vary`). */
const VARY = "QQVALUEQQ";
const NO_GRAIN = encodeURIComponent(JSON.stringify({ grain: 0 }));

/** The measured request, for the value `value` (a placeholder or a real one). */
function requestPath(value: string): string {
	const where = encodeURIComponent(JSON.stringify({ status: "up", ip: { $ne: `unseen-${value}` } }));
	return `/api/hosts?where=${where}&max_results=${PAGE}&projection=${NO_GRAIN}`;
}

/** Headers the limit server does not repeat (per connection or per answer; the total it sets itself). */
const NOT_REPEATED = new Set([
	"date",
	"connection",
	"keep-alive",
	"transfer-encoding",
	"content-length",
	"x-total-count",
]);

/** Every host as fleet-ctl renders it in a list, in `_id` order: the JSON of each, and the fields the filter reads. */
async function renderedHosts(base: string, hosts: number): Promise<LimitSpec["hosts"]> {
	const out: LimitSpec["hosts"] = [];
	for (let page = 1; out.length < hosts; page++) {
		const res = await rawGet(`${base}/api/hosts?max_results=${PAGE * 20}&page=${page}&projection=${NO_GRAIN}`);
		if (res.status !== 200) throw new Error(`reading the hosts answered ${res.status}`);
		const items = JSON.parse(res.body.toString("utf8"))._items as Array<Record<string, unknown>>;
		if (!items.length) break;
		for (const item of items) out.push({ status: item.status, ip: item.ip, json: JSON.stringify(item) });
	}
	if (out.length !== hosts) throw new Error(`read ${out.length} hosts of ${hosts}`);
	return out;
}

/** fleet-ctl's answer for one value, cut into the limit server's template; throws where it cannot be cut exactly. */
function templateOf(body: string, value: string, hosts: LimitSpec["hosts"]): string {
	const matches = hosts.filter(h => h.status === "up" && h.ip !== `unseen-${value}`);
	const head = '{"_items":[';
	const items = matches
		.slice(0, PAGE)
		.map(h => h.json)
		.join(",");
	if (!body.startsWith(head + items + "]"))
		throw new Error("fleet-ctl's page is not the first 25 hosts up in _id order as it renders them in a list");
	const last = Math.ceil(matches.length / PAGE);
	let rest = body.slice(head.length + items.length);
	if (!rest.includes(`"total":${matches.length}`) || last <= 2)
		throw new Error(`fleet-ctl's total is not ${matches.length}, or too few hosts up to tell the last page`);
	rest = rest
		.replace(`"total":${matches.length}`, `"total":${LIMIT_MARKS.total}`)
		.split(`page=${last}"`)
		.join(`page=${LIMIT_MARKS.last}"`);
	return head + LIMIT_MARKS.items + rest.split(`unseen-${value}`).join(LIMIT_MARKS.value);
}

async function startLimit(specFile: string): Promise<{ proc: Proc; base: string }> {
	const proc = spawnNode("limit", [path.join(__dirname, "limit-server.js"), specFile], { ...process.env, PORT: "0" });
	const deadline = Date.now() + 30_000;
	while (Date.now() < deadline) {
		const m = /LISTENING (\d+)/.exec(proc.log.join(""));
		if (m) return { proc, base: `http://127.0.0.1:${m[1]}` };
		if (proc.child.exitCode !== null) break;
		await sleep(50);
	}
	await stopProc(proc);
	throw new Error(`the limit server did not start\n${proc.log.join("")}`);
}

type Measured = LoadResult & { cpu: { server: number; loader: number } };

const failures = (r: LoadResult) => r.non2xx + r.errors + r.timeouts + r.mismatches;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

export async function benchUnindexed(
	dir: string,
	log: (m: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const hosts = envInt("BENCH_HOSTS", 10_000);
	log(`unindexed: seeding ${hosts} hosts ...`);
	const seeded = await seed(path.join(dir, "seed"), hosts);
	const running = await startDeployment(
		"inproc",
		"off",
		seeded.dir,
		`unindexed-${process.pid}-${Date.now().toString(36)}`,
		null,
		hostId(Math.min(4242, hosts - 1)),
	);
	let limit: { proc: Proc; base: string } | null = null;
	try {
		const rendered = await renderedHosts(running.base, hosts);
		const first = await rawGet(running.base + requestPath("00000000"));
		if (first.status !== 200)
			throw new Error(`the filtered list answered ${first.status}: ${first.body.toString("utf8").slice(0, 300)}`);
		const headers: Record<string, string> = {};
		for (const [k, v] of Object.entries(first.headers))
			if (!NOT_REPEATED.has(k) && v !== undefined) headers[k] = Array.isArray(v) ? v.join(", ") : v;
		const spec: LimitSpec = {
			hosts: rendered,
			template: templateOf(first.body.toString("utf8"), "00000000", rendered),
			headers,
			pageSize: PAGE,
		};
		const specFile = path.join(dir, "limit.json");
		fs.writeFileSync(specFile, JSON.stringify(spec));
		const bodyFile = path.join(dir, "unindexed.body");
		fs.writeFileSync(bodyFile, first.body.toString("utf8").split("unseen-00000000").join(`unseen-${VARY}`));
		limit = await startLimit(specFile);
		// The limit answers what fleet-ctl answers, byte for byte, for any value: else the ratio compares two different works.
		for (const value of ["00000001", "12345678", "99999999"]) {
			const [ours, theirs] = [
				await rawGet(running.base + requestPath(value)),
				await rawGet(limit.base + requestPath(value)),
			];
			if (!ours.body.equals(theirs.body))
				throw new Error(
					`the limit server answers ${value} otherwise than fleet-ctl:\n${ours.body.toString("utf8").slice(-400)}\n${theirs.body.toString("utf8").slice(-400)}`,
				);
		}
		const total = rendered.filter(h => h.status === "up").length;
		// Keyed "c32", "c1": an object's integer-like keys would be listed in numeric order, not the order measured.
		const runs: Record<string, { ours: Measured[]; limit: Measured[] }> = {};
		for (const connections of [CONNECTIONS, 1]) {
			const key = `c${connections}`;
			runs[key] = { ours: [], limit: [] };
			for (let round = 0; round < ROUNDS; round++) {
				const order = round % 2 === 0 ? (["ours", "limit"] as const) : (["limit", "ours"] as const);
				for (const who of order) {
					const base = who === "ours" ? running.base : limit.base;
					const pids = who === "ours" ? running.servers.map(p => p.child.pid ?? 0) : [limit.proc.child.pid ?? 0];
					log(
						`unindexed: ${who === "ours" ? "fleet-ctl" : "the limit"}, ${connections} connection(s), round ${round + 1} ...`,
					);
					const r = await load(base + requestPath(VARY), bodyFile, pids, undefined, connections, undefined, VARY);
					log(
						`  ${fmt(r.rps)} req/s, p50 ${fmt(r.p50, 2)} ms, p99 ${fmt(r.p99, 2)} ms${failures(r) ? `, ${failures(r)} FAILURES` : ""}`,
					);
					runs[key][who].push(r);
				}
			}
		}
		const out: string[] = [];
		out.push(`GET ${requestPath("<new each request>")}`);
		out.push(
			`${fmt(hosts)} hosts (${fmt(total)} up: the total of every answer), read caches off, in one process; the limit: the same hosts in memory, the filter by hand (bench/limit-server.ts), the same bytes`,
		);
		out.push(
			`${ROUNDS} round(s) each, fleet-ctl and the limit in turn; figures are the median of the rounds (every round in brackets); ratio: fleet-ctl's req/s over the limit's of the same round, median (each round)`,
		);
		out.push("");
		const rows: string[][] = [];
		for (const [key, r] of Object.entries(runs)) {
			const each = (xs: Measured[], f: (m: Measured) => number, d = 0) =>
				`${fmt(median(xs.map(f)), d)} (${xs.map(x => fmt(f(x), d)).join(", ")})`;
			const cpu = (xs: Measured[]) => fmt(median(xs.map(x => (x.cpu.server / 100 / x.rps) * 1e6)));
			const ratios = r.ours.map((x, i) => x.rps / r.limit[i].rps);
			rows.push([
				key.slice(1),
				each(r.ours, x => x.rps),
				each(r.ours, x => x.p50, 2),
				fmt(median(r.ours.map(x => x.p99)), 2),
				cpu(r.ours),
				each(r.limit, x => x.rps),
				fmt(median(r.limit.map(x => x.p50)), 2),
				cpu(r.limit),
				`${median(ratios).toFixed(3)} (${ratios.map(x => x.toFixed(2)).join(", ")})`,
			]);
		}
		const header = [
			"connections",
			"fleet-ctl req/s",
			"p50 ms",
			"p99 ms",
			"CPU µs/req",
			"limit req/s",
			"limit p50",
			"limit CPU µs/req",
			"ratio",
		];
		const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)));
		out.push(header.map((h, i) => h.padStart(widths[i])).join("  "));
		for (const r of rows) out.push(r.map((c, i) => c.padStart(widths[i])).join("  "));
		const wide = runs[`c${CONNECTIONS}`];
		const ratio = median(wide.ours.map((x, i) => x.rps / wide.limit[i].rps));
		const p50 = median(runs.c1.ours.map(x => x.p50));
		out.push("");
		out.push(
			`  unindexed filter, ${CONNECTIONS} connections: ratio >= 0.2   ${ratio.toFixed(3)}  ${ratio >= 0.2 ? "MET" : "NOT MET"}`,
		);
		out.push(`  unindexed filter, 1 connection: p50 <= 2 ms      ${p50.toFixed(3)}  ${p50 <= 2 ? "MET" : "NOT MET"}`);
		const loaders = Object.values(runs).flatMap(r => r.limit.filter(x => x.cpu.loader >= 90));
		if (loaders.length)
			out.push(
				`  note: the load generator was at ${loaders.map(x => x.cpu.loader.toFixed(0)).join(", ")}% of a core in the limit's run(s): the limit is understated and the ratio flatters fleet-ctl`,
			);
		const bad = Object.values(runs)
			.flatMap(r => [...r.ours, ...r.limit])
			.filter(x => failures(x) > 0);
		for (const b of bad)
			out.push(
				`!!! INVALID: ${b.url}: non-2xx ${b.non2xx}, errors ${b.errors}, timeouts ${b.timeouts}, body mismatches ${b.mismatches} ${b.firstError ?? ""} ${b.firstMismatch ?? ""}`,
			);
		return { report: out.join("\n"), valid: bad.length === 0 };
	} finally {
		await Promise.all([running.stop(), ...(limit ? [stopProc(limit.proc)] : [])]);
	}
}
