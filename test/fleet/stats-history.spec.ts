/**
 * lib/fleet/stats-history.ts BucketLasts: the snapshot each `online` point shows is the one of highest index in
 * its bucket, whatever order the headers come in and whatever their times say (what MongoDB's pipeline keeps:
 * `$last` after sorting by index); points come in bucket order with HTTP-date timestamps; counts set from a
 * filter stop at the first snapshot without any, or drop its point.
 */
import { BucketLasts } from "../../lib/fleet/stats-history";

const T0 = Date.UTC(2026, 10, 28);
const range = { start: new Date(T0), end: new Date(T0 + 3 * 3_600_000) };
const at = (minutes: number) => T0 + minutes * 60_000;

describe("BucketLasts", () => {
	it("keeps the highest index of each hourly bucket, in any order, and ignores headers outside the range", () => {
		const lasts = new BucketLasts(range, 3600);
		// Bucket 0: indexes 4, 2 and 1 in that order (4 taken at an earlier minute than 2, and offered before 1: neither time nor order decides).
		// Bucket 2: index 7. Bucket 1 holds none. Past the end and before the start: not shown.
		for (const [index, minute, up] of [
			[4, 5, 40],
			[2, 50, 20],
			[7, 150, 70],
			[1, 10, 10],
			[9, 181, 90],
			[0, -1, 0],
		])
			lasts.offer(index, at(minute), up, 100 - up);
		expect(lasts.size).toBe(2);
		expect(lasts.indexes()).toEqual([4, 7]);
		expect(lasts.points()).toEqual([
			{ timestamp: "Sat, 28 Nov 2026 00:00:00 GMT", _id: null, hostnames: { up: 40, down: 60 } },
			{ timestamp: "Sat, 28 Nov 2026 02:00:00 GMT", _id: null, hostnames: { up: 70, down: 30 } },
		]);
	});

	it("sets a filter's counts, stopping at a snapshot without any or dropping its point", () => {
		const make = () => {
			const lasts = new BucketLasts(range, 3600);
			lasts.offer(3, at(30), 5, 5);
			lasts.offer(8, at(90), 6, 6);
			return lasts;
		};
		const stopped = make();
		expect(stopped.recount(i => (i === 3 ? { up: 1, down: 2 } : null), "stop")).toBe(false);
		const dropped = make();
		expect(dropped.recount(i => (i === 8 ? { up: 3, down: 4 } : undefined), "drop")).toBe(true);
		expect(dropped.size).toBe(1);
		expect(dropped.points()).toEqual([
			{ timestamp: "Sat, 28 Nov 2026 01:00:00 GMT", _id: null, hostnames: { up: 3, down: 4 } },
		]);
	});
});
