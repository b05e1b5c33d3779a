/**
 * Owns the `hosts_statistic` collection: periodic snapshots of every host (`index`, `timestamp`,
 * one entry per host). The soft-deletion flag of an entry is `_soft_deleted` in list output and
 * `_deleted` in single-record output, as the spec shows them.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds } from "../lib/eve/dates";
import type { Doc } from "../lib/store";

const StatsService: EveServiceSchema = {
	name: "stats",
	mixins: [
		EveCollection({
			resource: "hosts_statistic",
			writes: [],
			idPattern: OBJECT_ID,
			schema: {
				hosts: { type: "array", items: "object" },
				timestamp: "date",
				index: { type: "number", integer: true, min: 0 },
			},
		}),
	],
	actions: {
		/** Stores one snapshot (internal). */
		record: {
			visibility: "public",
			params: { timestamp: { type: "date", convert: true }, hosts: { type: "array", items: "object", max: 200_000 } },
			async handler(this: EveThis, ctx: Context<{ timestamp: Date; hosts: Doc[] }>) {
				const [last] = await this.store.find({}, { sort: [["index", -1]], limit: 1, exclude: ["hosts"] });
				const now = nowSeconds();
				const doc = { hosts: ctx.params.hosts, timestamp: ctx.params.timestamp, index: last ? last.index + 1 : 0, _id: newObjectId(), _created: now, _updated: now };
				await this.store.insertMany([doc]);
				await this.notifyChanged(ctx, "created", [doc._id]);
				return { _id: doc._id, index: doc.index };
			},
		},
	},
	methods: {
		transformOutput(this: EveThis, doc: Doc, single: boolean): Doc {
			if (!single || !Array.isArray(doc.hosts)) return doc;
			return {
				...doc,
				hosts: doc.hosts.map((h: Doc) => {
					const { _soft_deleted, ...rest } = h;
					return { ...rest, _deleted: _soft_deleted === true };
				}),
			};
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("index", true);
		await this.store.ensureIndex("timestamp");
	},
};

export default StatsService;
