/**
 * The one presence rule (lib/fleet/presence.ts), which the hosts service's presence readings and the
 * cm-gateway's reconciliation both decide with: only a live host moving between up and down is a transition;
 * a host seen alive has its heartbeat written once it is as old as the resolution.
 */
import { heartbeatDue, presenceTransition } from "../../lib/fleet/presence";

describe("presenceTransition", () => {
	it.each([
		[{ status: "up" }, "down", "host.down"],
		[{ status: "down" }, "up", "host.up"],
		[{ status: "up" }, "up", null],
		[{ status: "down" }, "down", null],
		// A new host, or one the master had not placed yet, has no transition to report.
		[{ status: "unknown" }, "up", null],
		[{ status: "unknown" }, "down", null],
		[{}, "up", null],
		[undefined, "down", null],
		// A soft-deleted host's presence changes silently.
		[{ status: "up", _soft_deleted: true }, "down", null],
		[{ status: "down", _soft_deleted: true }, "up", null],
		[{ status: "up", _soft_deleted: false }, "down", "host.down"],
		// No reading (a held one keeps the last status): nothing.
		[{ status: "up" }, undefined, null],
	] as const)("%j becoming %s: %s", (before, after, expected) => {
		expect(presenceTransition(before, after)).toBe(expected);
	});
});

describe("heartbeatDue", () => {
	const NOW = new Date("2030-01-01T00:10:00.000Z");
	const RESOLUTION = 300_000;
	it.each<[string, unknown, boolean]>([
		["no heartbeat yet", undefined, true],
		["a heartbeat that is not a date", "2030-01-01T00:09:00.000Z", true],
		["a minute old", new Date("2030-01-01T00:09:00.000Z"), false],
		["one millisecond short of the resolution", new Date("2030-01-01T00:05:00.001Z"), false],
		["exactly the resolution old", new Date("2030-01-01T00:05:00.000Z"), true],
		["older", new Date("2030-01-01T00:00:00.000Z"), true],
		["now", new Date("2030-01-01T00:10:00.000Z"), false],
		// The clock went back (or the heartbeat was written by a clock ahead): moved to now.
		["a millisecond in the future", new Date("2030-01-01T00:10:00.001Z"), true],
	])("%s: %s", (_, stored, due) => {
		expect(heartbeatDue(stored, NOW, RESOLUTION)).toBe(due);
	});

	it("writes every reading with a resolution of 0", () => {
		expect(heartbeatDue(new Date("2030-01-01T00:10:00.000Z"), NOW, 0)).toBe(true);
	});
});
