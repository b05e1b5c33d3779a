/** services/cm-gateway/presence-guard.ts: when a presence reading is believed (docs/salt.md, "Presence"). */
import { PresenceGuard } from "../../services/cm-gateway/presence-guard";

function guard(opts: Partial<{ maxLoss: number; minHosts: number; confirmMs: number }> = {}) {
	let now = 1_000_000;
	const g = new PresenceGuard({ maxLoss: 0.5, minHosts: 2, confirmMs: 10_000, now: () => now, ...opts });
	return { g, later: (ms: number) => void (now += ms) };
}

describe("the presence guard", () => {
	it("applies readings that lose nothing, one host, or half of the hosts up or less", () => {
		const { g } = guard();
		expect([g.judge(3, 0), g.judge(0, 0), g.judge(3, 1), g.judge(100, 50), g.judge(1, 1)]).toEqual([
			"apply",
			"apply",
			"apply",
			"apply",
			"apply",
		]);
		expect(g.holding).toBe(false);
	});

	it("holds a reading that loses more than half of the hosts up and at least two (the empty list after a master restart)", () => {
		const { g } = guard();
		expect(g.judge(3, 3)).toBe("hold");
		expect(g.holding).toBe(true);
		expect(guard().g.judge(100, 51)).toBe("hold");
		expect(guard().g.judge(2, 2)).toBe("hold");
	});

	it("keeps holding readings that come sooner than confirmMs (the change and present events of one loop), applies the first one later", () => {
		const { g, later } = guard();
		expect(g.judge(3, 3)).toBe("hold");
		later(9_999);
		expect(g.judge(3, 2)).toBe("hold");
		later(1);
		expect(g.judge(3, 2)).toBe("apply");
		expect(g.holding).toBe(false);
		// Confirmed and applied: the next mass loss is held again.
		expect(g.judge(3, 3)).toBe("hold");
	});

	it("clears a held reading when a reading shows no host lost", () => {
		const { g, later } = guard();
		expect(g.judge(10, 10)).toBe("hold");
		later(5);
		expect(g.judge(10, 0)).toBe("apply");
		expect(g.holding).toBe(false);
		later(20_000);
		expect(g.judge(10, 10)).toBe("hold");
	});

	it("after the master did not answer, holds the next reading that loses any host, until confirmed", () => {
		const { g, later } = guard();
		g.masterUnanswering();
		expect(g.judge(10, 1)).toBe("hold");
		later(10_000);
		expect(g.judge(10, 1)).toBe("apply");
		// Confirmed: single losses are believed at once again.
		expect(g.judge(10, 1)).toBe("apply");
	});

	it("forgets the master's silence once a reading loses nothing", () => {
		const { g } = guard();
		g.masterUnanswering();
		expect(g.judge(10, 0)).toBe("apply");
		expect(g.judge(10, 1)).toBe("apply");
	});

	it("says when a reading cannot be held, so that counting the hosts up can be skipped", () => {
		const { g, later } = guard();
		expect([g.couldHold(0), g.couldHold(1), g.couldHold(2)]).toEqual([false, false, true]);
		expect(g.judge(3, 3)).toBe("hold");
		expect(g.couldHold(1)).toBe(true);
		later(10_000);
		expect(g.judge(3, 1)).toBe("apply");
		expect(g.couldHold(1)).toBe(false);
		g.masterUnanswering();
		expect(g.couldHold(1)).toBe(true);
	});

	it("with maxLoss 1 holds nothing by share", () => {
		expect(guard({ maxLoss: 1 }).g.judge(3, 3)).toBe("apply");
	});
});
