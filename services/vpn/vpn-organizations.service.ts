/**
 * Owns the `vpn_organizations` collection: Pritunl organizations, each under a VPN manager.
 * The organization's `auth_token` and `auth_secret` are secrets and never shown in clear.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import { MASK } from "../../lib/eve/render";
import { Invalid } from "../../lib/errors";
import type { Doc } from "../../lib/storage/store";
import { action } from "../../lib/contracts/call";
import type { OrganizationCreate, VpnOrganizationRecord, WriteAnswer } from "../../lib/contracts/vpn";

/**
 * Creates of organizations under way (internal): written before Pritunl is asked, removed once the record
 * is stored or what Pritunl made is undone, so that a create whose vpn process died half-way is found and
 * undone by another (services/vpn/vpn.service.ts).
 */
const CREATES = "vpn_organization_creates";

const VpnOrganizationsService: EveServiceSchema = {
	name: "vpn-organizations",
	mixins: [
		EveCollection({
			resource: "vpn_organizations",
			writes: [],
			idPattern: OBJECT_ID,
			secretPaths: ["vpn_representation.auth_token", "vpn_representation.auth_secret"],
			schema: {
				name: { type: "string", min: 1, max: 200 },
				vpn_manager: { type: "string", pattern: OBJECT_ID },
				vpn_representation: { type: "object", optional: true },
				cipher_type: { type: "string", max: 50, optional: true },
				type: { type: "number", integer: true, optional: true },
			},
			relations: { vpn_manager: { resource: "vpn_managers", service: "vpn-managers", embeddable: true } },
			extraCollections: [CREATES],
		}),
	],
	actions: {
		/** A create is about to ask Pritunl (internal: the vpn service); answers its id. */
		createStarted: action("vpn-organizations.createStarted", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const _id = newObjectId();
				await this.stores[CREATES].insertMany([
					{ _id, manager: ctx.params.manager, name: ctx.params.name, before: ctx.params.before, at: new Date() },
				]);
				return _id;
			},
		}),
		/** The create is over: its record is stored, or nothing of it is left in Pritunl (internal). */
		createEnded: action("vpn-organizations.createEnded", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				return this.stores[CREATES].removeMany({ _id: ctx.params.id });
			},
		}),
		/** Creates started longer than `olderThanMs` ago and never ended: their process died (internal). */
		unfinishedCreates: action("vpn-organizations.unfinishedCreates", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				return (await this.stores[CREATES].find(
					{ at: { $lt: new Date(Date.now() - ctx.params.olderThanMs) } },
					{ limit: 100 },
				)) as OrganizationCreate[];
			},
		}),
		/** What is wrong with an organization record before anything is made for it (internal: the vpn service). */
		checkRecord: action("vpn-organizations.checkRecord", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const record = ctx.params.record;
				if (record === null || typeof record !== "object" || Array.isArray(record))
					return { _root: "must be of dict type" };
				return this.eve.createCheck(record) ?? (await this.referenceIssues(ctx, record as Doc));
			},
		}),
		/** Stores an organization record that exists in Pritunl (internal: the vpn service calls it); answers Eve's write response. */
		insertRecord: action("vpn-organizations.insertRecord", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const issues = this.eve.createCheck(ctx.params.record) ?? (await this.referenceIssues(ctx, ctx.params.record));
				if (issues) throw new Invalid(issues, "invalid VPN organization");
				const now = nowSeconds();
				const doc = { ...ctx.params.record, _id: newObjectId(), _created: now, _updated: now };
				await this.store.insertMany([doc]);
				// The manager may have been deleted since it was checked: then the record goes (the vpn service
				// removes the organization from Pritunl again). vpn-managers checks from its side too.
				const gone = await this.referenceIssues(ctx, doc);
				if (gone) {
					await this.store.removeMany({ _id: doc._id });
					throw new Invalid(gone, "invalid VPN organization");
				}
				await this.notifyChanged(ctx, "created", [doc._id]);
				return this.writeResponse(doc) as WriteAnswer;
			},
		}),
		/**
		 * DELETE's preconditions for the vpn service before it removes the organization in Pritunl (internal): 404
		 * when the record is not there, 412 when the request's If-Match names another version (docs/api.md).
		 */
		claimForRemoval: action("vpn-organizations.claimForRemoval", {
			visibility: "public",
			async handler(this: EveThis, ctx: RestContext) {
				await this.claimForRemoval(ctx, String(ctx.params.id));
				return null;
			},
		}),
		/** Stored records, secrets in clear (internal: the vpn service): these ids, or those of these managers, or all. */
		records: action("vpn-organizations.records", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const filter: Doc = {};
				if (ctx.params.ids) filter._id = { $in: ctx.params.ids };
				if (ctx.params.managers) filter.vpn_manager = { $in: ctx.params.managers };
				return (await this.store.find(filter, {
					sort: [
						["_created", 1],
						["_id", 1],
					],
				})) as VpnOrganizationRecord[];
			},
		}),
		/** Pritunl's current record of an organization (internal: the vpn sync); writes only a change. */
		setRepresentation: action("vpn-organizations.setRepresentation", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const doc = await this.store.findOne({ _id: ctx.params.id });
				if (!doc) return false;
				if (JSON.stringify(doc.vpn_representation) === JSON.stringify(ctx.params.vpn_representation)) return false;
				await this.store.updateMany(
					{ _id: ctx.params.id },
					{ $set: { vpn_representation: ctx.params.vpn_representation, _updated: nowSeconds() } },
				);
				await this.notifyChanged(ctx, "updated", [ctx.params.id]);
				return true;
			},
		}),
		/** Deletes a record whose organization is gone from Pritunl (internal: the vpn service). */
		removeRecord: action("vpn-organizations.removeRecord", {
			visibility: "public",
			async handler(this: EveThis, ctx) {
				const removed = await this.store.removeMany({ _id: ctx.params.id });
				await this.notifyChanged(ctx, "removed", [ctx.params.id]);
				return removed;
			},
		}),
		countByManager: action("vpn-organizations.countByManager", {
			visibility: "public",
			handler(this: EveThis, ctx: Context<{ ids: string[] }>) {
				return this.store.count({ vpn_manager: { $in: ctx.params.ids } });
			},
		}),
	},
	methods: {
		transformOutput(this: EveThis, doc: Doc): Doc {
			const rep = doc.vpn_representation;
			if (!rep || typeof rep !== "object") return doc;
			const masked = { ...rep };
			for (const key of ["auth_token", "auth_secret"]) if (masked[key] != null) masked[key] = MASK;
			return { ...doc, vpn_representation: masked };
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("vpn_manager");
	},
};

export default VpnOrganizationsService;
