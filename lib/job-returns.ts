/** What actions and failed patches share: records keyed by jid + hostname, written by the cm-gateway. */
import type { Context } from "moleculer";
import { JOB_RETURN_ID } from "./eve/ids";
import { EveError } from "./eve/errors";
import { nowSeconds } from "./eve/dates";
import { compileSchema } from "./eve/validation";
import type { Doc } from "./store";
import type { EveThis } from "../mixins/eve-collection.mixin";

export const jobReturnSchema = {
	jid: { type: "string", pattern: /^\d{20}(_\d+)?$/ },
	action: { type: "string", max: 200 },
	host: { type: "string", max: 253 },
	state: { type: "string", max: 50 },
} as const;

/** Inserts or replaces returns by `_id` (jid + host); keeps `_created` of a record seen before. */
export async function recordJobReturns(service: EveThis, ctx: Context, returns: Doc[]): Promise<{ ids: string[] }> {
	const check = (service.recordCheck ??= compileSchema({ ...service.eve.opts.schema }));
	const now = nowSeconds();
	const docs = returns.map(r => {
		const _id = `${r.jid}${r.host}`;
		const issues = check(r);
		if (issues || !JOB_RETURN_ID.test(_id)) throw new EveError(422, `job return ${_id} is invalid`, { issues: issues ?? { _id: "invalid" } });
		return { ...r, _id };
	});
	const ids = docs.map(d => d._id);
	const existing = new Map((await service.store.find({ _id: { $in: ids } })).map(d => [d._id, d]));
	await service.store.removeMany({ _id: { $in: [...existing.keys()] } });
	await service.store.insertMany(docs.map(d => ({ ...d, _created: existing.get(d._id)?._created ?? now, _updated: now })));
	await service.notifyChanged(ctx, "created", ids);
	return { ids };
}
