/**
 * The cost curve (issue 20): how fleet-ctl's embedded default grows with the fleet. For each host count of
 * BENCH_CURVE (default 1,000, 10,000, 50,000), seeded into NeDB files: start-up time, memory at ready and
 * after load, the hosts file's size, what the start writes (nothing, when nothing changed), and a
 * filtered list's latency with one connection (read caches off), next to the bare server replaying the
 * same bytes. Then a restart on the same files: its time and what it writes. Around the two starts, the start's
 * floor on the same file (bench/start-floor.ts: a bare Node process that reads it and JSON.parse's each line),
 * so that a start-up goal is read against what this machine takes to parse the file at all.
 */
import fs from "node:fs";
import path from "node:path";
import { hostId } from "./hosts";
import { DIST, envInt, fmt, sleep, spawnNode, stopProc } from "./support";
import { capture, load, rssMiB, seed, startBare, startDeployment, type Replayer, type Running } from "./reads";
import type { LoadResult } from "./load";

const COUNTS = (process.env.BENCH_CURVE || "1000,10000,50000").split(",").map(s => Number(s.trim()));
const DURATION = envInt("BENCH_CURVE_DURATION", 5);
/** How long after ready the start's writes are awaited (the membership recomputation, the first sweeps). */
const SETTLE_MS = 3000;

/** Goals of the issue, by host count: one-connection p50 of the filtered list, ms. */
const P50_GOAL: Record<number, number> = { 1000: 1, 10000: 2, 50000: 5 };
const RSS_PER_1K_GOAL = 6;
const RSS_50K_GOAL = 600;
const START_50K_GOAL = 3;

interface Start {
	seconds: number;
	rssReady: number;
	/** Spawn to every host's grain read from the file (lib/storage/nedb-deferred.ts: read after ready, in the background). */
	grainsSeconds: number;
	/** RSS once the grains are read and SETTLE_MS have passed since ready: the memory the fleet holds from then on. */
	rssSettled: number;
	/** Bytes the start wrote to hosts.db: from ready to SETTLE_MS later (NeDB compacts the file as it loads). */
	written: number;
}

/** A run of the start's floor: spawn to exit, and the read and parse alone. */
interface Floor {
	seconds: number;
	parseSeconds: number;
}

interface Point {
	hosts: number;
	/** The start's floor, run before the first start and after the restart (the faster of the two is shown). */
	floor: Floor;
	seedSeconds: number;
	fileMiB: number;
	first: Start;
	restart: Start;
	rssAfterLoad: number;
	ours: LoadResult;
	bare: LoadResult;
}

const size = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : 0);

async function start(
	dataDir: string,
	fixed: string,
	log: (m: string) => void,
): Promise<{ running: Running; start: Start }> {
	const file = path.join(dataDir, "hosts.db");
	// Bytes written from before the start to SETTLE_MS after ready: a file rewritten (a new inode, or a new
	// time) counts whole, else what was appended. Its size alone would miss a rewrite at load.
	const before = fs.statSync(file);
	const t0 = performance.now();
	const running = await startDeployment(
		"inproc",
		"off",
		dataDir,
		`curve-${process.pid}-${Date.now().toString(36)}`,
		null,
		fixed,
	);
	const seconds = (performance.now() - t0) / 1000;
	const pid = running.servers[0].child.pid;
	const rssReady = rssMiB(pid);
	const settleAt = Date.now() + SETTLE_MS;
	const grainsSeconds = await grainsRead(running, t0);
	await sleep(Math.max(0, settleAt - Date.now()));
	const rssSettled = rssMiB(pid);
	const after = fs.statSync(file);
	const written =
		after.ino !== before.ino || after.mtimeMs !== before.mtimeMs
			? after.ino !== before.ino
				? after.size
				: Math.max(after.size - before.size, 1)
			: 0;
	log(
		`  ready in ${seconds.toFixed(1)} s, RSS ${rssReady.toFixed(0)} MiB; every grain read at ${grainsSeconds.toFixed(1)} s, RSS then ${rssSettled.toFixed(0)} MiB; wrote ${written} B (from the start to ${SETTLE_MS / 1000} s after ready; a rewrite counts whole)`,
	);
	return { running, start: { seconds, rssReady, grainsSeconds, rssSettled, written } };
}

/**
 * Seconds from `t0` until the deployment has read every host's grain from its file: its gauge
 * `fleet_store_deferred_pending{collection="hosts"}` at 0. Throws when the gauge never shows (the memory figures
 * would then be taken before the fleet is all in memory).
 */
