/**
 * Owns the `hosts` collection: one record per Salt minion, keyed by its id (the hostname).
 * Operators may only set `identification_number` and soft-delete a host; everything else arrives
 * from the Salt master through `hosts.upsertMany` (the cm-gateway's inventory).
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema } from "../../mixins/eve-collection.mixin";
import type { HostsThis } from "./types";
import { HOSTNAME } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import { Invalid } from "../../lib/errors";
import { MASK } from "../../lib/eve/render";
import { compileSchema } from "../../lib/eve/validation";
import { DuplicateKeyError, type Doc } from "../../lib/storage/store";
import { batchEnd } from "../../lib/fleet/batches";
import { configOf } from "../../lib/config";
import { ENTRY_FIELDS } from "../../lib/fleet/stats-history";
import { compileRule, needsGrains, type HostFacts } from "../../lib/fleet/group-rules";
import { presenceActions, presenceMethods } from "./presence";
import { inventoryUpdate } from "./changes";
import { membershipActions, membershipLoop, membershipMethods } from "./memberships";
import { targetActions, targetMethods } from "./targets";
import { vpnActions } from "./vpn-identity";
import { conformityActions } from "./conformity";
import { metricMethods } from "./fleet-metric";
import { action } from "../../lib/contracts/call";
import type { InventoryState, StatisticEntry } from "../../lib/contracts/hosts";

/** Host updates written together (updateEach): about 200 KB of hosts appended per write. */
const UPDATE_EACH_BATCH = 50;

/** Field order of a host record as the spec lists it (Eve shows fields in stored order). */
const HOST_FIELDS = [
	"version",
	"ip",
	"nodegroups",
	"groups",
	"last_distupgrade",
	"last_stateapply",
	"last_action",
	"_soft_deleted",
	"status",
	"key",
	"heartbeat",
	"nat",
	"fingerprint",
	"fingerprint_history",
	"key_conflict",
	"identification_number",
	"vpn_organization",
	"vpn_representation",
	"resolved",
	"conformity",
	"grain",
];

const stringList = { type: "array", items: "string", optional: true } as const;

const hostSchema = {
	version: "string|optional",
	ip: "string|optional",
	nodegroups: stringList,
	groups: stringList,
	last_distupgrade: "date|optional",
	last_stateapply: "date|optional",
	last_action: "string|optional",
	status: { type: "enum", values: ["up", "down", "unknown"], optional: true },
	key: { type: "enum", values: ["accepted", "pending", "rejected", "denied"], optional: true },
	heartbeat: "date|optional",
	nat: "boolean|optional",
	fingerprint: "string|optional",
	fingerprint_history: {
		type: "array",
		optional: true,
		items: { type: "object", props: { added: "date", fingerprint: "string" } },
	},
	// Beyond the spec: a second key the master holds for this id besides the trusted one (docs/salt.md, "Key conflicts").
	key_conflict: {
		type: "object",
		optional: true,
		nullable: true,
		props: { key: { type: "enum", values: ["pending", "rejected", "denied"] }, fingerprint: "string|optional" },
	},
	identification_number: { type: "string", max: 200, optional: true },
	vpn_organization: { type: "string", optional: true, nullable: true },
	vpn_representation: { type: "object", optional: true, nullable: true },
	grain: { type: "object", optional: true },
	// Beyond the spec: what the IP resolver said (POST /graph request_ips; docs/graph.md).
	resolved: {
		type: "object",
		optional: true,
		props: { ip: "string", gateway: { type: "string", optional: true }, resolver: "string", at: "date" },
	},
	// Beyond the spec: how the host compares with its declared state (docs/conformity.md).
	conformity: {
		type: "object",
		optional: true,
		props: {
			state: { type: "enum", values: ["conformant", "drifted", "failing", "unknown"] },
			since: "date",
			checked: "date",
			drifted: "number",
			failing: "number",
		},
	},
} as const;

