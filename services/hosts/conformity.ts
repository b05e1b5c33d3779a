/**
 * Hosts' conformity (internal action of the hosts service for the conformity service, docs/conformity.md): the
 * summary the host record shows — `state`, `since`, `checked`, `drifted`, `failing` — written where it changed.
 */
import type { ActionSchema } from "moleculer";
import type { HostsThis } from "./types";
import { nowSeconds } from "../../lib/eve/dates";
import { action } from "../../lib/contracts/call";

export const conformityActions: Record<string, ActionSchema<HostsThis>> = {
	/** The ids of the live hosts (internal: the conformity fleet view counts the hosts never checked). */
	liveIds: action("hosts.liveIds", {
		visibility: "public",
		async handler(this: HostsThis) {
			const ids: string[] = [];
			await this.store.scan({ _soft_deleted: false }, [], d => ids.push(d._id));
			return ids;
		},
	}),
	/** Sets each listed live host's `conformity`; answers the hosts changed (hosts that do not exist are left alone). */
	setConformity: action("hosts.setConformity", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const wanted = new Map(ctx.params.hosts.map(h => [h._id, h.conformity]));
			const current = new Map<string, string>();
			await this.store.scan({ _id: { $in: [...wanted.keys()] } }, ["conformity"], d =>
				current.set(d._id, JSON.stringify(d.conformity ?? null)),
			);
			const now = nowSeconds();
			const changed: string[] = [];
			for (const [id, was] of current) {
				const want = wanted.get(id)!;
				if (was === JSON.stringify(want)) continue;
				await this.store.updateMany({ _id: id }, { $set: { conformity: want, _updated: now } });
				changed.push(id);
			}
			if (changed.length) await this.notifyChanged(ctx, "updated", changed);
			return changed;
		},
	}),
};
