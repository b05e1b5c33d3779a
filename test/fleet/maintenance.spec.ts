/**
 * Maintenance windows as time (lib/fleet/maintenance.ts): RRULE occurrences in a time zone, their length, the
 * clock changes, and the fields a window is refused for.
 */
import {
	compileWindow,
	isCompiled,
	nextOpenings,
	openingAt,
	parseDuration,
	type CompiledWindow,
	type WindowTiming,
} from "../../lib/fleet/maintenance";

function compiled(t: WindowTiming): CompiledWindow {
	const c = compileWindow(t);
	if (!isCompiled(c)) throw new Error(JSON.stringify(c));
	return c;
}

const saturdayNights = compiled({
	rrule: "FREQ=WEEKLY;BYDAY=SA",
	start: "2026-03-28T02:30",
	timezone: "Europe/Paris",
	duration: "PT4H",
});

describe("maintenance window occurrences", () => {
	it("answers the next openings as instants of the zone's wall time, winter and summer", () => {
		const next = nextOpenings(saturdayNights, new Date("2026-10-20T00:00:00Z"), 3);
		// 24 October is still summer time (UTC+2): 02:30 is 00:30Z; from 31 October on, winter (UTC+1): 01:30Z.
		expect(next.map(o => o.start.toISOString())).toEqual([
			"2026-10-24T00:30:00.000Z",
			"2026-10-31T01:30:00.000Z",
			"2026-11-07T01:30:00.000Z",
		]);
		expect(next[0].end.toISOString()).toBe("2026-10-24T04:30:00.000Z");
	});

	it("opens on the night the clocks jump over the start at the instant it would have been", () => {
		// 29 March 2026, 02:00 → 03:00 in Paris: 02:30 does not exist that night. The rule starts on the 28th.
		const daily = compiled({
			rrule: "FREQ=DAILY",
			start: "2026-03-28T02:30",
			timezone: "Europe/Paris",
			duration: "PT1H",
		});
		const [first, second] = nextOpenings(daily, new Date("2026-03-28T12:00:00Z"), 2);
		expect(first.start.toISOString()).toBe("2026-03-29T01:30:00.000Z");
		expect(second.start.toISOString()).toBe("2026-03-30T00:30:00.000Z");
	});

	it("is open from its start (included) to its end (excluded)", () => {
		expect(openingAt(saturdayNights, new Date("2026-11-28T01:29:59Z"))).toBeNull();
		expect(openingAt(saturdayNights, new Date("2026-11-28T01:30:00Z"))?.start.toISOString()).toBe(
			"2026-11-28T01:30:00.000Z",
		);
		expect(openingAt(saturdayNights, new Date("2026-11-28T05:29:59Z"))?.end.toISOString()).toBe(
			"2026-11-28T05:30:00.000Z",
		);
		expect(openingAt(saturdayNights, new Date("2026-11-28T05:30:00Z"))).toBeNull();
	});

	it("is not open before its first start, and a rule with COUNT ends", () => {
		const twice = compiled({
			rrule: "FREQ=DAILY;COUNT=2",
			start: "2026-12-01T10:00",
			timezone: "UTC",
			duration: "PT1H",
		});
		expect(openingAt(twice, new Date("2026-11-30T10:30:00Z"))).toBeNull();
		expect(openingAt(twice, new Date("2026-12-02T10:30:00Z"))).not.toBeNull();
		expect(nextOpenings(twice, new Date("2026-12-01T11:00:00Z"), 5).map(o => o.start.toISOString())).toEqual([
			"2026-12-02T10:00:00.000Z",
		]);
	});

	it("answers an hourly rule that started years ago in one pass", () => {
		const hourly = compiled({ rrule: "FREQ=HOURLY", start: "2020-01-01T00:00", timezone: "UTC", duration: "PT10M" });
		expect(openingAt(hourly, new Date("2026-11-25T07:05:00Z"))?.start.toISOString()).toBe("2026-11-25T07:00:00.000Z");
		expect(openingAt(hourly, new Date("2026-11-25T07:15:00Z"))).toBeNull();
		expect(nextOpenings(hourly, new Date("2026-11-25T07:15:00Z"), 2).map(o => o.start.toISOString())).toEqual([
			"2026-11-25T08:00:00.000Z",
			"2026-11-25T09:00:00.000Z",
		]);
	});

	it("answers the same openings as the whole rule walked from its start, asked at times far apart", () => {
		for (const rrule of [
			"FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH",
			"FREQ=MONTHLY;BYDAY=-1FR",
			"FREQ=MONTHLY;BYMONTHDAY=31",
			"FREQ=DAILY;INTERVAL=3",
			"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
		]) {
			const timing = { rrule, start: "2024-02-29T23:00", timezone: "America/New_York", duration: "PT2H" };
			const asked = compiled(timing);
			for (const at of [
				"2025-01-15T00:00:00Z",
				"2026-07-01T12:00:00Z",
				"2025-06-01T00:00:00Z",
				"2027-12-30T00:00:00Z",
			]) {
				// With COUNT the rule is never restarted: it is walked from 2024 every time (the brute force).
				const whole = nextOpenings(compiled({ ...timing, rrule: `${rrule};COUNT=10000` }), new Date(at), 6).map(o =>
					o.start.toISOString(),
				);
				expect({ rrule, at, next: nextOpenings(asked, new Date(at), 6).map(o => o.start.toISOString()) }).toEqual({
					rrule,
					at,
					next: whole,
				});
			}
		}
	});

	it("refuses what is not a window, field by field", () => {
		expect(
			compileWindow({ rrule: "FREQ=MINUTELY", start: "2026-01-01", timezone: "Mars/Olympus", duration: "PT0M" }),
		).toEqual({
			rrule: expect.stringContaining("at most hourly"),
			start: expect.stringContaining("YYYY-MM-DDTHH:MM"),
			timezone: expect.stringContaining("unknown time zone"),
			duration: expect.stringContaining("ISO 8601"),
		});
		expect(
			compileWindow({ rrule: "FREQ=DAILY;FOO=1", start: "2026-01-01T00:00", timezone: "UTC", duration: "PT1H" }),
		).toEqual({ rrule: expect.stringContaining("not an RFC 5545 RRULE") });
		expect(
			compileWindow({
				rrule: "DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY",
				start: "2026-01-01T00:00",
				timezone: "UTC",
				duration: "PT1H",
			}),
		).toEqual({ rrule: expect.any(String) });
		expect(
			compileWindow({ rrule: "FREQ=DAILY;TZID=UTC", start: "2026-01-01T00:00", timezone: "UTC", duration: "PT1H" }),
		).toEqual({ rrule: expect.stringContaining("DTSTART or TZID") });
	});

	it("reads ISO 8601 durations of weeks, days, hours and minutes, up to 31 days", () => {
		expect(parseDuration("PT4H30M")).toBe(4.5 * 3600_000);
		expect(parseDuration("P1DT2H")).toBe(26 * 3600_000);
		expect(parseDuration("P1W")).toBe(7 * 86_400_000);
		for (const bad of ["P", "PT", "4H", "PT0M", "P5W", "PT-1H", "P1Y"]) expect(parseDuration(bad)).toBeNull();
	});
});
