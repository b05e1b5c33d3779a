/**
 * Owns the `actions` collection: one record per host return of every job fleet-ctl started
 * (`_id` = jid + hostname). Read-only over the API; the cm-gateway records them.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { JOB_RETURN_ID } from "../lib/eve/ids";
import { jobReturnSchema, recordJobReturns } from "../lib/job-returns";
import type { Doc } from "../lib/store";

const ActionsService: EveServiceSchema = {
	name: "actions",
	mixins: [
		EveCollection({
			resource: "actions",
			idPattern: JOB_RETURN_ID,
			schema: { ...jobReturnSchema, args: { type: "array", optional: true }, return: { type: "string", optional: true } },
			relations: { host: { resource: "hosts", service: "hosts", embeddable: true, validate: false } },
		}),
	],
	actions: {
		create: false,
		patch: false,
		remove: false,
		/** Records job returns (internal: the cm-gateway calls it); a repeated return replaces the earlier one. */
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
		await this.store.ensureIndex("jid");
	},
};

export default ActionsService;
