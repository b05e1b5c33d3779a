/**
 * The vpn service: fleet-ctl's side of Pritunl (docs/vpn.md). It owns no collection, only the
 * connections to each manager's Pritunl (pritunl-client.ts, kept per manager by clients.ts):
 *
 *  - `checkManager`: a VPN manager is created only once its credentials log in;
 *  - `createOrganization` / `deleteOrganization` (POST and DELETE /vpn_organizations): the organization is
 *    made or removed in Pritunl and its record in `vpn_organizations` (owned by vpn-organizations); when a
 *    step fails after Pritunl made something, what was made is removed again (an organization whose
 *    removal fails too is retried by every sync until it is gone);
 *  - the sync (every VPN_SYNC_INTERVAL_MS, `vpn.sync`, POST /vpn_organizations/{id}/sync): each
 *    organization's record from Pritunl (`user_count`), and each host's Pritunl user — the user whose
 *    name is the hostname — as its `vpn_representation`, written through hosts.setVpn;
 *  - `profile` (GET /hosts/{id}/vpn_profile): the host's profile archive from Pritunl.
 *
 * Pritunl unreachable or answering nonsense: 502, no answer in time: 504 (Eve's shape); a sync that
 * fails for one manager leaves that manager's hosts as they were and is tried again at the next tick.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { configOf, type Config } from "../../lib/config";
import type { Issues } from "../../lib/eve/errors";
import { Conflict, Invalid, Malformed, NotFound, UpstreamFailed } from "../../lib/errors";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { HttpMeta } from "../../mixins/eve-collection.mixin";
import type { Doc } from "../../lib/storage/store";
import { PritunlError, pritunlBaseUrl } from "./pritunl-client";
import { ManagerClients, NoManager, deleteInPritunl, isOrg, malformed, orgList, type ManagerClient } from "./clients";
import { Orphans, UNFINISHED_AFTER_TIMEOUTS } from "./orphans";
import { VpnSync, type SyncResult } from "./sync";
import { action, call } from "../../lib/contracts/call";

interface Parts {
	clients: ManagerClients;
	orphans: Orphans;
	sync: VpnSync;
}

interface Vars {
	/** The settings this service and its parts share (one object: a test may narrow OUTBOUND_ALLOW on it). */
	config: Config;
	parts: Parts;
	stopping: boolean;
	adoptTimer: NodeJS.Timeout | null;
}

type VpnThis = Service & Vars;
type Ctx<P = Record<string, unknown>> = Context<P, HttpMeta & { user?: { role?: string } }>;

/** The organization record an URL names; like GET, a malformed or unknown id is 404 (docs/api.md). */
async function organizationRecord(ctx: Context, id: string): Promise<Doc> {
	if (!OBJECT_ID.test(id)) throw new NotFound();
	const [record] = await call(ctx, "vpn-organizations.records", { ids: [id] });
	if (!record) throw new NotFound();
	return record;
}

