/**
 * The one presence rule (lib/fleet/presence.ts), which the hosts service's presence readings and the
 * cm-gateway's reconciliation both decide with: only a live host moving between up and down is a transition.
 */
import { presenceTransition } from "../../lib/fleet/presence";

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
