/**
 * Reading state returns (lib/fleet/state-results.ts) and judging a host's conformity from its `test=True` return
 * (lib/fleet/conformity.ts), on returns shaped as Salt 3006 sends them (../shared/reference/salt-3006/state_fail.json
 * has the real one this test's failing return follows).
 */
import fs from "node:fs";
import path from "node:path";
import { readStates, returnValue } from "../../lib/fleet/state-results";
import { judge } from "../../lib/fleet/conformity";
import { referenceDir } from "../support/reference";

/** The real capture, where .ci/run finds the shared tree (SHARED_DIR); without it that test is reported skipped. */
const CAPTURES = referenceDir("salt-3006");
const REFERENCE = path.join(CAPTURES ?? "", "state_fail.json");
const withCapture = CAPTURES ? it : it.skip;

const state = (id: string, sls: string, result: boolean | null, changes: Record<string, unknown> = {}, run = 0, fn = "pkg_|-%_|-%_|-installed") => ({
	[fn.replace(/%/g, id)]: { name: id, changes, result, comment: `${id} says`, __sls__: sls, __run_num__: run, __id__: id, start_time: "07:34:20.691568", duration: 7.4 },
});

describe("state results", () => {
	withCapture(`reads every state of a real failing return, in run order${CAPTURES ? "" : " (skipped: the salt-3006 captures are not found; set SHARED_DIR)"}`, () => {
		const ret = JSON.parse(fs.readFileSync(REFERENCE, "utf8")).return[0]["db-01"].ret;
		const reading = readStates(ret);
		if (!("states" in reading)) throw new Error(`not read: ${reading.error}`);
		const expected = Object.entries(ret as Record<string, { __id__: string; __run_num__: number; result: boolean }>)
			.sort(([, a], [, b]) => a.__run_num__ - b.__run_num__)
			.map(([key, v]) => [v.__id__, `${key.split("_|-")[0]}.${key.split("_|-")[3]}`, v.result]);
		expect(reading.states.map(s => [s.state_id, s.fun, s.result])).toEqual(expected);
		expect(reading.states.map(s => s.fun)).toContain("file.exists");
		expect(reading.states[0]).toMatchObject({ state_id: "ok-step", sls: "patches.broken-pkg", name: "echo before-failure", result: true });
	});

	it("says why a return has no states to read", () => {
		expect(readStates(["No matching sls found for 'x' in env 'base'"])).toEqual({ error: "No matching sls found for 'x' in env 'base'" });
		expect(readStates('{"cut": ')).toEqual({ error: '{"cut": ' });
		expect(readStates({ "pkg_|-a_|-a_|-installed": "not a result" })).toEqual({ error: "state 'pkg_|-a_|-a_|-installed' is not a state result" });
		expect(returnValue('{"a":1}')).toEqual({ a: 1 });
		expect(returnValue("plain")).toBe("plain");
	});
});

describe("conformity of a host", () => {
	it("is conformant when every state is already as declared, drifted when one would change, failing when one would fail", () => {
		expect(judge({ ...state("vim", "common", true), ...state("ntp", "common", true, {}, 1) }, true)).toMatchObject({ state: "conformant", states: [], drifted: 0, failing: 0 });
		const drifted = judge({ ...state("vim", "common", true), ...state("curl", "common", null, { curl: { old: "1", new: "2" } }, 1) }, true);
		expect(drifted).toMatchObject({ state: "drifted", drifted: 1, failing: 0 });
		expect(drifted.states).toEqual([{ state_id: "curl", sls: "common", fun: "pkg.installed", name: "curl", result: null, predicted_changes: { curl: { old: "1", new: "2" } }, comment: "curl says" }]);
		// A state already right but reporting changes (Salt does, for some modules) counts as drifted too.
		expect(judge(state("motd", "common", true, { diff: "+x" }), true).state).toBe("drifted");
		expect(judge({ ...state("curl", "common", null), ...state("svc", "web", false, {}, 1) }, true)).toMatchObject({ state: "failing", drifted: 1, failing: 1 });
	});

	it("is failing when its states cannot be rendered, unknown when it did not answer", () => {
		const broken = judge(["Rendering SLS 'base:web' failed: mapping values are not allowed here"], true);
		expect(broken).toMatchObject({ state: "failing", failing: 1, states: [{ state_id: "render", result: false, comment: "Rendering SLS 'base:web' failed: mapping values are not allowed here" }] });
		expect(judge(undefined, false)).toMatchObject({ state: "unknown", states: [] });
	});

	it("leaves out the states a suppression rule names (both of its fields must match)", () => {
		const ret = { ...state("restart", "web", null, {}, 0, "cmd_|-%_|-%_|-run"), ...state("curl", "common", null, {}, 1) };
		expect(judge(ret, true, [{ sls: "web", state_id: "restart" }])).toMatchObject({ state: "drifted", drifted: 1, suppressed: 1, states: [{ state_id: "curl" }] });
		expect(judge(ret, true, [{ sls: "web" }, { state_id: "curl" }])).toMatchObject({ state: "conformant", suppressed: 2 });
		expect(judge(ret, true, [{ sls: "common", state_id: "restart" }]).suppressed).toBe(0);
		// An empty rule suppresses nothing.
		expect(judge(ret, true, [{}]).suppressed).toBe(0);
	});

	it("keeps its digest while the same states differ the same way, whatever Salt's comments say, and changes it when they move", () => {
		const a = judge(state("curl", "common", null, { curl: { new: "2" } }), true);
		const reworded = judge({ "pkg_|-curl_|-curl_|-installed": { ...Object.values(state("curl", "common", null, { curl: { new: "2" } }))[0], comment: "other words, 12:00:01" } }, true);
		expect(reworded.digest).toBe(a.digest);
		expect(judge(state("curl", "common", null, { curl: { new: "3" } }), true).digest).not.toBe(a.digest);
		expect(judge(state("curl", "common", true), true).digest).not.toBe(a.digest);
	});
});
