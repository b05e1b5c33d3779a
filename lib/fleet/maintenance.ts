/**
 * Maintenance windows as time (docs/security.md, "Maintenance windows"): a window recurs by an RFC 5545 RRULE
 * from a first start given as a wall time in an IANA time zone, and lasts a duration (ISO 8601 / RFC 5545,
 * `PT4H`). The rule is expanded by the `rrule` library in "floating" time (its dates' UTC fields are the zone's
 * wall clock), and each occurrence becomes an instant with lib/fleet/schedule.ts `instantsOf`, so that a window
 * at 02:30 in Europe/Paris stays at 02:30 across the clock changes (on the night the clocks jump over it, it
 * opens at the instant 02:30 would have been; on the night they go back, at the first 02:30).
 *
 * Pure: no clock is read here, `at` and `after` are given.
 */
import { RRule, type Options } from "rrule";
import { instantsOf, parseWallTime, validTimeZone, wallClock, FIRST_YEAR, LAST_YEAR } from "./schedule";

/** A window as stored: its recurrence, first start, zone and length. */
export interface WindowTiming {
	rrule: string;
	/** The first occurrence, "YYYY-MM-DDTHH:MM" in `timezone` (the rule's DTSTART). */
	start: string;
	timezone: string;
	/** How long each occurrence lasts: an ISO 8601 duration of weeks, days, hours, minutes (e.g. "PT4H", "P1DT2H"). */
	duration: string;
}

/** One occurrence of a window: from `start` (included) to `end` (excluded). */
export interface Opening {
	start: Date;
	end: Date;
}

/** The longest occurrence: a window longer than its recurrence would be always open. */
export const DURATION_MAX_MS = 31 * 86_400_000;
/** Occurrences looked at for one question at most: a rule with fewer openings within reach answers what it found. */
const STEPS_MAX = 5000;
/** How far ahead the next opening is looked for. */
export const HORIZON_MS = 400 * 86_400_000;
/** How far ahead a preview lists openings. */
export const PREVIEW_HORIZON_MS = 10 * 366 * 86_400_000;

/** An ISO 8601 duration ("PT4H30M", "P1W", "P1DT12H") in ms; null when malformed, zero, or longer than DURATION_MAX_MS. */
export function parseDuration(text: string): number | null {
	const m = /^P(?:(\d{1,3})W)?(?:(\d{1,3})D)?(?:T(?:(\d{1,4})H)?(?:(\d{1,6})M)?)?$/.exec(text);
	if (!m || text === "P" || text.endsWith("T")) return null;
	const [w, d, h, min] = m.slice(1).map(v => Number(v ?? 0));
	const ms = (((w * 7 + d) * 24 + h) * 60 + min) * 60_000;
	return ms > 0 && ms <= DURATION_MAX_MS ? ms : null;
}

/** The rule's options, or why it is not one a window may use. */
export function parseRule(text: string): Partial<Options> | string {
	const value = text.trim().replace(/^RRULE:/i, "");
	if (!value || /[\r\n]/.test(value))
		return "must be one RRULE value (e.g. FREQ=WEEKLY;BYDAY=SA;BYHOUR=2), without DTSTART: the window's start gives it";
	if (/(^|;)\s*(DTSTART|TZID)\s*[=:]/i.test(value))
		return "must not hold DTSTART or TZID: give the window's start and timezone";
	let options: Partial<Options>;
	try {
		options = RRule.parseString(value);
	} catch (err) {
		return `is not an RFC 5545 RRULE: ${String((err as Error).message).slice(0, 200)}`;
	}
	if (options.freq === undefined) return "must name FREQ";
	if (options.freq === RRule.SECONDLY || options.freq === RRule.MINUTELY)
		return "must recur at most hourly (FREQ=HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY)";
	if (options.interval !== undefined && (options.interval < 1 || options.interval > 1000))
		return "INTERVAL must be between 1 and 1000";
	if (options.count !== undefined && options.count !== null && (options.count < 1 || options.count > 10_000))
		return "COUNT must be between 1 and 10000";
	return options;
}

/** A window's timing made ready to answer questions, or the issues of its fields. */
export interface CompiledWindow {
	rule: RRule;
	timezone: string;
	durationMs: number;
	/**
	 * The same rule restarted from a later occurrence, near the last time asked about: `rrule` walks a rule from
	 * its DTSTART on every question, which for an hourly window started years ago is tens of thousands of steps.
	 * A rule without COUNT restarted from one of its occurrences recurs the same (its periods, intervals and UNTIL
	 * count from there); one with COUNT is never restarted (it is short: COUNT ≤ 10000).
	 */
	near?: RRule;
}

