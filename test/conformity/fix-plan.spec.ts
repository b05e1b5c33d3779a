/**
 * What a conformity fix applies and the runs it asks to be authorized before the first runs
 * (services/conformity/fix-plan.ts), with literal expectations from docs/conformity.md ("Fixing only what drifted"):
 * only the states that would change (not those that would fail, not render errors), one group per state with exactly
 * the hosts drifted on it, in sls then state id order; a target's fix is its rollouts' `state.sls_id … queue=True`
 * then the re-check, a host's its `state.sls_id` runs then its check; every call asked in order, the first refusal
 * thrown and nothing asked after it.
 */
import {
	appliedOrFailed,
	authorizeFix,
	hostFixCalls,
	isFixable,
	planTargetFix,
	targetFixCalls,
	type FixCall,
	type HostConformity,
} from "../../services/conformity/fix-plan";

const drift = (sls: string, state_id: string) => ({ sls, state_id, result: null });

describe("conformity fix plan", () => {
	it("applies only the states that would change: not those that would fail, not a render error", () => {
		expect(isFixable({ sls: "common", state_id: "base_packages", result: null })).toBe(true);
		expect(isFixable({ sls: "common", state_id: "base_packages", result: false })).toBe(false);
		expect(isFixable({ sls: "common", state_id: "base_packages", result: true })).toBe(false);
		expect(isFixable({ sls: "", state_id: "render", result: null })).toBe(false);
	});

	it("groups a target's drifted states by state, with exactly the hosts drifted on each, sorted", () => {
		const docs: HostConformity[] = [
			{
				_id: "web-02",
				states: [
					drift("web", "nginx_conf"),
					drift("common", "base_packages"),
					{ sls: "common", state_id: "ntp_conf", result: false },
				],
			},
			{ _id: "db-01", states: [{ sls: "", state_id: "render", result: false }] },
			{ _id: "web-01", states: [drift("common", "base_packages"), drift("common", "motd")] },
			{ _id: "app-01" },
			{ _id: "app-02", states: [drift("web", "nginx_conf")] },
		];
		expect(planTargetFix(docs)).toEqual({
			groups: [
				{ sls: "common", state_id: "base_packages", hosts: ["web-01", "web-02"] },
				{ sls: "common", state_id: "motd", hosts: ["web-01"] },
				{ sls: "web", state_id: "nginx_conf", hosts: ["app-02", "web-02"] },
			],
			hosts: ["app-02", "web-01", "web-02"],
		});
		// Nothing drifted, nothing to do.
		expect(
			planTargetFix([
				{ _id: "db-01", states: [{ sls: "common", state_id: "base_packages", result: true }] },
				{ _id: "db-02" },
			]),
		).toEqual({ groups: [], hosts: [] });
	});

	it("orders groups by sls first, then state id, and never takes two states for one", () => {
		const plan = planTargetFix([
			{ _id: "h1", states: [drift("web", "alpha"), drift("common", "zeta")] },
			// The same id in two sls files, and names whose concatenations are equal: four states.
			{ _id: "h2", states: [drift("ab", "c"), drift("a", "bc"), drift("web", "zeta")] },
		]);
		expect(plan.groups.map(g => [g.sls, g.state_id, g.hosts])).toEqual([
			["a", "bc", ["h2"]],
			["ab", "c", ["h2"]],
			["common", "zeta", ["h1"]],
			["web", "alpha", ["h1"]],
			["web", "zeta", ["h2"]],
		]);
	});

	it("makes a target's fix one state.sls_id with queue=True per group, then the re-check of every host", () => {
		const plan = planTargetFix([
			{ _id: "web-02", states: [drift("common", "base_packages"), drift("web", "nginx_conf")] },
			{ _id: "web-01", states: [drift("common", "base_packages")] },
		]);
		expect(targetFixCalls(plan)).toEqual([
			{
				client: "local_async",
				fun: "state.sls_id",
				arg: ["base_packages", "common"],
				kwarg: { queue: true },
				targets: ["web-01", "web-02"],
			},
			{
				client: "local_async",
				fun: "state.sls_id",
				arg: ["nginx_conf", "web"],
				kwarg: { queue: true },
				targets: ["web-02"],
			},
			{ client: "local_async", fun: "state.apply", kwarg: { test: true }, targets: ["web-01", "web-02"] },
		]);
	});

	it("makes a host's fix one state.sls_id per drifted state, in the check's order, then the check", () => {
		expect(hostFixCalls("web-01", [drift("web", "nginx_conf"), drift("common", "base_packages")])).toEqual([
			{ client: "local", fun: "state.sls_id", arg: ["nginx_conf", "web"], kwarg: {}, targets: ["web-01"] },
			{ client: "local", fun: "state.sls_id", arg: ["base_packages", "common"], kwarg: {}, targets: ["web-01"] },
			{ client: "local_async", fun: "state.apply", kwarg: { test: true }, targets: ["web-01"] },
		]);
	});

	describe("authorizeFix", () => {
		const calls = hostFixCalls("web-01", [drift("common", "base_packages"), drift("web", "nginx_conf")]);
		const asked = (refuse?: (c: FixCall) => boolean) => {
			const seen: string[] = [];
			const authorize = async (c: FixCall) => {
				seen.push(`${c.fun} ${JSON.stringify(c.arg ?? [])}`);
				if (refuse?.(c))
					throw Object.assign(
						new Error("the run is refused: sls web not allowed by scope.calls['state.sls_id'].mods (common)"),
						{ code: 403 },
					);
				return { id: "tok-1" };
			};
			return { seen, authorize };
		};

		it("asks about every run, in order, when the token allows them all", async () => {
			const { seen, authorize } = asked();
			await expect(authorizeFix(calls, authorize)).resolves.toBeUndefined();
			expect(seen).toEqual([
				'state.sls_id ["base_packages","common"]',
				'state.sls_id ["nginx_conf","web"]',
				"state.apply []",
			]);
		});

		it("throws the first refusal as it is, a later state's as well as the first's, and asks nothing after it", async () => {
			const later = asked(c => c.arg?.[1] === "web");
			await expect(authorizeFix(calls, later.authorize)).rejects.toMatchObject({
				code: 403,
				message: "the run is refused: sls web not allowed by scope.calls['state.sls_id'].mods (common)",
			});
			expect(later.seen).toEqual(['state.sls_id ["base_packages","common"]', 'state.sls_id ["nginx_conf","web"]']);
			// The check alone refused (a token that may fix but not check): refused too.
			const check = asked(c => c.fun === "state.apply");
			await expect(authorizeFix(calls, check.authorize)).rejects.toMatchObject({ code: 403 });
			expect(check.seen).toHaveLength(3);
		});
	});

	it("reads a state's run as applied only when every state it ran succeeded", () => {
		const ok = {
			"pkg_|-base_packages_|-base_packages_|-installed": {
				result: true,
				changes: { vim: { new: "9.2" } },
				__run_num__: 0,
			},
		};
		expect(appliedOrFailed(ok)).toBe("applied");
		expect(
			appliedOrFailed({ ...ok, "file_|-motd_|-/etc/motd_|-managed": { result: false, changes: {}, __run_num__: 1 } }),
		).toBe("failed");
		expect(
			appliedOrFailed({ ...ok, "file_|-motd_|-/etc/motd_|-managed": { result: null, changes: {}, __run_num__: 1 } }),
		).toBe("failed");
		// Salt's answer when the state cannot be found or rendered: a list of messages.
		expect(appliedOrFailed(["No matching sls found for 'common' in env 'base'"])).toBe("failed");
		expect(appliedOrFailed(false)).toBe("failed");
	});
});
