/**
 * Owns the `audit` collection and every record in it: one record per mutating request and per remote execution —
 * who, with which role, when, from where, what (method, path, targets, Salt function and arguments with secrets
 * masked), the outcome and the jid. Its callers (the gateway, the run door, sign-in) report facts with `begin` and
 * `complete` (lib/contracts/audit.ts); record.ts builds the record. Append-only: no route changes or deletes a
 * record; only a begun one (a run's, written before it runs) is completed with its outcome.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import { DuplicateKeyError, type Doc } from "../../lib/storage/store";
import { Conflict, Invalid, NotFound } from "../../lib/errors";
import { AUDIT_OUTCOMES, type AuditAnswer, type AuditBegin, type AuditComplete } from "../../lib/contracts/audit";
import { buildRecord, resultFields } from "./record";

const OUTCOMES = [...AUDIT_OUTCOMES];

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

/** The params' schemas of the two actions: the contract's shapes (lib/contracts/audit.ts), checked on every call. */
const RESULT = {
	type: "object",
	strict: "remove",
	props: {
		status: { type: "number", integer: true, min: 100, max: 599 },
		outcome: { type: "enum", values: OUTCOMES, optional: true },
		message: { type: "string", optional: true },
		jid: { type: "string", optional: true, nullable: true },
	},
} as const;
const NULLABLE_STRING = { type: "string", nullable: true } as const;

type AuditThis = EveThis;

const AuditService: EveServiceSchema<AuditThis> = {
	name: "audit",
	mixins: [EveCollection({ resource: "audit", writes: [], idPattern: OBJECT_ID, schema: auditSchema })],
	actions: {
		/**
		 * Writes a new record from the facts given (internal: the gateway, the run door, sign-in). Once per id: a second
		 * begin under an id is refused (409), never merged. Throws when the record cannot be stored: a run waits for it.
		 */
		begin: {
			visibility: "public",
			params: {
				id: { type: "string", pattern: OBJECT_ID, optional: true },
				who: { type: "object", props: { token: NULLABLE_STRING, name: NULLABLE_STRING, role: NULLABLE_STRING } },
				request: {
					type: "object",
					props: { source: "string", agent: { type: "string", optional: true }, method: "string", path: "string" },
				},
				run: {
					type: "object",
					optional: true,
					props: {
						targets: { type: "array", items: "string", optional: true },
						fun: { type: "string", optional: true, nullable: true },
						call: {
							type: "object",
							optional: true,
							props: {
								cm_client: "string",
								arg: { type: "array", optional: true },
								kwarg: { type: "object", optional: true },
							},
						},
						break_glass: { type: "string", optional: true },
						approval: { type: "string", optional: true },
					},
				},
				body: { type: "any", optional: true },
				result: { ...RESULT, optional: true },
			},
			async handler(this: AuditThis, ctx: Context<AuditBegin>): Promise<AuditAnswer> {
				const id = ctx.params.id ?? newObjectId();
				const record = buildRecord(ctx.params);
				const issues = this.eve.createCheck(record);
				if (issues) {
					this.logger.error("Rejected an audit record:", JSON.stringify(issues));
					throw new Invalid(issues, "the audit record is malformed");
				}
				const now = nowSeconds();
				try {
					await this.store.insertMany([{ ...record, _id: id, _created: now, _updated: now }]);
				} catch (err) {
					if (err instanceof DuplicateKeyError)
						throw new Conflict(`audit record ${id} was begun already: a record is begun once, then completed`);
					throw err;
				}
				await this.notifyChanged(ctx, "created", [id]);
				return { _id: id };
			},
		},

		/**
		 * Sets the outcome (status, outcome, message, jid) of a begun record (internal: the run door, then the gateway
		 * for a run's request); the rest of a record never changes. A refusal or a hold the run door wrote stays one:
		 * the request's outcome does not turn it into a failure.
		 */
		complete: {
			visibility: "public",
			params: { id: { type: "string", pattern: OBJECT_ID }, result: RESULT },
			async handler(this: AuditThis, ctx: Context<AuditComplete>): Promise<AuditAnswer> {
				const { id, result } = ctx.params;
				const existing = await this.store.findOne({ _id: id });
				if (!existing) throw new NotFound(`audit record ${id} was never begun`);
				const $set: Doc = { ...resultFields(result), _updated: nowSeconds() };
				// A jid once known stays: a request that fails after its job started (a timeout) does not erase it.
				if (result.jid == null) delete $set.jid;
				if (existing.outcome === "denied" || existing.outcome === "held") delete $set.outcome;
				await this.store.updateMany({ _id: id }, { $set });
				await this.notifyChanged(ctx, "updated", [id]);
				return { _id: id };
			},
		},
	},

	async started(this: AuditThis) {
		await this.store.ensureIndex("token");
	},
};

export default AuditService;
