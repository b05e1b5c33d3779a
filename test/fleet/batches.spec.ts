/** lib/fleet/batches.ts: batches that fit one transporter message, and text cut to a size. */
import { batchesBySize, capText } from "../../lib/fleet/batches";

describe("batchesBySize", () => {
	it("cuts by count and by serialized size, keeps order, and sends an oversized record alone", () => {
		const small = Array.from({ length: 10 }, (_, i) => ({ i }));
		expect(batchesBySize(small, 4).map(b => b.length)).toEqual([4, 4, 2]);
		const big = (n: number) => ({ pad: "x".repeat(n) });
		const batches = batchesBySize([big(400), big(400), big(400), big(2000), big(10)], 100, 1000);
		expect(batches.map(b => b.map(x => x.pad.length))).toEqual([[400, 400], [400], [2000], [10]]);
		for (const b of batches.filter(b => b.length > 1)) expect(Buffer.byteLength(JSON.stringify(b))).toBeLessThanOrEqual(1000 + b.length + 1);
		expect(batchesBySize([], 10)).toEqual([]);
	});
});

describe("capText", () => {
	it("keeps short text and cuts long text at a UTF-8 boundary, saying how much was left out", () => {
		expect(capText("hello", 10)).toBe("hello");
		const cut = capText("é".repeat(100), 51);
		expect(cut.startsWith("é".repeat(25))).toBe(true);
		expect(cut).not.toContain("\uFFFD");
		expect(cut).toMatch(/\[150 more bytes not kept\]$/);
	});
});
