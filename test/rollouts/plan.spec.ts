/**
 * A rollout's plan (services/rollouts/plan.ts): how hosts are cut into the canary and batches, the failure budget
 * as a count, what a batch's failures are, and the predicted changes read from a dry run's state return.
 */
import { SHARE, batchFailures, hostsOf, planBatches, sizeOf } from "../../services/rollouts/plan";
import { predictedChanges } from "../../lib/fleet/state-results";

describe("rollout plan", () => {
	it("cuts the canary first, then batches of a count, the last one what is left", () => {
		const plan = planBatches(10, 1, 4);
		expect(plan.map(b => [b.index, b.canary, b.from, b.to, b.state])).toEqual([
			[0, true, 0, 1, "pending"],
			[1, false, 1, 5, "pending"],
			[2, false, 5, 9, "pending"],
			[3, false, 9, 10, "pending"],
		]);
	});

	it("reads a share of all the hosts, rounded up for batches and down for the budget", () => {
		expect(planBatches(25, 0, "10%").map(sizeOf)).toEqual([3, 3, 3, 3, 3, 3, 3, 3, 1]);
		expect(planBatches(3, 0, "1%").map(sizeOf)).toEqual([1, 1, 1]);
		expect(hostsOf("5%", 99, false)).toBe(4);
		expect(hostsOf("5%", 10, false)).toBe(0);
		expect(hostsOf(2, 10, false)).toBe(2);
		expect(hostsOf("1%", 10, true)).toBe(1);
		expect(hostsOf("0%", 10, true)).toBe(0);
		expect(hostsOf("100%", 7, false)).toBe(7);
		expect(planBatches(2, 5, "50%").map(b => [b.canary, sizeOf(b)])).toEqual([[true, 2]]);
	});

	it("reads as a share only a whole percentage of up to three digits, nothing around it", () => {
		expect(["0%", "5%", "100%", "999%"].map(s => SHARE.test(s))).toEqual([true, true, true, true]);
		expect(["5", "x5%", "5%x", "5 %", "1000%", "5.5%", "%", "-5%"].map(s => SHARE.test(s))).toEqual([
			false,
			false,
			false,
			false,
			false,
			false,
			false,
			false,
		]);
	});

	it("counts failed, silent and unreached hosts as a batch's failures", () => {
		expect(
			batchFailures({
				index: 0,
				canary: false,
				from: 0,
				to: 9,
				state: "finished",
				failed: 2,
				timed_out: 1,
				unreached: 3,
			}),
		).toBe(6);
		expect(batchFailures({ index: 0, canary: false, from: 0, to: 9, state: "pending" })).toBe(0);
	});

	it("keeps the states a dry run says would change or fail, normalized, and drops those already right", () => {
		const ret = {
			"cmd_|-upgrade_|-apt-get install -y openssl_|-run": {
				name: "apt-get install -y openssl",
				result: null,
				changes: {},
				comment: "would run",
				__sls__: "patches.x",
				__id__: "upgrade",
				__run_num__: 0,
			},
			"pkg_|-base_|-base_|-installed": {
				name: "base",
				result: true,
				changes: {},
				comment: "already installed",
				__sls__: "common",
				__id__: "base",
				__run_num__: 1,
			},
			"file_|-conf_|-/etc/x.conf_|-managed": {
				name: "/etc/x.conf",
				result: null,
				changes: { diff: "+a" },
				__sls__: "patches.x",
				__id__: "conf",
				__run_num__: 2,
			},
			"service_|-svc_|-ssh_|-running": {
				name: "ssh",
				result: false,
				changes: {},
				comment: "no such service",
				__sls__: "patches.x",
				__id__: "svc",
				__run_num__: 3,
			},
		};
		expect(predictedChanges("web-01", ret)).toEqual([
			{
				host: "web-01",
				state_id: "upgrade",
				sls: "patches.x",
				function: "cmd.run",
				name: "apt-get install -y openssl",
				result: null,
				changes: {},
			},
			{
				host: "web-01",
				state_id: "conf",
				sls: "patches.x",
				function: "file.managed",
				name: "/etc/x.conf",
				result: null,
				changes: { diff: "+a" },
			},
			{
				host: "web-01",
				state_id: "svc",
				sls: "patches.x",
				function: "service.running",
				name: "ssh",
				result: false,
				changes: {},
			},
		]);
	});

	it("reads a return that is no state dict (a render error, a cut text) as a failure, never as no change", () => {
		expect(predictedChanges("db-01", ["No matching sls found for 'x' in env 'base'"])).toEqual([
			{
				host: "db-01",
				state_id: "render",
				sls: "",
				function: "",
				name: "",
				result: false,
				changes: { comment: "No matching sls found for 'x' in env 'base'" },
			},
		]);
		expect(predictedChanges("db-01", '{"cmd_|-a_|-b_|-run": {"result": nu…[12 more bytes not kept]')[0].result).toBe(
			false,
		);
		expect(predictedChanges("db-01", {})).toEqual([]);
	});
});
