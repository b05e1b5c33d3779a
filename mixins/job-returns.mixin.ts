/**
 * What the actions and failed_patches collections share: read-only records keyed by jid + hostname
 * (`_id` = "<20-digit jid><hostname>"), each linked to its host and its job (`salt_jobs`), written by the cm-gateway through
 * the internal `record` action.
 */
import type { Context, ServiceSchema } from "moleculer";
import type { ValidationSchema } from "fastest-validator";
import { EveCollection, type EveServiceSchema, type EveThis } from "./eve-collection.mixin";
import { JOB_RETURN_ID } from "../lib/eve/ids";
import { Invalid } from "../lib/errors";
import { nowSeconds } from "../lib/eve/dates";
import { maskSecrets } from "../lib/security/masking";
import type { Doc } from "../lib/storage/store";

const jobReturnSchema = {
	jid: { type: "string", pattern: /^\d{20}(_\d+)?$/ },
	action: { type: "string", max: 200 },
	host: { type: "string", max: 253 },
	state: { type: "string", max: 50 },
} as const;

export function JobReturns(resource: string, fields: ValidationSchema): Partial<ServiceSchema> {
	const schema: Partial<EveServiceSchema> = {
		mixins: [
			EveCollection({
				resource,
				writes: [],
				idPattern: JOB_RETURN_ID,
				schema: { ...jobReturnSchema, ...fields },
				relations: {
					host: { resource: "hosts", service: "hosts", embeddable: true, validate: false },
					jid: { resource: "salt_jobs", service: "salt-jobs", embeddable: true, validate: false },
				},
			}),
		],
		actions: {
			/**
			 * Records returns; a repeated return (same jid and host) replaces the earlier one but keeps its
			 * `_created`, within one call too (the later one wins): the records are replaced by removing and
			 * inserting them, and an insert refused for a repeated id would lose the removed record.
			 */
			record: {
				visibility: "public",
				params: { returns: { type: "array", max: 50_000, items: "object" } },
				async handler(this: EveThis, ctx: Context<{ returns: Doc[] }>) {
					const now = nowSeconds();
					const byId = new Map<string, Doc>();
					for (const r of ctx.params.returns) {
						const _id = `${r.jid}${r.host}`;
						const issues = this.eve.createCheck(r);
						if (issues || !JOB_RETURN_ID.test(_id))
							throw new Invalid(issues ?? { _id: "invalid" }, `job return ${_id} is invalid`);
						byId.delete(_id);
						// A run's arguments are stored masked (lib/security/masking.ts): no secret in the job history.
						byId.set(_id, { ...r, _id, ...(r.args !== undefined ? { args: maskSecrets(r.args) } : {}) });
					}
					const docs = [...byId.values()];
					const ids = docs.map(d => d._id);
					const existing = new Map((await this.store.find({ _id: { $in: ids } })).map(d => [d._id, d]));
					await this.store.removeMany({ _id: { $in: [...existing.keys()] } });
					await this.store.insertMany(
						docs.map(d => ({ ...d, _created: existing.get(d._id)?._created ?? now, _updated: now })),
					);
					await this.notifyChanged(ctx, "created", ids);
					return { ids };
				},
			},
		},
		async started(this: EveThis) {
			await this.store.ensureIndex("host");
			await this.store.ensureIndex("jid");
		},
	};
	return schema as Partial<ServiceSchema>;
}
