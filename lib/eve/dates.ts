/** Eve's DATE_FORMAT, "%a, %d %b %Y %H:%M:%S GMT" (RFC 1123), which is exactly Date#toUTCString. */

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;

/** "00" to "59": the fields of a time of day. */
const TWO_DIGITS = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, "0"));
const DAY_MS = 86_400_000;
/** "Sat, 28 Nov 2026 " by day number since the epoch: the part of the format a day shares. */
const dayPrefixes = new Map<number, string>();

/**
 * Date#toUTCString, character for character, at a seventh of its cost for most dates: the day's part is made
 * once per day (by toUTCString itself, so that every year prints as it does), the time of day from a table. A
 * month of `online` points at one minute is 43,200 dates.
 */
export function formatHttpDate(date: Date): string {
	const time = date.getTime();
	if (!Number.isFinite(time)) return date.toUTCString();
	const day = Math.floor(time / DAY_MS);
	let prefix = dayPrefixes.get(day);
	if (prefix === undefined) {
		if (dayPrefixes.size >= 4096) dayPrefixes.clear();
		const midnight = new Date(day * DAY_MS).toUTCString();
		// "00:00:00 GMT" is the last 12 characters whatever the width of the year.
		dayPrefixes.set(day, (prefix = midnight.slice(0, midnight.length - 12)));
	}
	const s = Math.floor((time - day * DAY_MS) / 1000);
	return `${prefix}${TWO_DIGITS[(s / 3600) | 0]}:${TWO_DIGITS[((s / 60) | 0) % 60]}:${TWO_DIGITS[s % 60]} GMT`;
}

/** Parses an HTTP-date; null when the string is not one (or names an impossible date). */
export function parseHttpDate(value: string): Date | null {
	const m = HTTP_DATE.exec(value);
	if (!m) return null;
	const [, , day, mon, year, hh, mm, ss] = m;
	const date = new Date(Date.UTC(+year, MONTHS.indexOf(mon), +day, +hh, +mm, +ss));
	return date.getUTCDate() === +day && +hh < 24 && +mm < 60 && +ss < 60 ? date : null;
}

export function isHttpDate(value: unknown): value is string {
	return typeof value === "string" && parseHttpDate(value) !== null;
}

/** Eve stamps _created/_updated with second precision. */
export function nowSeconds(): Date {
	return new Date(Math.floor(Date.now() / 1000) * 1000);
}

/**
 * Replaces every Date at any depth with its HTTP-date form, as Eve's JSON encoder does. The value is not
 * changed: what holds a Date is copied, what holds none is shared with the value given.
 */
export function renderDates<T>(value: T): T {
	if (value instanceof Date) return formatHttpDate(value) as unknown as T;
	if (Array.isArray(value)) {
		let out: unknown[] | null = null;
		for (let i = 0; i < value.length; i++) {
			const shown = renderDates(value[i]);
			if (shown !== value[i]) (out ??= [...value])[i] = shown;
		}
		return (out ?? value) as T;
	}
	if (value !== null && typeof value === "object") {
		let out: Record<string, unknown> | null = null;
		for (const key of Object.keys(value)) {
			const v = (value as Record<string, unknown>)[key];
			const shown = renderDates(v);
			// Own properties whatever the key: a client's `__proto__` key is data, shown back as sent (the copy
			// holds it as an own property, so assigning it sets that property).
			if (shown !== v) (out ??= Object.fromEntries(Object.entries(value)))[key] = shown;
		}
		return (out ?? value) as T;
	}
	return value;
}
