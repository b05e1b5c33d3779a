/**
 * Owns the `conformity_rules` collection (docs/conformity.md, "Suppressing noisy states"): rules that make known-noisy
 * states count for nothing in conformity checks — `{sls?, state_id?, reason}`, at least one of the first two; a state
 * matches when every field the rule gives is equal. Operators write them (not scoped tokens: a rule weighs on every
 * host's checks); every write is audited like any other.
 * A rule applies from the next check on (a judgement already made is not redone).
 */
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import type { Doc } from "../../lib/storage/store";
import { refuseFleetWideToScoped } from "../../lib/http/work-scope";
import { writeMethods } from "../../mixins/eve-collection/writes";

const ConformityRulesService: EveServiceSchema = {
	name: "conformity-rules",
	mixins: [
		EveCollection({
			resource: "conformity_rules",
			idPattern: OBJECT_ID,
			schema: {
				sls: { type: "string", min: 1, max: 500, optional: true },
				state_id: { type: "string", min: 1, max: 500, optional: true },
				reason: { type: "string", min: 1, max: 2000 },
			},
		}),
	],
	actions: {
		/** Every rule, as the judgement reads them (internal: the conformity service). */
		all: {
			visibility: "public",
			async handler(this: EveThis) {
				const docs = await this.store.find({}, { only: ["sls", "state_id"] });
				return docs.map(d => ({
					...(d.sls !== undefined ? { sls: d.sls } : {}),
					...(d.state_id !== undefined ? { state_id: d.state_id } : {}),
				}));
			},
		},
	},
	methods: {
		/** A rule weighs on every host's checks: fleet-wide, so no scoped token writes one (docs/security.md). */
		async beforeStore(this: EveThis, ctx: RestContext, doc: Doc, info: { op: string }): Promise<Doc> {
			refuseFleetWideToScoped(ctx, info.op === "create" ? "create" : "change", "a suppression rule");
			return doc;
		},
		async removeDocs(this: EveThis, ctx: RestContext, docs: Doc[]) {
			refuseFleetWideToScoped(ctx, "delete", "a suppression rule");
			await writeMethods.removeDocs.call(this, ctx, docs);
		},
		async checkRules(
			this: EveThis,
			_ctx: RestContext,
			doc: Doc,
			info: { op: string; existing?: Doc },
		): Promise<Issues | null> {
			const merged = { ...(info.existing ?? {}), ...doc };
			if (merged.sls === undefined && merged.state_id === undefined)
				return { sls: "give sls, state_id or both: a rule naming neither would suppress every state" };
			return null;
		},
	},
};

export default ConformityRulesService;