async function grainsRead(running: Running, t0: number): Promise<number> {
	if (!running.health) throw new Error("the curve needs the in-process deployment's health listener");
	const deadline = Date.now() + 120_000;
	let last = "";
	while (Date.now() < deadline) {
		try {
			const text = await (await fetch(`${running.health}/metrics`)).text();
			const m = /^fleet_store_deferred_pending\{[^}]*collection="hosts"[^}]*\} (\d+)/m.exec(text);
			last = m ? `${m[1]} pending` : "no gauge";
			if (m && m[1] === "0") return (performance.now() - t0) / 1000;
		} catch (err) {
			last = (err as Error).message;
		}
		await sleep(50);
	}
	throw new Error(`the hosts' grains were not all read within 120 s of the start (${last})`);
}

/** The start's floor on `file` (bench/start-floor.ts), timed from spawn to exit. */
async function startFloor(file: string, records: number): Promise<Floor> {
	const t0 = performance.now();
	const proc = spawnNode("start-floor", [path.join(DIST, "bench", "start-floor.js"), file], { ...process.env });
	const code = await new Promise<number | null>(resolve => proc.child.once("exit", resolve));
	const seconds = (performance.now() - t0) / 1000;
	const last = proc.log.join("").trim().split("\n").pop() ?? "";
	let out: { records?: number; parseMs?: number } = {};
	try {
		out = JSON.parse(last) as typeof out;
	} catch {
		// reported below
	}
	if (code !== 0 || out.records !== records || typeof out.parseMs !== "number")
		throw new Error(`the start's floor failed on ${file} (exit ${code}): ${proc.log.join("").slice(-500)}`);
	return { seconds, parseSeconds: out.parseMs / 1000 };
}

