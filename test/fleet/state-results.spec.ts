/** A state return read (lib/fleet/state-results.ts): its states, a dry run read whole, and which hosts count as failures. */
import {
	PREDICTED_MAX,
	STATE_FUNCTIONS,
	changesOrFails,
	readDryRun,
	readStates,
	returnValue,
	type DryRunReturn,
} from "../../lib/fleet/state-results";

/** A `state.apply test=True` return as the job history keeps it: one state that would change, or none. */
const ret = (host: string, changes: boolean, extra: Partial<DryRunReturn> = {}): DryRunReturn => ({
	host,
	state: "finished",
	retcode: 0,
	success: true,
	return: JSON.stringify({
		"file_|-motd_|-/etc/motd_|-managed": {
			__id__: "motd",
			__sls__: "common",
			__run_num__: 0,
			name: "/etc/motd",
			result: changes ? null : true,
			comment: "",
			changes: changes ? { diff: "New file" } : {},
		},
	}),
	...extra,
});

describe("readDryRun", () => {
	it("counts a host that did not answer as a failure: a batch nobody answered is not 'nothing would change'", () => {
		expect(readDryRun([], 3)).toEqual({ predicted: [], total: 0, failures: 3 });
		const two = readDryRun([ret("web-01", false), ret("web-02", false)], 3);
		expect(two.failures).toBe(1);
		expect(two.total).toBe(0);
	});

	it("counts unfinished, failed and would-fail hosts, and keeps every host's predicted change", () => {
		const reading = readDryRun(
			[
				ret("web-01", true),
				ret("web-02", false, { state: "running" }),
				ret("web-03", false, { retcode: 1, success: false }),
				ret("web-04", true),
			],
			4,
		);
		expect(reading.failures).toBe(2);
		expect(reading.predicted.map(c => [c.host, c.state_id, c.function])).toEqual([
			["web-01", "motd", "file.managed"],
			["web-04", "motd", "file.managed"],
		]);
	});
});

describe("readDryRun, host by host", () => {
	it("counts each host at most once, whatever fails: its exit, its success flag, or a state that would fail", () => {
		const wouldFail = JSON.stringify({
			"pkg_|-a_|-a_|-installed": { __id__: "a", __run_num__: 0, result: false, changes: {} },
			"pkg_|-b_|-b_|-installed": { __id__: "b", __run_num__: 1, result: false, changes: {} },
		});
		const returns = [
			ret("web-01", true, { retcode: 2 }),
			ret("web-02", true, { success: false }),
			ret("web-03", false, { return: wouldFail }),
			ret("web-04", true, { retcode: undefined, success: undefined }),
			ret("web-05", false, { retcode: 0, success: true }),
		];
		expect(returns.map(r => readDryRun([r], 1).failures)).toEqual([1, 1, 1, 0, 0]);
		const reading = readDryRun(returns, 5);
		expect(reading.failures).toBe(3);
		expect(reading.predicted.map(c => [c.host, c.state_id, c.result])).toEqual([
			["web-01", "motd", null],
			["web-02", "motd", null],
			["web-03", "a", false],
			["web-03", "b", false],
			["web-04", "motd", null],
		]);
	});

	it("reads a return that is no state dict as a failure with the reason, and more returns than hosts as no missing one", () => {
		const reading = readDryRun(
			[{ host: "db-01", state: "finished", retcode: 0, return: JSON.stringify(["Rendering SLS 'base:x' failed"]) }],
			0,
		);
		expect(reading).toEqual({
			predicted: [
				{
					host: "db-01",
					state_id: "render",
					sls: "",
					function: "",
					name: "",
					result: false,
					changes: { comment: "Rendering SLS 'base:x' failed" },
				},
			],
			total: 1,
			failures: 1,
		});
	});

	it(`keeps at most ${PREDICTED_MAX} predicted changes and counts them all`, () => {
		const returns = Array.from({ length: PREDICTED_MAX + 5 }, (_, i) => ret(`h-${String(i).padStart(5, "0")}`, true));
		const reading = readDryRun(returns, returns.length);
		expect(reading.total).toBe(2005);
		expect(reading.predicted.length).toBe(2000);
		expect(reading.predicted[1999].host).toBe("h-01999");
		expect(reading.failures).toBe(0);
	});
});

