/**
 * test/support/leak-environment.ts: the suites' environment fails a suite that leaves timers running, names each
 * timer and where it was set, and passes one whose timers are cleared, unref'd or about to fire. Each fixture runs
 * in a jest of its own, as the suites do.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";

const ROOT = path.resolve(__dirname, "../..");
const FIXTURES = path.join(__dirname, "leak-fixtures");

function runFixture(name: string): { status: number | null; output: string } {
	const jest = path.join(ROOT, "node_modules", "jest", "bin", "jest.js");
	const res = spawnSync(
		process.execPath,
		[
			jest,
			"--ci",
			"--roots",
			FIXTURES,
			"--testMatch",
			"**/*.fixture.ts",
			"--runTestsByPath",
			path.join(FIXTURES, name),
		],
		{
			cwd: ROOT,
			encoding: "utf8",
			timeout: 120_000,
			env: { ...process.env, FORCE_COLOR: "0" },
		},
	);
	return { status: res.status, output: `${res.stdout}${res.stderr}` };
}

describe("the leak-checking environment", () => {
	it("fails a suite that leaves an interval and a far timer running, and says where each was set", () => {
		const { status, output } = runFixture("leaky.fixture.ts");
		expect(status).toBe(1);
		expect(output).toContain("the suite left 2 timer(s) running after its last hook");
		expect(output).toMatch(/setInterval, repeating, set\n\s+at .*leaky\.fixture\.ts:3/);
		expect(output).toMatch(/setTimeout, due in \d+ ms, set\n\s+at .*leaky\.fixture\.ts:4/);
	});

	it("passes a suite whose timers are cleared, unref'd or about to fire", () => {
		const { status, output } = runFixture("tidy.fixture.ts");
		expect(output).toContain("1 passed");
		expect(output).not.toContain("timer(s) running");
		expect(status).toBe(0);
	});
});
