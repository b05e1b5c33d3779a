/**
 * A bounded cache of read results that a write clears. `generation` is taken before a read starts and
 * given back with its result: a result computed across a clear is not stored, so a read that raced a
 * write can never be served after it. Entries also expire, which bounds staleness should a change
 * notice from another process be lost.
 */
export class ReadCache<V> {
	private readonly entries = new Map<string, { at: number; value: V }>();
	private gen = 0;

	constructor(
		private readonly ttlMs: number,
		private readonly maxEntries: number,
	) {}

	/** False with a TTL of 0 (READ_CACHE_MS=0): nothing is ever kept. */
	get enabled(): boolean {
		return this.ttlMs > 0;
	}

	/** How many answers are kept (some may have expired and not been dropped yet). */
	get size(): number {
		return this.entries.size;
	}

	get generation(): number {
		return this.gen;
	}

	get(key: string): V | undefined {
		const hit = this.entries.get(key);
		if (!hit) return undefined;
		if (Date.now() - hit.at >= this.ttlMs) {
			this.entries.delete(key);
			return undefined;
		}
		return hit.value;
	}

	set(key: string, value: V, generation: number): void {
		if (generation !== this.gen || this.ttlMs === 0) return;
		if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
		this.entries.set(key, { at: Date.now(), value });
	}

	clear(): void {
		this.gen++;
		this.entries.clear();
	}
}

/** How long a cached caller may live without a change notice (the only bound across processes); reads: READ_CACHE_MS (lib/config.ts). */
export const READ_CACHE_MS = 5000;