describe("readStates", () => {
	it("says why a return has no states: the messages of a list, a text, or an empty return", () => {
		expect(readStates(["Rendering failed", "Jinja error: x"])).toEqual({ error: "Rendering failed; Jinja error: x" });
		expect(readStates(null)).toEqual({ error: "an empty return" });
		expect(readStates(undefined)).toEqual({ error: "an empty return" });
		expect(readStates("")).toEqual({ error: "an empty return" });
		expect(readStates([])).toEqual({ error: "an empty return" });
		expect(readStates(7)).toEqual({ error: "7" });
		expect(readStates("x".repeat(2500))).toEqual({ error: "x".repeat(2000) });
		expect(readStates({ [`k${"y".repeat(300)}`]: [1] })).toEqual({
			error: `state 'k${"y".repeat(199)}' is not a state result`,
		});
		expect(readStates({ "pkg_|-a_|-a_|-installed": null })).toEqual({
			error: "state 'pkg_|-a_|-a_|-installed' is not a state result",
		});
	});

	it("reads each state from its fields, else from its key, in the order Salt ran them", () => {
		const reading = readStates({
			"file_|-conf_|-/etc/x_|-managed": { result: true, changes: { diff: "+a" }, comment: "updated", __run_num__: 2 },
			"cmd_|-run it_|-echo hi_|-run": {
				__id__: "run it!",
				__sls__: "web",
				name: "echo hi there",
				result: null,
				changes: [],
				comment: 5,
				__run_num__: 0,
			},
			weird: { result: "yes", changes: "none", __run_num__: 1 },
		});
		expect(reading).toEqual({
			states: [
				{
					state_id: "run it!",
					sls: "web",
					fun: "cmd.run",
					name: "echo hi there",
					result: null,
					changes: {},
					comment: "",
				},
				{ state_id: "weird", sls: "", fun: "", name: "", result: null, changes: {}, comment: "" },
				{
					state_id: "conf",
					sls: "",
					fun: "file.managed",
					name: "/etc/x",
					result: true,
					changes: { diff: "+a" },
					comment: "updated",
				},
			],
		});
		expect(readStates({})).toEqual({ states: [] });
	});

	it("keeps the order of the return for states without a run number, and cuts a long comment", () => {
		const reading = readStates({
			"pkg_|-b_|-b_|-installed": { result: false, comment: "c".repeat(2100) },
			"pkg_|-a_|-a_|-installed": { result: true },
			"pkg_|-z_|-z_|-installed": { result: true, __run_num__: 1.5 },
		});
		if (!("states" in reading)) throw new Error(reading.error);
		expect(reading.states.map(s => [s.state_id, s.result, s.comment.length])).toEqual([
			["b", false, 2000],
			["a", true, 0],
			["z", true, 0],
		]);
	});
});

describe("changesOrFails and returnValue", () => {
	it("says a state would change or fail unless it is right and changes nothing", () => {
		const s = (result: boolean | null, changes: Record<string, unknown>) => ({
			state_id: "a",
			sls: "",
			fun: "",
			name: "",
			result,
			changes,
			comment: "",
		});
		expect([s(true, {}), s(true, { diff: "+" }), s(null, {}), s(false, {})].map(changesOrFails)).toEqual([
			false,
			true,
			true,
			true,
		]);
	});

	it("reads a return kept as text: its JSON value, else the text", () => {
		expect(returnValue('{"a":[1]}')).toEqual({ a: [1] });
		expect(returnValue("null")).toBeNull();
		expect(returnValue("not json {")).toBe("not json {");
	});

	it("dry-runs exactly the state functions (the catalogue's dryRun ones)", () => {
		expect([...STATE_FUNCTIONS].sort()).toEqual(["state.apply", "state.highstate", "state.sls"]);
	});
});
