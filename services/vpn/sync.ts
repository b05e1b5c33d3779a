/**
 * The VPN sync (every VPN_SYNC_INTERVAL_MS, `vpn.sync`, POST /vpn_organizations/{id}/sync): each
 * organization's record from Pritunl (`user_count`), and each host's Pritunl user — the user whose name is the
 * hostname — as its `vpn_representation`, written through hosts.setVpn; a manager that fails leaves its hosts
 * as they were. One sync (or look for orphans) at a time in this process.
 */
import type { Context, Logger, ServiceBroker } from "moleculer";
import type { Config } from "../../lib/config";
import { HOSTNAME } from "../../lib/eve/ids";
import type { Doc } from "../../lib/storage/store";
import { isUser, malformed, orgList, type ManagerClients } from "./clients";
import type { Orphans } from "./orphans";
import { call } from "../../lib/contracts/call";

/** The spec's host `vpn_representation`, in its order, from Pritunl's `User.dict()` (protocols.md §9). */
const USER_FIELDS: Array<[spec: string, pritunl: string]> = [
	["auth_type", "auth_type"],
	["hwtoken_id", "yubico_id"],
	["client_to_client", "client_to_client"],
	["otp_secret", "otp_secret"],
	["name", "name"],
	["pin", "pin"],
	["dns_suffix", "dns_suffix"],
	["disabled", "disabled"],
	["mac_addresses", "mac_addresses"],
	["email", "email"],
	["organization_name", "organization_name"],
	["bypass_secondary", "bypass_secondary"],
	["groups", "groups"],
	["organization", "organization"],
	["port_forwarding", "port_forwarding"],
	["dns_servers", "dns_servers"],
	["type", "type"],
	["id", "id"],
];

/** A Pritunl user as the host's `vpn_representation`: the spec's fields only, `yubico_id` as `hwtoken_id`. */
export function userRepresentation(u: Doc): Doc {
	const rep: Doc = {};
	for (const [spec, key] of USER_FIELDS) rep[spec] = u[key] === undefined ? null : u[key];
	rep.pin = Boolean(u.pin);
	return rep;
}

export interface SyncResult {
	organizations: number;
	users: number;
	hosts: string[];
	failed: Array<{ manager: string; error: string; code: number }>;
}

export interface SyncDeps {
	broker: ServiceBroker;
	logger: Logger;
	config: Config;
	clients: ManagerClients;
	orphans: Orphans;
	stopping(): boolean;
}

export class VpnSync {
	private chain: Promise<unknown> = Promise.resolve();
	private timer: NodeJS.Timeout | null = null;

	constructor(private readonly deps: SyncDeps) {}

	/** Runs `work` after the sync or look in progress: one at a time in this process. */
	private inLine<T>(work: () => Promise<T>): Promise<T> {
		const run = this.chain.catch(() => undefined).then(work);
		this.chain = run;
		return run;
	}

	/** One sync (of these organizations, or of all); a request arriving meanwhile runs after the one in progress. */
	run(ctx: Context, orgs?: string[]): Promise<SyncResult> {
		return this.inLine(() => this.once(ctx, orgs));
	}

	/** A look for what failed creates left in Pritunl, outside a sync (which looks too), in line with the syncs. */
	lookForOrphans(): void {
		this.inLine(() => this.deps.orphans.clean(this.deps.broker as unknown as Context)).catch((err: Error) =>
			this.deps.logger.warn("Looking for organizations left by failed creates failed:", err.message),
		);
	}

	/** The periodic sync: the first `firstInMs` from now, then every VPN_SYNC_INTERVAL_MS. */
	schedule(firstInMs = this.deps.config.vpnSyncIntervalMs): void {
		const every = this.deps.config.vpnSyncIntervalMs;
		if (!every || this.deps.stopping()) return;
		this.timer = setTimeout(async () => {
			try {
				// The broker stands in for a context: the periodic sync belongs to no request.
				await this.run(this.deps.broker as unknown as Context);
			} catch (err) {
				this.deps.logger.warn("VPN sync failed:", (err as Error).message);
			}
			this.schedule();
		}, firstInMs);
		this.timer.unref?.();
	}

	/** Stops the timer; resolves once the sync in progress is over. */
	async stop(): Promise<void> {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		await this.chain.catch(() => undefined);
	}

	private async once(ctx: Context, only?: string[]): Promise<SyncResult> {
		const records = await call(ctx, "vpn-organizations.records", only ? { ids: only } : {});
		const byManager = new Map<string, Doc[]>();
		for (const r of records) byManager.set(r.vpn_manager, [...(byManager.get(r.vpn_manager) ?? []), r]);
		const result: SyncResult = { organizations: 0, users: 0, hosts: [], failed: [] };
		const synced: string[] = [];
		const assignments = new Map<string, { _id: string; vpn_organization: string; vpn_representation: Doc }>();
		for (const [managerId, orgs] of byManager) {
			let name = managerId;
			try {
				const mc = await this.deps.clients.of(ctx, managerId);
				name = mc.name;
				const pritunl = new Map((await orgList(mc.client)).map((o: Doc) => [o.id, o]));
				const found: Array<{ record: Doc; users: Doc[] }> = [];
				for (const record of orgs) {
					const pid = record.vpn_representation?.id;
					const current = pritunl.get(pid);
					if (!current) {
						this.deps.logger.warn(
							`The VPN organization '${record.name}' (${record._id}) is not in the Pritunl of manager '${name}' any more: its hosts have no VPN identity`,
						);
						found.push({ record, users: [] });
						continue;
					}
					const res = await mc.client.json<unknown>("GET", `/user/${pid}`, undefined, { accept: [404] });
					if (res.status === 404) {
						found.push({ record, users: [] });
						continue;
					}
					if (!Array.isArray(res.body) || !res.body.every(isUser))
						throw malformed(`list of users of organization '${record.name}'`);
					found.push({
						record: { ...record, vpn_representation: current },
						users: res.body.filter((u: Doc) => (u.type ?? "client") === "client"),
					});
				}
				// Only once the whole manager was read: a failure half-way changes nothing of its hosts.
				for (const { record, users } of found) {
					if (pritunl.has(record.vpn_representation?.id))
						await call(ctx, "vpn-organizations.setRepresentation", {
							id: record._id,
							vpn_representation: record.vpn_representation,
						});
					synced.push(record._id);
					result.organizations++;
					result.users += users.length;
					for (const u of users) {
						// The same hostname in two organizations: the older organization record keeps it.
						if (!assignments.has(u.name))
							assignments.set(u.name, {
								_id: u.name,
								vpn_organization: record._id,
								vpn_representation: userRepresentation(u),
							});
					}
				}
			} catch (err) {
				const code = typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 502;
				const message = (err as Error).message;
				this.deps.logger.warn(
					`VPN sync of manager '${name}' failed; its hosts keep their last VPN identity until the next sync:`,
					message,
				);
				result.failed.push({ manager: managerId, error: message, code: code === 504 ? 504 : code >= 500 ? 502 : code });
			}
		}
		await this.deps.orphans.clean(ctx);
		const valid = [...assignments.values()].filter(a => HOSTNAME.test(a._id));
		const existing = only ? undefined : records.map(r => String(r._id));
		if (synced.length || valid.length || existing)
			result.hosts = await call(ctx, "hosts.setVpn", {
				orgs: synced,
				assignments: valid,
				...(existing ? { existing } : {}),
			});
		return result;
	}
}
