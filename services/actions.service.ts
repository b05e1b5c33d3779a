/**
 * Owns the `actions` collection: one record per host of every job fleet-ctl started (`_id` = jid +
 * hostname, `args` with Salt's `__kwarg__`, `return` as text; `state` "running" until the host returns,
 * then "finished", or "timeout"). Read-only over the API.
 */
import type { Context } from "moleculer";
import type { EveServiceSchema, EveThis } from "../mixins/eve-collection.mixin";
import { JobReturns } from "../mixins/job-returns.mixin";

const ActionsService: EveServiceSchema = {
	name: "actions",
	mixins: [JobReturns("actions", { args: { type: "array", optional: true }, return: { type: "string", optional: true } })],
	actions: {
		/** The hosts still "running", with their jobs (internal: the cm-gateway, after a restart). */
		running: {
			visibility: "public",
			async handler(this: EveThis, _ctx: Context) {
				const docs = await this.store.find({ state: "running" }, { only: ["jid", "action", "host", "args", "_created"] });
				return docs.map(d => ({ jid: d.jid, action: d.action, host: d.host, args: d.args, _created: d._created }));
			},
		},
	},
};

export default ActionsService;
