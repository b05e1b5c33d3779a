#!/usr/bin/env node
/**
 * `npm run mutate`: Stryker over the modules named in stryker.config.mjs (MODULES), printing the score per
 * module (the clear-text reporter's per-file table) and then each module against MIN_SCORE.
 *
 *   npm run mutate                      every module
 *   npm run mutate -- --since [<ref>]   only the modules changed against <ref> (default: origin/main, else main):
 *                                       committed since the merge base, staged, unstaged or untracked
 *   npm run mutate -- <stryker options> passed on (e.g. --incremental, --mutate lib/http/auth.ts)
 *
 * Exits non-zero when Stryker fails or a module mutated scores below MIN_SCORE.
 */
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const ROOT = path.resolve(__dirname, "..");
const REPORT = path.join(ROOT, "reports/mutation/mutation.json");

function git(...args) {
	const r = spawnSync("git", args, { cwd: ROOT, encoding: "utf8" });
	return r.status === 0 ? r.stdout.trim() : null;
}

function baseRef(asked) {
	for (const ref of asked ? [asked] : ["origin/main", "main"])
		if (git("rev-parse", "--verify", "--quiet", `${ref}^{commit}`) !== null) return ref;
	throw new Error(
		asked
			? `--since: '${asked}' is not a commit`
			: "--since: neither origin/main nor main exists; name a ref: --since <ref>",
	);
}

/** Files changed against `ref`: since the merge base (committed), plus what is staged, unstaged or untracked. */
function changedSince(ref) {
	const base = git("merge-base", "HEAD", ref) ?? ref;
	const lists = [git("diff", "--name-only", base), git("ls-files", "--others", "--exclude-standard")];
	return new Set(
		lists
			.filter(Boolean)
			.flatMap(l => l.split("\n"))
			.filter(Boolean),
	);
}

function scores(modules) {
	const report = JSON.parse(fs.readFileSync(REPORT, "utf8"));
	return modules.map(file => {
		const mutants = report.files[file]?.mutants ?? [];
		const count = status => mutants.filter(m => m.status === status).length;
		const detected = count("Killed") + count("Timeout");
		const valid = detected + count("Survived") + count("NoCoverage");
		return { file, detected, valid, score: valid ? (100 * detected) / valid : NaN };
	});
}

async function main() {
	const { MODULES, MIN_SCORE } = await import(path.join(ROOT, "stryker.config.mjs"));
	const args = process.argv.slice(2);
	let modules = MODULES;
	const since = args.indexOf("--since");
	if (since >= 0) {
		const value = args[since + 1] && !args[since + 1].startsWith("-") ? args[since + 1] : undefined;
		args.splice(since, value ? 2 : 1);
		const ref = baseRef(value);
		const changed = changedSince(ref);
		modules = MODULES.filter(m => changed.has(m));
		if (!modules.length) {
			console.log(`mutate: none of the ${MODULES.length} modules changed since ${ref}; nothing to do.`);
			return 0;
		}
		console.log(`mutate: ${modules.length} module(s) changed since ${ref}: ${modules.join(", ")}`);
	}
	const mutateGiven = args.some(a => a === "--mutate" || a === "-m" || a.startsWith("--mutate="));
	const strykerArgs = ["run", ...(mutateGiven ? [] : ["--mutate", modules.join(",")]), ...args];
	const stryker = path.join(ROOT, "node_modules/@stryker-mutator/core/bin/stryker.js");
	const started = Date.now();
	const run = spawnSync(process.execPath, [stryker, ...strykerArgs], { cwd: ROOT, stdio: "inherit" });
	if (run.status !== 0) return run.status ?? 1;
	if (args.includes("--dryRunOnly")) return 0;
	const measured = scores(mutateGiven ? Object.keys(JSON.parse(fs.readFileSync(REPORT, "utf8")).files) : modules);
	console.log(
		`\nScore per module (killed or timed out / mutants that compile; needs ${MIN_SCORE}%), ${Math.round((Date.now() - started) / 1000)} s:`,
	);
	for (const { file, detected, valid, score } of measured) {
		console.log(
			`  ${score >= MIN_SCORE ? "ok  " : "LOW "} ${score.toFixed(2).padStart(6)}%  ${String(detected).padStart(4)}/${String(valid).padEnd(4)}  ${file}`,
		);
	}
	return measured.every(m => m.score >= MIN_SCORE) ? 0 : 2;
}

main().then(
	code => process.exit(code),
	err => {
		console.error(`mutate: ${err.message}`);
		process.exit(1);
	},
);
