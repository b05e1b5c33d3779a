/**
 * Hosts' VPN identity (internal actions of the hosts service for the vpn service): the VPN sync's result
 * written where it changed, and a host's identity with its secret for the profile download.
 */
import type { ActionSchema } from "moleculer";
import type { HostsThis } from "./types";
import { nowSeconds } from "../../lib/eve/dates";
import { action } from "../../lib/contracts/call";

export const vpnActions: Record<string, ActionSchema<HostsThis>> = {
	/**
	 * The VPN sync's result (internal: the vpn service): each host of `assignments` gets that organization
	 * and Pritunl user; a host in one of `orgs` (organizations read completely) that no assignment names
	 * has no VPN identity any more (both fields are removed). Hosts that do not exist are left alone (a Pritunl user of no host).
	 * Writes only what changed; answers the hosts it changed.
	 */
	setVpn: action("hosts.setVpn", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const wanted = new Map(ctx.params.assignments.map(a => [a._id, a]));
			const current = new Map<string, { org: unknown; rep: string }>();
			const { existing } = ctx.params;
			// With `existing`, also the hosts of organizations deleted meanwhile (a delete that raced a sync).
			const stale = existing
				? [
						{
							$and: [
								{ vpn_organization: { $exists: true } },
								{ vpn_organization: { $ne: null } },
								{ vpn_organization: { $nin: existing } },
							],
						},
					]
				: [];
			const filter = {
				$or: [{ _id: { $in: [...wanted.keys()] } }, { vpn_organization: { $in: ctx.params.orgs } }, ...stale],
			};
			await this.store.scan(filter, ["vpn_organization", "vpn_representation"], d => {
				current.set(d._id, { org: d.vpn_organization ?? null, rep: JSON.stringify(d.vpn_representation ?? null) });
			});
			const now = nowSeconds();
			const changed: string[] = [];
			for (const [id, was] of current) {
				const want = wanted.get(id);
				const org = want?.vpn_organization ?? null;
				const rep = want?.vpn_representation ?? null;
				if (was.org === org && was.rep === JSON.stringify(rep)) continue;
				// No identity any more: the fields go, as on a host that never had one.
				if (want)
					await this.store.updateMany(
						{ _id: id },
						{ $set: { vpn_organization: org, vpn_representation: rep, _updated: now } },
					);
				else
					await this.store.updateMany(
						{ _id: id },
						{ $unset: { vpn_organization: true, vpn_representation: true }, $set: { _updated: now } },
					);
				changed.push(id);
			}
			if (changed.length) await this.notifyChanged(ctx, "updated", changed);
			return changed;
		},
	}),

	/** A live host's VPN identity, otp_secret in clear (internal: the vpn service's profile download). */
	vpnIdentity: action("hosts.vpnIdentity", {
		visibility: "public",
		async handler(this: HostsThis, ctx) {
			const doc = await this.visibleItem(ctx.params.id);
			return {
				_id: doc._id,
				vpn_organization: doc.vpn_organization ?? null,
				vpn_representation: doc.vpn_representation ?? null,
			};
		},
	}),
};
