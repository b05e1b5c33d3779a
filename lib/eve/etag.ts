/**
 * Entity tags of records, and the conditional headers that name them (docs/api.md, "ETags and
 * conditional requests"): what a record's ETag is, how `If-Match` and `If-None-Match` are read and
 * compared, and the 412 a failed `If-Match` gives. The Eve mixin uses them for item reads and writes,
 * the gateway for the 304 of an item read.
 *
 * A record's ETag is a SHA-1 (40 hex, as Eve's `_etag`) of the stored record, every field included
 * (`_updated` and the revision token `_rev` too), keys in sorted order, so any change to what is stored —
 * by the API or by any service — changes it. It is computed when needed, never stored.
 */
import { createHash, randomBytes } from "node:crypto";
import { EveError } from "./errors";

/** Eve's message for a failed If-Match (eve/methods/common.py get_document). */
export const ETAG_MISMATCH = "Client and server etags don't match";

export const preconditionFailed = () => new EveError(412, ETAG_MISMATCH);

/**
 * The stored field that every write of the Eve layer sets to a new random value: compare-and-write
 * filters on it (with `_updated`), so two writes made from the same ETag cannot both succeed. Never shown.
 */
export const REVISION_FIELD = "_rev";

export function newRevision(): string {
	return randomBytes(8).toString("hex");
}

/** The record's ETag (unquoted). `variant` separates representations that differ by caller (hosts: admins). */
export function documentEtag(doc: Record<string, unknown>, variant = ""): string {
	const hash = createHash("sha1");
	hash.update(variant);
	hash.update("\u0000");
	hash.update(canonical(doc));
	return hash.digest("hex");
}

/** The ETag header value: quoted, strong. */
export function quoteEtag(etag: string): string {
	return `"${etag}"`;
}

/**
 * A deterministic serialization: object keys sorted, dates by their instant (tagged, so a date and the
 * string of its ISO form differ). Stored records are plain data: objects, arrays, strings, numbers,
 * booleans, null and dates.
 */
export function canonical(value: unknown): string {
	if (value === null || typeof value !== "object") return canonicalScalar(value);
	if (value instanceof Date)
		return `{"$date":${JSON.stringify(Number.isNaN(value.getTime()) ? null : value.toISOString())}}`;
	if (Array.isArray(value)) {
		let out = "[";
		for (let i = 0; i < value.length; i++)
			out += (i ? "," : "") + (value[i] === undefined ? "null" : canonical(value[i]));
		return out + "]";
	}
	if (Buffer.isBuffer(value)) return `{"$binary":${JSON.stringify(value.toString("base64"))}}`;
	const record = value as Record<string, unknown>;
	const keys = Object.keys(record).sort();
	let out = "{";
	let first = true;
	for (const k of keys) {
		const v = record[k];
		if (v === undefined) continue;
		out += (first ? "" : ",") + JSON.stringify(k) + ":" + canonical(v);
		first = false;
	}
	return out + "}";
}

/** A value that is not an object: as JSON, with what JSON cannot say made explicit. */
function canonicalScalar(value: unknown): string {
	if (value === undefined || typeof value === "function" || typeof value === "symbol") return "null";
	if (typeof value === "bigint") return value.toString();
	return JSON.stringify(value);
}

/** A parsed If-Match / If-None-Match header: `*`, or the opaque tags it lists (quotes and `W/` removed). */
export interface EtagCondition {
	any: boolean;
	tags: string[];
}

/**
 * Reads an If-Match or If-None-Match value: `*`, or a comma-separated list of entity tags, each quoted
 * (`"x"`), weak (`W/"x"`) or bare (`x`, which Eve accepts too: it strips the quotes). Null when the header
 * is absent or blank (Eve ignores an empty If-Match).
 */
export function parseEtagCondition(header: string | string[] | undefined): EtagCondition | null {
	const raw = Array.isArray(header) ? header.join(",") : header;
	if (raw == null || raw.trim() === "") return null;
	if (raw.trim() === "*") return { any: true, tags: [] };
	const tags: string[] = [];
	for (const part of splitTags(raw)) {
		let tag = part.trim();
		if (!tag) continue;
		if (tag.startsWith("W/")) tag = tag.slice(2);
		if (tag.length >= 2 && tag.startsWith('"') && tag.endsWith('"')) tag = tag.slice(1, -1);
		if (tag === "*") return { any: true, tags: [] };
		tags.push(tag);
	}
	return tags.length ? { any: false, tags } : null;
}

/** Splits on commas outside quotes (a quoted tag may hold a comma). */
function splitTags(raw: string): string[] {
	const parts: string[] = [];
	let quoted = false;
	let start = 0;
	for (let i = 0; i < raw.length; i++) {
		const c = raw[i];
		if (c === '"') quoted = !quoted;
		else if (c === "," && !quoted) {
			parts.push(raw.slice(start, i));
			start = i + 1;
		}
	}
	parts.push(raw.slice(start));
	return parts;
}

/** If-Match on a write to an existing record: `*` or one listed tag equal to its ETag (weak tags compare too, as in Eve). */
export function ifMatchPasses(condition: EtagCondition, etag: string): boolean {
	return condition.any || condition.tags.includes(etag);
}

/**
 * If-None-Match on a read: true (304) only when a listed tag is the current ETag. `*` never is: it says
 * "any version you have", and the one the client has may be old.
 */
export function ifNoneMatchHits(header: string | string[] | undefined, etagHeader: string): boolean {
	const condition = parseEtagCondition(header);
	if (!condition || condition.any) return false;
	const current = parseEtagCondition(etagHeader);
	if (!current || current.any || current.tags.length !== 1) return false;
	return condition.tags.includes(current.tags[0]);
}

/** A digest of a value by its canonical serialization: equal values, whatever their keys' order, digest alike. */
export function canonicalDigest(value: unknown): string {
	return createHash("sha256").update(canonical(value)).digest("hex");
}
