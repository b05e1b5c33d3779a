/**
 * Owns the `alerts` collection: notifications (host down, fingerprint changed, patch failed,
 * vnc.connect ...) with a `read` flag. `mark_as_read=1` on a read marks the returned alerts read.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds } from "../lib/eve/dates";
import type { QueryArgs } from "../lib/eve/query";
import type { Doc } from "../lib/storage/store";
import { ALERT_LEVELS } from "../lib/contracts/fleet";
import { action } from "../lib/contracts/call";

interface NewAlert {
	type: string;
	level: string;
	payload: Doc;
}

function markAsRead(args: QueryArgs): boolean {
	const flag = (args.get("mark_as_read") ?? "").trim().toLowerCase();
	return flag === "1" || flag === "true";
}

/** What this service has on `this` besides the Eve mixin's. */
interface AlertsMembers {
	insertAlerts(ctx: Context, alerts: NewAlert[]): Promise<string[]>;
}

type AlertsThis = EveThis & AlertsMembers;

const AlertsService: EveServiceSchema<AlertsThis> = {
	name: "alerts",
	mixins: [
		EveCollection({
			resource: "alerts",
			writes: [],
			idPattern: OBJECT_ID,
			schema: {
				type: { type: "string", min: 1, max: 200 },
				level: { type: "enum", values: [...ALERT_LEVELS] },
				payload: { type: "object", optional: true },
				read: "boolean",
			},
		}),
	],
	actions: {
		/** Raises an alert (internal: other services call it). */
		raise: action("alerts.raise", {
			visibility: "public",
			async handler(this: AlertsThis, ctx) {
				const [_id] = await this.insertAlerts(ctx, [ctx.params]);
				return { _id };
			},
		}),
		/** Raises several alerts at once (internal). */
		raiseMany: action("alerts.raiseMany", {
			visibility: "public",
			async handler(this: AlertsThis, ctx) {
				return { ids: await this.insertAlerts(ctx, ctx.params.alerts) };
			},
		}),
	},
	methods: {
		async insertAlerts(this: AlertsThis, ctx: Context, alerts: NewAlert[]): Promise<string[]> {
			if (!alerts.length) return [];
			const now = nowSeconds();
			const docs = alerts.map(a => ({
				type: a.type,
				level: a.level,
				payload: a.payload,
				read: false,
				_id: newObjectId(),
				_created: now,
				_updated: now,
			}));
			await this.store.insertMany(docs);
			const ids = docs.map(d => d._id);
			await this.notifyChanged(ctx, "created", ids);
			// Every gateway pushes them to its live streams; one webhooks replica delivers them.
			ctx.broadcast("alerts.raised", { alerts: docs }, { groups: ["api"] });
			ctx.emit("alerts.raised", { alerts: docs }, { groups: ["webhooks"] });
			return ids;
		},

		/** Reads that mark alerts read must run every time. */
		readCacheable(this: AlertsThis, args: QueryArgs): boolean {
			return markAsRead(args) === false;
		},

		async beforeRender(this: AlertsThis, ctx: RestContext, docs: Doc[], args: QueryArgs) {
			if (!markAsRead(args)) return;
			const unread = docs.filter(d => d.read !== true).map(d => d._id);
			if (unread.length === 0) return;
			await this.store.updateMany({ _id: { $in: unread } }, { $set: { read: true } });
			for (const d of docs) d.read = true;
			await this.notifyChanged(ctx, "updated", unread);
		},
	},
	async started(this: AlertsThis) {
		await this.store.ensureIndex("read");
	},
};

export default AlertsService;
