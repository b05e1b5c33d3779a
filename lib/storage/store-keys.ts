/**
 * Field names as NeDB and MongoDB can store them. Both refuse a key that starts with `$` or holds a `.`
 * (MongoDB also a NUL), and a key `__proto__` is lost on the way (NeDB's copy, BSON's reader and any
 * `out[k] = v` set the prototype instead), yet clients send such keys (a `kwarg` of `{"$x": 1}`), and
 * what they send must be stored and shown back exactly. So every key is encoded on its way in and
 * decoded on its way out of lib/storage/store.ts, percent-style:
 *
 *   `%` -> `%25`   `.` -> `%2E`   NUL -> `%00`   a leading `$` -> `%24`   `__proto__` -> `%5F_proto__`
 *
 * Every other key is stored as it is, so existing records and indexes keep working. Decoding undoes
 * exactly these escapes and nothing else, so decode(encode(k)) === k for every string: the encoding
 * cannot make two keys one. (A key stored before this encoding existed that holds `%25`, `%2E` or
 * `%00`, starts with `%24` or is `%5F_proto__` now reads decoded; docs/api.md says so.)
 *
 * Field paths our code writes (`"pending.by"` in a filter, an update, a sort or a projection) have dots
 * that separate fields: each segment is encoded on its own, the separators never. Query and update
 * operators (`$in`, `$elemMatch`, `$each`…) are not keys of data and stay; literal values inside
 * filters and updates are data and have all their keys encoded.
 *
 * The walks over documents use their own stack (no nesting can overflow the call stack), look before
 * they copy (a document none of whose keys changes is returned as it is, with no allocation), and copy
 * only the objects on the way to a key that changes. Filters and updates, which our code builds, are
 * walked recursively to a fixed depth; the values inside them are walked like documents.
 */

const PROTO = "__proto__";
const PROTO_ENCODED = "%5F_proto__";
const DOLLAR = 0x24;
/** A character that is escaped wherever it is in a key. */
const UNSAFE = /[%.\0]/;
const UNSAFE_ALL = /[%.\0]/g;
const ESCAPE: Record<string, string> = { "%": "%25", ".": "%2E", "\0": "%00" };
/** The escapes `encodeKey` writes: `%24` only ever starts a key. */
const ENCODED = /^%24|%(?:25|2E|00)/g;
const UNESCAPE: Record<string, string> = { "%24": "$", "%25": "%", "%2E": ".", "%00": "\0" };

/** Filters and updates are built by our code: deeper than this is a bug, not data. */
const MAX_FILTER_DEPTH = 64;

type Container = Record<string, unknown> | unknown[];

// ---------------------------------------------------------------- keys

/** Whether a key has to be written differently to be stored. */
export function keyNeedsEncoding(key: string): boolean {
	return key.charCodeAt(0) === DOLLAR || UNSAFE.test(key) || key === PROTO;
}

/** The key as it is stored. */
export function encodeKey(key: string): string {
	if (!keyNeedsEncoding(key)) return key;
	if (key === PROTO) return PROTO_ENCODED;
	const escaped = key.replace(UNSAFE_ALL, c => ESCAPE[c]);
	return escaped.charCodeAt(0) === DOLLAR ? "%24" + escaped.slice(1) : escaped;
}

/** The key as it was sent, from its stored form. */
export function decodeKey(key: string): string {
	if (!key.includes("%")) return key;
	if (key === PROTO_ENCODED) return PROTO;
	return key.replace(ENCODED, e => UNESCAPE[e]);
}

/** A field path with each of its dot-separated segments encoded (the dots are separators). */
export function encodePath(path: string): string {
	if (!path.includes("$") && !path.includes("%") && !path.includes("\0") && !path.includes(PROTO)) return path;
	return path.split(".").map(encodeKey).join(".");
}

// ---------------------------------------------------------------- documents

function isPlainObject(v: unknown): v is Record<string, unknown> {
	if (v === null || typeof v !== "object") return false;
	// Not `v.constructor === Object`: a client key "constructor" would answer that.
	const proto = Object.getPrototypeOf(v);
	return proto === Object.prototype || proto === null;
}

function isContainer(v: unknown): v is Container {
	return Array.isArray(v) || isPlainObject(v);
}

/** Sets `obj[key]` as an own property whatever the key (a plain `obj.__proto__ = v` sets the prototype). */
export function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
	if (key === PROTO) Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
	else obj[key] = value;
}

/** Reused by `anyKey` (which never calls out while it holds it): the common case allocates nothing. */
const scratch: unknown[] = [];

/** Whether a key changes on encoding (`decoding` false) or on decoding (true). */
function keyChanges(key: string, decoding: boolean): boolean {
	return decoding ? key.includes("%") && decodeKey(key) !== key : keyNeedsEncoding(key);
}

/**
 * Whether any key of the objects in `value`, at any depth, changes on encoding or decoding. Walks with
 * its own stack. The hot path of every read (10,000 hosts with their grains): one test per key, no
 * allocation, no call it cannot inline.
 */
