/**
 * Reading state returns (lib/fleet/state-results.ts) and judging a host's conformity from its `test=True` return
 * (lib/fleet/conformity.ts), on returns shaped as Salt 3006 sends them (../shared/reference/salt-3006/state_fail.json
 * has the real one this test's failing return follows); which jobs are checks of the declared state (docs/conformity.md),
 * and which transitions are alerts.
 */
import fs from "node:fs";
import path from "node:path";
import { readStates, returnValue } from "../../lib/fleet/state-results";
import { isHighstateTest, isStateTest, judge, transitionAlert } from "../../lib/fleet/conformity";
import { referenceDir } from "../support/reference";

/** The real capture, where .ci/run finds the shared tree (SHARED_DIR); without it that test is reported skipped. */
const CAPTURES = referenceDir("salt-3006");
const REFERENCE = path.join(CAPTURES ?? "", "state_fail.json");
const withCapture = CAPTURES ? it : it.skip;

const state = (
	id: string,
	sls: string,
	result: boolean | null,
	changes: Record<string, unknown> = {},
	run = 0,
	fn = "pkg_|-%_|-%_|-installed",
) => ({
	[fn.replace(/%/g, id)]: {
		name: id,
		changes,
		result,
		comment: `${id} says`,
		__sls__: sls,
		__run_num__: run,
		__id__: id,
		start_time: "07:34:20.691568",
		duration: 7.4,
	},
});

describe("state results", () => {
	withCapture(
		`reads every state of a real failing return, in run order${CAPTURES ? "" : " (skipped: the salt-3006 captures are not found; set SHARED_DIR)"}`,
		() => {
			const ret = JSON.parse(fs.readFileSync(REFERENCE, "utf8")).return[0]["db-01"].ret;
			const reading = readStates(ret);
			if (!("states" in reading)) throw new Error(`not read: ${reading.error}`);
			const expected = Object.entries(ret as Record<string, { __id__: string; __run_num__: number; result: boolean }>)
				.sort(([, a], [, b]) => a.__run_num__ - b.__run_num__)
				.map(([key, v]) => [v.__id__, `${key.split("_|-")[0]}.${key.split("_|-")[3]}`, v.result]);
			expect(reading.states.map(s => [s.state_id, s.fun, s.result])).toEqual(expected);
			expect(reading.states.map(s => s.fun)).toContain("file.exists");
			expect(reading.states[0]).toMatchObject({
				state_id: "ok-step",
				sls: "patches.broken-pkg",
				name: "echo before-failure",
				result: true,
			});
		},
	);

	it("says why a return has no states to read", () => {
		expect(readStates(["No matching sls found for 'x' in env 'base'"])).toEqual({
			error: "No matching sls found for 'x' in env 'base'",
		});
		expect(readStates('{"cut": ')).toEqual({ error: '{"cut": ' });
		expect(readStates({ "pkg_|-a_|-a_|-installed": "not a result" })).toEqual({
			error: "state 'pkg_|-a_|-a_|-installed' is not a state result",
		});
		expect(returnValue('{"a":1}')).toEqual({ a: 1 });
		expect(returnValue("plain")).toBe("plain");
	});
});

describe("conformity of a host", () => {
	it("is conformant when every state is already as declared, drifted when one would change, failing when one would fail", () => {
		expect(judge({ ...state("vim", "common", true), ...state("ntp", "common", true, {}, 1) }, true)).toMatchObject({
			state: "conformant",
			states: [],
			drifted: 0,
			failing: 0,
		});
		const drifted = judge(
			{ ...state("vim", "common", true), ...state("curl", "common", null, { curl: { old: "1", new: "2" } }, 1) },
			true,
		);
		expect(drifted).toMatchObject({ state: "drifted", drifted: 1, failing: 0 });
		expect(drifted.states).toEqual([
			{
				state_id: "curl",
				sls: "common",
				fun: "pkg.installed",
				name: "curl",
				result: null,
				predicted_changes: { curl: { old: "1", new: "2" } },
				comment: "curl says",
			},
		]);
		// A state already right but reporting changes (Salt does, for some modules) counts as drifted too.
		expect(judge(state("motd", "common", true, { diff: "+x" }), true).state).toBe("drifted");
		expect(judge({ ...state("curl", "common", null), ...state("svc", "web", false, {}, 1) }, true)).toMatchObject({
			state: "failing",
			drifted: 1,
			failing: 1,
		});
	});

	it("is failing when its states cannot be rendered, unknown when it did not answer", () => {
		const broken = judge(["Rendering SLS 'base:web' failed: mapping values are not allowed here"], true);
		expect(broken).toMatchObject({ state: "failing", drifted: 0, failing: 1, suppressed: 0 });
		expect(broken.states).toEqual([
			{
				state_id: "render",
				sls: "",
				fun: "",
				name: "",
				result: false,
				predicted_changes: {},
				comment: "Rendering SLS 'base:web' failed: mapping values are not allowed here",
			},
		]);
		// Another reason is another judgement (the host's record is written again).
		expect(judge(["Rendering SLS 'base:web' failed: could not find template"], true).digest).not.toBe(broken.digest);
		expect(judge(undefined, false)).toMatchObject({
			state: "unknown",
			states: [],
			drifted: 0,
			failing: 0,
			suppressed: 0,
		});
		// Silence says nothing of what the host returned.
		expect(judge(state("curl", "common", null), false)).toMatchObject({ state: "unknown", states: [] });
	});

	it("leaves out the states a suppression rule names (both of its fields must match)", () => {
		const ret = {
			...state("restart", "web", null, {}, 0, "cmd_|-%_|-%_|-run"),
			...state("curl", "common", null, {}, 1),
		};
		expect(judge(ret, true, [{ sls: "web", state_id: "restart" }])).toMatchObject({
			state: "drifted",
			drifted: 1,
			suppressed: 1,
			states: [{ state_id: "curl" }],
		});
		expect(judge(ret, true, [{ sls: "web" }, { state_id: "curl" }])).toMatchObject({
			state: "conformant",
			suppressed: 2,
		});
		expect(judge(ret, true, [{ sls: "common", state_id: "restart" }]).suppressed).toBe(0);
		// An empty rule suppresses nothing.
		expect(judge(ret, true, [{}]).suppressed).toBe(0);
	});

	it("keeps its digest while the same states differ the same way, whatever Salt's comments say, and changes it when they move", () => {
		const a = judge(state("curl", "common", null, { curl: { new: "2" } }), true);
		const reworded = judge(
			{
				"pkg_|-curl_|-curl_|-installed": {
					...Object.values(state("curl", "common", null, { curl: { new: "2" } }))[0],
					comment: "other words, 12:00:01",
				},
			},
			true,
		);
		expect(reworded.digest).toBe(a.digest);
		expect(judge(state("curl", "common", null, { curl: { new: "3" } }), true).digest).not.toBe(a.digest);
		expect(judge(state("curl", "common", true), true).digest).not.toBe(a.digest);
	});
});

