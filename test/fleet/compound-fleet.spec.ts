/**
 * lib/fleet/compound.ts on a whole fleet: the budget of one resolution (MAX_TARGET_STEPS_PER_RESOLUTION plus
 * MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE a host) is far above what ordinary targets take on 50,000 hosts. Apart from
 * compound.spec.ts because it takes about ten seconds: the mutation run (stryker.config.mjs) runs fast specs only.
 */
import { compileTarget } from "../../lib/fleet/compound";
import { HOSTS, ctx } from "./compound-hosts";

describe("one resolution over a large fleet", () => {
	it("leaves ordinary targets on 50,000 hosts with the demo's grains within its budget", () => {
		const fleet = Array.from({ length: 50_000 }, (_, i) => ({ ...HOSTS[i % HOSTS.length], _id: `h-${i}` }));
		for (const expr of [
			"G@os:Debian and web-*",
			"G@roles:web or G@selinux:enabled:True",
			"P@os:(Debian|Ubuntu) and not G@osrelease:11",
			"S@10.0.0.0/8 and G@num_cpus:4",
		]) {
			expect(() => fleet.filter(compileTarget(expr, ctx, true).test)).not.toThrow();
		}
	});
});
