/**
 * lib/fleet/schedule.ts with an injected clock: intervals, one-shot tasks, `end`, cron expressions (fields,
 * names, macros, the day-of-month/day-of-week rule), time zones and both DST changes, wall times in a zone.
 */
import fc from "fast-check";
import {
	CronError,
	firstDue,
	neverDueReason,
	nextDue,
	parseCron,
	parseWallTime,
	planRun,
	preview,
	resumedNext,
	validTimeZone,
} from "../../lib/fleet/schedule";

const at = (iso: string) => new Date(iso);
const iso = (d: Date | null) => (d ? d.toISOString().replace(".000Z", "Z") : null);

describe("interval and one-shot schedules", () => {
	const start = at("2026-01-01T10:00:00Z");

	it("is due at start, then every interval, at a fixed rate", () => {
		const s = { start, interval: 3600 };
		expect(iso(nextDue(s, at("2026-01-01T09:00:00Z")))).toBe("2026-01-01T10:00:00Z");
		expect(iso(nextDue(s, at("2026-01-01T10:00:00Z")))).toBe("2026-01-01T11:00:00Z");
		expect(iso(nextDue(s, at("2026-01-01T10:59:59Z")))).toBe("2026-01-01T11:00:00Z");
		expect(iso(nextDue(s, at("2026-01-03T07:30:00Z")))).toBe("2026-01-03T08:00:00Z");
	});

	it("is due up to end included, then never", () => {
		const s = { start, interval: 3600, end: at("2026-01-01T12:00:00Z") };
		expect(iso(nextDue(s, at("2026-01-01T11:00:00Z")))).toBe("2026-01-01T12:00:00Z");
		expect(nextDue(s, at("2026-01-01T12:00:00Z"))).toBeNull();
	});

	it("runs a task without interval once, at start", () => {
		expect(iso(nextDue({ start }, at("2025-12-31T00:00:00Z")))).toBe("2026-01-01T10:00:00Z");
		expect(nextDue({ start }, start)).toBeNull();
		expect(nextDue({ start, interval: 0 }, at("2026-01-02T00:00:00Z"))).toBeNull();
	});

	it("previews the next due times", () => {
		expect(preview({ start, interval: 1800 }, at("2026-01-01T10:10:00Z"), 3).map(iso)).toEqual([
			"2026-01-01T10:30:00Z",
			"2026-01-01T11:00:00Z",
			"2026-01-01T11:30:00Z",
		]);
		expect(preview({ start }, at("2026-01-01T00:00:00Z"), 5).map(iso)).toEqual(["2026-01-01T10:00:00Z"]);
	});
});

describe("cron expressions", () => {
	const start = at("2026-01-01T00:00:00Z");
	const cron = (expr: string, timezone = "UTC") => ({ start, cron: expr, timezone });

	it("parses ranges, steps, lists, names and macros, and refuses the rest with a reason", () => {
		const c = parseCron("*/15 9-17/4 1,15 jan-mar mon-fri");
		expect([...c.minutes]).toEqual([0, 15, 30, 45]);
		expect([...c.hours]).toEqual([9, 13, 17]);
		expect([...c.days]).toEqual([1, 15]);
		expect([...c.months]).toEqual([1, 2, 3]);
		expect([...c.weekdays]).toEqual([1, 2, 3, 4, 5]);
		expect([...parseCron("0 0 * * 7").weekdays]).toEqual([0]);
		expect(parseCron("@hourly")).toEqual(parseCron("0 * * * *"));
		for (const bad of [
			"* * * *",
			"60 * * * *",
			"* 24 * * *",
			"* * 0 * *",
			"* * * 13 *",
			"5-1 * * * *",
			"*/0 * * * *",
			"* * * * funday",
			"a * * * *",
		]) {
			expect(() => parseCron(bad)).toThrow(CronError);
		}
	});

	it("gives the next matching minute, weekdays and the either-day rule", () => {
		expect(iso(nextDue(cron("*/15 * * * *"), at("2026-03-04T10:07:00Z")))).toBe("2026-03-04T10:15:00Z");
		// 2026-03-06 is a Friday: next weekday 09:00 is Monday the 9th.
		expect(iso(nextDue(cron("0 9 * * mon-fri"), at("2026-03-06T10:00:00Z")))).toBe("2026-03-09T09:00:00Z");
		// The 13th, or any Friday (both day fields restricted).
		expect(iso(nextDue(cron("0 0 13 * fri"), at("2026-03-07T00:00:00Z")))).toBe("2026-03-13T00:00:00Z");
		expect(iso(nextDue(cron("0 0 13 * fri"), at("2026-03-13T00:00:00Z")))).toBe("2026-03-20T00:00:00Z");
		expect(iso(nextDue(cron("0 0 29 2 *"), at("2026-03-01T00:00:00Z")))).toBe("2028-02-29T00:00:00Z");
		expect(nextDue(cron("0 0 31 2 *"), start)).toBeNull();
	});

	it("is due in the task's time zone, and never before start", () => {
		expect(iso(nextDue(cron("0 9 * * *", "Europe/Moscow"), at("2026-06-01T00:00:00Z")))).toBe("2026-06-01T06:00:00Z");
		expect(iso(nextDue({ ...cron("0 9 * * *"), start: at("2026-06-10T12:00:00Z") }, at("2026-06-01T00:00:00Z")))).toBe(
			"2026-06-11T09:00:00Z",
		);
	});

	it("shifts a wall time the clocks skip by the jump (spring forward), and runs the next day as usual", () => {
		// Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
		const s = cron("30 2 * * *", "Europe/Berlin");
		const first = nextDue(s, at("2026-03-28T12:00:00Z"));
		expect(iso(first)).toBe("2026-03-29T01:30:00Z"); // 03:30 CEST
		expect(iso(nextDue(s, first!))).toBe("2026-03-30T00:30:00Z"); // 02:30 CEST
		// A job at 03:30 too runs once that night, not twice.
		const both = cron("30 2,3 * * *", "Europe/Berlin");
		expect(preview(both, at("2026-03-28T23:00:00Z"), 2).map(iso)).toEqual([
			"2026-03-29T01:30:00Z",
			"2026-03-30T00:30:00Z",
		]);
	});

	it("runs a wall time the clocks repeat (fall back) once, the first time", () => {
		// Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
		expect(preview(cron("30 2 * * *", "Europe/Berlin"), at("2026-10-24T12:00:00Z"), 2).map(iso)).toEqual([
			"2026-10-25T00:30:00Z",
			"2026-10-26T01:30:00Z",
		]);
		expect(preview(cron("30 * * * *", "Europe/Berlin"), at("2026-10-24T23:45:00Z"), 3).map(iso)).toEqual([
			"2026-10-25T00:30:00Z",
			"2026-10-25T02:30:00Z",
			"2026-10-25T03:30:00Z",
		]);
	});
});

