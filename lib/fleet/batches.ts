/**
 * Splits records into batches that fit one transporter message: NATS refuses a message over its
 * max_payload (1 MiB by default), so a batch of host records with their grains, or of job returns, is
 * cut by size as well as by count. A record larger than the limit goes alone.
 */

/** Serialized size budget of one batch: half of NATS's default max_payload, leaving room for the envelope. */
export const BATCH_BYTES = 512 * 1024;

export function batchesBySize<T>(items: T[], maxCount: number, maxBytes = BATCH_BYTES): T[][] {
	const out: T[][] = [];
	for (let start = 0; start < items.length; ) {
		const end = batchEnd(items, start, maxCount, maxBytes);
		out.push(items.slice(start, end));
		start = end;
	}
	return out;
}

/** Where the batch that starts at `start` ends (exclusive): what fits one message, at least one record. Sizes only what it takes. */
export function batchEnd<T>(items: T[], start: number, maxCount: number, maxBytes = BATCH_BYTES): number {
	let bytes = 0;
	let end = start;
	while (end < items.length && end - start < maxCount) {
		const size = Buffer.byteLength(JSON.stringify(items[end]) ?? "");
		if (end > start && bytes + size > maxBytes) break;
		bytes += size;
		end++;
	}
	return end;
}

/** Text cut to `maxBytes` (UTF-8), saying how much was left out. */
export function capText(text: string, maxBytes: number): string {
	if (Buffer.byteLength(text) <= maxBytes) return text;
	const cut = Buffer.from(text)
		.subarray(0, maxBytes)
		.toString("utf8")
		.replace(/\uFFFD$/, "");
	return `${cut}\n… [${Buffer.byteLength(text) - Buffer.byteLength(cut)} more bytes not kept]`;
}
