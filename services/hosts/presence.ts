/**
 * Presence of the hosts (internal actions of the hosts service, written by the cm-gateway): readings of the
 * master (who is up, who is down, whether the list is everyone connected), what a reading would take down
 * (for the presence guard), and a key leaving or coming back (soft delete, restore). Transitions are decided
 * by the one presence rule (lib/fleet/presence.ts).
 */
import type { ActionSchema } from "moleculer";
import type { HostsThis } from "./types";
import { nowSeconds } from "../../lib/eve/dates";
import type { Doc } from "../../lib/storage/store";
import { heartbeatDue, presenceTransition } from "../../lib/fleet/presence";
import { configOf } from "../../lib/config";
import { action } from "../../lib/contracts/call";

/** A reading of the master's presence: hosts seen up, seen down, and whether `up` is everyone connected. */
export interface PresenceReading {
	up: string[];
	down: string[];
	complete: boolean;
}

export const presenceActions: Record<string, ActionSchema<HostsThis>> = {
	/**
	 * Presence from the master's events (internal: the cm-gateway). Known accepted hosts in `up` become "up" with
	 * `heartbeat` now, those in `down` "down"; with `complete`, `up` is every connected minion, so the
	 * other accepted hosts that are up go down. With `changesOnly`, hosts already up are left as they are
	 * (a job return proving a host alive does not rewrite every host of a job). Answers the live hosts that
	 * changed: {wentUp, wentDown}.
	 */
	setPresence: action("hosts.setPresence", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const { up, docs } = await this.presenceDocs(ctx.params);
			const now = nowSeconds();
			const resolution = configOf(this.broker).heartbeatResolutionMs;
			const wentUp: string[] = [];
			const wentDown: string[] = [];
			const nowUp: string[] = [];
			const nowDown: string[] = [];
			for (const d of docs) {
				const id = d._id as string;
				// The master tracks the presence of accepted minions only; the others stay "unknown".
				if (d.key !== "accepted") continue;
				if (up.has(id)) {
					// A host up already is written only when its heartbeat is due (lib/fleet/presence.ts).
					if (d.status === "up" && (ctx.params.changesOnly || !heartbeatDue(d.heartbeat, now, resolution))) continue;
					nowUp.push(id);
					if (presenceTransition(d, "up")) wentUp.push(id);
				} else if (d.status !== "down") {
					nowDown.push(id);
					if (presenceTransition(d, "down")) wentDown.push(id);
				}
			}
			if (nowUp.length)
				await this.store.updateMany({ _id: { $in: nowUp } }, { $set: { status: "up", heartbeat: now, _updated: now } });
			if (nowDown.length)
				await this.store.updateMany({ _id: { $in: nowDown } }, { $set: { status: "down", _updated: now } });
			if (nowUp.length || nowDown.length) await this.notifyChanged(ctx, "updated", [...nowUp, ...nowDown]);
			if (nowUp.length || nowDown.length) this.countHostsSoon();
			return { wentUp, wentDown };
		},
	}),

	/**
	 * What a presence reading would take down, before it is applied (internal: the cm-gateway's presence
	 * guard, services/cm-gateway/presence-guard.ts): {up: the live accepted hosts up now, losing: how many of them it takes down}.
	 */
	presenceLoss: action("hosts.presenceLoss", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const { up, docs } = await this.presenceDocs(ctx.params);
			const losing = docs.filter(
				(d: Doc) => d.key === "accepted" && d._soft_deleted !== true && d.status === "up" && !up.has(d._id as string),
			).length;
			const live = await this.store.count({ status: "up", key: "accepted", _soft_deleted: false });
			return { up: live, losing };
		},
	}),

	/**
	 * The inventory's soft-delete and restore (internal: the cm-gateway). `present: false` soft-deletes
	 * the hosts whose key left the master and forgets their `key` (so that a later reconciliation can
	 * tell them from hosts an operator deleted); `present: true` restores them. Answers the ids changed.
	 */
	setPresent: action("hosts.setPresent", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const { ids, present } = ctx.params;
			if (!ids.length) return [];
			const docs = await this.store.find(
				{ _id: { $in: ids }, _soft_deleted: present ? true : { $ne: true } },
				{ exclude: ["grain"] },
			);
			const changed = docs.map(d => d._id as string);
			if (!changed.length) return [];
			const now = nowSeconds();
			const update = present
				? { $set: { _soft_deleted: false, _updated: now } }
				: { $set: { _soft_deleted: true, _updated: now }, $unset: { key: true as const } };
			await this.store.updateMany({ _id: { $in: changed } }, update);
			await this.notifyChanged(ctx, "updated", changed);
			return changed;
		},
	}),
};

export const presenceMethods = {
	/** The hosts a presence reading names (with `complete`, also every accepted host up that it leaves out, as down). */
	async presenceDocs(this: HostsThis, reading: PresenceReading): Promise<{ up: Set<string>; docs: Doc[] }> {
		const up = new Set(reading.up);
		const down = new Set(reading.down.filter(id => !up.has(id)));
		const docs: Doc[] = [];
		const fields = ["key", "status", "heartbeat", "_soft_deleted"];
		const presence = (d: Doc) =>
			docs.push({ _id: d._id, key: d.key, status: d.status, heartbeat: d.heartbeat, _soft_deleted: d._soft_deleted });
		await this.store.scan({ _id: { $in: [...up, ...down] } }, fields, presence);
		if (reading.complete) {
			await this.store.scan({ status: "up", key: "accepted" }, fields, d => {
				if (up.has(d._id as string) || down.has(d._id as string)) return;
				down.add(d._id as string);
				presence(d);
			});
		}
		return { up, docs };
	},
};
