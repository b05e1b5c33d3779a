/**
 * Splits records into batches that fit one transporter message: NATS refuses a message over its
 * max_payload (1 MiB by default), so a batch of host records with their grains, or of job returns, is
 * cut by size as well as by count. A record larger than the limit goes alone.
 */

/** Serialized size budget of one batch: half of NATS's default max_payload, leaving room for the envelope. */
export const BATCH_BYTES = 512 * 1024;

export function batchesBySize<T>(items: T[], maxCount: number, maxBytes = BATCH_BYTES): T[][] {
	const out: T[][] = [];
	let current: T[] = [];
	let bytes = 0;
	for (const item of items) {
		const size = Buffer.byteLength(JSON.stringify(item) ?? "");
		if (current.length && (current.length >= maxCount || bytes + size > maxBytes)) {
			out.push(current);
			current = [];
			bytes = 0;
		}
		current.push(item);
		bytes += size;
	}
	if (current.length) out.push(current);
	return out;
}

/** Text cut to `maxBytes` (UTF-8), saying how much was left out. */
export function capText(text: string, maxBytes: number): string {
	if (Buffer.byteLength(text) <= maxBytes) return text;
	const cut = Buffer.from(text).subarray(0, maxBytes).toString("utf8").replace(/\uFFFD$/, "");
	return `${cut}\n… [${Buffer.byteLength(text) - Buffer.byteLength(cut)} more bytes not kept]`;
}
