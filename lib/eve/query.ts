/**
 * Eve's list and item query parameters: parsing, checking and the query strings of `_links`.
 *
 * Nothing a client sends reaches a database before it passes through here: `where` is parsed into a
 * filter built only from allow-listed operators, field paths are checked, and sizes are bounded.
 */
import { MAX_JSON_DEPTH, nestingDepth } from "./json-depth";
import { badRequest } from "./errors";
import { parseHttpDate } from "./dates";

export type QueryPairs = Array<[string, string]>;
import type { Filter, SortSpec } from "../storage/store";

export type { Filter, SortSpec };

/** The query string as ordered [key, value] pairs, which is what the gateway sends. */
export class QueryArgs {
	constructor(readonly pairs: QueryPairs = []) {}

	static from(input: unknown): QueryArgs {
		if (Array.isArray(input)) return new QueryArgs(input.map(([k, v]) => [String(k), v == null ? "" : String(v)]));
		if (input && typeof input === "object") {
			return new QueryArgs(
				Object.entries(input as Record<string, unknown>).map(([k, v]) => [
					k,
					typeof v === "string" ? v : JSON.stringify(v),
				]),
			);
		}
		return new QueryArgs();
	}

	get(key: string): string | undefined {
		for (const [k, v] of this.pairs) if (k === key) return v;
		return undefined;
	}

	all(key: string): string[] {
		return this.pairs.filter(([k]) => k === key).map(([, v]) => v);
	}

	has(key: string): boolean {
		return this.pairs.some(([k]) => k === key);
	}
}

// ---------------------------------------------------------------- where

const FIELD_OPERATORS = new Set([
	"$eq",
	"$ne",
	"$gt",
	"$gte",
	"$lt",
	"$lte",
	"$in",
	"$nin",
	"$exists",
	"$not",
	"$all",
	"$size",
	"$elemMatch",
]);
const LOGICAL_OPERATORS = new Set(["$and", "$or", "$nor"]);
const BANNED_OPERATORS = new Set(["$where", "$function", "$accumulator", "$expr", "$regex", "$text", "$jsonSchema"]);
/** Inside `{"$elemMatch": {<operators>}}` on arrays of scalars only comparisons make sense. */
const SCALAR_ELEM_OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"]);
export const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

const MAX_WHERE_LENGTH = 16 * 1024;
const MAX_DEPTH = 12;
const MAX_NODES = 2000;

const FIELD_PATH = /^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$/;

export function checkFieldPath(path: string, what = "field"): void {
	if (path.length > 200 || !FIELD_PATH.test(path)) throw badRequest(`invalid ${what} name '${truncate(path)}'`);
	for (const segment of path.split(".")) {
		if (FORBIDDEN_KEYS.has(segment)) throw badRequest(`invalid ${what} name '${truncate(path)}'`);
	}
}

function truncate(s: string, n = 60): string {
	return s.length > n ? s.slice(0, n) + "…" : s;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
	return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date);
}

class WhereChecker {
	private nodes = 0;

	query(q: unknown, depth: number): Filter {
		if (!isPlainObject(q)) throw badRequest("`where` must be a JSON object");
		this.tick(depth);
		const out: Filter = {};
		for (const [key, value] of Object.entries(q)) {
			if (key.startsWith("$")) {
				this.operatorName(key);
				if (!LOGICAL_OPERATORS.has(key)) throw badRequest(`operator ${key} is not allowed at the top of a query`);
				if (!Array.isArray(value) || value.length === 0) throw badRequest(`${key} needs a non-empty array of queries`);
				out[key] = value.map(sub => this.query(sub, depth + 1));
			} else {
				checkFieldPath(key);
				out[key] = this.condition(value, depth + 1);
			}
		}
		return out;
	}

	private operatorName(key: string): void {
		if (BANNED_OPERATORS.has(key)) throw badRequest(`query operator ${key} is not allowed`);
		if (!FIELD_OPERATORS.has(key) && !LOGICAL_OPERATORS.has(key)) {
			throw badRequest(`unknown or unsupported query operator ${truncate(key)}`);
		}
	}

