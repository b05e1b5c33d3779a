/**
 * Owns the `updates` collection: patches (Salt state files) loaded from the master. Operators may
 * only change a patch's `description`; a reload keeps the descriptions.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds } from "../lib/eve/dates";
import type { Doc } from "../lib/storage/store";

const UpdatesService: EveServiceSchema = {
	name: "updates",
	mixins: [
		EveCollection({
			resource: "updates",
			writes: ["patch"],
			idPattern: OBJECT_ID,
			schema: {
				name: { type: "string", min: 1, max: 500 },
				text: { type: "string", max: 4 * 1024 * 1024 },
				description: { type: "string", max: 10_000, optional: true },
			},
			patchSchema: { description: { type: "string", max: 10_000 } },
		}),
	],
	actions: {
		/** Creates or refreshes patches by name, keeping local descriptions (internal: the cm-gateway calls it). */
		upsertMany: {
			visibility: "public",
			params: {
				patches: { type: "array", max: 10_000, items: { type: "object", props: { name: "string", text: "string" } } },
			},
			async handler(this: EveThis, ctx: Context<{ patches: Array<{ name: string; text: string }> }>) {
				const now = nowSeconds();
				const existing = new Map(
					(await this.store.find({ name: { $in: ctx.params.patches.map(p => p.name) } })).map(d => [d.name, d]),
				);
				const fresh: Doc[] = [];
				for (const p of ctx.params.patches) {
					const old = existing.get(p.name);
					if (!old)
						fresh.push({
							name: p.name,
							text: p.text,
							description: "",
							_id: newObjectId(),
							_created: now,
							_updated: now,
						});
					else if (old.text !== p.text)
						await this.store.updateMany({ _id: old._id }, { $set: { text: p.text, _updated: now } });
				}
				await this.store.insertMany(fresh);
				await this.notifyChanged(ctx, "updated", []);
				return { created: fresh.length, total: ctx.params.patches.length };
			},
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("name", { unique: true });
	},
};

export default UpdatesService;
