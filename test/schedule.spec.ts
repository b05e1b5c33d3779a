/**
 * lib/schedule.ts with an injected clock: intervals, one-shot tasks, `end`, cron expressions (fields,
 * names, macros, the day-of-month/day-of-week rule), time zones and both DST changes, wall times in a zone.
 */
import { CronError, nextDue, parseCron, parseWallTime, planRun, preview, resumedNext, validTimeZone } from "../lib/schedule";

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
		expect(preview({ start, interval: 1800 }, at("2026-01-01T10:10:00Z"), 3).map(iso)).toEqual(["2026-01-01T10:30:00Z", "2026-01-01T11:00:00Z", "2026-01-01T11:30:00Z"]);
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
		for (const bad of ["* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "5-1 * * * *", "*/0 * * * *", "* * * * funday", "a * * * *"]) {
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
		expect(iso(nextDue({ ...cron("0 9 * * *"), start: at("2026-06-10T12:00:00Z") }, at("2026-06-01T00:00:00Z")))).toBe("2026-06-11T09:00:00Z");
	});

	it("shifts a wall time the clocks skip by the jump (spring forward), and runs the next day as usual", () => {
		// Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
		const s = cron("30 2 * * *", "Europe/Berlin");
		const first = nextDue(s, at("2026-03-28T12:00:00Z"));
		expect(iso(first)).toBe("2026-03-29T01:30:00Z"); // 03:30 CEST
		expect(iso(nextDue(s, first!))).toBe("2026-03-30T00:30:00Z"); // 02:30 CEST
		// A job at 03:30 too runs once that night, not twice.
		const both = cron("30 2,3 * * *", "Europe/Berlin");
		expect(preview(both, at("2026-03-28T23:00:00Z"), 2).map(iso)).toEqual(["2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"]);
	});

	it("runs a wall time the clocks repeat (fall back) once, the first time", () => {
		// Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice.
		expect(preview(cron("30 2 * * *", "Europe/Berlin"), at("2026-10-24T12:00:00Z"), 2).map(iso)).toEqual(["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]);
		expect(preview(cron("30 * * * *", "Europe/Berlin"), at("2026-10-24T23:45:00Z"), 3).map(iso)).toEqual(["2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z", "2026-10-25T03:30:00Z"]);
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
		expect(planRun(hourly, at("2026-01-01T12:00:00Z"), at("2026-01-01T12:00:00.300Z"), GRACE, false)).toEqual({ skip: null, next: at("2026-01-01T13:00:00Z") });
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
		expect(planRun({ ...hourly, end: at("2026-01-01T12:00:00Z") }, at("2026-01-01T12:00:00Z"), at("2026-01-01T12:00:00Z"), GRACE, false).next).toBeNull();
	});

	it("resumes a paused task at the next due time from now, not at the runs missed while paused", () => {
		expect(resumedNext(hourly, at("2026-01-02T08:20:00Z"))).toEqual(at("2026-01-02T09:00:00Z"));
		expect(resumedNext(hourly, at("2026-01-02T09:00:00Z"))).toEqual(at("2026-01-02T09:00:00Z"));
		expect(resumedNext({ start }, at("2026-01-02T00:00:00Z"))).toBeNull();
	});
});
