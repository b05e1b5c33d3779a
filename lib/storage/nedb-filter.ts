/**
 * MongoDB filters as NeDB queries with the same meaning: the operators whose NeDB meaning differs from
 * MongoDB's (null and missing fields, `$ne`, `$nin`, `$all`, `$nor`, `$elemMatch` on scalars) are rewritten,
 * long string `$in` lists are matched through a Set. Filters arrive checked (lib/eve/query.ts) and encoded
 * (store-keys.ts).
 */
import type { Doc, Filter } from "./store";

/** A plain object (not an array, a date or null). */
export function isPlain(v: unknown): v is Record<string, unknown> {
	return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date);
}

/** MongoDB matches `{f: null}` on missing fields; NeDB does not. */
function equals(field: string, value: unknown): Filter {
	return value === null ? { $or: [{ [field]: null }, { [field]: { $exists: false } }] } : { [field]: value };
}

function rewriteFieldOps(field: string, ops: Record<string, unknown>): Filter[] {
	const conds: Filter[] = [];
	const native: Record<string, unknown> = {};
	for (const [op, arg] of Object.entries(ops)) {
		switch (op) {
			case "$eq":
				conds.push(equals(field, arg));
				break;
			case "$ne":
				conds.push({ $not: equals(field, arg) });
				break;
			case "$in":
				conds.push(
					(arg as unknown[]).includes(null)
						? { $or: (arg as unknown[]).map(v => equals(field, v)) }
						: (setMembership(field, arg as unknown[]) ?? { [field]: { $in: arg } }),
				);
				break;
			case "$nin":
				conds.push({
					$not: {
						$or: [{ [field]: { $in: arg } }, ...((arg as unknown[]).includes(null) ? [equals(field, null)] : [])],
					},
				});
				break;
			case "$not":
				conds.push({ $not: toNedbFilter({ [field]: arg }) });
				break;
			case "$all":
				conds.push(
					(arg as unknown[]).length === 0
						? { [field]: { $in: [] } }
						: { $and: (arg as unknown[]).map(v => ({ [field]: v })) },
				);
				break;
			case "$elemMatch":
				native.$elemMatch =
					isPlain(arg) && Object.keys(arg).some(k => k.startsWith("$"))
						? scalarElemOps(arg)
						: toNedbFilter(arg as Filter);
				break;
			default:
				native[op] = arg;
		}
	}
	if (Object.keys(native).length) conds.push({ [field]: native });
	return conds;
}

/** Lists longer than this are matched through a Set: NeDB checks `$in` by scanning the list for every record. */
const SET_MEMBERSHIP_FROM = 32;

/**
 * `{field: {$in: [strings]}}` for a long list, as a NeDB `$where` that looks each record's value (or each
 * element of an array value, as `$in` does) up in a Set: O(records) instead of O(records × list), which
 * turns a 5,000-host lookup from ~120 ms into a few. Only top-level fields and string lists, where Set
 * equality is NeDB's equality.
 */
function setMembership(field: string, list: unknown[]): Filter | null {
	if (list.length < SET_MEMBERSHIP_FROM || field.includes(".") || !list.every(v => typeof v === "string")) return null;
	const set = new Set(list as string[]);
	return {
		$where(this: Doc) {
			const v = this[field];
			return Array.isArray(v) ? v.some(e => typeof e === "string" && set.has(e)) : typeof v === "string" && set.has(v);
		},
	};
}

/** Inside $elemMatch on scalars NeDB has no $eq; `$in: [v]` means the same. */
function scalarElemOps(ops: Record<string, unknown>): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	for (const [op, arg] of Object.entries(ops)) {
		if (op === "$eq") out.$in = [arg];
		else out[op] = arg;
	}
	return out;
}

/** Rewrites a checked MongoDB filter into a NeDB query with the same meaning. */
export function toNedbFilter(filter: Filter): Filter {
	const conds: Filter[] = [];
	for (const [key, value] of Object.entries(filter)) {
		if (key === "$and" || key === "$or") conds.push({ [key]: (value as Filter[]).map(toNedbFilter) });
		else if (key === "$nor") conds.push({ $not: { $or: (value as Filter[]).map(toNedbFilter) } });
		else if (isPlain(value) && Object.keys(value).some(k => k.startsWith("$")))
			conds.push(...rewriteFieldOps(key, value));
		else conds.push(equals(key, value));
	}
	if (conds.length === 0) return {};
	if (conds.length === 1) return conds[0];
	// NeDB looks for an index among the top-level fields only: conditions on distinct fields stay at the
	// top (an implicit AND, as in MongoDB), the others go under $and. A flat `{_id, …}` is found through the
	// _id index; the same under $and made every update by id scan the collection.
	const top: Filter = {};
	const rest: Filter[] = [];
	for (const cond of conds) {
		const keys = Object.keys(cond);
		if (keys.length === 1 && !keys[0].startsWith("$") && !(keys[0] in top)) top[keys[0]] = cond[keys[0]];
		else rest.push(cond);
	}
	return rest.length ? { ...top, $and: rest } : top;
}
