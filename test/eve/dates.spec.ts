/**
 * Eve's dates (lib/eve/dates.ts): formatHttpDate is Date#toUTCString exactly — every time of day, years of
 * every width, before the epoch, milliseconds dropped, invalid dates — however many dates it formats.
 */
import { formatHttpDate, parseHttpDate } from "../../lib/eve/dates";
import { prng } from "../../bench/hosts";

describe("formatHttpDate", () => {
	it("is toUTCString for every second of a day, at the edges of time and for invalid dates", () => {
		const day = Date.UTC(2026, 10, 28);
		for (let s = 0; s < 86_400; s++) {
			const d = new Date(day + s * 1000 + (s % 1000));
			expect(formatHttpDate(d)).toBe(d.toUTCString());
		}
		const edges = [
			0,
			-1,
			-999,
			-1000,
			-1001,
			-86_400_000,
			-86_400_001,
			Date.UTC(999, 0, 1),
			Date.UTC(-1, 5, 3, 4, 5, 6),
			Date.UTC(10_000, 0, 1) - 1,
			Date.UTC(10_000, 0, 1),
			8.64e15,
			-8.64e15,
			1.5,
			-1.5,
		];
		for (const t of edges) expect(formatHttpDate(new Date(t))).toBe(new Date(t).toUTCString());
		expect(formatHttpDate(new Date(NaN))).toBe("Invalid Date");
	});

	it("is toUTCString for random times over ±300,000 years, more days than it keeps, and reads back", () => {
		const random = prng(7);
		for (let i = 0; i < 20_000; i++) {
			const t = Math.round((random() * 2 - 1) * 8.64e15 * (i % 2 ? 1 : 1e-4));
			const d = new Date(t);
			const text = formatHttpDate(d);
			expect(text).toBe(d.toUTCString());
			if (d.getUTCFullYear() >= 1000 && d.getUTCFullYear() <= 9999)
				expect(parseHttpDate(text)?.getTime()).toBe(Math.floor(t / 1000) * 1000);
		}
	});
});