	private condition(value: unknown, depth: number): unknown {
		if (isPlainObject(value) && Object.keys(value).some(k => k.startsWith("$"))) {
			return this.operators(value, depth, FIELD_OPERATORS);
		}
		return this.literal(value, depth);
	}

	private operators(ops: Record<string, unknown>, depth: number, allowed: Set<string>): Filter {
		this.tick(depth);
		const out: Filter = {};
		for (const [op, arg] of Object.entries(ops)) {
			if (!op.startsWith("$")) throw badRequest(`cannot mix operators and fields in one condition ('${truncate(op)}')`);
			this.operatorName(op);
			if (!allowed.has(op)) throw badRequest(`query operator ${op} is not allowed here`);
			switch (op) {
				case "$in":
				case "$nin":
				case "$all":
					if (!Array.isArray(arg)) throw badRequest(`${op} needs an array`);
					out[op] = arg.map(v => this.literal(v, depth + 1));
					break;
				case "$exists":
					if (typeof arg !== "boolean" && arg !== 0 && arg !== 1) throw badRequest("$exists needs true or false");
					out[op] = Boolean(arg);
					break;
				case "$size":
					if (!Number.isInteger(arg) || (arg as number) < 0) throw badRequest("$size needs a non-negative integer");
					out[op] = arg;
					break;
				case "$not":
					if (!isPlainObject(arg) || !Object.keys(arg).every(k => k.startsWith("$"))) {
						throw badRequest("$not needs an object of operators");
					}
					out[op] = this.operators(arg, depth + 1, FIELD_OPERATORS);
					break;
				case "$elemMatch":
					if (!isPlainObject(arg) || Object.keys(arg).length === 0)
						throw badRequest("$elemMatch needs a non-empty object");
					out[op] = Object.keys(arg).some(k => k.startsWith("$"))
						? this.operators(arg, depth + 1, SCALAR_ELEM_OPERATORS)
						: this.query(arg, depth + 1);
					break;
				default:
					out[op] = this.literal(arg, depth + 1);
			}
		}
		return out;
	}

	/**
	 * A value compared as is; HTTP-dates become dates (as Eve does). Its keys are data: a key with dots is
	 * compared as a key (the store encodes it as it encodes the stored one). Keys starting with `$` are
	 * refused (read as operators in places: the statistics match entries with NeDB's own matcher), and so
	 * are the prototype keys, which a query may not name (docs/api.md).
	 */
	private literal(value: unknown, depth: number): unknown {
		this.tick(depth);
		if (typeof value === "string") return parseHttpDate(value) ?? value;
		if (Array.isArray(value)) return value.map(v => this.literal(v, depth + 1));
		if (isPlainObject(value)) {
			const out: Record<string, unknown> = {};
			for (const [k, v] of Object.entries(value)) {
				if (k.startsWith("$")) throw badRequest(`operator ${truncate(k)} is not allowed inside a value`);
				if (FORBIDDEN_KEYS.has(k)) throw badRequest(`invalid key '${truncate(k)}' inside a value`);
				out[k] = this.literal(v, depth + 1);
			}
			return out;
		}
		return value;
	}

	private tick(depth: number): void {
		if (depth > MAX_DEPTH) throw badRequest("`where` is nested too deeply");
		if (++this.nodes > MAX_NODES) throw badRequest("`where` is too large");
	}
}

/** Checks a filter that came from a client (or was built from one) and returns a safe copy. */
export function checkFilter(filter: unknown): Filter {
	return new WhereChecker().query(filter, 0);
}

/** Parses the `where` parameter: a JSON object, or Eve's Python-like syntax (`name=="x" and type>=1`). */
export function parseWhere(raw: string | undefined): Filter {
	if (raw == null || raw.trim() === "") return {};
	if (raw.length > MAX_WHERE_LENGTH) throw badRequest("`where` is too long");
	// Before any parser (the JSON reviver and the Python-style parser both recurse); the checker bounds it finer.
	if (nestingDepth(raw, MAX_JSON_DEPTH, true) > MAX_JSON_DEPTH) throw badRequest("`where` is nested too deeply");
	let parsed: unknown;
	const trimmed = raw.trim();
	// JSON first (what is not JSON fails at once); JSON.parse never answers undefined.
	try {
		parsed = JSON.parse(trimmed);
	} catch {
		// not JSON: Eve's Python-like syntax
	}
	if (parsed !== undefined) {
		const key = protoKeyIn(parsed);
		if (key !== null) throw badRequest(`invalid key '${key}'`);
	}
	if (parsed === undefined) parsed = parsePythonWhere(trimmed);
	return checkFilter(parsed);
}