function anyKey(value: unknown, decoding: boolean): boolean {
	if (typeof value !== "object" || !isContainer(value)) return false;
	const stack = scratch;
	stack.length = 0;
	stack.push(value);
	let found = false;
	while (stack.length && !found) {
		const node = stack.pop();
		if (Array.isArray(node)) {
			for (let i = 0; i < node.length; i++) {
				const child: unknown = node[i];
				if (typeof child === "object" && isContainer(child)) stack.push(child);
			}
			continue;
		}
		const obj = node as Record<string, unknown>;
		// for…in, not Object.keys: no array per object. An inherited key (only a polluted Object.prototype
		// has any) is passed over when it would count; otherwise walking it is merely wasted.
		for (const key in obj) {
			if (keyChanges(key, decoding) && Object.hasOwn(obj, key)) {
				found = true;
				break;
			}
			const child = obj[key];
			if (typeof child === "object" && isContainer(child)) stack.push(child);
		}
	}
	stack.length = 0;
	return found;
}

/** One object or array being copied by `copyMapped`: `out` is made only once something in it changes. */
interface Frame {
	src: Container;
	/** Own keys of an object; null for an array. */
	keys: string[] | null;
	next: number;
	out: Container | null;
	parent: Frame | null;
	/** This container's index in its parent's keys (or elements). */
	slot: number;
}

function frame(src: Container, parent: Frame | null, slot: number): Frame {
	return { src, keys: Array.isArray(src) ? null : Object.keys(src), next: 0, out: null, parent, slot };
}

/** Puts the child at index `i` of `f` (under its mapped key) into the copy, making the copy when it is the first change. */
function settle(f: Frame, i: number, value: unknown, map: (key: string) => string): void {
	if (f.keys === null) {
		const src = f.src as unknown[];
		if (f.out === null && value !== src[i]) f.out = src.slice(0, i);
		if (f.out !== null) (f.out as unknown[])[i] = value;
		return;
	}
	const src = f.src as Record<string, unknown>;
	const key = f.keys[i];
	const mapped = map(key);
	if (f.out === null && (mapped !== key || value !== src[key])) {
		const out: Record<string, unknown> = {};
		for (let j = 0; j < i; j++) setOwn(out, f.keys[j], src[f.keys[j]]);
		f.out = out;
	}
	if (f.out !== null) setOwn(f.out as Record<string, unknown>, mapped, value);
}

/** `root` with every key mapped, copying only the objects and arrays on the way to a key that changes. */
function copyMapped(root: Container, map: (key: string) => string): Container {
	let f: Frame = frame(root, null, 0);
	for (;;) {
		const size = f.keys ? f.keys.length : (f.src as unknown[]).length;
		if (f.next < size) {
			const i = f.next++;
			const child = f.keys ? (f.src as Record<string, unknown>)[f.keys[i]] : (f.src as unknown[])[i];
			if (isContainer(child)) f = frame(child, f, i);
			else settle(f, i, child, map);
			continue;
		}
		const done = f.out ?? f.src;
		if (f.parent === null) return done;
		settle(f.parent, f.slot, done, map);
		f = f.parent;
	}
}

/** A value with every key at any depth in its stored form; the value itself when none changes. */
export function encodeKeys<T>(value: T): T {
	if (!anyKey(value, false)) return value;
	return copyMapped(value as Container, encodeKey) as T;
}

/** A stored value with every key as it was sent; the value itself when none changes. */
export function decodeKeys<T>(value: T): T {
	if (!anyKey(value, true)) return value;
	return copyMapped(value as Container, decodeKey) as T;
}

/** Decodes every document of a list in place (the list is the caller's own: a fresh database answer). */
export function decodeAll<T>(docs: T[]): T[] {
	for (let i = 0; i < docs.length; i++) {
		const doc = decodeKeys(docs[i]);
		if (doc !== docs[i]) docs[i] = doc;
	}
	return docs;
}

// ---------------------------------------------------------------- filters

const LOGICAL = new Set(["$and", "$or", "$nor"]);

function hasOperatorKey(v: unknown): v is Record<string, unknown> {
	return isPlainObject(v) && Object.keys(v).some(k => k.charCodeAt(0) === DOLLAR);
}

function tooDeep(depth: number): void {
	if (depth > MAX_FILTER_DEPTH)
		throw new Error(`a filter or update nested more than ${MAX_FILTER_DEPTH} levels deep cannot be stored`);
}

/**
 * Builds the object again from `[key, value]` pairs, one for each of its entries, when one of them differs
 * from what `obj` holds; `obj` itself otherwise.
 */
function rebuilt(obj: Record<string, unknown>, pairs: Array<[string, unknown]>): Record<string, unknown> {
	let same = true;
	for (const [k, v] of pairs) if (!Object.hasOwn(obj, k) || obj[k] !== v) same = false;
	if (same) return obj;
	const out: Record<string, unknown> = {};
	for (const [k, v] of pairs) setOwn(out, k, v);
	return out;
}