export async function benchCurve(dir: string, log: (m: string) => void): Promise<{ report: string; valid: boolean }> {
	const points: Point[] = [];
	let valid = true;
	for (const hosts of COUNTS) {
		if (!Number.isInteger(hosts) || hosts < 1) throw new Error(`BENCH_CURVE: '${hosts}' is not a host count`);
		log(`curve, ${hosts} hosts: seeding ...`);
		const seeded = await seed(path.join(dir, `seed-${hosts}`), hosts);
		const fixed = hostId(Math.min(4242, hosts - 1));
		const dataDir = path.join(dir, `data-${hosts}`);
		fs.cpSync(seeded.dir, dataDir, { recursive: true });
		// Seeding ran in this process: its garbage is collected and its sweeping done before the deployment
		// starts, or the start and RSS measured are partly this process's work on the same two cores.
		(globalThis as { gc?: () => void }).gc?.();
		await sleep(SETTLE_MS);
		const hostsFile = path.join(dataDir, "hosts.db");
		const fileMiB = size(hostsFile) / 2 ** 20;
		const floorBefore = await startFloor(hostsFile, hosts);
		log(
			`  the start's floor (a bare Node process parsing the file): ${floorBefore.seconds.toFixed(1)} s, of which the parse ${floorBefore.parseSeconds.toFixed(1)} s`,
		);
		log(`curve, ${hosts} hosts: starting (caches off) ...`);
		const first = await start(dataDir, fixed, log);
		let bare: Replayer | null = null;
		let ours: LoadResult;
		let b: LoadResult;
		let rssAfterLoad: number;
		try {
			const captured = await capture(first.running.base, "filtered1", dir, `curve-${hosts}`, seeded, fixed);
			bare = await startBare([captured], dir, `curve-${hosts}`);
			ours = await load(
				first.running.base + captured.path,
				captured.bodyFile,
				[first.running.servers[0].child.pid ?? 0],
				undefined,
				1,
				DURATION,
			);
			b = await load(
				bare.base + captured.path,
				captured.bodyFile,
				bare.procs.map(p => p.child.pid ?? 0),
				undefined,
				1,
				DURATION,
			);
			rssAfterLoad = rssMiB(first.running.servers[0].child.pid);
			log(
				`  filtered list, 1 connection: p50 ${ours.p50} ms (bare ${b.p50} ms), RSS after ${rssAfterLoad.toFixed(0)} MiB`,
			);
		} finally {
			await Promise.all([first.running.stop(), ...(bare?.procs ?? []).map(p => stopProc(p))]);
		}
		log(`curve, ${hosts} hosts: restarting on the same files ...`);
		const again = await start(dataDir, fixed, log);
		await again.running.stop();
		const floorAfter = await startFloor(hostsFile, hosts);
		log(`  the start's floor again: ${floorAfter.seconds.toFixed(1)} s`);
		const floor = floorAfter.seconds < floorBefore.seconds ? floorAfter : floorBefore;
		for (const r of [ours, b]) if (r.non2xx + r.errors + r.timeouts + r.mismatches > 0) valid = false;
		points.push({
			hosts,
			floor,
			seedSeconds: seeded.seconds,
			fileMiB,
			first: first.start,
			restart: again.start,
			rssAfterLoad,
			ours,
			bare: b,
		});
		fs.rmSync(seeded.dir, { recursive: true, force: true });
	}

	// RSS per 1k hosts added since the smaller fleet: the process's own ~140 MiB (Node, the services) left out. Taken once
	// every grain is read (at ready they are still in the file: RSS at ready is lower than what the fleet holds after).
	const marginal = (i: number) =>
		i === 0
			? null
			: ((points[i].first.rssSettled - points[i - 1].first.rssSettled) / (points[i].hosts - points[i - 1].hosts)) *
				1000;
	const ms = (v: number) => v.toFixed(2);
	const rows = points.map((p, i) => [
		fmt(p.hosts),
		p.fileMiB.toFixed(1),
		p.first.seconds.toFixed(1),
		p.restart.seconds.toFixed(1),
		`${p.floor.seconds.toFixed(1)} / ${p.floor.parseSeconds.toFixed(1)}`,
		`${p.first.grainsSeconds.toFixed(1)} / ${p.restart.grainsSeconds.toFixed(1)}`,
		p.first.rssReady.toFixed(0),
		p.first.rssSettled.toFixed(0),
		((p.first.rssSettled / p.hosts) * 1000).toFixed(1),
		marginal(i)?.toFixed(1) ?? "–",
		p.rssAfterLoad.toFixed(0),
		`${fmt(p.first.written)} / ${fmt(p.restart.written)}`,
		`${ms(p.ours.p50)} / ${ms(p.ours.p99)}`,
		`${ms(p.bare.p50)} / ${ms(p.bare.p99)}`,
		`${p.ours.non2xx + p.ours.errors + p.ours.timeouts + p.ours.mismatches} / ${p.bare.non2xx + p.bare.errors + p.bare.timeouts + p.bare.mismatches}`,
	]);
	const header = [
		"hosts",
		"file MiB",
		"start s",
		"restart s",
		"floor s / parse s",
		"grains read s",
		"RSS ready MiB",
		"RSS grains read",
		"MiB per 1k",
		"MiB per 1k added",
		"RSS after load",
		"B written at start / restart",
		"filtered p50 / p99 ms",
		"bare p50 / p99 ms",
		"failures",
	];
	const widths = header.map((h, i) => Math.max(h.length, ...rows.map(r => r[i].length)));
	const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join("  ");
	const out = [line(header), widths.map(w => "-".repeat(w)).join("  "), ...rows.map(line)];
	out.push(
		"  floor: a bare Node process reading the same hosts file and JSON.parse'ing each line (bench/start-floor.ts), spawn to exit / the parse alone; the faster of a run before the first start and one after the restart.",
	);
	out.push(
		"  start: spawn to the first answers (item and list); grains read: spawn to every host's grain read from the file after ready, first start / restart (docs/storage.md); memory per 1k from RSS once the grains are read.",
		"",
	);
	out.push("goals:");
	for (const [i, p] of points.entries()) {
		const goal = P50_GOAL[p.hosts];
		if (goal !== undefined)
			out.push(
				`  ${fmt(p.hosts)} hosts: filtered list p50 <= ${goal} ms: ${ms(p.ours.p50)} ${p.ours.p50 <= goal ? "MET" : "NOT MET"}`,
			);
		// Per 1k hosts added (the smallest fleet has nothing to compare with: its figure is mostly the process itself).
		const perK = marginal(i);
		if (perK !== null)
			out.push(
				`  ${fmt(points[i - 1].hosts)} -> ${fmt(p.hosts)} hosts: RSS (grains read) <= ${RSS_PER_1K_GOAL} MiB per 1k hosts added: ${perK.toFixed(2)} ${perK <= RSS_PER_1K_GOAL ? "MET" : "NOT MET"}`,
			);
		out.push(
			`  ${fmt(p.hosts)} hosts: a restart with nothing changed writes nothing: ${fmt(p.restart.written)} B ${p.restart.written === 0 ? "MET" : "NOT MET"}`,
		);
		if (p.hosts === 50_000) {
			const peak = Math.max(p.first.rssReady, p.first.rssSettled, p.rssAfterLoad);
			out.push(
				`  50,000 hosts: RSS < ${RSS_50K_GOAL} MiB: ${peak.toFixed(0)} (the largest of ready, grains read, after load) ${peak < RSS_50K_GOAL ? "MET" : "NOT MET"}`,
			);
			const floorNote = `(the start's floor on this machine: ${p.floor.seconds.toFixed(1)} s for a bare Node process to parse the file, ${p.floor.parseSeconds.toFixed(1)} s of it the parse)`;
			out.push(
				`  50,000 hosts: start < ${START_50K_GOAL} s: ${p.first.seconds.toFixed(1)} ${p.first.seconds < START_50K_GOAL ? "MET" : "NOT MET"} ${floorNote}`,
			);
		}
	}
	if (!valid) out.push("!!! INVALID: some curve requests failed; its latencies measure errors.");
	return { report: out.join("\n"), valid };
}