class ProtoKeyError extends Error {}

/** JSON.parse reviver that refuses prototype-polluting keys anywhere in a client document. */
export function rejectProtoKeys(key: string, value: unknown): unknown {
	if (FORBIDDEN_KEYS.has(key)) throw new ProtoKeyError(`invalid key '${key}'`);
	return value;
}

/**
 * The first prototype-polluting key anywhere in a parsed JSON value, or null: what rejectProtoKeys refuses,
 * checked after a plain JSON.parse (a reviver makes V8's parse several times slower). Bounded by the nesting
 * the caller checked before parsing (JSON.parse made own properties of such keys: nothing was polluted).
 */
function protoKeyIn(value: unknown): string | null {
	if (value === null || typeof value !== "object") return null;
	if (Array.isArray(value)) {
		for (const v of value) {
			const found = protoKeyIn(v);
			if (found !== null) return found;
		}
		return null;
	}
	for (const k of Object.keys(value)) {
		if (FORBIDDEN_KEYS.has(k)) return k;
		const found = protoKeyIn((value as Record<string, unknown>)[k]);
		if (found !== null) return found;
	}
	return null;
}

// Eve's fallback parser for expressions like: name == "x" and (type >= 1 or when > datetime(2024,1,1))
const TOKEN =
	/\s*(?:(==|!=|<=|>=|<|>)|(\(|\)|,)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|([A-Za-z_][A-Za-z0-9_.]*))/y;
const COMPARISONS: Record<string, string | null> = {
	"==": null,
	"!=": "$ne",
	"<": "$lt",
	"<=": "$lte",
	">": "$gt",
	">=": "$gte",
};

/** `src` is trimmed and not empty: every position left holds a token (the sticky TOKEN matches there or not at all). */
function parsePythonWhere(src: string): Filter {
	const tokens: Array<{ kind: string; text: string }> = [];
	let pos = 0;
	while (pos < src.length) {
		TOKEN.lastIndex = pos;
		const m = TOKEN.exec(src);
		if (!m) throw badRequest("Unable to parse `where` clause");
		pos = TOKEN.lastIndex;
		if (m[1]) tokens.push({ kind: "cmp", text: m[1] });
		else if (m[2]) tokens.push({ kind: m[2], text: m[2] });
		else if (m[3]) tokens.push({ kind: "str", text: m[3] });
		else if (m[4]) tokens.push({ kind: "num", text: m[4] });
		else tokens.push({ kind: "name", text: m[5] });
	}
	let i = 0;
	const fail = (): never => {
		throw badRequest("Unable to parse `where` clause");
	};
	const peek = () => tokens[i];
	const next = () => tokens[i++] ?? fail();
	const expect = (kind: string) => (next().kind === kind ? undefined : fail());

	const value = (): unknown => {
		const t = next();
		if (t.kind === "str") return t.text.slice(1, -1).replace(/\\(.)/g, "$1");
		if (t.kind === "num") return Number(t.text);
		if (t.kind === "name") {
			if (t.text === "True") return true;
			if (t.text === "False") return false;
			if (t.text === "None") return null;
			if (t.text === "ObjectId") {
				expect("(");
				const id = value();
				expect(")");
				return id;
			}
			if (t.text === "datetime") {
				expect("(");
				const parts: number[] = [];
				for (;;) {
					const n = value();
					if (typeof n !== "number") fail();
					parts.push(n as number);
					if (peek()?.kind === ",") next();
					else break;
				}
				expect(")");
				if (parts.length < 3 || parts.length > 6) fail();
				const [y, mo, d, h = 0, mi = 0, s = 0] = parts;
				return new Date(Date.UTC(y, mo - 1, d, h, mi, s));
			}
		}
		return fail();
	};
	const comparison = (): Filter => {
		if (peek()?.kind === "(") {
			next();
			const inner = orExpr();
			expect(")");
			return inner;
		}
		const field = next();
		if (field.kind !== "name") fail();
		const op = next();
		if (op.kind !== "cmp") fail();
		const v = value();
		const mongoOp = COMPARISONS[op.text];
		return { [field.text]: mongoOp ? { [mongoOp]: v } : v };
	};
	const andExpr = (): Filter => {
		const parts = [comparison()];
		while (peek()?.kind === "name" && peek().text === "and") {
			next();
			parts.push(comparison());
		}
		return parts.length === 1 ? parts[0] : { $and: parts };
	};
	function orExpr(): Filter {
		const parts = [andExpr()];
		while (peek()?.kind === "name" && peek().text === "or") {
			next();
			parts.push(andExpr());
		}
		return parts.length === 1 ? parts[0] : { $or: parts };
	}
	const result = orExpr();
	if (i !== tokens.length) fail();
	return result;
}

