/**
 * services/cm-gateway/salt-state.ts: which state runs are patches, when a run failed, and the steps a failed_patches
 * record keeps (order, `cmd`), on returns shaped as Salt 3006 sends them.
 */
import { failedPatchSteps, patchOf, stepCommand } from "../../services/cm-gateway/salt-state";

const step = (over: Record<string, unknown>) => ({
	name: "/opt/fix.sh",
	changes: { pid: 4242, retcode: 0, stdout: "ok", stderr: "" },
	result: true,
	comment: 'Command "/opt/fix.sh" run',
	__sls__: "patches.fix1",
	__run_num__: 0,
	start_time: "12:00:00.123456",
	duration: 812.345,
	__id__: "apply_fix",
	...over,
});

describe("patchOf", () => {
	const P = "patches/";
	it("reads mods from the keyword or the first positional argument of state.apply and state.sls", () => {
		expect(patchOf("state.apply", [{ __kwarg__: true, mods: "patches.fix1" }], P)).toBe("patches.fix1");
		expect(patchOf("state.apply", ["patches.fix1"], P)).toBe("patches.fix1");
		expect(patchOf("state.sls", ["patches.a", { __kwarg__: true, test: true }], P)).toBe("patches.a");
		expect(patchOf("state.apply", [{ __kwarg__: true, mods: ["patches.a", "patches.b"] }], P)).toBe(
			"patches.a,patches.b",
		);
		expect(patchOf("state.apply", ["patches.a, patches.b"], P)).toBe("patches.a,patches.b");
		expect(patchOf("state.apply", ["patches"], P)).toBe("patches");
		expect(patchOf("state.apply", ["patches/sub/fix"], P)).toBe("patches/sub/fix");
	});

	it("keeps only the mods under the patches directory", () => {
		expect(patchOf("state.apply", ["webserver"], P)).toBeNull();
		expect(patchOf("state.apply", ["patchesx.fix1"], P)).toBeNull();
		expect(patchOf("state.apply", [{ __kwarg__: true, mods: ["base", "patches.fix1"] }], P)).toBe("patches.fix1");
		expect(patchOf("state.apply", ["ops.patches.fix1"], "ops/patches/")).toBe("ops.patches.fix1");
		expect(patchOf("state.apply", ["patches.fix1"], "ops/patches/")).toBeNull();
		// An empty prefix: the file roots themselves hold the patches.
		expect(patchOf("state.apply", ["webserver"], "")).toBe("webserver");
	});

	it("is null for a highstate, other functions and non-string mods", () => {
		expect(patchOf("state.apply", [], P)).toBeNull();
		expect(patchOf("state.apply", [{ __kwarg__: true, test: true }], P)).toBeNull();
		expect(patchOf("state.highstate", [], P)).toBeNull();
		expect(patchOf("cmd.run", ["patches.fix1"], P)).toBeNull();
		expect(patchOf("state.apply", [{ __kwarg__: true, mods: 42 }], P)).toBeNull();
	});
});

describe("stepCommand", () => {
	it("is the command line of a cmd state and <state>.<function> <name> otherwise", () => {
		expect(stepCommand("cmd_|-apply_fix_|-/opt/fix.sh --now_|-run", "/opt/fix.sh --now")).toBe("/opt/fix.sh --now");
		expect(stepCommand("pkg_|-ssl_|-openssl_|-installed", "openssl")).toBe("pkg.installed openssl");
		expect(stepCommand("file_|-conf_|-/etc/x.conf_|-managed", "/etc/x.conf")).toBe("file.managed /etc/x.conf");
		expect(stepCommand("not a tag", "x")).toBe("x");
	});
});

describe("failedPatchSteps", () => {
	it("is null when every step succeeded, or the return is not a state return", () => {
		expect(failedPatchSteps({ "cmd_|-a_|-/opt/fix.sh_|-run": step({}) }, "patches.fix1")).toBeNull();
		expect(failedPatchSteps(false, "patches.fix1")).toBeNull();
		expect(failedPatchSteps("'state.apply' is not available.", "patches.fix1")).toBeNull();
		expect(failedPatchSteps({}, "patches.fix1")).toBeNull();
	});

	it("keeps every step of a failed run, in __run_num__ order, with cmd and salt's own fields", () => {
		const ret = {
			"cmd_|-restart_|-systemctl restart ssh_|-run": step({
				__id__: "restart",
				name: "systemctl restart ssh",
				__run_num__: 1,
				result: false,
				changes: { pid: 7, retcode: 1, stdout: "", stderr: "boom" },
			}),
			"pkg_|-ssl_|-openssl_|-installed": step({ __id__: "ssl", name: "openssl", __run_num__: 0, changes: {} }),
		};
		const steps = failedPatchSteps(ret, "patches.fix1")!;
		expect(steps.map(s => s.__id__)).toEqual(["ssl", "restart"]);
		expect(steps[0]).toMatchObject({
			cmd: "pkg.installed openssl",
			result: true,
			__sls__: "patches.fix1",
			duration: 812.345,
			start_time: "12:00:00.123456",
		});
		expect(steps[1]).toMatchObject({
			cmd: "systemctl restart ssh",
			result: false,
			changes: { pid: 7, retcode: 1, stdout: "", stderr: "boom" },
			comment: 'Command "/opt/fix.sh" run',
		});
	});

	it("counts 'No states found' as a failure", () => {
		const ret = {
			"no_|-states_|-states_|-None": {
				result: false,
				comment: "No states found for this minion",
				name: "No States",
				changes: {},
				__run_num__: 0,
			},
		};
		expect(failedPatchSteps(ret, "patches.fix1")).toEqual([
			expect.objectContaining({ result: false, comment: "No states found for this minion", __sls__: "patches.fix1" }),
		]);
	});

	it("turns a render error (a list of strings) into one failed 'render' step", () => {
		const steps = failedPatchSteps(
			["Rendering SLS 'base:patches.fix1' failed: mapping values are not allowed here"],
			"patches.fix1",
		);
		expect(steps).toEqual([
			{
				__id__: "render",
				__run_num__: 0,
				__sls__: "patches.fix1",
				name: "patches.fix1",
				result: false,
				comment: "Rendering SLS 'base:patches.fix1' failed: mapping values are not allowed here",
				start_time: "",
				duration: 0,
				changes: {},
				cmd: "",
			},
		]);
	});
});