const HostsService: EveServiceSchema<HostsThis> = {
	name: "hosts",
	mixins: [
		EveCollection({
			resource: "hosts",
			writes: ["patch", "remove"],
			idPattern: HOSTNAME,
			schema: hostSchema,
			patchSchema: { identification_number: { type: "string", max: 200 } },
			softDelete: { flag: "_soft_deleted", showParam: "show_soft_deleted" },
			listHidden: ["grain"],
			// Three quarters of a host's record: parsed when first read, not at a start (docs/storage.md).
			deferred: "grain",
			indexes: {
				status: {},
				key: {},
				nodegroups: {},
				groups: {},
				vpn_organization: {},
				version: {},
				ip: { ordered: true },
				"conformity.state": { sparse: true },
			},
			secretPaths: ["vpn_representation.otp_secret"],
			// A host as shown depends on the record and the caller's role alone (transformOutput, readVariant).
			renderCache: true,
			relations: {
				nodegroups: { resource: "nodegroups", service: "nodegroups", field: "name", many: true, validate: false },
				groups: { resource: "groups", service: "groups", many: true, embeddable: true, validate: false },
				last_action: { resource: "actions", service: "actions", embeddable: true, validate: false },
				vpn_organization: {
					resource: "vpn_organizations",
					service: "vpn-organizations",
					embeddable: true,
					validate: false,
				},
			},
		}),
	],

	actions: {
		...presenceActions,
		...membershipActions,
		...targetActions,
		...vpnActions,
		...conformityActions,
		/** Creates or updates hosts from the master's view of them (internal: the cm-gateway and tests call it). */
		upsertMany: action("hosts.upsertMany", {
			visibility: "public",
			async handler(this: HostsThis, ctx) {
				// The schema checks each host's id; the inventory check below checks the rest of it.
				const hosts = ctx.params.hosts as Doc[];
				for (const h of hosts) {
					// Memberships are derived from the groups and nodegroups, never written by callers.
					delete h.groups;
					delete h.nodegroups;
					const { _id, ...rest } = h;
					const issues = this.inventoryCheck(rest);
					if (issues) throw new Invalid(issues as Record<string, unknown>, `host '${_id}' is invalid`);
				}
				const incoming = new Map(hosts.map(h => [h._id as string, h]));
				const now = nowSeconds();
				const resolution = configOf(this.broker).heartbeatResolutionMs;
				// Each stored host compared in place (no copy of its grain): only what differs is written.
				const existing = new Set<string>();
				const updates: Array<[string, NonNullable<ReturnType<typeof inventoryUpdate>>]> = [];
				await this.store.scan({ _id: { $in: [...incoming.keys()] } }, HOST_FIELDS, stored => {
					const { _id, ...fields } = incoming.get(stored._id as string) as Doc;
					existing.add(_id);
					const update = inventoryUpdate(stored, fields, now, resolution);
					if (update) updates.push([_id, update]);
				});
				const changed = updates.map(([_id]) => _id);
				// UPDATE_EACH_BATCH per write where the store can (a job's returns update thousands of hosts' last_action,
				// each its own value; a write holds the store's queue, so reads wait behind no more than one batch); one
				// by one where it cannot, or where one of them was refused (the others still written).
				for (let from = 0; from < updates.length; from += UPDATE_EACH_BATCH) {
					const batch = updates.slice(from, from + UPDATE_EACH_BATCH);
					const each = this.store.updateEach
						? await this.store.updateEach(batch).then(
								() => true,
								(err: unknown) => (err instanceof DuplicateKeyError ? false : Promise.reject(err)),
							)
						: false;
					if (!each) for (const [_id, update] of batch) await this.store.updateMany({ _id }, update);
				}
				const fresh = [...incoming.values()].filter(h => !existing.has(h._id)).map(h => this.newHost(h, now));
				await this.store.insertMany(fresh);
				if (fresh.length)
					await this.notifyChanged(
						ctx,
						"created",
						fresh.map(d => d._id),
					);
				if (changed.length) await this.notifyChanged(ctx, "updated", changed);
				if (fresh.length) this.countHostsSoon();
				// New hosts and new grains may change what groups and nodegroups select.
				const affected = [
					...fresh.map(d => d._id as string),
					...updates.filter(([, u]) => "grain" in u.$set).map(([id]) => id),
				];
				if (affected.length) await this.updateMembership(ctx, affected);
				return { created: fresh.length, updated: changed.length };
			},
		}),

		/**
		 * What the inventory compares with the master (internal: the cm-gateway): the hosts (all of them, or
		 * those of `ids`), soft-deleted ones included, as {_id, key?, status?, fingerprint?, fingerprint_history, _soft_deleted}.
		 */
		inventoryState: action("hosts.inventoryState", {
			visibility: "public",
			async handler(this: HostsThis, ctx) {
				const fields = ["key", "status", "fingerprint", "fingerprint_history", "key_conflict", "_soft_deleted"];
				const state = (d: Doc): InventoryState => ({
					_id: d._id,
					key: d.key,
					status: d.status,
					fingerprint: d.fingerprint,
					fingerprint_history: Array.isArray(d.fingerprint_history) ? [...d.fingerprint_history] : [],
					...(d.key_conflict ? { key_conflict: d.key_conflict } : {}),
					_soft_deleted: d._soft_deleted === true,
				});
				const { ids, after, limit } = ctx.params;
				if (limit) {
					const id: Doc = { ...(ids ? { $in: ids } : {}), ...(after !== undefined ? { $gt: after } : {}) };
					return (
						await this.store.find(Object.keys(id).length ? { _id: id } : {}, {
							sort: [["_id", 1]],
							limit,
							only: fields,
						})
					).map(state);
				}
				// A pass over the fleet: only these fields are taken, the records (and their grains) are not copied.
				const out: InventoryState[] = [];
				await this.store.scan(ids ? { _id: { $in: ids } } : {}, fields, d => {
					out.push(state(d));
				});
				return out;
			},
		}),

		/**
		 * What a group resolves to (internal: the groups service): the `explicit` names that are not
		 * soft-deleted hosts (names no host has yet are kept) and every live host one of `rules` selects, sorted.
		 */
		resolve: action("hosts.resolve", {
			visibility: "public",
			async handler(this: HostsThis, ctx) {
				const names = new Set(ctx.params.explicit);
				if (names.size)
					for (const d of await this.store.find({ _id: { $in: [...names] }, _soft_deleted: true }, { only: ["_id"] }))
						names.delete(d._id);
				const tests = ctx.params.rules.map(r => compileRule(r)).filter((t): t is NonNullable<typeof t> => t !== null);
				if (tests.length) {
					await this.store.scan(
						{ _soft_deleted: false },
						needsGrains(ctx.params.rules) ? ["grain", "nodegroups"] : ["nodegroups"],
						d => {
							if (tests.some(t => t(d as HostFacts))) names.add(d._id);
						},
					);
				}
				return [...names].sort();
			},
		}),

		/** Every live host's id and address, sorted by id (internal: POST /graph request_ips). */
		liveAddresses: action("hosts.liveAddresses", {
			visibility: "public",
			async handler(this: HostsThis) {
				const out: Array<{ _id: string; ip?: string }> = [];
				await this.store.scan({ _soft_deleted: false }, ["ip"], d => {
					out.push({ _id: d._id, ip: typeof d.ip === "string" ? d.ip : undefined });
				});
				return out.sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0));
			},
		}),

		/** The live hosts no group resolves to, sorted (internal: GET /graph/not-linked). */
		unlinked: action("hosts.unlinked", {
			visibility: "public",
			async handler(this: HostsThis) {
				const docs = await this.store.find({ _soft_deleted: false, groups: { $size: 0 } }, { only: ["_id"] });
				return docs.map(d => d._id as string).sort();
			},
		}),

		/**
		 * The hosts' snapshot entries (internal: the stats service), in `_id` order after `after`: all hosts, or
		 * those written at or after `since`. Pages are cut at `limit` entries and at BATCH_BYTES, so a page
		 * always fits one NATS message; grains never leave. Answers {entries, seen (the newest `_updated`), more}.
		 */
		statisticEntries: action("hosts.statisticEntries", {
			visibility: "public",
			async handler(this: HostsThis, ctx) {
				const { since, after, limit } = ctx.params;
				const filter: Doc = {};
				if (since) filter._updated = { $gte: since };
				if (after !== undefined) filter._id = { $gt: after };
				// Only this page (and one more, to tell whether more follow) is read, in _id order: the database sorts,
				// by its _id index, instead of the whole rest of the fleet being read and sorted for every page.
				const page: StatisticEntry[] = (
					await this.store.find(filter, { sort: [["_id", 1]], limit: limit + 1, only: ENTRY_FIELDS })
				).map(d => {
					const e: StatisticEntry = { _id: d._id, _soft_deleted: d._soft_deleted === true };
					for (const f of ENTRY_FIELDS) if (d[f] !== undefined && d[f] !== null) e[f] = d[f];
					return e;
				});
				const entries = page.slice(0, batchEnd(page, 0, limit));
				// The newest write among these entries: the caller keeps the newest over all its pages.
				let seen: Date | null = null;
				for (const e of entries) if (e._updated instanceof Date && (!seen || e._updated > seen)) seen = e._updated;
				return { entries, seen, more: entries.length < page.length };
			},
		}),

		/** Which of these hostnames are soft-deleted hosts (they never resolve as targets). */
		softDeletedAmong: action("hosts.softDeletedAmong", {
			visibility: "public",
			async handler(this: HostsThis, ctx) {
				const docs = await this.store.find({ _id: { $in: ctx.params.ids }, _soft_deleted: true }, { only: ["_id"] });
				return docs.map(d => d._id);
			},
		}),
	},

	events: {
		// Any change of a group or of the nodegroup definitions may change every host's memberships.
		"groups.created": {
			handler(this: HostsThis) {
				this.scheduleMembership();
			},
		},
		"groups.updated": {
			handler(this: HostsThis) {
				this.scheduleMembership();
			},
		},
		"groups.removed": {
			handler(this: HostsThis) {
				this.scheduleMembership();
			},
		},
		"nodegroups.changed": {
			handler(this: HostsThis) {
				this.scheduleMembership();
			},
		},
	},

	methods: {
		...presenceMethods,
		...membershipMethods,
		...targetMethods,
		...metricMethods,

		newHost(this: HostsThis, h: Doc, now: Date): Doc {
			const doc: Doc = {};
			for (const f of HOST_FIELDS) {
				if (f in h && !(f === "key_conflict" && h[f] === null)) doc[f] = h[f];
				else if (f === "nodegroups" || f === "groups" || f === "fingerprint_history") doc[f] = [];
				else if (f === "_soft_deleted") doc[f] = false;
			}
			return { ...doc, _id: h._id, _created: now, _updated: now };
		},

		/** `otp_secret` is a secret: shown in clear to admins only (never in embedded records). */
		transformOutput(
			this: HostsThis,
			doc: Doc,
			_single: boolean,
			ctx?: Context<unknown, { user?: { role?: string } }>,
		): Doc {
			const vpn = doc.vpn_representation;
			if (ctx?.meta.user?.role === "admin") return doc;
			if (vpn && typeof vpn === "object" && vpn.otp_secret)
				return { ...doc, vpn_representation: { ...vpn, otp_secret: MASK } };
			return doc;
		},

		/** Admins read hosts differently (otp_secret in clear): their reads are cached apart. */
		readVariant(this: HostsThis, ctx: Context<unknown, { user?: { role?: string } }>): string {
			return ctx.meta.user?.role === "admin" ? "admin" : "";
		},
	},

	created(this: HostsThis) {
		// The full host schema checks what the inventory writes; operators get the narrow PATCH schema.
		this.inventoryCheck = compileSchema(hostSchema);
		this.memberships = membershipLoop(this);
	},

	async stopped(this: HostsThis) {
		clearInterval(this.countTimer);
		clearTimeout(this.countSoonTimer ?? undefined);
		await this.memberships.stop();
	},

	async started(this: HostsThis) {
		if (this.broker.isMetricsEnabled()) {
			this.countTimer = setInterval(() => this.countHosts(), configOf(this.broker).fleetMetricsIntervalMs);
			this.countTimer.unref();
			this.countHostsSoon();
		}
		// Definitions may have changed while this service was down: a full recomputation once the groups and
		// nodegroups services are there (membershipSources; in the background, so a process without them starts).
		this.scheduleMembership(0);
	},
};

export default HostsService;
