/**
 * Summarizes a V8 .cpuprofile (node --cpu-prof; `BENCH_PROFILE=dir npm run bench` writes one per server
 * process): self time per function, per module, and inclusive time of the heaviest frames.
 *
 *   node dist/bench/profile-top.js <file.cpuprofile> [--from=ms] [--to=ms] [--top=30]
 *
 * --from/--to bound the window in ms since the profile started (≈ since the process was spawned).
 * Without them, and with a timeline.json beside the profile (written by bench/run.ts), one summary is
 * printed per measured window of that process.
 */
import fs from "node:fs";
import path from "node:path";

interface CallFrame {
	functionName: string;
	url: string;
	lineNumber: number;
	columnNumber: number;
}
interface ProfileNode {
	id: number;
	callFrame: CallFrame;
	children?: number[];
}
interface Profile {
	nodes: ProfileNode[];
	startTime: number;
	endTime: number;
	samples: number[];
	timeDeltas: number[];
}

const ROOT = path.resolve(__dirname, "../..");

function moduleOf(cf: CallFrame): string {
	const url = cf.url;
	if (!url) return cf.functionName.startsWith("(") ? cf.functionName : "(native/builtin)";
	if (url.startsWith("node:")) {
		const parts = url.slice(5).split("/");
		return "node:" + (parts[0] === "internal" && parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts.join("/"));
	}
	const file = url.startsWith("file://") ? decodeURIComponent(url.slice(7)) : url;
	const nm = file.lastIndexOf("/node_modules/");
	if (nm >= 0) {
		const rest = file.slice(nm + 14).split("/");
		return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
	}
	if (file.startsWith(ROOT + "/")) return "fleet-ctl:" + path.relative(ROOT, file).replace(/^dist\//, "");
	return file;
}

/** "function package/file:line", e.g. "deepCopy @seald-io/nedb/lib/model.js:112". */
function frameName(cf: CallFrame): string {
	const fn = cf.functionName || "(anonymous)";
	if (!cf.url) return `${fn} ${moduleOf(cf)}`;
	const file = cf.url.startsWith("file://") ? decodeURIComponent(cf.url.slice(7)) : cf.url;
	const nm = file.lastIndexOf("/node_modules/");
	const where = nm >= 0 ? file.slice(nm + 14) : file.startsWith(ROOT + "/") ? path.relative(ROOT, file) : file;
	return `${fn} ${where}:${cf.lineNumber + 1}`;
}

function summarize(profile: Profile, fromMs: number, toMs: number, top: number, title: string): string {
	const byId = new Map<number, ProfileNode>();
	const parent = new Map<number, number>();
	for (const n of profile.nodes) {
		byId.set(n.id, n);
		for (const c of n.children ?? []) parent.set(c, n.id);
	}
	const self = new Map<string, number>();
	const modules = new Map<string, number>();
	const inclusive = new Map<string, number>();
	let total = 0;
	let idle = 0;
	let t = profile.startTime;
	for (let i = 0; i < profile.samples.length; i++) {
		t += profile.timeDeltas[i];
		const rel = (t - profile.startTime) / 1000;
		if (rel < fromMs || rel > toMs) continue;
		// the time a sample stands for: the gap to the next one (V8 attributes it so)
		const dt = (profile.timeDeltas[i + 1] ?? profile.timeDeltas[i]) / 1000;
		const node = byId.get(profile.samples[i]);
		if (!node) continue;
		const cf = node.callFrame;
		if (cf.functionName === "(idle)") {
			idle += dt;
			continue;
		}
		total += dt;
		const name = frameName(cf);
		self.set(name, (self.get(name) ?? 0) + dt);
		const mod = moduleOf(cf);
		modules.set(mod, (modules.get(mod) ?? 0) + dt);
		const seen = new Set<string>();
		for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
			const n = byId.get(id);
			if (!n) break;
			const key = frameName(n.callFrame);
			if (seen.has(key) || n.callFrame.functionName === "(root)") continue;
			seen.add(key);
			inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
		}
	}
	const pct = (v: number) => `${((100 * v) / total).toFixed(1).padStart(5)}%`;
	const ms = (v: number) => `${v.toFixed(0).padStart(7)} ms`;
	const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
	const out: string[] = [];
	out.push(
		`== ${title}: window ${fromMs.toFixed(0)}..${Number.isFinite(toMs) ? toMs.toFixed(0) : "end"} ms, busy ${total.toFixed(0)} ms, idle ${idle.toFixed(0)} ms (busy ${((100 * total) / (total + idle)).toFixed(1)}%)`,
	);
	out.push("-- self time by module");
	for (const [k, v] of sorted(modules).slice(0, top)) out.push(`${ms(v)} ${pct(v)}  ${k}`);
	out.push("-- self time by function");
	for (const [k, v] of sorted(self).slice(0, top)) out.push(`${ms(v)} ${pct(v)}  ${k}`);
	out.push("-- inclusive time by function (time with the function on the stack)");
	for (const [k, v] of sorted(inclusive).slice(0, top)) out.push(`${ms(v)} ${pct(v)}  ${k}`);
	return out.join("\n");
}

function main() {
	const args = process.argv.slice(2);
	const file = args.find(a => !a.startsWith("--"));
	if (!file) {
		process.stderr.write("usage: node dist/bench/profile-top.js <file.cpuprofile> [--from=ms] [--to=ms] [--top=30]\n");
		process.exit(2);
	}
	const opt = (name: string) => args.find(a => a.startsWith(`--${name}=`))?.split("=")[1];
	const top = Number(opt("top") ?? 30);
	const profile = JSON.parse(fs.readFileSync(file, "utf8")) as Profile;
	const from = opt("from");
	const to = opt("to");
	if (from !== undefined || to !== undefined) {
		process.stdout.write(
			summarize(profile, Number(from ?? 0), to !== undefined ? Number(to) : Infinity, top, path.basename(file)) + "\n",
		);
		return;
	}
	const timelineFile = path.join(path.dirname(file), "timeline.json");
	const processName = path.basename(file).replace(/\.cpuprofile$/, "");
	const windows = fs.existsSync(timelineFile)
		? (
				JSON.parse(fs.readFileSync(timelineFile, "utf8")) as Array<{
					process: string;
					label: string;
					fromMs: number;
					toMs: number;
				}>
			).filter(w => w.process === processName)
		: [];
	if (windows.length === 0) {
		process.stdout.write(summarize(profile, 0, Infinity, top, `${path.basename(file)} (whole profile)`) + "\n");
		return;
	}
	for (const w of windows)
		process.stdout.write(summarize(profile, w.fromMs, w.toMs, top, `${processName} ${w.label}`) + "\n\n");
}

main();
