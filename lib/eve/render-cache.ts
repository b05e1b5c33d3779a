/**
 * Records as clients see them, serialized once per stored version: a bounded cache keyed by the embedded store's
 * own record object (a record stays the same object until a write replaces it: lib/storage/store.ts
 * findPageShared), then by what else the rendering depends on (the caller's read variant, the projection, list
 * or item). It can never answer an old version: a changed record is another key. Unlike the read caches
 * (READ_CACHE_MS), nothing here expires or is cleared by a write, and a filter or a page it has not seen still
 * reaches the store; only a record's rendering is saved (docs/storage.md, "Rendered records").
 *
 * Also `RawJson`: a body already serialized, which the Eve layer sends as it is.
 */

/** A record rendered: its JSON without `_links`, the JSON of its `_links`, and its ETag once asked. */
export interface Rendered {
	/** The record's fields as a JSON object's bytes, without its closing brace. */
	fields: Buffer;
	/** `_links` as a JSON object's bytes, without its closing brace. */
	links: Buffer;
	etag?: string;
}

/** A body already serialized, in pieces, given to the Eve layer's cachedRead instead of a value to serialize. */
export class RawJson {
	constructor(readonly chunks: Buffer[]) {}

	get body(): Buffer {
		return Buffer.concat(this.chunks);
	}
}

const COMMA = Buffer.from(",");
const LINKS = Buffer.from('"_links":');
const CLOSE = Buffer.from("}}");

/** A kept rendering's bytes in a buffer of their own (not a slice of Node's shared pool, which it would keep alive). */
function own(text: string): Buffer {
	const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
	bytes.write(text);
	return bytes;
}

/**
 * The pieces of a rendered record with its `_links`, and more links after its own (`"name":{...}` members' text),
 * appended to `out` (a list's pieces: no array per record).
 */
export function renderedChunks(r: Rendered, moreLinks = "", out: Buffer[] = []): Buffer[] {
	out.push(r.fields);
	if (r.fields.length > 1) out.push(COMMA);
	out.push(LINKS, r.links);
	if (moreLinks) {
		if (r.links.length > 1) out.push(COMMA);
		out.push(Buffer.from(moreLinks));
	}
	out.push(CLOSE);
	return out;
}

/** Splits a rendered record (its `_links` last, as the Eve layer builds it) into the two pieces kept. */
export function toRendered(item: Record<string, unknown>): Rendered {
	const { _links, ...fields } = item;
	return { fields: own(JSON.stringify(fields).slice(0, -1)), links: own(JSON.stringify(_links ?? {}).slice(0, -1)) };
}

export class RenderCache {
	/**
	 * Two generations: reads are looked up in the young one, then in the old one (and moved to the young one).
	 * When the young one is full it becomes the old one and the old one is dropped: the records not read for a
	 * whole generation go, as an LRU would drop them, without reordering a map on every read.
	 */
	private young = new Map<object, Map<string, Rendered>>();
	private old = new Map<object, Map<string, Rendered>>();
	/** Renderings served from the cache and made afresh since it was created (the tests' and the bench's measure). */
	hits = 0;
	misses = 0;

	/** @param maxRecords record versions kept (each keeps its stored record alive): at most this many, at least half. */
	constructor(private readonly maxRecords: number) {}

	private variants(record: object): Map<string, Rendered> | undefined {
		let variants = this.young.get(record);
		if (variants === undefined) {
			variants = this.old.get(record);
			if (variants !== undefined) {
				this.old.delete(record);
				this.keep(record, variants);
			}
		}
		return variants;
	}

	private keep(record: object, variants: Map<string, Rendered>): void {
		if (this.young.size >= Math.max(1, Math.floor(this.maxRecords / 2))) {
			this.old = this.young;
			this.young = new Map();
		}
		this.young.set(record, variants);
	}

	get(record: object, variant: string): Rendered | undefined {
		const hit = this.variants(record)?.get(variant);
		if (hit) this.hits++;
		else this.misses++;
		return hit;
	}

	set(record: object, variant: string, rendered: Rendered): void {
		let variants = this.variants(record);
		if (!variants) this.keep(record, (variants = new Map()));
		// A record is read in few ways (roles, projections); a client inventing projections cannot grow one without bound.
		if (variants.size >= 16) variants.delete(variants.keys().next().value as string);
		variants.set(variant, rendered);
	}

	/** Record versions kept now. */
	get size(): number {
		return this.young.size + this.old.size;
	}
}
