/**
 * Owns the `actions` collection: one record per host of every job fleet-ctl started (`_id` = jid +
 * hostname, `args` with Salt's `__kwarg__`, `return` as text; `state` "running" until the host returns,
 * then "finished", or "timeout"; `retcode` and `success` as Salt sent them). Read-only over the API. `args` are
 * stored with their secrets masked, shown masked to operators and admins and withheld from viewers. Each record
 * links to its job in `salt_jobs`, whose counts are recounted from these records (`jobCounts`).
 */
import type { Context } from "moleculer";
import type { EveServiceSchema, EveThis } from "../mixins/eve-collection.mixin";
import { JobReturns } from "../mixins/job-returns.mixin";
import { countReturn, noCounts, type JobCounts } from "../lib/fleet/job-counts";
import { RunArgs } from "../mixins/run-args.mixin";

const ActionsService: EveServiceSchema = {
	name: "actions",
	mixins: [
		// Arguments shown masked, or withheld from viewers (stored masked by JobReturns).
		RunArgs,
		JobReturns("actions", {
			args: { type: "array", optional: true },
			return: { type: "string", optional: true },
			retcode: { type: "number", integer: true, optional: true },
			success: { type: "boolean", optional: true },
			task: { type: "string", optional: true },
			run: { type: "string", optional: true },
		}),
	],
	actions: {
		/** How each of these jobs' hosts went, from their records (internal: salt-jobs.tally). */
		jobCounts: {
			visibility: "public",
			params: { jids: { type: "array", items: "string", max: 1000 } },
			async handler(this: EveThis, ctx: Context<{ jids: string[] }>): Promise<JobCounts[]> {
				const byJid = new Map(ctx.params.jids.map(jid => [jid, noCounts(jid)]));
				await this.store.scan({ jid: { $in: ctx.params.jids } }, ["jid", "state", "success", "retcode"], doc => {
					const c = byJid.get(doc.jid);
					if (c) countReturn(c, doc);
				});
				return [...byJid.values()];
			},
		},
		/** A job's host records with their returns (internal: a rollout reads its dry runs' predicted changes). */
		returnsOf: {
			visibility: "public",
			params: { jid: "string" },
			async handler(this: EveThis, ctx: Context<{ jid: string }>) {
				const docs = await this.store.find(
					{ jid: ctx.params.jid },
					{ only: ["host", "state", "return", "retcode", "success"] },
				);
				return docs.map(d => ({
					host: d.host,
					state: d.state,
					return: d.return,
					retcode: d.retcode,
					success: d.success,
				}));
			},
		},
		/** Drops every host record of these jobs (internal: the job history's retention). */
		removeJobs: {
			visibility: "public",
			params: { jids: { type: "array", items: "string", max: 10_000 } },
			async handler(this: EveThis, ctx: Context<{ jids: string[] }>) {
				const removed = await this.store.removeMany({ jid: { $in: ctx.params.jids } });
				if (removed) await this.notifyChanged(ctx, "removed", []);
				return { removed };
			},
		},
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
				const docs = await this.store.find(
					{ state: "running" },
					{ only: ["jid", "action", "host", "args", "task", "run", "_created"] },
				);
				return docs.map(d => ({
					jid: d.jid,
					action: d.action,
					host: d.host,
					args: d.args,
					task: d.task,
					run: d.run,
					_created: d._created,
				}));
			},
		},
	},
	async started(this: EveThis) {
		// Only task runs carry `run`: the others stay out of the index.
		await this.store.ensureIndex("run", { sparse: true });
	},
};

export default ActionsService;
