/** lib/fleet/batches.ts: batches that fit one transporter message, and text cut to a size. */
import { batchEnd, batchesBySize, capText } from "../../lib/fleet/batches";

describe("batchesBySize", () => {
	it("cuts by count and by serialized size, keeps order, and sends an oversized record alone", () => {
		const small = Array.from({ length: 10 }, (_, i) => ({ i }));
		expect(batchesBySize(small, 4).map(b => b.length)).toEqual([4, 4, 2]);
		const big = (n: number) => ({ pad: "x".repeat(n) });
		const batches = batchesBySize([big(400), big(400), big(400), big(2000), big(10)], 100, 1000);
		expect(batches.map(b => b.map(x => x.pad.length))).toEqual([[400, 400], [400], [2000], [10]]);
		for (const b of batches.filter(b => b.length > 1))
			expect(Buffer.byteLength(JSON.stringify(b))).toBeLessThanOrEqual(1000 + b.length + 1);
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

describe("batch boundaries", () => {
	/** A record whose JSON is exactly `bytes` long (`{"p":"…"}` is 8 bytes around the padding). */
	const sized = (bytes: number) => ({ p: "x".repeat(bytes - 8) });

	it("fits records up to the byte limit exactly, and no further", () => {
		expect(batchesBySize([sized(400), sized(600), sized(8)], 10, 1000).map(b => b.length)).toEqual([2, 1]);
		expect(batchesBySize([sized(400), sized(601)], 10, 1000).map(b => b.length)).toEqual([1, 1]);
		expect(batchEnd([sized(400), sized(600), sized(400)], 0, 10, 1000)).toBe(2);
		expect(batchEnd([sized(400), sized(600), sized(400)], 1, 10, 1000)).toBe(3);
	});

	it("fills one message with half of NATS's 1 MiB by default", () => {
		const kib = (n: number) => sized(n * 1024);
		expect(batchesBySize([kib(200), kib(200), kib(112), kib(1)], 100).map(b => b.length)).toEqual([3, 1]);
	});

	it("counts from where the batch starts, and sizes a record that has no JSON as nothing", () => {
		expect(batchEnd([1, 2, 3, 4, 5, 6, 7], 2, 3)).toBe(5);
		expect(batchEnd([1, 2, 3], 3, 3)).toBe(3);
		expect(batchesBySize([undefined, undefined, "ab"], 10, 4).map(b => b.length)).toEqual([3]);
	});
});

describe("capText, at the limit", () => {
	it("keeps a text of exactly the limit, and cuts one byte more", () => {
		expect(capText("abcd", 4)).toBe("abcd");
		expect(capText("abcde", 4)).toBe("abcd\n… [1 more bytes not kept]");
		// A replacement character the text itself holds is kept; only a character the cut split is dropped.
		expect(capText("\uFFFDabcdef", 5)).toBe("\uFFFDab\n… [4 more bytes not kept]");
	});
});