/** A filter (MongoDB's language) with its field paths and the keys of its literal values in stored form. */
export function encodeFilter<F extends Record<string, unknown>>(filter: F): F {
	return encodeQuery(filter, 0) as F;
}

function encodeQuery(filter: Record<string, unknown>, depth: number): Record<string, unknown> {
	tooDeep(depth);
	const pairs: Array<[string, unknown]> = [];
	for (const [key, value] of Object.entries(filter)) {
		if (LOGICAL.has(key) && Array.isArray(value))
			pairs.push([key, mapSame(value, q => (isPlainObject(q) ? encodeQuery(q, depth + 1) : q))]);
		else if (key.charCodeAt(0) === DOLLAR)
			pairs.push([key, value]); // $where, $expr…: not ours to rewrite
		else pairs.push([encodePath(key), encodeCondition(value, depth + 1)]);
	}
	return rebuilt(filter, pairs);
}

/** What a field is compared with: an object of operators, or a literal value. */
function encodeCondition(cond: unknown, depth: number): unknown {
	if (!hasOperatorKey(cond)) return encodeKeys(cond);
	tooDeep(depth);
	const pairs: Array<[string, unknown]> = [];
	for (const [op, arg] of Object.entries(cond)) pairs.push([op, encodeOperand(op, arg, depth + 1)]);
	return rebuilt(cond, pairs);
}

function encodeOperand(op: string, arg: unknown, depth: number): unknown {
	switch (op) {
		case "$not":
			return encodeCondition(arg, depth);
		case "$all":
			// literals, or `{$elemMatch: …}` conditions
			return Array.isArray(arg)
				? mapSame(arg, v => (hasOperatorKey(v) ? encodeCondition(v, depth) : encodeKeys(v)))
				: encodeKeys(arg);
		case "$elemMatch":
			// `{$elemMatch: {$gt: 1}}` on scalars, `{$elemMatch: {k: "x"}}` (a query on each element) on documents
			if (hasOperatorKey(arg)) return encodeCondition(arg, depth);
			return isPlainObject(arg) ? encodeQuery(arg, depth) : arg;
		default:
			// $eq, $ne, $in, $nin, $gt…: literal values (or lists of them); $exists, $size: scalars, left as they are
			return encodeKeys(arg);
	}
}

function mapSame(list: unknown[], fn: (v: unknown) => unknown): unknown[] {
	let out: unknown[] | null = null;
	for (let i = 0; i < list.length; i++) {
		const v = fn(list[i]);
		if (out === null && v !== list[i]) out = list.slice(0, i);
		if (out !== null) out.push(v);
	}
	return out ?? list;
}

// ---------------------------------------------------------------- updates, sorts, projections

const ARRAY_MODIFIERS = new Set(["$each", "$slice", "$sort", "$position"]);

/** An update (`$set`, `$push`…) with its field paths and the keys of the values it writes in stored form. */
export function encodeUpdate<U extends object>(update: U): U {
	const pairs: Array<[string, unknown]> = [];
	for (const [op, fields] of Object.entries(update)) {
		if (!isPlainObject(fields)) {
			pairs.push([op, fields]);
			continue;
		}
		const inner: Array<[string, unknown]> = [];
		for (const [path, value] of Object.entries(fields)) inner.push([encodePath(path), encodeUpdateValue(op, value)]);
		pairs.push([op, rebuilt(fields, inner)]);
	}
	return rebuilt(update as Record<string, unknown>, pairs) as U;
}

function encodeUpdateValue(op: string, value: unknown): unknown {
	switch (op) {
		case "$unset":
		case "$inc":
		case "$currentDate":
			return value;
		case "$rename":
			return typeof value === "string" ? encodePath(value) : value;
		case "$pull":
			// a condition on the elements to remove: operators, or a query on each element
			if (hasOperatorKey(value)) return encodeCondition(value, 1);
			return isPlainObject(value) ? encodeQuery(value, 1) : value;
		case "$push":
		case "$addToSet":
			if (isPlainObject(value) && Array.isArray(value.$each) && Object.keys(value).every(k => ARRAY_MODIFIERS.has(k))) {
				return rebuilt(
					value,
					Object.entries(value).map(([k, v]): [string, unknown] => [k, k === "$each" ? encodeKeys(v) : v]),
				);
			}
			return encodeKeys(value);
		default:
			return encodeKeys(value);
	}
}

/** Sort fields in stored form; the same list when none changes. */
export function encodeSort<S extends Array<[string, 1 | -1]>>(sort: S): S {
	return mapSame(sort, entry => {
		const [path, dir] = entry as [string, 1 | -1];
		const stored = encodePath(path);
		return stored === path ? entry : [stored, dir];
	}) as S;
}

/** Field paths (projections, scans, indexes) in stored form; the same list when none changes. */
export function encodePaths(paths: string[]): string[] {
	return mapSame(paths, p => encodePath(p as string)) as string[];
}
