/**
 * scripts/built.js (build once, run many): `npm start`, `repl`, `sim:*` and `bench` build only when a source
 * changed since the last build. Checked with `--check`, which builds nothing; a source's modification time is
 * moved forward and put back.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";

const ROOT = path.resolve(__dirname, "..");
const STAMP = path.join(ROOT, "dist", ".build-stamp");
const check = () =>
	spawnSync(process.execPath, [path.join(ROOT, "scripts/built.js"), "--check"], {
		cwd: ROOT,
		encoding: "utf8",
	}).stdout.trim();
const itBuilt = fs.existsSync(STAMP) ? it : it.skip;

describe("build once, run many", () => {
	itBuilt(
		`says a build is due when a source is newer than the last build, and not otherwise${fs.existsSync(STAMP) ? "" : " (skipped: no build yet: npm test builds first)"}`,
		() => {
			const source = path.join(ROOT, "lib/config.ts");
			const { atime, mtime } = fs.statSync(source);
			const stamp = fs.statSync(STAMP).mtime;
			try {
				// As the build left it: the stamp newer than every source.
				fs.utimesSync(source, atime, new Date(stamp.getTime() - 60_000));
				const before = check();
				fs.utimesSync(source, atime, new Date(stamp.getTime() + 60_000));
				expect({ before, after: check() }).toEqual({
					before: expect.not.stringContaining("lib/config.ts"),
					after: expect.stringMatching(/^build needed: (.+, )?lib\/config\.ts(, .+)? changed since the last build$/),
				});
			} finally {
				fs.utimesSync(source, atime, mtime);
			}
		},
	);

	it("every script that runs the compiled code builds through it, and the build stamps dist/", () => {
		const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).scripts as Record<
			string,
			string
		>;
		for (const name of ["prestart", "pretest", "repl", "dev", "bench", "sim:salt", "sim:pritunl", "sim:resolver"]) {
			expect({ name, script: scripts[name] }).toEqual({
				name,
				script: expect.stringMatching(/^node scripts\/built\.js($| && )/),
			});
		}
		expect(scripts.build).toMatch(/ && node scripts\/built\.js --stamp$/);
		// Outputs of moved or removed sources go: the build starts from an empty dist/.
		expect(scripts.build).toMatch(/^node scripts\/built\.js --clean && /);
		expect(Object.values(scripts).filter(s => /npm run build &&/.test(s))).toEqual([]);
	});

	it("--clean removes the compiled tree, stale service files included (a moved service is not loaded twice)", () => {
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-ctl-clean-"));
		const stale = path.join(dir, "services", "hosts.service.js");
		fs.mkdirSync(path.dirname(stale), { recursive: true });
		fs.writeFileSync(stale, "// the output of a source that moved to services/hosts/\n");
		const res = spawnSync(process.execPath, [path.join(ROOT, "scripts/built.js"), "--clean", dir], {
			cwd: ROOT,
			encoding: "utf8",
		});
		expect({ status: res.status, left: fs.existsSync(dir) }).toEqual({ status: 0, left: false });
	});
});
