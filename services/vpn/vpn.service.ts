/**
 * The vpn service: fleet-ctl's side of Pritunl (docs/vpn.md). It owns no collection, only the
 * connections to each manager's Pritunl (services/vpn/pritunl-client.ts):
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
import { createHash } from "node:crypto";
import type { Context, ServiceSchema } from "moleculer";
import { loadConfig } from "../../lib/config";
import { EveError, badRequest, notFound, validationFailed, type Issues } from "../../lib/eve/errors";
import { PritunlClient, PritunlError, pritunlBaseUrl } from "./pritunl-client";
import { outboundPolicy } from "../../lib/security/address-guard";
import type { HttpMeta } from "../../mixins/eve-collection.mixin";
import type { Doc } from "../../lib/storage/store";
import { HOSTNAME, OBJECT_ID } from "../../lib/eve/ids";


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

/** Pritunl's `Organization.dict()` keys the record keeps (later versions add more; they are kept too). */
function isOrg(o: unknown): o is Doc {
	return o !== null && typeof o === "object" && typeof (o as Doc).id === "string" && OBJECT_ID.test((o as Doc).id) && typeof (o as Doc).name === "string";
}

function isUser(u: unknown): u is Doc {
	return u !== null && typeof u === "object" && typeof (u as Doc).id === "string" && typeof (u as Doc).name === "string";
}

/** A Pritunl user as the host's `vpn_representation`: the spec's fields only, `yubico_id` as `hwtoken_id`. */
export function userRepresentation(u: Doc): Doc {
	const rep: Doc = {};
	for (const [spec, key] of USER_FIELDS) rep[spec] = u[key] === undefined ? null : u[key];
	rep.pin = Boolean(u.pin);
	return rep;
}

/** The manager a record names is gone (a record made before managers refused deletion, or a race). */
class NoManager extends EveError {
	constructor(id: string) {
		super(422, `the VPN manager '${id}' does not exist`);
	}
}

function malformed(what: string): PritunlError {
	return new PritunlError(502, "malformed", `Pritunl sent a malformed ${what}`);
}

interface ManagerClient {
	key: string;
	client: PritunlClient;
	name: string;
}

/**
 * An organization a failed create may have left in Pritunl. Known by its id, or, when Pritunl never
 * said (a create that timed out may still complete), as any organization of this name that was not there
 * in `before` and that no record names. Looked for again by the syncs after `recheckAfter` (ms epoch).
 */
interface Orphan {
	manager: string;
	id?: string;
	name: string;
	before?: string[];
	recheckAfter: number;
	/**
	 * A create whose outcome is unknown: until then, finding nothing yet is no proof (Pritunl may still be
	 * carrying it out), so it is looked for again.
	 */
	lookUntil?: number;
	/** Its create's entry in `vpn-organizations` (createStarted), ended once nothing is left to look for. */
	pending?: string;
	/** The client that made it: the manager's record may be gone by now. */
	client: PritunlClient;
	attempts: number;
}

/** How many syncs look for an orphan before it is left to a person (with an error in the log). */
const ORPHAN_ATTEMPTS = 20;
/**
 * How long (in PRITUNL_TIMEOUT_MS) a create that was not answered is looked for: a create Pritunl finishes
 * after fleet-ctl stopped waiting appears within a few timeouts, and looking longer would risk taking an
 * organization someone made by hand under the same name for it.
 */
const ORPHAN_LOOK_TIMEOUTS = 10;
/**
 * A create not ended after this many PRITUNL_TIMEOUT_MS is one whose vpn process died: a live one has asked
 * Pritunl (two calls, each bounded by the timeout) and stored the record or taken over its undo long before.
 */
const UNFINISHED_AFTER_TIMEOUTS = 5;

export interface SyncResult {
	organizations: number;
	users: number;
	hosts: string[];
	failed: Array<{ manager: string; error: string; code: number }>;
}

type VpnThis = ThisType<any> & Record<string, any>;
type Ctx<P = Record<string, unknown>> = Context<P, HttpMeta & { user?: { role?: string } }>;

