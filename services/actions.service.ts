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
	mixins: [JobReturns("actions", { args: { type: "array", optional: true }, return: { type: "string", optional: true }, task: { type: "string", optional: true }, run: { type: "string", optional: true } })],
	actions: {
		/** The job a task run started, if any host record names the run (internal: the cm-gateway's dedupe). */
		byRun: {
			visibility: "public",
			params: { run: "string" },
			async handler(this: EveThis, ctx: Context<{ run: string }>) {
				const [doc] = await this.store.find({ run: ctx.params.run }, { limit: 1 });
				return doc ? { jid: doc.jid } : null;
			},
		},
		/** How many hosts of this job have not answered yet (internal: the scheduler's overlap check). */
		outstanding: {
			visibility: "public",
			params: { jid: "string" },
			async handler(this: EveThis, ctx: Context<{ jid: string }>) {
				return this.store.count({ jid: ctx.params.jid, state: "running" });
			},
		},
		/** The hosts still "running", with their jobs (internal: the cm-gateway, after a restart). */
		running: {
			visibility: "public",
			async handler(this: EveThis, _ctx: Context) {
				const docs = await this.store.find({ state: "running" }, { only: ["jid", "action", "host", "args", "task", "run", "_created"] });
				return docs.map(d => ({ jid: d.jid, action: d.action, host: d.host, args: d.args, task: d.task, run: d.run, _created: d._created }));
			},
		},
	},
	async started(this: EveThis) {
		// Only task runs carry `run`: the others stay out of the index.
		await this.store.ensureIndex("run", { sparse: true });
	},
};

export default ActionsService;
