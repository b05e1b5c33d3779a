/**
 * What an inventory update changes in a stored host: the fields whose value differs (dates by their
 * time, lists and objects by their content), `heartbeat` only when it is due (lib/fleet/presence.ts).
 * A reconciliation that finds the fleet as it left it writes nothing.
 */
import type { Doc } from "../../lib/storage/store";
import { heartbeatDue } from "../../lib/fleet/presence";

/** JSON-like equality, dates compared by their time. */
export function sameValue(a: unknown, b: unknown): boolean {
	if (a === b) return true;
	if (a instanceof Date || b instanceof Date)
		return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
	if (Array.isArray(a) || Array.isArray(b))
		return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
	if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
	const ak = Object.keys(a);
	const bk = Object.keys(b);
	return ak.length === bk.length && ak.every(k => Object.hasOwn(b, k) && sameValue((a as Doc)[k], (b as Doc)[k]));
}

/**
 * The update that brings `stored` to what the inventory says (`fields`, without `_id`): the `$set` of the
 * fields that differ and the `$unset` of a cleared key conflict (sent as null); null when nothing differs.
 */
export function inventoryUpdate(
	stored: Doc,
	fields: Doc,
	now: Date,
	heartbeatResolutionMs: number,
): { $set: Doc; $unset?: { key_conflict: true } } | null {
	const $set: Doc = {};
	let unset = false;
	for (const [field, value] of Object.entries(fields)) {
		if (field === "key_conflict" && value === null) unset = stored.key_conflict !== undefined;
		else if (field === "heartbeat") {
			if (
				value instanceof Date
					? heartbeatDue(stored.heartbeat, value, heartbeatResolutionMs)
					: !sameValue(stored.heartbeat, value)
			)
				$set.heartbeat = value;
		} else if (!sameValue(stored[field], value)) $set[field] = value;
	}
	if (!Object.keys($set).length && !unset) return null;
	return { $set: { ...$set, _updated: now }, ...(unset ? { $unset: { key_conflict: true as const } } : {}) };
}