/** True when a filter names the field anywhere (used for Eve's "soft delete filter only if not asked for"). */
export function filterMentions(filter: unknown, field: string): boolean {
	if (Array.isArray(filter)) return filter.some(f => filterMentions(f, field));
	if (!isPlainObject(filter)) return false;
	return Object.entries(filter).some(([k, v]) => k === field || (k.startsWith("$") && filterMentions(v, field)));
}

/** Whether two field paths are the same, or one holds the other (`a` and `a.b`). */
export function pathsOverlap(a: string, b: string): boolean {
	return a === b || a.startsWith(b + ".") || b.startsWith(a + ".");
}

/** The first field the filter names that is one of `paths`, inside one, or holds one; undefined if none. */
export function filterTouches(filter: unknown, paths: string[]): string | undefined {
	if (Array.isArray(filter)) return filter.map(f => filterTouches(f, paths)).find(Boolean);
	if (!isPlainObject(filter)) return undefined;
	for (const [k, v] of Object.entries(filter)) {
		const hit = k.startsWith("$") ? filterTouches(v, paths) : paths.some(p => pathsOverlap(k, p)) ? k : undefined;
		if (hit) return hit;
	}
	return undefined;
}

// ---------------------------------------------------------------- sort, projection, embedded, paging

/** `-a,b` or Eve's Python form `[("a", -1), ("b", 1)]`. */
export function parseSort(raw: string | undefined): SortSpec {
	if (raw == null || raw.trim() === "") return [];
	const trimmed = raw.trim();
	let spec: SortSpec;
	if (trimmed.startsWith("[")) {
		// Starts with `[`: an array, when it parses.
		let parsed: unknown[];
		try {
			parsed = JSON.parse(trimmed.replace(/\(/g, "[").replace(/\)/g, "]").replace(/'/g, '"'));
		} catch {
			throw badRequest("Unable to parse `sort` clause");
		}
		spec = parsed.map(entry => {
			if (!Array.isArray(entry) || typeof entry[0] !== "string" || (entry[1] !== 1 && entry[1] !== -1)) {
				throw badRequest("Unable to parse `sort` clause");
			}
			return [entry[0], entry[1]] as [string, 1 | -1];
		});
	} else {
		spec = trimmed.split(",").map(part => {
			const p = part.trim();
			const desc = p.startsWith("-");
			const field = desc ? p.slice(1).trim() : p;
			if (!field) throw badRequest("Unable to parse `sort` clause");
			return [field, desc ? -1 : 1] as [string, 1 | -1];
		});
	}
	if (spec.length > 8) throw badRequest("`sort` names too many fields");
	for (const [field] of spec) checkFieldPath(field, "sort field");
	return spec;
}

export interface Projection {
	mode: "include" | "exclude";
	fields: string[];
}

function parseJsonObject(raw: string, name: string): Record<string, unknown> {
	let parsed: unknown;
	let protoKey: string | null;
	try {
		parsed = JSON.parse(raw);
		// In the try: a value nested past the call stack is refused like any other bad value.
		protoKey = protoKeyIn(parsed);
	} catch {
		throw badRequest(`Unable to parse \`${name}\` clause`);
	}
	if (!isPlainObject(parsed) || protoKey !== null) throw badRequest(`Unable to parse \`${name}\` clause`);
	return parsed;
}

function flagValue(v: unknown, name: string): boolean {
	if (v === 1 || v === true) return true;
	if (v === 0 || v === false) return false;
	throw badRequest(`\`${name}\` values must be 0 or 1`);
}

/** Eve: any 1 makes the projection inclusive; otherwise the 0 fields are excluded. */
export function parseProjection(raw: string | undefined): Projection | null {
	if (raw == null || raw.trim() === "") return null;
	const obj = parseJsonObject(raw, "projection");
	const entries = Object.entries(obj).map(([k, v]) => {
		checkFieldPath(k, "projection field");
		return [k, flagValue(v, "projection")] as const;
	});
	if (entries.length === 0) return null;
	if (entries.some(([, on]) => on)) return { mode: "include", fields: entries.filter(([, on]) => on).map(([k]) => k) };
	return { mode: "exclude", fields: entries.map(([k]) => k) };
}

/** The fields asked to be embedded (`{"field": 1}`); the caller ignores the ones that cannot be. */
export function parseEmbedded(raw: string | undefined): string[] {
	if (raw == null || raw.trim() === "") return [];
	const obj = parseJsonObject(raw, "embedded");
	return Object.entries(obj)
		.filter(([k, v]) => {
			checkFieldPath(k, "embedded field");
			return flagValue(v, "embedded");
		})
		.map(([k]) => k);
}

export interface Paging {
	page: number;
	maxResults: number;
}

/** Eve never rejects paging: garbage falls back to the defaults and large pages are clamped. */
export function parsePaging(args: QueryArgs, pageSizeDefault: number, pageSizeLimit: number): Paging {
	let maxResults = pageSizeDefault;
	const rawMax = args.get("max_results");
	if (rawMax != null && rawMax.trim() !== "") {
		const n = Math.trunc(Number(rawMax));
		if (Number.isFinite(n) && n > 0) maxResults = Math.min(n, pageSizeLimit);
	}
	let page = 1;
	const rawPage = args.get("page");
	if (rawPage != null && /^\s*[-+]?\d+\s*$/.test(rawPage)) {
		const n = Math.abs(parseInt(rawPage, 10));
		if (Number.isSafeInteger(n) && n > 0) page = n;
	}
	// Pages so far out that skip would overflow are simply empty.
	page = Math.min(page, Math.floor(Number.MAX_SAFE_INTEGER / maxResults));
	return { page, maxResults };
}

const LINK_DROPPED = new Set(["max_results", "where", "sort", "page", "projection", "embedded"]);

/**
 * Eve's querydef: max_results (if not default), where and sort raw (if not empty: an empty `where=` or
 * `sort=` is dropped, as Eve's `if req.where` does), page (if > 1), then the other params.
 */
export function linkQuery(args: QueryArgs, paging: Paging, pageSizeDefault: number, page: number): string {
	const parts: string[] = [];
	if (paging.maxResults !== pageSizeDefault) parts.push(`max_results=${paging.maxResults}`);
	const where = args.get("where");
	if (where) parts.push(`where=${where}`);
	const sort = args.get("sort");
	if (sort) parts.push(`sort=${sort}`);
	if (page > 1) parts.push(`page=${page}`);
	for (const [k, v] of args.pairs) if (!LINK_DROPPED.has(k)) parts.push(`${k}=${v}`);
	return parts.length ? "?" + parts.join("&") : "";
}

/** A bool query flag: present and not "0"/"false"/"no"/"off". */
export function queryFlag(args: QueryArgs, name: string): boolean {
	if (!args.has(name)) return false;
	const v = (args.get(name) ?? "").trim().toLowerCase();
	return !["0", "false", "no", "off"].includes(v);
}