describe("expressions that can never fire", () => {
	const never = (expr: string) => neverDueReason(parseCron(expr));

	it("names the expressions no date matches, and only those", () => {
		expect(never("0 0 30 2 *")).toBe("never due: no date matches day 30 of feb");
		expect(never("0 0 31 4,6,9,11 *")).toBe("never due: no date matches day 31 of apr, jun, sep, nov");
		expect(never("0 0 30,31 feb *")).toBe("never due: no date matches day 30, 31 of feb");
		for (const fine of [
			"0 0 29 2 *",
			"0 0 31 * *",
			"0 0 30 2 mon",
			"0 0 * 2 mon",
			"0 0 1-31 2 *",
			"@yearly",
			"* * * * *",
		])
			expect(never(fine)).toBeNull();
	});

	it("finds a due time from any start within the search horizon exactly when some date matches (property)", () => {
		const subset = (max: number, from = 1) =>
			fc.uniqueArray(fc.integer({ min: from, max }), { minLength: 1, maxLength: 4 });
		// Biased towards the month ends and the short months, where the expressions that never fire are.
		const days = fc.oneof(subset(31), subset(31, 28), fc.constant(null));
		const months = fc.oneof(
			subset(12),
			fc.uniqueArray(fc.constantFrom(2, 4, 6, 9, 11), { minLength: 1, maxLength: 3 }),
		);
		const expr = fc
			.record({ days, months, weekdays: fc.oneof(subset(6, 0), fc.constant(null)) })
			.map(
				({ days, months, weekdays }) =>
					`0 0 ${days ? days.join(",") : "*"} ${months.join(",")} ${weekdays ? weekdays.join(",") : "*"}`,
			);
		const start = fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(9990, 0, 1) }).map(ms => new Date(ms));
		fc.assert(
			fc.property(expr, start, (e, from) => {
				const due = nextDue({ start: from, cron: e, timezone: "UTC" }, from);
				expect(due === null).toBe(never(e) !== null);
			}),
			{ numRuns: 300 },
		);
	});

	it("finds February 29 across a century year that is not leap (the longest gap, 8 years)", () => {
		const after = at("2096-02-29T00:00:01Z");
		expect(iso(nextDue({ start: after, cron: "0 0 29 2 *", timezone: "UTC" }, after))).toBe("2104-02-29T00:00:00Z");
	});

	it("gives a schedule's first due time, or null when end comes before it; a past start still has one", () => {
		const start = at("2030-01-01T00:00:00Z");
		expect(iso(firstDue({ start, cron: "0 0 29 2 *", timezone: "UTC" }))).toBe("2032-02-29T00:00:00Z");
		expect(firstDue({ start, cron: "0 0 29 2 *", timezone: "UTC", end: at("2031-12-31T00:00:00Z") })).toBeNull();
		expect(firstDue({ start, cron: "0 0 30 2 *", timezone: "UTC" })).toBeNull();
		expect(iso(firstDue({ start: at("2001-01-01T00:00:00Z") }))).toBe("2001-01-01T00:00:00Z");
		expect(iso(firstDue({ start, interval: 60, end: at("2030-01-01T00:00:30Z") }))).toBe("2030-01-01T00:00:00Z");
	});

	it("gives up on an expression no date matches after a bounded search", () => {
		const t0 = performance.now();
		expect(
			nextDue(
				{ start: at("2030-01-01T00:00:00Z"), cron: "* * 31 2 *", timezone: "Europe/Berlin" },
				at("2030-01-01T00:00:00Z"),
			),
		).toBeNull();
		// 2,929 day checks, no hour or minute tried: well under a second even on a loaded machine.
		expect(performance.now() - t0).toBeLessThan(1000);
	});
});

