/**
 * When a task (or a conformity check) is due (docs/scheduling.md). Pure functions of the task and a clock, so that every rule is
 * tested with an injected time.
 *
 *  - `interval` (seconds, > 0): due at start, start + interval, start + 2·interval, … (fixed rate: a late
 *    run does not move the ones after it).
 *  - `cron` (five fields, in the task's time zone): due at every matching wall-clock minute at or after
 *    start. Fields: minute 0–59, hour 0–23, day of month 1–31, month 1–12 or jan–dec, day of week 0–7 or
 *    sun–sat (0 and 7 are Sunday); `*`, `a-b`, `a-b/n`, `*\/n`, lists; when both day fields are restricted
 *    a day matches either (as Vixie cron); `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`. Across DST:
 *    a wall time the clocks skip (spring forward) runs when it would have been, i.e. shifted by the jump
 *    (02:30 → 03:30); a wall time that happens twice (fall back) runs once, the first time.
 *  - neither (interval absent or 0): due once, at start.
 *  - `end`: nothing is due after it.
 *
 * What a task may be given (checked when it is written, docs/scheduling.md): times in the years
 * FIRST_YEAR–LAST_YEAR, a cron expression that some calendar date matches (`neverDueReason`), and a schedule
 * with at least one due time (`firstDue`).
 */

export interface Schedule {
	start: Date;
	end?: Date | null;
	interval?: number;
	cron?: string | null;
	timezone?: string;
}

/**
 * The years a task's `start` and `end` may name: from the Unix epoch to the last four-digit year. Outside
 * them Date reads years 0–99 as 1900–1999 ("0000-01-01" would be 1900) and Intl shows year 0 as 1.
 */
export const FIRST_YEAR = 1970;
export const LAST_YEAR = 9999;

// ---------------------------------------------------------------- time zones

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
	let f = formatters.get(tz);
	if (!f) {
		f = new Intl.DateTimeFormat("en-US", {
			timeZone: tz,
			hourCycle: "h23",
			year: "numeric",
			month: "numeric",
			day: "numeric",
			hour: "numeric",
			minute: "numeric",
			second: "numeric",
			weekday: "short",
		});
		formatters.set(tz, f);
	}
	return f;
}

/** Is this an IANA time zone the runtime knows? */
export function validTimeZone(tz: string): boolean {
	try {
		formatter(tz);
		return true;
	} catch {
		return false;
	}
}

export interface WallClock {
	year: number;
	month: number;
	day: number;
	hour: number;
	minute: number;
	/** 0 = Sunday */
	weekday: number;
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

/** The wall clock of an instant in a time zone. */
export function wallClock(at: Date, tz: string): WallClock {
	const parts: Record<string, string> = {};
	for (const p of formatter(tz).formatToParts(at)) parts[p.type] = p.value;
	return {
		year: +parts.year,
		month: +parts.month,
		day: +parts.day,
		hour: +parts.hour,
		minute: +parts.minute,
		weekday: WEEKDAYS[parts.weekday],
	};
}

/** The zone's offset from UTC at an instant, in ms (UTC+3 → +3 h). */
function offsetAt(at: number, tz: string): number {
	const w = wallClock(new Date(at), tz);
	const seconds = new Date(at).getUTCSeconds();
	return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, seconds) - (at - (at % 1000));
}

/**
 * The instants at which the zone's clocks show this wall time: one normally, two when the clocks go back
 * over it (earliest first), none when they jump over it — then the instant it would have been, which the
 * clocks show shifted by the jump.
 */
export function instantsOf(
	year: number,
	month: number,
	day: number,
	hour: number,
	minute: number,
	tz: string,
): { instants: number[]; skipped: boolean } {
	const asUtc = Date.UTC(year, month - 1, day, hour, minute);
	const offsets = [
		...new Set([offsetAt(asUtc - 14 * 3600_000, tz), offsetAt(asUtc + 14 * 3600_000, tz), offsetAt(asUtc, tz)]),
	];
	const instants = offsets
		.map(off => asUtc - off)
		.filter(u => {
			const w = wallClock(new Date(u), tz);
			return w.year === year && w.month === month && w.day === day && w.hour === hour && w.minute === minute;
		});
	if (instants.length) return { instants: [...new Set(instants)].sort((a, b) => a - b), skipped: false };
	return { instants: [asUtc - offsetAt(asUtc - 14 * 3600_000, tz)], skipped: true };
}

