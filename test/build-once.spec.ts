/**
 * scripts/built.js (build once, run many): `npm start`, `repl`, `sim:*` and `bench` build only when a source
 * changed since the last build. Checked with `--check`, which builds nothing; a source's modification time is
 * moved forward and put back.
 */
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";

const ROOT = path.resolve(__dirname, "..");
const STAMP = path.join(ROOT, "dist", ".build-stamp");
const check = () => spawnSync(process.execPath, [path.join(ROOT, "scripts/built.js"), "--check"], { cwd: ROOT, encoding: "utf8" }).stdout.trim();
const itBuilt = fs.existsSync(STAMP) ? it : it.skip;

describe("build once, run many", () => {
	itBuilt(`says a build is due when a source is newer than the last build, and not otherwise${fs.existsSync(STAMP) ? "" : " (skipped: no build yet: npm test builds first)"}`, () => {
		const source = path.join(ROOT, "lib/config.ts");
		const { atime, mtime } = fs.statSync(source);
		const stamp = fs.statSync(STAMP).mtime;
		try {
			// As the build left it: the stamp newer than every source.
			fs.utimesSync(source, atime, new Date(stamp.getTime() - 60_000));
			const before = check();
			fs.utimesSync(source, atime, new Date(stamp.getTime() + 60_000));
			expect({ before, after: check() }).toEqual({ before: expect.not.stringContaining("lib/config.ts"), after: expect.stringMatching(/^build needed: (.+, )?lib\/config\.ts(, .+)? changed since the last build$/) });
		} finally {
			fs.utimesSync(source, atime, mtime);
		}
	});

	it("every script that runs the compiled code builds through it, and the build stamps dist/", () => {
		const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts as Record<string, string>;
		for (const name of ["prestart", "pretest", "repl", "dev", "bench", "sim:salt", "sim:pritunl", "sim:resolver"]) {
			expect({ name, script: scripts[name] }).toEqual({ name, script: expect.stringMatching(/^node scripts\/built\.js($| && )/) });
		}
		expect(scripts.build).toMatch(/ && node scripts\/built\.js --stamp$/);
		expect(Object.values(scripts).filter(s => /npm run build &&/.test(s))).toEqual([]);
	});
});