describe("wall times in a zone", () => {
	it("reads YYYY-MM-DD HH:MM in the zone, refuses dates that do not exist", () => {
		expect(iso(parseWallTime("2026-06-01 12:00", "Europe/Berlin"))).toBe("2026-06-01T10:00:00Z");
		expect(iso(parseWallTime("2026-06-01 12:00", "UTC"))).toBe("2026-06-01T12:00:00Z");
		expect(iso(parseWallTime("2026-03-29 02:30", "Europe/Berlin"))).toBe("2026-03-29T01:30:00Z");
		expect(parseWallTime("2026-02-30 10:00", "UTC")).toBeNull();
		expect(parseWallTime("2026-01-01 24:00", "UTC")).toBeNull();
		expect(parseWallTime("tomorrow", "UTC")).toBeNull();
	});

	it("reads only the years 1970 to 9999: never year 0000 as 1900, nor 0070 as 1970", () => {
		for (const bad of ["0000-01-01 00:00", "0070-06-01 12:00", "1969-12-31 23:59"])
			expect(parseWallTime(bad, "UTC")).toBeNull();
		expect(iso(parseWallTime("1970-01-01 00:00", "UTC"))).toBe("1970-01-01T00:00:00Z");
		expect(iso(parseWallTime("9999-12-31 23:59", "Pacific/Kiritimati"))).toBe("9999-12-31T09:59:00Z");
	});

	it("knows the IANA zones the runtime knows", () => {
		expect(validTimeZone("Europe/Berlin")).toBe(true);
		expect(validTimeZone("Mars/Olympus")).toBe(false);
	});
});

describe("what happens to a due run", () => {
	const start = at("2026-01-01T10:00:00Z");
	const hourly = { start, interval: 3600 };
	const GRACE = 60_000;

	it("runs a run found on time, and moves next to the following due time", () => {
		expect(planRun(hourly, at("2026-01-01T12:00:00Z"), at("2026-01-01T12:00:00.300Z"), GRACE, false)).toEqual({
			skip: null,
			next: at("2026-01-01T13:00:00Z"),
		});
	});

	it("after an outage runs once (run_once) or not at all (skip), and never makes up the other missed runs", () => {
		const due = at("2026-01-01T12:00:00Z");
		const now = at("2026-01-01T17:30:00Z"); // five runs missed
		expect(planRun(hourly, due, now, GRACE, false)).toEqual({ skip: null, next: at("2026-01-01T18:00:00Z") });
		const skipped = planRun({ ...hourly, misfire: "skip" }, due, now, GRACE, false);
		expect(skipped.skip).toMatch(/misfire/);
		expect(skipped.next).toEqual(at("2026-01-01T18:00:00Z"));
		// Within the grace a late run is not a misfire.
		expect(planRun({ ...hourly, misfire: "skip" }, due, at("2026-01-01T12:00:30Z"), GRACE, false).skip).toBeNull();
	});

	it("skips a run while the previous one has hosts outstanding, unless overlap is allowed", () => {
		const due = at("2026-01-01T12:00:00Z");
		expect(planRun(hourly, due, due, GRACE, true).skip).toMatch(/overlap/);
		expect(planRun({ ...hourly, overlap: "allow" }, due, due, GRACE, true).skip).toBeNull();
	});

	it("finishes a one-shot task with its run, and a task at its end", () => {
		expect(planRun({ start }, start, start, GRACE, false)).toEqual({ skip: null, next: null });
		expect(
			planRun(
				{ ...hourly, end: at("2026-01-01T12:00:00Z") },
				at("2026-01-01T12:00:00Z"),
				at("2026-01-01T12:00:00Z"),
				GRACE,
				false,
			).next,
		).toBeNull();
	});

	it("resumes a paused task at the next due time from now, not at the runs missed while paused", () => {
		expect(resumedNext(hourly, at("2026-01-02T08:20:00Z"))).toEqual(at("2026-01-02T09:00:00Z"));
		expect(resumedNext(hourly, at("2026-01-02T09:00:00Z"))).toEqual(at("2026-01-02T09:00:00Z"));
		expect(resumedNext({ start }, at("2026-01-02T00:00:00Z"))).toBeNull();
	});
});
