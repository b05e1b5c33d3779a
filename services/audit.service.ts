/**
 * Owns the `audit` collection: one record per mutating request and per remote execution — who, with
 * which role, when, from where, what (method, path, targets, Salt function and arguments with secrets
 * masked), the outcome and the jid. Append-only: no route changes or deletes a record; only a run's
 * record, written before the run, is completed with the outcome of its request.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { Invalid, NotFound } from "../lib/errors";
import { nowSeconds } from "../lib/eve/dates";
import { redact } from "../lib/http/auth";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";

/** What completing a record may set. */
const OUTCOME_FIELDS = ["status", "outcome", "message", "jid"];
const OUTCOMES = ["ok", "denied", "failed", "started", "held"];

const auditSchema = {
	token: { type: "string", optional: true, nullable: true },
	name: { type: "string", optional: true, nullable: true },
	role: { type: "string", optional: true, nullable: true },
	source: { type: "string", max: 200, optional: true },
	// The client's User-Agent (the REPL's says so: lib/repl/api-client.ts).
	agent: { type: "string", max: 200, optional: true },
	method: { type: "string", max: 10 },
	path: { type: "string", max: 4096 },
	targets: { type: "array", items: "string", optional: true },
	fun: { type: "string", max: 200, optional: true, nullable: true },
	args: { type: "any", optional: true },
	status: { type: "number", integer: true },
	// "started": a run's record written before the job was handed to salt-api, not completed (yet); "held": a run
	// an approval policy matched, waiting for its approvers (docs/security.md).
	outcome: { type: "enum", values: OUTCOMES },
	message: { type: "string", max: 2000, optional: true },
	jid: { type: "string", optional: true, nullable: true },
	// An admin's reason for a run outside the maintenance windows (docs/security.md, break-glass).
	break_glass: { type: "string", max: 2000, optional: true },
	// The approval request that holds the run, or that it carries out.
	approval: { type: "string", max: 24, optional: true },
} as const;

/** What this service has on `this` besides the Eve mixin's. */
interface AuditMembers {
	completeRecord(ctx: Context, existing: Doc | null, entry: Doc): Promise<unknown>;
}

type AuditThis = EveThis & AuditMembers;

const AuditService: EveServiceSchema<AuditThis> = {
	name: "audit",
	mixins: [EveCollection({ resource: "audit", writes: [], idPattern: OBJECT_ID, schema: auditSchema })],
	actions: {
		/**
		 * Appends one record (internal: the gateway, the cm-gateway and the REPL call it), or completes the
		 * record `id` names when it exists already: a run's record is written before the run by the
		 * cm-gateway, and its request's outcome (status, outcome, message, jid) is set on it afterwards.
		 * Arguments are masked here too. Throws when the record cannot be stored: a run waits for it.
		 */
		record: {
			visibility: "public",
			params: { id: { type: "string", pattern: OBJECT_ID, optional: true }, entry: "object" },
			async handler(this: AuditThis, ctx: Context<{ id?: string; entry: Doc }>) {
				const id = ctx.params.id ?? newObjectId();
				// Only the outcome (a run completing its record): nothing to insert.
				if (ctx.params.id && !("method" in ctx.params.entry)) return this.completeRecord(ctx, await this.store.findOne({ _id: id }), ctx.params.entry);
				const entry = { ...ctx.params.entry, args: redact(ctx.params.entry.args) };
				const issues = this.eve.createCheck(entry);
				if (issues) {
					this.logger.error("Rejected an audit record:", JSON.stringify(issues));
					throw new Invalid(issues, "the audit record is malformed");
				}
				const now = nowSeconds();
				try {
					await this.store.insertMany([{ ...entry, _id: id, _created: now, _updated: now }]);
				} catch (err) {
					// Written before by the run this request started: complete it instead.
					if (!(err instanceof DuplicateKeyError)) throw err;
					return this.completeRecord(ctx, await this.store.findOne({ _id: id }), ctx.params.entry);
				}
				await this.notifyChanged(ctx, "created", [id]);
				return { _id: id };
			},
		},
	},

	methods: {
		/** Sets the outcome fields of a record already written; the rest of a record never changes. */
		async completeRecord(this: AuditThis, ctx: Context, existing: Doc | null, entry: Doc) {
			if (!existing) throw new NotFound("the audit record vanished");
			const $set: Doc = { _updated: nowSeconds() };
			for (const k of OUTCOME_FIELDS) if (entry[k] !== undefined) $set[k] = entry[k];
			// A refusal or a hold the run door wrote stays one: the request's outcome does not turn it into a failure.
			if (existing.outcome === "denied" || existing.outcome === "held") delete $set.outcome;
			const bad = ($set.status !== undefined && !Number.isInteger($set.status)) || ($set.outcome !== undefined && !OUTCOMES.includes($set.outcome)) || ($set.message !== undefined && typeof $set.message !== "string") || ($set.jid !== undefined && $set.jid !== null && typeof $set.jid !== "string");
			if (bad) throw new Invalid({ outcome: "malformed" }, "the audit record's outcome is malformed");
			if (typeof $set.message === "string") $set.message = $set.message.slice(0, 2000);
			await this.store.updateMany({ _id: existing._id }, { $set });
			await this.notifyChanged(ctx, "updated", [String(existing._id)]);
			return { _id: existing._id };
		},
	},
	async started(this: AuditThis) {
		await this.store.ensureIndex("token");
	},
};

export default AuditService;
