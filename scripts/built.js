#!/usr/bin/env node
/**
 * Build once, run many (issue 18): `npm start`, `npm run repl`, `npm run sim:*` and `npm run bench` build only
 * when something the build reads changed since the last build, instead of recompiling the whole project
 * every time.
 *
 *   node scripts/built.js            build (npm run build) if dist/ is missing or older than a source; else nothing
 *   node scripts/built.js --stamp    record that a build just finished (the end of `npm run build`)
 *   node scripts/built.js --check    say whether a build is needed and why; exit 0 either way, build nothing
 *   node scripts/built.js --clean    remove dist/ (the start of `npm run build`): tsc never deletes the output of a
 *                                    source that moved or went, and moleculer-runner would load a stale
 *                                    dist/services/x.service.js next to its new dist/services/x/x.service.js
 *                                    (two services of one name on the same NeDB file); `--clean <dir>` another
 *
 * "Older" compares modification times with dist/.build-stamp, written at the end of every successful build:
 * any file under the compiled trees, the UI, the tsconfigs, the build script or package-lock.json that is
 * newer means a build.
 */
const fs = require("node:fs");
const path = require("node:path");
const { spawnSync } = require("node:child_process");

const ROOT = path.resolve(__dirname, "..");
const STAMP = path.join(ROOT, "dist", ".build-stamp");
/** What `npm run build` reads (tsconfig.build.json's include, the UI and its build). */
const SOURCES = [
	"moleculer.config.ts",
	"lib",
	"services",
	"mixins",
	"types",
	"test",
	"bench",
	"ui",
	"scripts/build-ui.js",
	"tsconfig.json",
	"tsconfig.build.json",
	"package-lock.json",
];
const SKIP = new Set(["node_modules", "dist", ".stryker-tmp", "reports", "test-artifacts"]);

/** Source files newer than `since` (ms), at most `max` of them. Iterative: no recursion on the tree's depth. */
function newerThan(since, max) {
	const found = [];
	const stack = SOURCES.map(s => path.join(ROOT, s));
	while (stack.length && found.length < max) {
		const p = stack.pop();
		let st;
		try {
			st = fs.statSync(p);
		} catch {
			continue;
		}
		if (st.isDirectory()) {
			for (const name of fs.readdirSync(p)) if (!SKIP.has(name)) stack.push(path.join(p, name));
		} else if (st.mtimeMs > since) found.push(path.relative(ROOT, p));
	}
	return found.sort();
}

/** Why a build is needed, or null when dist/ is current. */
function staleness() {
	let stamp;
	try {
		stamp = fs.statSync(STAMP).mtimeMs;
	} catch {
		return "no build yet (dist/.build-stamp is missing)";
	}
	// Building stops at the first; --check lists up to ten.
	const newer = newerThan(stamp, process.argv[2] === "--check" ? 10 : 1);
	return newer.length ? `${newer.join(", ")} changed since the last build` : null;
}

function main() {
	const arg = process.argv[2];
	if (arg === "--clean") {
		fs.rmSync(path.resolve(ROOT, process.argv[3] ?? "dist"), { recursive: true, force: true });
		return 0;
	}
	if (arg === "--stamp") {
		fs.mkdirSync(path.dirname(STAMP), { recursive: true });
		fs.writeFileSync(STAMP, `${new Date().toISOString()}\n`);
		return 0;
	}
	const why = staleness();
	if (arg === "--check") {
		console.log(why ? `build needed: ${why}` : "up to date");
		return 0;
	}
	if (!why) return 0;
	console.log(`fleet-ctl: building (${why}) ...`);
	const npm = process.platform === "win32" ? "npm.cmd" : "npm";
	return spawnSync(npm, ["run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" }).status ?? 1;
}

process.exit(main());
