/**
 * Owns the `failed_patches` collection: a patch run (`state.apply`) whose return had a failing
 * step, one record per host, with every step. Read-only over the API; the cm-gateway records them.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { JOB_RETURN_ID } from "../lib/eve/ids";
import { jobReturnSchema, recordJobReturns } from "../lib/job-returns";
import type { Doc } from "../lib/store";

const FailedPatchesService: EveServiceSchema = {
	name: "failed-patches",
	mixins: [
		EveCollection({
			resource: "failed_patches",
			idPattern: JOB_RETURN_ID,
			schema: { ...jobReturnSchema, patch: { type: "string", optional: true }, return: { type: "array", items: "object", optional: true } },
			relations: { host: { resource: "hosts", service: "hosts", embeddable: true, validate: false } },
		}),
	],
	actions: {
		create: false,
		patch: false,
		remove: false,
		record: {
			visibility: "public",
			params: { returns: { type: "array", max: 50_000, items: "object" } },
			handler(this: EveThis, ctx: Context<{ returns: Doc[] }>) {
				return recordJobReturns(this, ctx, ctx.params.returns);
			},
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("host");
	},
};

export default FailedPatchesService;