/** "YYYY-MM-DD HH:MM[:SS]" as a wall time in `tz`; null if malformed, not a real date, or outside FIRST_YEAR–LAST_YEAR. */
export function parseWallTime(value: string, tz: string): Date | null {
	const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value.trim());
	if (!m) return null;
	const [y, mo, d, h, mi, s] = m.slice(1).map(v => (v === undefined ? 0 : Number(v)));
	if (y < FIRST_YEAR || y > LAST_YEAR) return null;
	const probe = new Date(Date.UTC(y, mo - 1, d));
	if (probe.getUTCMonth() !== mo - 1 || probe.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) return null;
	return new Date(instantsOf(y, mo, d, h, mi, tz).instants[0] + s * 1000);
}

// ---------------------------------------------------------------- cron

export interface Cron {
	minutes: Set<number>;
	hours: Set<number>;
	days: Set<number>;
	months: Set<number>;
	weekdays: Set<number>;
	/** Both day fields restricted: a day matches when either does. */
	dayEither: boolean;
}

const MACROS: Record<string, string> = {
	"@yearly": "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0",
	"@daily": "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly": "0 * * * *",
};
const MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

export class CronError extends Error {}

function field(text: string, min: number, max: number, names: string[] = [], nameBase = 0): Set<number> {
	const out = new Set<number>();
	const value = (v: string) => {
		const i = names.indexOf(v.toLowerCase());
		const n = i >= 0 ? i + nameBase : /^\d+$/.test(v) ? Number(v) : NaN;
		if (!Number.isInteger(n) || n < min || n > max) throw new CronError(`'${v}' is not in ${min}-${max}`);
		return n;
	};
	for (const part of text.split(",")) {
		const m = /^(\*|[\w]+(?:-[\w]+)?)(?:\/(\d+))?$/.exec(part);
		if (!m) throw new CronError(`'${part}' is not a cron field`);
		const step = m[2] === undefined ? 1 : Number(m[2]);
		if (step < 1) throw new CronError(`step '${m[2]}' must be at least 1`);
		let [lo, hi] = [min, max];
		if (m[1] !== "*") {
			const [a, b] = m[1].split("-");
			lo = value(a);
			hi = b === undefined ? (m[2] === undefined ? lo : max) : value(b);
			if (hi < lo) throw new CronError(`range '${m[1]}' goes backwards`);
		}
		for (let v = lo; v <= hi; v += step) out.add(v);
	}
	return out;
}

/** Parses a five-field cron expression (or a macro); throws CronError with the reason. */
export function parseCron(expr: string): Cron {
	const text = MACROS[expr.trim().toLowerCase()] ?? expr.trim();
	const parts = text.split(/\s+/);
	if (parts.length !== 5)
		throw new CronError(`a cron expression has five fields (minute hour day month weekday), not ${parts.length}`);
	const [mi, h, d, mo, wd] = parts;
	const weekdays = field(wd, 0, 7, DAY_NAMES);
	if (weekdays.has(7)) {
		weekdays.delete(7);
		weekdays.add(0);
	}
	return {
		minutes: field(mi, 0, 59),
		hours: field(h, 0, 23),
		days: field(d, 1, 31),
		months: field(mo, 1, 12, MONTH_NAMES, 1),
		weekdays,
		dayEither: d !== "*" && wd !== "*",
	};
}

function dayMatches(c: Cron, year: number, month: number, day: number): boolean {
	if (!c.months.has(month)) return false;
	const weekday = new Date(Date.UTC(year, month - 1, day)).getUTCDay();
	return c.dayEither ? c.days.has(day) || c.weekdays.has(weekday) : c.days.has(day) && c.weekdays.has(weekday);
}

/** Days in each month, February in a leap year (a date that exists in some year exists in one of these). */
const MONTH_DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Why no date of any year matches the expression ("0 0 30 2 *", "0 0 31 4,6,9,11 *"), or null when some
 * date does. Exact and bounded (12 × 31 checks): every hour and minute exists on every day (a wall time the
 * clocks skip still runs, shifted), so an expression can fire exactly when its day fields match a date.
 * When both day fields are restricted, a day matches when either does, and every month has every weekday:
 * always some date. Otherwise one day field is `*` (all values): a weekday restriction alone matches in
 * every month, and a day-of-month restriction alone matches when one of its days exists in one of its
 * months, February 29 included (it comes back every 4 years, at most 8 across a century that is not leap).
 */
export function neverDueReason(c: Cron): string | null {
	if (c.dayEither || c.days.size === 31) return null;
	for (const month of c.months) for (const day of c.days) if (day <= MONTH_DAYS[month - 1]) return null;
	const months = [...c.months]
		.sort((a, b) => a - b)
		.map(m => MONTH_NAMES[m - 1])
		.join(", ");
	const days = [...c.days].sort((a, b) => a - b).join(", ");
	return `never due: no date matches day ${days} of ${months}`;
}