describe("which jobs are checks of the declared state", () => {
	const TEST = { __kwarg__: true, test: true };

	it("is a check: state.apply without mods, or state.highstate, whose effective test is exactly true", () => {
		expect(isHighstateTest("state.apply", [TEST])).toBe(true);
		expect(isHighstateTest("state.highstate", [TEST])).toBe(true);
		// test=True as Salt's `key=value` string (read as YAML), and empty mods.
		expect(isHighstateTest("state.apply", ["test=True"])).toBe(true);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: true, mods: "" }])).toBe(true);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: true, mods: [] }])).toBe(true);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: true, mods: null }])).toBe(true);
	});

	it("is no check: a real run, named sls, or another function", () => {
		expect(isHighstateTest("state.apply", [])).toBe(false);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: false }])).toBe(false);
		// The kwarg dict is read after the `key=value` strings: a real run.
		expect(isHighstateTest("state.apply", ["test=True", { __kwarg__: true, test: false }])).toBe(false);
		expect(isHighstateTest("state.apply", ["common", TEST])).toBe(false);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: true, mods: "common" }])).toBe(false);
		expect(isHighstateTest("state.apply", [{ __kwarg__: true, test: true, mods: ["common"] }])).toBe(false);
		// state.highstate's first positional argument is `test`: given with the keyword, Salt refuses the call (an
		// error for an answer, not a host's states) rather than running a check.
		expect(isHighstateTest("state.highstate", [true, TEST])).toBe(false);
		expect(isHighstateTest("state.sls", ["common", TEST])).toBe(false);
		expect(isHighstateTest("state.sls_id", ["base_packages", "common", TEST])).toBe(false);
		// Functions with nothing positional: one state, or no state at all.
		expect(isHighstateTest("state.single", [{ __kwarg__: true, fun: "pkg.installed", name: "vim", test: true }])).toBe(
			false,
		);
		expect(isHighstateTest("test.ping", [TEST])).toBe(false);
	});

	it("is a dry run of a state function whatever its mods (a scheduled check's batch), never another function's test=True", () => {
		expect(isStateTest("state.apply", ["common", TEST])).toBe(true);
		expect(isStateTest("state.sls", ["common", TEST])).toBe(true);
		expect(isStateTest("state.highstate", [TEST])).toBe(true);
		expect(isStateTest("state.apply", ["common"])).toBe(false);
		expect(isStateTest("state.sls", ["common", { __kwarg__: true, test: "True" }])).toBe(false);
		// state.sls_id is not a dry-run function, nor is cmd.run, nor a function fleet-ctl does not know.
		expect(isStateTest("state.sls_id", ["base_packages", "common", TEST])).toBe(false);
		expect(isStateTest("cmd.run", ["id", TEST])).toBe(false);
		expect(isStateTest("custom.apply", [TEST])).toBe(false);
	});
});

describe("which transitions are alerts", () => {
	it("alerts on the way into drift or failure, and on the way back to conformant, nothing else", () => {
		const cases: Array<
			[Parameters<typeof transitionAlert>[0], Parameters<typeof transitionAlert>[1], ReturnType<typeof transitionAlert>]
		> = [
			[null, "drifted", "host.drifted"],
			[null, "failing", "host.drifted"],
			["conformant", "drifted", "host.drifted"],
			["conformant", "failing", "host.drifted"],
			["unknown", "failing", "host.drifted"],
			["drifted", "conformant", "host.conformant"],
			["failing", "conformant", "host.conformant"],
			// Still bad, still good, or silence: no alert.
			["drifted", "failing", null],
			["failing", "drifted", null],
			["drifted", "drifted", null],
			[null, "conformant", null],
			["unknown", "conformant", null],
			["conformant", "conformant", null],
			["drifted", "unknown", null],
			[null, "unknown", null],
		];
		expect(cases.map(([from, to]) => [from, to, transitionAlert(from, to)])).toEqual(cases);
	});
});