const VpnService: ServiceSchema<ServiceSettingSchema, Record<string, never>, Vars, VpnThis> = {
	name: "vpn",

	actions: {
		/** Can fleet-ctl log in with this manager (clear credentials)? Issues to report, or null (internal: vpn-managers). */
		checkManager: action("vpn.checkManager", {
			visibility: "public",
			async handler(this: VpnThis, ctx: Ctx<{ manager: Doc }>): Promise<Issues | null> {
				const m = ctx.params.manager;
				try {
					pritunlBaseUrl(String(m.server_address));
				} catch {
					return { server_address: "must be host[:port] or an http(s) URL of the Pritunl server" };
				}
				const client = this.parts.clients.newClient(m);
				try {
					await client.check();
					return null;
				} catch (err) {
					if (!(err instanceof PritunlError)) throw err;
					const field = err.kind === "auth" ? (client.tokenAuth ? "api_secret" : "password") : "server_address";
					return { [field]: `cannot log in to Pritunl: ${err.message}` };
				} finally {
					client.close();
				}
			},
		}),

		/** POST /vpn_organizations: the organization in Pritunl, then its record; nothing half-made on failure. */
		createOrganization: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ body?: unknown }>) {
				const body = ctx.params.body;
				if (body === undefined || body === null) throw new Malformed("a JSON object is required");
				if (Array.isArray(body)) throw new Malformed("create one VPN organization at a time");
				const issues = await call(ctx, "vpn-organizations.checkRecord", { record: body });
				if (issues) throw new Invalid(issues);
				const record = body as Doc;
				const wanted = (record.vpn_representation ?? {}) as Doc;
				const name = typeof wanted.name === "string" && wanted.name ? wanted.name : String(record.name);
				const { clients, orphans } = this.parts;
				const { client } = await clients.of(ctx, record.vpn_manager);

				// What exists before, to find what an unanswered create made.
				const before = await orgList(client);
				// Names are how an unanswered create is found again and undone: two organizations of one name in
				// one Pritunl would make that guess, and the undo could remove the wrong one.
				if (before.some((o: Doc) => o.name === name))
					throw new Conflict(`the Pritunl of this VPN manager already has an organization named '${name}'`);
				// Kept in the database until the create is over: should this process die half-way, another finds it.
				const beforeIds = before.map((o: Doc) => o.id);
				const pending = await call(ctx, "vpn-organizations.createStarted", {
					manager: record.vpn_manager,
					name,
					before: beforeIds,
				});
				let org: Doc;
				try {
					const res = await client.json("POST", "/organization", { name, auth_api: wanted.auth_api === true });
					if (!isOrg(res.body)) throw malformed("organization in answer to its creation");
					org = res.body;
				} catch (err) {
					const ambiguous =
						err instanceof PritunlError &&
						(err.kind === "timeout" || err.kind === "malformed" || err.kind === "upstream");
					if (ambiguous)
						await orphans.undoCreate(
							ctx,
							client,
							{ manager: record.vpn_manager, name, before: beforeIds, pending },
							true,
						);
					else await orphans.endCreate(pending);
					throw err;
				}
				try {
					const written = await call(ctx, "vpn-organizations.insertRecord", {
						record: { ...record, vpn_representation: org },
					});
					await orphans.endCreate(pending);
					ctx.meta.$statusCode = 201;
					ctx.meta.$location = `/api/vpn_organizations/${written._id}`;
					return written;
				} catch (err) {
					await orphans.undoCreate(ctx, client, { manager: record.vpn_manager, id: org.id, name, pending }, false);
					throw err;
				}
			},
		},

		/** DELETE /vpn_organizations/{id}: from Pritunl (with its users), then the record; its hosts lose their VPN identity. */
		deleteOrganization: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				const record = await organizationRecord(ctx, ctx.params.id);
				// An If-Match naming another version is 412 before anything is removed in Pritunl.
				await call(ctx, "vpn-organizations.claimForRemoval", { id: record._id });
				ctx.meta.$statusCode = 204;
				const pid = record.vpn_representation?.id;
				const mc: ManagerClient | null = await this.parts.clients.of(ctx, record.vpn_manager).catch((err: unknown) => {
					if (err instanceof NoManager) return null;
					throw err;
				});
				if (!mc)
					this.logger.warn(
						`The VPN organization '${record.name}' (${record._id}) has no manager any more: only its record is deleted`,
					);
				else if (typeof pid === "string" && OBJECT_ID.test(pid)) await deleteInPritunl(mc.client, pid);
				await call(ctx, "vpn-organizations.removeRecord", { id: record._id });
				await call(ctx, "hosts.setVpn", { orgs: [record._id], assignments: [] });
				return null;
			},
		},

		/** POST /vpn_organizations/{id}/sync: this organization and its hosts now. */
		syncOrganization: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				const record = await organizationRecord(ctx, ctx.params.id);
				const result = await this.parts.sync.run(ctx, [record._id]);
				if (result.failed.length)
					throw new UpstreamFailed(
						result.failed[0].error,
						{ manager: result.failed[0].manager },
						result.failed[0].code,
					);
				return { _status: "OK", organization: record._id, users: result.users, hosts_changed: result.hosts.length };
			},
		},

		/** The whole sync now (internal: tests, operations); the periodic one runs the same. */
		sync: {
			visibility: "public",
			params: { orgs: { type: "array", items: "string", optional: true } },
			handler(this: VpnThis, ctx: Ctx<{ orgs?: string[] }>): Promise<SyncResult> {
				return this.parts.sync.run(ctx, ctx.params.orgs);
			},
		},

		/** GET /hosts/{id}/vpn_profile: the host's profile archive (a tar of .ovpn files) from Pritunl. */
		profile: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				const host = await call(ctx, "hosts.vpnIdentity", { id: ctx.params.id });
				const rep = host.vpn_representation;
				if (!host.vpn_organization || !rep || typeof rep.id !== "string")
					throw new NotFound(`host '${host._id}' has no VPN identity`);
				const [record] = await call(ctx, "vpn-organizations.records", { ids: [host.vpn_organization] });
				const orgId = record?.vpn_representation?.id;
				if (!record || typeof orgId !== "string" || !OBJECT_ID.test(orgId) || !OBJECT_ID.test(rep.id))
					throw new NotFound(`host '${host._id}' has no VPN identity`);
				const { client } = await this.parts.clients.of(ctx, record.vpn_manager).catch((err: unknown) => {
					if (err instanceof NoManager)
						throw new NotFound(
							`the VPN organization '${record.name}' of host '${host._id}' has no VPN manager any more`,
						);
					throw err;
				});
				const res = await client.call("GET", `/key/${orgId}/${rep.id}.tar`, undefined, { raw: true, accept: [404] });
				if (res.status === 404)
					throw new NotFound(`Pritunl has no user '${rep.name}' in organization '${record.name}' any more`);
				const type = String(res.headers["content-type"] ?? "");
				if (/json|html/i.test(type)) throw malformed("profile (not an archive)");
				ctx.meta.$responseType = "application/x-tar";
				ctx.meta.$responseHeaders = {
					"Content-Disposition": `attachment; filename="${String(host._id).replace(/[^A-Za-z0-9_.-]/g, "_")}.tar"`,
					"Cache-Control": "no-store",
					"X-Content-Type-Options": "nosniff",
				};
				return res.body;
			},
		},
	},

	created() {
		const config = (this.config = configOf(this.broker));
		this.stopping = false;
		this.adoptTimer = null;
		const clients = new ManagerClients(config);
		const deps = { broker: this.broker, logger: this.logger, config, clients, stopping: () => this.stopping };
		const orphans: Orphans = new Orphans({ ...deps, lookSoon: () => sync.lookForOrphans() });
		const sync: VpnSync = new VpnSync({ ...deps, orphans });
		this.parts = { clients, orphans, sync };
	},

	async started() {
		this.stopping = false;
		const { sync } = this.parts;
		const config = this.config;
		// The first sync once the services it reads and writes are there; then every interval.
		void this.broker
			.waitForServices(["vpn-managers", "vpn-organizations", "hosts"], 600_000)
			.then(() => {
				if (this.stopping) return;
				// Creates a vpn process left half-way (this one before a restart, or another replica) are looked for
				// once they are old enough, whether or not periodic syncs run (every sync looks for them too).
				this.adoptTimer = setTimeout(
					() => sync.lookForOrphans(),
					UNFINISHED_AFTER_TIMEOUTS * config.pritunlTimeoutMs + 1000,
				);
				this.adoptTimer.unref?.();
				sync.schedule(1000);
			})
			.catch(() => this.logger.warn("The VPN collections did not appear: no periodic VPN sync"));
	},

	async stopped() {
		this.stopping = true;
		const { sync, orphans, clients } = this.parts;
		if (this.adoptTimer) clearTimeout(this.adoptTimer);
		orphans.stop();
		await sync.stop();
		clients.closeAll();
	},
};

export default VpnService;
