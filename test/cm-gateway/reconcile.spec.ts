/**
 * When the cm-gateway's scheduled reconciliation comes next (services/cm-gateway/reconcile.ts
 * `nextSyncDelay`): the interval after a success, a doubling retry after failures, capped by the interval.
 */
import { nextSyncDelay } from "../../services/cm-gateway/reconcile";

describe("nextSyncDelay", () => {
	it("waits the interval after a success", () => {
		expect(nextSyncDelay(0, 5000, 300_000)).toBe(300_000);
	});

	it("retries after CM_SYNC_RETRY_MS, doubling per failure in a row, never later than the interval", () => {
		expect([1, 2, 3, 4, 5, 6, 7].map(f => nextSyncDelay(f, 5000, 300_000))).toEqual([
			5000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000,
		]);
		expect(nextSyncDelay(10_000, 5000, 300_000)).toBe(300_000);
	});

	it("never waits longer than a short interval", () => {
		expect(nextSyncDelay(1, 5000, 200)).toBe(200);
	});
});
