/**
 * Owns the `webhook_deliveries` collection: the log of every webhook delivery (services/webhooks/webhooks.service.ts
 * writes it): which webhook and alert, `status` (pending, delivered, failed, dropped, cancelled), `attempts`,
 * the last HTTP status or error, how long the last attempt took, when the next one is due. Read by admins
 * at `/api/webhook_deliveries` and, for one webhook, `/api/webhooks/{id}/deliveries`.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import { NotFound } from "../../lib/errors";
import { QueryArgs, parseWhere } from "../../lib/eve/query";
import type { Doc } from "../../lib/storage/store";

export const DELIVERY_STATUSES = ["pending", "delivered", "failed", "dropped", "cancelled"];

const WebhookDeliveriesService: EveServiceSchema = {
	name: "webhook-deliveries",
	mixins: [
		EveCollection({
			resource: "webhook_deliveries",
			writes: [],
			idPattern: OBJECT_ID,
			schema: {
				webhook: { type: "string" },
				alert: { type: "string" },
				type: { type: "string" },
				level: { type: "string" },
				status: { type: "enum", values: DELIVERY_STATUSES },
				attempts: { type: "number", integer: true, min: 0 },
				last_status: { type: "number", integer: true, optional: true, nullable: true },
				last_error: { type: "string", optional: true, nullable: true },
				duration_ms: { type: "number", optional: true, nullable: true },
				next_attempt: { type: "date", optional: true, nullable: true },
				delivered: { type: "date", optional: true, nullable: true },
			},
		}),
	],
	actions: {
		/** Writes a delivery's current state, creating it the first time (internal: the webhooks service). */
		log: {
			visibility: "public",
			params: { id: { type: "string", pattern: OBJECT_ID }, set: "object" },
			async handler(this: EveThis, ctx: Context<{ id: string; set: Doc }>) {
				const now = nowSeconds();
				const { _id: _ignored, ...set } = ctx.params.set;
				const updated = await this.store.findOneAndUpdate({ _id: ctx.params.id }, { $set: { ...set, _updated: now } });
				if (!updated) await this.store.insertMany([{ ...set, _id: ctx.params.id, _created: now, _updated: now }]);
				await this.notifyChanged(ctx, updated ? "updated" : "created", [ctx.params.id]);
				return true;
			},
		},

		/** GET /api/webhooks/{id}/deliveries: that webhook's deliveries, newest first unless `sort` says otherwise. */
		ofWebhook: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: RestContext) {
				const id = ctx.params.id as string;
				if (
					!OBJECT_ID.test(id) ||
					(await ctx.call<string[], { ids: string[] }>("webhooks.exist", { ids: [id] })).length === 0
				)
					throw new NotFound(`webhook '${id}' not found`);
				const given = QueryArgs.from(ctx.params.query).pairs;
				// The webhook is the filter; a client's own `where` narrows it further.
				const userWhere = given.find(([k]) => k === "where")?.[1];
				const where = userWhere?.trim() ? { $and: [{ webhook: id }, parseWhere(userWhere)] } : { webhook: id };
				const pairs: Array<[string, string]> = [
					...given.filter(([k]) => k !== "where"),
					["where", JSON.stringify(where)],
				];
				if (!pairs.some(([k]) => k === "sort")) pairs.push(["sort", "-_created"]);
				return this.cachedRead(ctx, `webhook:${id}`, new QueryArgs(pairs), () =>
					this.eveList(ctx, new QueryArgs(pairs)),
				);
			},
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("webhook");
	},
};

export default WebhookDeliveriesService;
