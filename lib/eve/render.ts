/** Eve's titles, links and field selection, shared by every collection. */
import type { Projection } from "./query";

export interface Link {
	title: string;
	href: string;
}

const titles = new Map<string, string>();

/** Eve's default item_title: resource.rstrip("s").capitalize() (so failed_patches -> "Failed_patche"); once per resource (a list asks for every link). */
export function itemTitle(resource: string): string {
	let title = titles.get(resource);
	if (title === undefined) {
		const stripped = resource.replace(/s+$/, "");
		title = stripped.charAt(0).toUpperCase() + stripped.slice(1).toLowerCase();
		// Resources are the route table's few names; bounded anyway.
		if (titles.size < 1000) titles.set(resource, title);
	}
	return title;
}

export const HOME_LINK: Link = { title: "home", href: "/" };

export const MASK = "********";

/**
 * Applies Eve's projection rules to a stored document: base = the collection's fields plus the
 * auto fields; any 1 makes it inclusive; auto fields can never be hidden.
 */
export function project(
	doc: Record<string, unknown>,
	fields: Set<string>,
	autoFields: Set<string>,
	projection: Projection | null,
): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	if (projection?.mode === "include") {
		for (const path of projection.fields) {
			const top = path.split(".")[0];
			if (!fields.has(top) || autoFields.has(top)) continue;
			copyPath(doc, out, path.split("."));
		}
		for (const key of Object.keys(doc)) if (autoFields.has(key)) out[key] = doc[key];
		return orderLike(doc, out);
	}
	const excluded = new Set(projection?.fields.filter(f => !autoFields.has(f)) ?? []);
	for (const [key, value] of Object.entries(doc)) {
		if ((fields.has(key) || autoFields.has(key)) && !excluded.has(key)) out[key] = value;
	}
	return out;
}

function copyPath(src: Record<string, unknown>, dst: Record<string, unknown>, path: string[]): void {
	const [head, ...rest] = path;
	if (!(head in src)) return;
	if (rest.length === 0) {
		dst[head] = src[head];
		return;
	}
	const child = src[head];
	if (child === null || typeof child !== "object" || Array.isArray(child)) return;
	const target = (dst[head] ??= {}) as Record<string, unknown>;
	copyPath(child as Record<string, unknown>, target, rest);
}

function orderLike(template: Record<string, unknown>, picked: Record<string, unknown>): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	for (const key of Object.keys(template)) if (key in picked) out[key] = picked[key];
	return out;
}

/** Lists and items come back as serialized JSON bytes (the Eve layer's cached reads). */
export function readJson<T = any>(value: unknown): T {
	if (Buffer.isBuffer(value)) return JSON.parse(value.toString("utf8")) as T;
	if (value instanceof Uint8Array) return JSON.parse(Buffer.from(value).toString("utf8")) as T;
	if (typeof value === "string") return JSON.parse(value) as T;
	return value as T;
}
