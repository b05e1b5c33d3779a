/**
 * What a PATCH body means, as Eve reads it: dicts are merged into the stored dicts
 * (MERGE_NESTED_DOCUMENTS), and a top-level key with dots (`{"info.regex": "^w-"}`) names a field inside
 * a dict, which is set to the value given (what MongoDB's `$set` of a dotted path does under Eve),
 * leaving the dict's other fields as stored. Only top-level keys are paths: a dotted key inside a value
 * (a task's `kwarg`) is data, stored as sent.
 */
import { badRequest, type Issues } from "./errors";
import { MAX_JSON_DEPTH } from "./json-depth";

type Dict = Record<string, unknown>;

export function isPlain(v: unknown): v is Dict {
	return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date) && !Buffer.isBuffer(v);
}

/** Sets an own property, whatever the key (`__proto__` included: never the prototype). */
function setOwn(node: Dict, key: string, value: unknown): void {
	Object.defineProperty(node, key, { value, writable: true, enumerable: true, configurable: true });
}

function own(node: Dict, key: string): unknown {
	return Object.hasOwn(node, key) ? node[key] : undefined;
}

/** Merging goes no deeper than a request body may nest (lib/eve/json-depth.ts): deeper is a bug, not data. */
const MAX_MERGE_DEPTH = MAX_JSON_DEPTH + 1;

/**
 * Eve's MERGE_NESTED_DOCUMENTS: dicts in a PATCH are merged into the stored dicts. Every key is data, kept
 * as an own property (`__proto__` and `constructor` included: the store encodes what it cannot hold).
 */
export function mergeNested(current: unknown, patch: unknown, depth = 0): unknown {
	if (!isPlain(current) || !isPlain(patch)) return patch;
	if (depth > MAX_MERGE_DEPTH) throw badRequest(`cannot merge dicts nested more than ${MAX_MERGE_DEPTH} levels deep`);
	// Spread and defineProperty make own properties; `out[k] = v` would set the prototype for "__proto__".
	const out: Dict = { ...current };
	for (const [k, v] of Object.entries(patch)) setOwn(out, k, mergeNested(own(current, k), v, depth + 1));
	return out;
}

export interface ResolvedPatch {
	/** The body with every dotted key folded into the whole new value of its top-level field. */
	doc: Dict;
	/** Top-level fields that now hold their whole new value: stored as they are, not merged again. */
	exact: string[];
	/** Dotted keys that cannot be applied (an empty segment, or a field inside a value that is not a dict). */
	issues?: Issues;
}

/**
 * Folds the dotted keys of a PATCH body into the stored record: `{"info.regex": "^w-"}` becomes
 * `{"info": {...stored info, "regex": "^w-"}}` (with a plain `info` of the same body merged in first), so
 * that the schema checks the nested field as it will be stored. Bodies without dotted keys come back as
 * they are.
 */
export function resolveDottedKeys(body: Dict, existing: Dict): ResolvedPatch {
	const keys = Object.keys(body);
	if (!keys.some(k => k.includes("."))) return { doc: body, exact: [] };
	const doc: Dict = {};
	for (const k of keys) if (!k.includes(".")) setOwn(doc, k, body[k]);
	const exact = new Set<string>();
	const issues: Issues = {};
	for (const key of keys) {
		if (!key.includes(".")) continue;
		const path = key.split(".");
		if (path.some(p => p === "")) {
			setOwn(issues, key, "not a valid field path (an empty name between dots)");
			continue;
		}
		const [head, ...rest] = path;
		if (!exact.has(head)) {
			const stored = own(existing, head);
			const base = Object.hasOwn(doc, head) ? mergeNested(stored, doc[head]) : stored;
			if (base != null && !isPlain(base)) {
				setOwn(issues, key, `'${head}' is not a dict: a field inside it cannot be set`);
				continue;
			}
			setOwn(doc, head, { ...(base ?? {}) });
			exact.add(head);
		}
		let node = doc[head] as Dict;
		let walked = head;
		let blocked = false;
		for (const seg of rest.slice(0, -1)) {
			const next = own(node, seg);
			if (next != null && !isPlain(next)) {
				setOwn(issues, key, `'${walked}.${seg}' is not a dict: a field inside it cannot be set`);
				blocked = true;
				break;
			}
			// A copy of each dict on the path: the stored record (and other keys' values) stay as they are.
			const copy: Dict = { ...(next ?? {}) };
			setOwn(node, seg, copy);
			node = copy;
			walked = `${walked}.${seg}`;
		}
		if (!blocked) setOwn(node, rest[rest.length - 1], body[key]);
	}
	return Object.keys(issues).length ? { doc, exact: [...exact], issues } : { doc, exact: [...exact] };
}