/**
 * How far ahead a cron expression is searched. Matching days of an expression that can fire (neverDueReason
 * is null) are never further apart than February 29s across a century year that is not leap (2096-02-29 to
 * 2104-02-29: 2,921 days), so this horizon finds the next due time of every such expression, and a search
 * costs at most this many day checks.
 */
const CRON_HORIZON_DAYS = 366 * 8;

/** The first instant strictly after `after` at which the expression is due in `tz`, or null within the horizon. */
export function nextCron(c: Cron, tz: string, after: Date): Date | null {
	const from = wallClock(after, tz);
	const hours = [...c.hours].sort((a, b) => a - b);
	const minutes = [...c.minutes].sort((a, b) => a - b);
	const day0 = Date.UTC(from.year, from.month - 1, from.day);
	// Start a day early: an instant shortly after midnight may still be due at a late wall time of the day before (clocks going back).
	for (let i = -1; i < CRON_HORIZON_DAYS; i++) {
		const date = new Date(day0 + i * 86_400_000);
		const [y, mo, d] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
		if (!dayMatches(c, y, mo, d)) continue;
		for (const h of hours) {
			for (const m of minutes) {
				// The first time the wall clock shows it: a repeated hour (clocks going back) runs once.
				const first = instantsOf(y, mo, d, h, m, tz).instants[0];
				if (first > after.getTime()) return new Date(first);
			}
		}
	}
	return null;
}

// ---------------------------------------------------------------- the schedule

/** The first due time strictly after `after` (or at start, if start is after it); null when none is left. */
export function nextDue(s: Schedule, after: Date): Date | null {
	let next: Date | null;
	if (s.cron)
		next = nextCron(parseCron(s.cron), s.timezone || "UTC", new Date(Math.max(after.getTime(), s.start.getTime() - 1)));
	else if (s.interval && s.interval > 0) {
		const ms = s.interval * 1000;
		const k = after < s.start ? 0 : Math.floor((after.getTime() - s.start.getTime()) / ms) + 1;
		next = new Date(s.start.getTime() + k * ms);
	} else next = after < s.start ? s.start : null;
	if (next && s.end && next > s.end) return null;
	return next;
}

/**
 * The schedule's first due time (at or after start), or null when it has none: a cron expression no date
 * matches, or whose first match comes after `end`. Bounded like nextCron. Independent of the clock: a
 * schedule whose due times are all past still has one (what happens to missed runs is planRun's business).
 */
export function firstDue(s: Schedule): Date | null {
	return nextDue(s, new Date(s.start.getTime() - 1));
}

/** The next `count` due times after `after`. */
export function preview(s: Schedule, after: Date, count: number): Date[] {
	const out: Date[] = [];
	let cursor = after;
	while (out.length < count) {
		const next = nextDue(s, cursor);
		if (!next) break;
		out.push(next);
		cursor = next;
	}
	return out;
}

// ---------------------------------------------------------------- what happens to a due run

export interface RunPolicy {
	misfire?: "run_once" | "skip";
	overlap?: "skip" | "allow";
}

export interface RunPlan {
	/** Run now, or skip with this reason. */
	skip: string | null;
	/** The due time after this one (missed ones skipped); null: the task is finished. */
	next: Date | null;
}

/**
 * What the scheduler does with a task due at `due`, looked at `now`: run it, unless it is a misfire (later
 * than `graceMs`) under `misfire: skip`, or the previous run still has hosts outstanding under
 * `overlap: skip` (the default). Either way `next` is the first due time after max(now, due): runs missed
 * during an outage never fire in a burst.
 */
export function planRun(
	s: Schedule & RunPolicy,
	due: Date,
	now: Date,
	graceMs: number,
	previousOutstanding: boolean,
): RunPlan {
	const next = nextDue(s, now > due ? now : due);
	if (now.getTime() - due.getTime() > graceMs && s.misfire === "skip")
		return { skip: "missed (misfire policy skip)", next };
	if (previousOutstanding && s.overlap !== "allow")
		return { skip: "the previous run still has hosts outstanding (overlap policy skip)", next };
	return { skip: null, next };
}

/** The next due time of a paused task that is resumed at `now`: runs missed while paused are not made up. */
export function resumedNext(s: Schedule, now: Date): Date | null {
	return nextDue(s, new Date(now.getTime() - 1));
}
