/**
 * Hosts' memberships: `groups` and `nodegroups` of every host, recomputed from the groups' and nodegroups' rules
 * (lib/fleet/group-rules.ts) whenever one changes, never two recomputations at once, waiting for those services
 * at start instead of racing them.
 */
import type { ActionSchema, Context } from "moleculer";
import type { HostsThis } from "./types";
import { nowSeconds } from "../../lib/eve/dates";
import { GroupIndex, type HostFacts } from "../../lib/fleet/group-rules";
import { call } from "../../lib/contracts/call";
import { PassLoop } from "../../lib/runtime/lease";

function sameList(a: string[], b: unknown): boolean {
	return Array.isArray(b) && a.length === b.length && a.every((v, i) => v === b[i]);
}

export const membershipActions: Record<string, ActionSchema<HostsThis>> = {
	/** Resolves once no membership recomputation is scheduled or running (internal: tests, benchmarks). */
	membershipSettled: {
		visibility: "public",
		async handler(this: HostsThis) {
			await this.memberships.settled();
			return { settled: true };
		},
	},
};

/** The recomputations, one at a time: once the groups and nodegroups services are there, every host's memberships. */
export function membershipLoop(service: HostsThis): PassLoop {
	return new PassLoop(
		async () => {
			await service.membershipSources();
			// The broker stands in for a context: the recomputation belongs to no request.
			if (!service.memberships.stopping) await service.updateMembership(service.broker as unknown as Context);
		},
		err => service.logger.warn("Could not recompute host memberships:", err.message),
	);
}

export const membershipMethods = {
	/** Every group and nodegroup, as the rules that select hosts. */
	async groupIndex(this: HostsThis, ctx: Context): Promise<GroupIndex> {
		const [groups, nodegroups] = await Promise.all([call(ctx, "groups.rules"), call(ctx, "nodegroups.rules")]);
		return new GroupIndex(groups, nodegroups);
	},

	/**
	 * Sets `groups` and `nodegroups` of these hosts (all of them when `ids` is absent) to what the groups
	 * and nodegroups select now; writes only the hosts whose memberships changed. Answers how many did.
	 */
	async updateMembership(this: HostsThis, ctx: Context, ids?: string[]): Promise<number> {
		let index: GroupIndex;
		try {
			index = await this.groupIndex(ctx);
		} catch (err) {
			// The groups or nodegroups service is not there yet: the full recomputation once it is (see started) does it.
			this.logger.warn("Could not read the groups to compute host memberships:", (err as Error).message);
			return 0;
		}
		const changes = new Map<string, { groups: string[]; nodegroups: string[]; ids: string[] }>();
		await this.store.scan(
			ids ? { _id: { $in: ids } } : {},
			index.usesGrains ? ["grain", "groups", "nodegroups"] : ["groups", "nodegroups"],
			d => {
				// Nodegroups first: a group's compound rule may read them (N@).
				const nodegroups = index.nodegroupsOf(d as HostFacts);
				// Not a spread of the record: that would read its grain, parsed only when a rule reads it (lib/storage/nedb-deferred.ts).
				const groups = index.groupsOf({
					_id: d._id as string,
					get grain() {
						return d.grain;
					},
					nodegroups,
				});
				if (sameList(groups, d.groups) && sameList(nodegroups, d.nodegroups)) return;
				const key = JSON.stringify([groups, nodegroups]);
				const entry = changes.get(key) ?? { groups, nodegroups, ids: [] };
				entry.ids.push(d._id);
				changes.set(key, entry);
			},
		);
		if (!changes.size) return 0;
		const now = nowSeconds();
		const changed: string[] = [];
		for (const { groups, nodegroups, ids: which } of changes.values()) {
			await this.store.updateMany({ _id: { $in: which } }, { $set: { groups, nodegroups, _updated: now } });
			changed.push(...which);
		}
		await this.notifyChanged(ctx, "updated", changed);
		return changed.length;
	},

	/**
	 * A full recomputation soon, never two at once: changes that arrive while one runs are all handled
	 * by the single run after it (a burst of group changes costs two runs, not one each).
	 */
	scheduleMembership(this: HostsThis, delayMs = 20) {
		this.memberships.ask(delayMs);
	},

	/**
	 * Resolves once the groups and nodegroups services are reachable (local or over the transporter), or
	 * this service stops: a recomputation asked for before (nodegroups announces its definitions as it
	 * starts, maybe before groups is there) waits for them instead of failing. In the background: a
	 * process running `hosts` alone starts at once and recomputes when they appear.
	 */
	async membershipSources(this: HostsThis): Promise<void> {
		// As broker.waitForServices checks (the typings make its nodeID mandatory; absent means any node).
		const registry = this.broker.registry as unknown as { hasService(name: string): boolean };
		while (!this.memberships.stopping && !["groups", "nodegroups"].every(name => registry.hasService(name))) {
			await new Promise(r => setTimeout(r, 100).unref?.());
		}
	},
};