export function compileWindow(t: WindowTiming): CompiledWindow | Record<string, string> {
	const issues: Record<string, string> = {};
	if (!validTimeZone(t.timezone))
		issues.timezone = `unknown time zone '${t.timezone.slice(0, 100)}' (an IANA name, e.g. Europe/Paris or UTC)`;
	const durationMs = parseDuration(t.duration);
	if (durationMs === null)
		issues.duration = "must be an ISO 8601 duration between one minute and 31 days, e.g. PT4H or P1DT2H";
	const options = parseRule(t.rrule);
	if (typeof options === "string") issues.rrule = options;
	const m = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})$/.exec(t.start);
	if (!m || !parseWallTime(t.start, issues.timezone ? "UTC" : t.timezone))
		issues.start = `must be a wall time "YYYY-MM-DDTHH:MM" (in the window's timezone) between ${FIRST_YEAR} and ${LAST_YEAR}`;
	if (Object.keys(issues).length || typeof options === "string" || !m || durationMs === null) return issues;
	const [y, mo, d, h, mi] = m.slice(1).map(Number);
	const rule = new RRule({ ...options, dtstart: new Date(Date.UTC(y, mo - 1, d, h, mi)), tzid: null }, true);
	return { rule, timezone: t.timezone, durationMs };
}

export function isCompiled(c: CompiledWindow | Record<string, string>): c is CompiledWindow {
	return c instanceof Object && "rule" in c && c.rule instanceof RRule;
}

/** A floating date (UTC fields = the zone's wall clock) as the instant the zone's clocks show it first. */
function instantOf(floating: Date, tz: string): number {
	return instantsOf(
		floating.getUTCFullYear(),
		floating.getUTCMonth() + 1,
		floating.getUTCDate(),
		floating.getUTCHours(),
		floating.getUTCMinutes(),
		tz,
	).instants[0];
}

/** An instant as a floating date in the zone. */
function floatingOf(at: Date, tz: string): Date {
	const w = wallClock(at, tz);
	return new Date(Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute));
}

/**
 * The occurrences whose floating start is within [from, to], in order, at most `max`, each as an opening. One
 * pass of the rule (`between` with an iterator that stops early): `after`, called again and again, would walk
 * the rule from its start every time.
 */
/** Restarted no closer than this before the time asked about, so that questions about nearby times share it. */
const NEAR_SLACK_MS = 7 * 86_400_000;

/** The rule to ask about times from `from` on: `c.near` when it starts before `from`, else the rule restarted at its last occurrence a week or more before `from`. */
function ruleFor(c: CompiledWindow, from: Date): RRule {
	const { options } = c.rule;
	if (options.count) return c.rule;
	const nearStart = c.near?.options.dtstart.getTime();
	if (nearStart !== undefined && nearStart <= from.getTime() && from.getTime() - nearStart < 8 * NEAR_SLACK_MS)
		return c.near!;
	const base = nearStart !== undefined && nearStart <= from.getTime() ? c.near! : c.rule;
	const anchor = base.before(new Date(from.getTime() - NEAR_SLACK_MS), true);
	if (!anchor) return c.rule;
	c.near = new RRule({ ...c.rule.origOptions, dtstart: anchor, tzid: null }, true);
	return c.near;
}

function openings(
	c: CompiledWindow,
	from: Date,
	to: Date,
	max: number,
	keep: (o: Opening) => boolean = () => true,
): Opening[] {
	const found: Opening[] = [];
	let steps = 0;
	ruleFor(c, from).between(from, to, true, (d: Date) => {
		const start = instantOf(d, c.timezone);
		const o = { start: new Date(start), end: new Date(start + c.durationMs) };
		if (keep(o)) found.push(o);
		return found.length < max && ++steps < STEPS_MAX;
	});
	return found;
}

/** The occurrence open at `at`, if one is. */
export function openingAt(c: CompiledWindow, at: Date): Opening | null {
	// An occurrence open now started at most one duration ago (plus a day for the zone's offset changes).
	const from = floatingOf(new Date(at.getTime() - c.durationMs - 86_400_000), c.timezone);
	const to = floatingOf(new Date(at.getTime() + 86_400_000), c.timezone);
	const open = openings(c, from, to, 1, o => o.start.getTime() <= at.getTime() && o.end.getTime() > at.getTime());
	return open[0] ?? null;
}

/** The next `count` occurrences starting after `after` (an occurrence open at `after` is not one), within `horizonMs` (400 days). */
export function nextOpenings(c: CompiledWindow, after: Date, count: number, horizonMs = HORIZON_MS): Opening[] {
	const horizon = after.getTime() + horizonMs;
	const from = floatingOf(new Date(after.getTime() - 86_400_000), c.timezone);
	const to = floatingOf(new Date(horizon + 86_400_000), c.timezone);
	return openings(c, from, to, count, o => o.start.getTime() > after.getTime() && o.start.getTime() <= horizon);
}
