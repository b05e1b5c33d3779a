/** A dry run read whole (lib/fleet/state-results.ts readDryRun): what it predicts, and which hosts count as failures. */
import { readDryRun, type DryRunReturn } from "../../lib/fleet/state-results";

/** A `state.apply test=True` return as the job history keeps it: one state that would change, or none. */
const ret = (host: string, changes: boolean, extra: Partial<DryRunReturn> = {}): DryRunReturn => ({
	host,
	state: "finished",
	retcode: 0,
	success: true,
	return: JSON.stringify({
		"file_|-motd_|-/etc/motd_|-managed": { __id__: "motd", __sls__: "common", __run_num__: 0, name: "/etc/motd", result: changes ? null : true, comment: "", changes: changes ? { diff: "New file" } : {} },
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
		const reading = readDryRun([ret("web-01", true), ret("web-02", false, { state: "running" }), ret("web-03", false, { retcode: 1, success: false }), ret("web-04", true)], 4);
		expect(reading.failures).toBe(2);
		expect(reading.predicted.map(c => [c.host, c.state_id, c.function])).toEqual([
			["web-01", "motd", "file.managed"],
			["web-04", "motd", "file.managed"],
		]);
	});
});