const VpnService: ServiceSchema = {
	name: "vpn",

	actions: {
		/** Can fleet-ctl log in with this manager (clear credentials)? Issues to report, or null (internal: vpn-managers). */
		checkManager: {
			visibility: "public",
			params: { manager: "object" },
			async handler(this: VpnThis, ctx: Ctx<{ manager: Doc }>): Promise<Issues | null> {
				const m = ctx.params.manager;
				try {
					pritunlBaseUrl(String(m.server_address));
				} catch {
					return { server_address: "must be host[:port] or an http(s) URL of the Pritunl server" };
				}
				const client = this.newClient(m);
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
		},

		/** POST /vpn_organizations: the organization in Pritunl, then its record; nothing half-made on failure. */
		createOrganization: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ body?: unknown }>) {
				const body = ctx.params.body;
				if (body === undefined || body === null) throw badRequest("a JSON object is required");
				if (Array.isArray(body)) throw badRequest("create one VPN organization at a time");
				const issues: Issues | null = await ctx.call("vpn-organizations.checkRecord", { record: body });
				if (issues) throw validationFailed(issues);
				const record = body as Doc;
				const wanted = (record.vpn_representation ?? {}) as Doc;
				const name = typeof wanted.name === "string" && wanted.name ? wanted.name : String(record.name);
				const { client } = await this.managerClient(ctx, record.vpn_manager);

				// What exists before, to find what an unanswered create made.
				const before = await this.orgList(client);
				// Names are how an unanswered create is found again and undone: two organizations of one name in
				// one Pritunl would make that guess, and the undo could remove the wrong one.
				if (before.some((o: Doc) => o.name === name)) throw new EveError(409, `the Pritunl of this VPN manager already has an organization named '${name}'`);
				// Kept in the database until the create is over: should this process die half-way, another finds it.
				const beforeIds = before.map((o: Doc) => o.id);
				const pending: string = await ctx.call("vpn-organizations.createStarted", { manager: record.vpn_manager, name, before: beforeIds });
				let org: Doc;
				try {
					const res = await client.json("POST", "/organization", { name, auth_api: wanted.auth_api === true });
					if (!isOrg(res.body)) throw malformed("organization in answer to its creation");
					org = res.body;
				} catch (err) {
					const ambiguous = err instanceof PritunlError && (err.kind === "timeout" || err.kind === "malformed" || err.kind === "upstream");
					if (ambiguous) await this.undoCreate(ctx, client, { manager: record.vpn_manager, name, before: beforeIds, pending }, true);
					else await this.endCreate(pending);
					throw err;
				}
				try {
					const written = await ctx.call<Doc, { record: Doc }>("vpn-organizations.insertRecord", { record: { ...record, vpn_representation: org } });
					await this.endCreate(pending);
					ctx.meta.$statusCode = 201;
					ctx.meta.$location = `/api/vpn_organizations/${written._id}`;
					return written;
				} catch (err) {
					await this.undoCreate(ctx, client, { manager: record.vpn_manager, id: org.id, name, pending }, false);
					throw err;
				}
			},
		},

		/** DELETE /vpn_organizations/{id}: from Pritunl (with its users), then the record; its hosts lose their VPN identity. */
		deleteOrganization: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				// Like GET: a malformed or unknown id is 404 (docs/api.md).
				if (!OBJECT_ID.test(ctx.params.id)) throw notFound();
				const [record]: Doc[] = await ctx.call("vpn-organizations.records", { ids: [ctx.params.id] });
				if (!record) throw notFound();
				// An If-Match naming another version is 412 before anything is removed in Pritunl.
				await ctx.call("vpn-organizations.claimForRemoval", { id: record._id });
				ctx.meta.$statusCode = 204;
				const pid = record.vpn_representation?.id;
				const mc: ManagerClient | null = await this.managerClient(ctx, record.vpn_manager).catch((err: unknown) => {
					if (err instanceof NoManager) return null;
					throw err;
				});
				if (!mc) this.logger.warn(`The VPN organization '${record.name}' (${record._id}) has no manager any more: only its record is deleted`);
				else if (typeof pid === "string" && OBJECT_ID.test(pid)) await this.deleteInPritunl(mc.client, pid);
				await ctx.call("vpn-organizations.removeRecord", { id: record._id });
				await ctx.call("hosts.setVpn", { orgs: [record._id], assignments: [] });
				return null;
			},
		},

		/** POST /vpn_organizations/{id}/sync: this organization and its hosts now. */
		syncOrganization: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				if (!OBJECT_ID.test(ctx.params.id)) throw notFound();
				const [record]: Doc[] = await ctx.call("vpn-organizations.records", { ids: [ctx.params.id] });
				if (!record) throw notFound();
				const result: SyncResult = await this.runSync(ctx, [record._id]);
				if (result.failed.length) throw new EveError(result.failed[0].code, result.failed[0].error);
				return { _status: "OK", organization: record._id, users: result.users, hosts_changed: result.hosts.length };
			},
		},

		/** The whole sync now (internal: tests, operations); the periodic one runs the same. */
		sync: {
			visibility: "public",
			params: { orgs: { type: "array", items: "string", optional: true } },
			handler(this: VpnThis, ctx: Ctx<{ orgs?: string[] }>): Promise<SyncResult> {
				return this.runSync(ctx, ctx.params.orgs);
			},
		},

		/** GET /hosts/{id}/vpn_profile: the host's profile archive (a tar of .ovpn files) from Pritunl. */
		profile: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: VpnThis, ctx: Ctx<{ id: string }>) {
				const host: Doc = await ctx.call("hosts.vpnIdentity", { id: ctx.params.id });
				const rep = host.vpn_representation;
				if (!host.vpn_organization || !rep || typeof rep.id !== "string") throw notFound(`host '${host._id}' has no VPN identity`);
				const [record]: Doc[] = await ctx.call("vpn-organizations.records", { ids: [host.vpn_organization] });
				const orgId = record?.vpn_representation?.id;
				if (!record || typeof orgId !== "string" || !OBJECT_ID.test(orgId) || !OBJECT_ID.test(rep.id)) throw notFound(`host '${host._id}' has no VPN identity`);
				const { client } = await this.managerClient(ctx, record.vpn_manager).catch((err: unknown) => {
					if (err instanceof NoManager) throw notFound(`the VPN organization '${record.name}' of host '${host._id}' has no VPN manager any more`);
					throw err;
				});
				const res = await client.call("GET", `/key/${orgId}/${rep.id}.tar`, undefined, { raw: true, accept: [404] });
				if (res.status === 404) throw notFound(`Pritunl has no user '${rep.name}' in organization '${record.name}' any more`);
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

	methods: {
		newClient(this: VpnThis, m: Doc): PritunlClient {
			return new PritunlClient({
				url: String(m.server_address),
				username: m.username,
				password: m.password,
				apiToken: m.api_token,
				apiSecret: m.api_secret,
				ca: m.ca_certificate,
				timeoutMs: this.config.pritunlTimeoutMs,
				outbound: outboundPolicy("pritunl", this.config),
			});
		},

		/** The kept client of a manager, made again when its record changed. */
		async managerClient(this: VpnThis, ctx: Context, managerId: string): Promise<ManagerClient> {
			let m: Doc;
			try {
				m = await ctx.call("vpn-managers.credentials", { id: managerId });
			} catch (err) {
				if ((err as { code?: number }).code === 404) throw new NoManager(managerId);
				throw err;
			}
			const key = createHash("sha256")
				.update(JSON.stringify([m.server_address, m.username, m.password, m.api_token, m.api_secret, m.ca_certificate]))
				.digest("hex");
			const kept: ManagerClient | undefined = this.clients.get(managerId);
			if (kept && kept.key === key) return kept;
			kept?.client.close();
			let client: PritunlClient;
			try {
				client = this.newClient(m);
			} catch (err) {
				throw new PritunlError(502, "unreachable", `the VPN manager '${m.name}' has an unusable server_address (${(err as Error).message})`);
			}
			const entry = { key, client, name: m.name };
			this.clients.set(managerId, entry);
			return entry;
		},

		async orgList(this: VpnThis, client: PritunlClient): Promise<Doc[]> {
			const { body } = await client.json<unknown>("GET", "/organization");
			if (!Array.isArray(body) || !body.every(isOrg)) throw malformed("list of organizations");
			return body;
		},

		/** Removes an organization from Pritunl; one that is not there (Pritunl: 500 for an unknown id) is fine. */
		async deleteInPritunl(this: VpnThis, client: PritunlClient, pid: string): Promise<void> {
			try {
				await client.json("DELETE", `/organization/${pid}`);
			} catch (err) {
				if (!(err instanceof PritunlError) || err.status !== 500) throw err;
				const orgs: Doc[] = await this.orgList(client);
				if (orgs.some(o => o.id === pid)) throw err;
			}
		},

		/**
		 * Removes what a failed create made in Pritunl. When that fails, or when the create's outcome is
		 * unknown (`lookAgain`: Pritunl may still be carrying it out), the syncs look for it again.
		 */
		async undoCreate(this: VpnThis, ctx: Context, client: PritunlClient, found: Pick<Orphan, "manager" | "id" | "name" | "before" | "pending">, lookAgain: boolean): Promise<void> {
			const timeout = this.config.pritunlTimeoutMs;
			const orphan: Orphan = { ...found, client, attempts: 0, recheckAfter: Date.now() + 2 * timeout, ...(lookAgain ? { lookUntil: Date.now() + ORPHAN_LOOK_TIMEOUTS * timeout } : {}) };
			try {
				const removed = await this.removeOrphan(ctx, orphan);
				if (lookAgain && !removed) this.keepOrphan(orphan);
				else await this.endCreate(orphan.pending);
			} catch (err) {
				this.keepOrphan({ ...orphan, recheckAfter: Date.now() + timeout });
				this.logger.error(`Could not remove the Pritunl organization '${orphan.name}'${orphan.id ? ` (${orphan.id})` : ""} made by a failed create; the syncs try again:`, (err as Error).message);
			}
		},

		/** Removes what the orphan names; answers whether there was something (false: not made, or not yet). */
		async removeOrphan(this: VpnThis, ctx: Context, orphan: Orphan): Promise<boolean> {
			const client = orphan.client;
			if (orphan.id) {
				await this.deleteInPritunl(client, orphan.id);
				return true;
			}
			const before = new Set(orphan.before ?? []);
			const candidates = (await this.orgList(client)).filter((o: Doc) => o.name === orphan.name && !before.has(o.id));
			if (!candidates.length) return false;
			// More than one new organization of that name: someone else made one too, and which is ours cannot be told.
			if (candidates.length > 1) throw new Error(`${candidates.length} new organizations are named '${orphan.name}': none is removed; a person must choose`);
			// An organization created since under the same name through fleet-ctl has a record: it stays.
			const records: Doc[] = await ctx.call("vpn-organizations.records", { managers: [orphan.manager] });
			const recorded = new Set(records.map(r => r.vpn_representation?.id));
			for (const o of candidates) if (!recorded.has(o.id)) await this.deleteInPritunl(client, o.id);
			return true;
		},

		/** Keeps an orphan to look for again, at its time, whether or not periodic syncs run. */
		keepOrphan(this: VpnThis, orphan: Orphan) {
			if (!this.orphans.includes(orphan)) this.orphans.push(orphan);
			this.armOrphanTimer();
		},

		/** A look for the orphans when the earliest is due. */
		armOrphanTimer(this: VpnThis) {
			if (this.orphanTimer) clearTimeout(this.orphanTimer);
			this.orphanTimer = null;
			if (this.stopping || !this.orphans.length) return;
			const at = Math.min(...this.orphans.map((o: Orphan) => o.recheckAfter));
			this.orphanTimer = setTimeout(() => {
				this.orphanTimer = null;
				this.lookForOrphans();
			}, Math.max(0, at - Date.now()));
			this.orphanTimer.unref?.();
		},

		/** Runs `work` after the sync or look in progress: one at a time in this process. */
		inLine<T>(this: VpnThis, work: () => Promise<T>): Promise<T> {
			const run = this.syncChain.catch(() => undefined).then(work);
			this.syncChain = run;
			return run;
		},

		/** One sync at a time in this process; a request arriving meanwhile runs after it. */
		runSync(this: VpnThis, ctx: Context, orgs?: string[]): Promise<SyncResult> {
			return this.inLine(() => this.syncOnce(ctx, orgs));
		},

		/** A look for what failed creates left in Pritunl, outside a sync (which looks too), in line with the syncs. */
		lookForOrphans(this: VpnThis) {
			this.inLine(() => this.cleanOrphans(this.broker as unknown as Context)).catch((err: Error) => this.logger.warn("Looking for organizations left by failed creates failed:", err.message));
		},

		async syncOnce(this: VpnThis, ctx: Context, only?: string[]): Promise<SyncResult> {
			const records: Doc[] = await ctx.call("vpn-organizations.records", only ? { ids: only } : {});
			const byManager = new Map<string, Doc[]>();
			for (const r of records) byManager.set(r.vpn_manager, [...(byManager.get(r.vpn_manager) ?? []), r]);
			const result: SyncResult = { organizations: 0, users: 0, hosts: [], failed: [] };
			const synced: string[] = [];
			const assignments = new Map<string, { _id: string; vpn_organization: string; vpn_representation: Doc }>();
			for (const [managerId, orgs] of byManager) {
				let name = managerId;
				try {
					const mc: ManagerClient = await this.managerClient(ctx, managerId);
					name = mc.name;
					const pritunl = new Map((await this.orgList(mc.client)).map((o: Doc) => [o.id, o]));
					const found: Array<{ record: Doc; users: Doc[] }> = [];
					for (const record of orgs) {
						const pid = record.vpn_representation?.id;
						const current = pritunl.get(pid);
						if (!current) {
							this.logger.warn(`The VPN organization '${record.name}' (${record._id}) is not in the Pritunl of manager '${name}' any more: its hosts have no VPN identity`);
							found.push({ record, users: [] });
							continue;
						}
						const res = await mc.client.json<unknown>("GET", `/user/${pid}`, undefined, { accept: [404] });
						if (res.status === 404) {
							found.push({ record, users: [] });
							continue;
						}
						if (!Array.isArray(res.body) || !res.body.every(isUser)) throw malformed(`list of users of organization '${record.name}'`);
						found.push({ record: { ...record, vpn_representation: current }, users: res.body.filter((u: Doc) => (u.type ?? "client") === "client") });
					}
					// Only once the whole manager was read: a failure half-way changes nothing of its hosts.
					for (const { record, users } of found) {
						if (pritunl.has(record.vpn_representation?.id)) await ctx.call("vpn-organizations.setRepresentation", { id: record._id, vpn_representation: record.vpn_representation });
						synced.push(record._id);
						result.organizations++;
						result.users += users.length;
						for (const u of users) {
							// The same hostname in two organizations: the older organization record keeps it.
							if (!assignments.has(u.name)) assignments.set(u.name, { _id: u.name, vpn_organization: record._id, vpn_representation: userRepresentation(u) });
						}
					}
				} catch (err) {
					const code = typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 502;
					const message = (err as Error).message;
					this.logger.warn(`VPN sync of manager '${name}' failed; its hosts keep their last VPN identity until the next sync:`, message);
					result.failed.push({ manager: managerId, error: message, code: code === 504 ? 504 : code >= 500 ? 502 : code });
				}
			}
			await this.cleanOrphans(ctx);
			const valid = [...assignments.values()].filter(a => HOSTNAME.test(a._id));
			const existing = only ? undefined : records.map(r => String(r._id));
			if (synced.length || valid.length || existing) result.hosts = await ctx.call("hosts.setVpn", { orgs: synced, assignments: valid, ...(existing ? { existing } : {}) });
			return result;
		},

		/** The create's database entry goes: nothing of it is left to look for. */
		async endCreate(this: VpnThis, pending: string | undefined): Promise<void> {
			if (!pending) return;
			await this.broker.call("vpn-organizations.createEnded", { id: pending }).catch((err: Error) => this.logger.warn(`Could not end the create entry ${pending}:`, err.message));
		},

		/** Creates whose vpn process died half-way (their entries outlived any live create): looked for as orphans. */
		async adoptUnfinishedCreates(this: VpnThis, ctx: Context): Promise<void> {
			const timeout = this.config.pritunlTimeoutMs;
			const creates: Doc[] = await ctx.call("vpn-organizations.unfinishedCreates", { olderThanMs: UNFINISHED_AFTER_TIMEOUTS * timeout });
			for (const c of creates) {
				if (this.orphans.some((o: Orphan) => o.pending === c._id)) continue;
				let client: PritunlClient;
				try {
					client = (await this.managerClient(ctx, c.manager)).client;
				} catch (err) {
					if (!(err instanceof NoManager)) continue; // unreachable now: the next look tries again
					this.logger.error(`A create of the Pritunl organization '${c.name}' stopped half-way and its VPN manager is gone: if Pritunl has it, remove it there`);
					await this.endCreate(c._id);
					continue;
				}
				this.logger.warn(`A create of the Pritunl organization '${c.name}' stopped half-way (its process ended): looking for what it left`);
				this.keepOrphan({ manager: c.manager, name: c.name, before: c.before ?? [], pending: c._id, client, attempts: 0, recheckAfter: 0, lookUntil: Date.now() + ORPHAN_LOOK_TIMEOUTS * timeout });
			}
		},

		/** Looks again for what failed creates may have left in Pritunl (see Orphan). */
		async cleanOrphans(this: VpnThis, ctx: Context): Promise<void> {
			await this.adoptUnfinishedCreates(ctx).catch((err: Error) => this.logger.warn("Could not read the unfinished creates:", err.message));
			const due: Orphan[] = this.orphans.filter((o: Orphan) => o.recheckAfter <= Date.now());
			for (const orphan of due) {
				try {
					const removed = await this.removeOrphan(ctx, orphan);
					this.orphans = this.orphans.filter((o: Orphan) => o !== orphan);
					if (!removed && orphan.lookUntil && Date.now() < orphan.lookUntil) this.keepOrphan({ ...orphan, recheckAfter: Date.now() + this.config.pritunlTimeoutMs });
					else await this.endCreate(orphan.pending);
				} catch (err) {
					if (++orphan.attempts < ORPHAN_ATTEMPTS) {
						orphan.recheckAfter = Date.now() + this.config.pritunlTimeoutMs;
						continue;
					}
					this.orphans = this.orphans.filter((o: Orphan) => o !== orphan);
					await this.endCreate(orphan.pending);
					this.logger.error(`Gave up removing the Pritunl organization '${orphan.name}'${orphan.id ? ` (${orphan.id})` : ""} left by a failed create; remove it in Pritunl:`, (err as Error).message);
				}
			}
			this.armOrphanTimer();
		},

		schedule(this: VpnThis) {
			const every = this.config.vpnSyncIntervalMs;
			if (!every || this.stopping) return;
			this.timer = setTimeout(async () => {
				try {
					// The broker stands in for a context: the periodic sync belongs to no request.
					await this.runSync(this.broker as unknown as Context);
				} catch (err) {
					this.logger.warn("VPN sync failed:", (err as Error).message);
				}
				this.schedule();
			}, every);
			this.timer.unref?.();
		},
	},

	created(this: VpnThis) {
		this.config = loadConfig();
		this.clients = new Map<string, ManagerClient>();
		this.orphans = [] as Orphan[];
		this.syncChain = Promise.resolve();
	},

	async started(this: VpnThis) {
		this.stopping = false;
		// The first sync once the services it reads and writes are there; then every interval.
		void this.broker
			.waitForServices(["vpn-managers", "vpn-organizations", "hosts"], 600_000)
			.then(() => {
				if (this.stopping) return;
				// Creates a vpn process left half-way (this one before a restart, or another replica) are looked for
				// once they are old enough, whether or not periodic syncs run (every sync looks for them too).
				this.adoptTimer = setTimeout(() => this.lookForOrphans(), UNFINISHED_AFTER_TIMEOUTS * this.config.pritunlTimeoutMs + 1000);
				this.adoptTimer.unref?.();
				if (!this.config.vpnSyncIntervalMs) return;
				this.timer = setTimeout(() => {
					void this.runSync(this.broker as unknown as Context)
						.catch((err: Error) => this.logger.warn("VPN sync failed:", err.message))
						.finally(() => this.schedule());
				}, 1000);
				this.timer.unref?.();
			})
			.catch(() => this.logger.warn("The VPN collections did not appear: no periodic VPN sync"));
	},

	async stopped(this: VpnThis) {
		this.stopping = true;
		if (this.timer) clearTimeout(this.timer);
		if (this.orphanTimer) clearTimeout(this.orphanTimer);
		if (this.adoptTimer) clearTimeout(this.adoptTimer);
		await this.syncChain.catch(() => undefined);
		for (const { client } of this.clients.values()) client.close();
		this.clients.clear();
	},
};

export default VpnService;
