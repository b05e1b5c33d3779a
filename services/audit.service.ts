/**
 * Owns the `audit` collection: one record per mutating request and per remote execution — who, with
 * which role, when, from where, what (method, path, targets, Salt function and arguments with secrets
 * masked), the outcome and the jid. Append-only: no route changes or deletes a record.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds } from "../lib/eve/dates";
import { redact } from "../lib/auth";
import type { Doc } from "../lib/store";

const auditSchema = {
	token: { type: "string", optional: true, nullable: true },
	name: { type: "string", optional: true, nullable: true },
	role: { type: "string", optional: true, nullable: true },
	source: { type: "string", max: 200, optional: true },
	method: { type: "string", max: 10 },
	path: { type: "string", max: 4096 },
	targets: { type: "array", items: "string", optional: true },
	fun: { type: "string", max: 200, optional: true, nullable: true },
	args: { type: "any", optional: true },
	status: { type: "number", integer: true },
	outcome: { type: "enum", values: ["ok", "denied", "failed"] },
	message: { type: "string", max: 2000, optional: true },
	jid: { type: "string", optional: true, nullable: true },
} as const;

const AuditService: EveServiceSchema = {
	name: "audit",
	mixins: [EveCollection({ resource: "audit", writes: [], idPattern: OBJECT_ID, schema: auditSchema })],
	actions: {
		/** Appends one record (internal: the gateway and the REPL call it). Arguments are masked here too. */
		record: {
			visibility: "public",
			params: { entry: "object" },
			async handler(this: EveThis, ctx: Context<{ entry: Doc }>) {
				const entry = { ...ctx.params.entry, args: redact(ctx.params.entry.args) };
				const issues = this.eve.createCheck(entry);
				if (issues) {
					this.logger.error("Rejected an audit record:", JSON.stringify(issues));
					return null;
				}
				const now = nowSeconds();
				const doc = { ...entry, _id: newObjectId(), _created: now, _updated: now };
				await this.store.insertMany([doc]);
				await this.notifyChanged(ctx, "created", [doc._id]);
				return { _id: doc._id };
			},
		},
	},
	async started(this: EveThis) {
		await this.store.ensureIndex("token");
	},
};

export default AuditService;
