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

/** A record rendered: its JSON text without `_links`, the JSON text of its `_links`, and its ETag once asked. */
export interface Rendered {
	/** The record's fields as a JSON object's text, without its closing brace. */
	fields: string;
	/** `_links` as a JSON object's text, without its closing brace. */
	links: string;
	etag?: string;
}

/** JSON text that is already the body, given to the Eve layer's cachedRead instead of a value to serialize. */
export class RawJson {
	constructor(readonly text: string) {}
}

/** The text of a rendered record with its `_links`, and more links after its own (`"name":{...}` members' text). */
export function renderedText(r: Rendered, moreLinks = ""): string {
	const links = moreLinks && r.links.length > 1 ? `${r.links},${moreLinks}` : r.links + moreLinks;
	return `${r.fields}${r.fields.length > 1 ? "," : ""}"_links":${links}}}`;
}

/** Splits a rendered record (its `_links` last, as the Eve layer builds it) into the two texts kept. */
export function toRendered(item: Record<string, unknown>): Rendered {
	const { _links, ...fields } = item;
	return { fields: JSON.stringify(fields).slice(0, -1), links: JSON.stringify(_links ?? {}).slice(0, -1) };
}

export class RenderCache {
	private readonly records = new Map<object, Map<string, Rendered>>();
	/** Renderings served from the cache and made afresh since it was created (the tests' and the bench's measure). */
	hits = 0;
	misses = 0;

	/** @param maxRecords record versions kept; the least recently read go first (each keeps its stored record alive). */
	constructor(private readonly maxRecords: number) {}

	get(record: object, variant: string): Rendered | undefined {
		const variants = this.records.get(record);
		const hit = variants?.get(variant);
		if (hit && variants) {
			// Most recently read last: the Map's order is the eviction order.
			this.records.delete(record);
			this.records.set(record, variants);
			this.hits++;
		} else {
			this.misses++;
		}
		return hit;
	}

	set(record: object, variant: string, rendered: Rendered): void {
		let variants = this.records.get(record);
		if (!variants) {
			if (this.records.size >= this.maxRecords) this.records.delete(this.records.keys().next().value as object);
			this.records.set(record, (variants = new Map()));
		}
		// A record is read in few ways (roles, projections); a client inventing projections cannot grow one without bound.
		if (variants.size >= 16) variants.delete(variants.keys().next().value as string);
		variants.set(variant, rendered);
	}

	get size(): number {
		return this.records.size;
	}
}
