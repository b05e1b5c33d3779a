/**
 * Owns the `salt_jobs` collection: the job history, one record per Salt job fleet-ctl started or saw on the
 * master's event bus (`_id` = jid). A record holds what was run (`fun`, `args`), on what (`target` as given,
 * `minions` the frozen list it was sent to), who and from where (`user`, `origin`, `task`/`run`/`rollout`),
 * when (`started`, `finished`), and how it went (`expected`, `returned`, `succeeded`, `failed`, `timed_out`,
 * `state`). `args` are stored with their secrets masked and withheld from viewers (mixins/run-args.mixin.ts). Read-only over the API; newest first unless sorted otherwise; the hosts' returns stay in `actions`
 * (each record links to them, each of them links back through `jid`).
 *
 * Written only by the cm-gateway: `open` when a job starts (or is seen), `tally` after each batch of returns
 * (the counts are recounted from the job's `actions` records, so a repeated or lost call leaves them exact).
 * Retention: jobs started more than JOBS_RETENTION_DAYS ago go, with their `actions` records.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { readMethods } from "../mixins/eve-collection/reads";
import type { Link } from "../lib/eve/render";
import { configOf } from "../lib/config";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";
import { noCounts, type JobCounts } from "../lib/fleet/job-counts";
import { maskSecrets } from "../lib/security/masking";
import { RunArgs } from "../mixins/run-args.mixin";

/** Where a job came from (docs/jobs.md). */
export const JOB_ORIGINS = ["api", "task", "rollout", "approval", "repl", "external"] as const;
export const JOB_ID = /^\d{20}(_\d+)?$/;
/** How often the retention sweep runs. */
const PRUNE_EVERY_MS = 3_600_000;
/** Most jobs one sweep removes (the next one goes on). */
const PRUNE_BATCH = 5000;

/** A job as the cm-gateway opens it. */
export interface JobOpening {
	jid: string;
	fun: string;
	args: unknown[];
	target: string;
	minions: string[];
	user: string | null;
	origin: (typeof JOB_ORIGINS)[number];
	task?: string;
	run?: string;
	rollout?: string;
	batch?: number;
	started?: Date | string;
}

const count = { type: "number", integer: true, min: 0 } as const;

const SaltJobsService: EveServiceSchema = {
	name: "salt-jobs",
	mixins: [
		// Arguments shown masked, or withheld from viewers.
		RunArgs,
		EveCollection({
			resource: "salt_jobs",
			writes: [],
			idPattern: JOB_ID,
			defaultSort: [["_id", -1]],
			schema: {
				fun: { type: "string", max: 200 },
				args: { type: "array", optional: true },
				target: { type: "string", max: 20_000 },
				minions: { type: "array", items: "string" },
				expected: count,
				returned: count,
				succeeded: count,
				failed: count,
				timed_out: count,
				user: { type: "string", max: 300, nullable: true },
				origin: { type: "enum", values: [...JOB_ORIGINS] },
				task: { type: "string", optional: true },
				run: { type: "string", optional: true },
				rollout: { type: "string", optional: true },
				batch: { type: "number", integer: true, optional: true },
				started: { type: "date" },
				finished: { type: "date", nullable: true },
				state: { type: "enum", values: ["running", "finished"] },
			},
			// A 10,000-host job's list of hosts is for its own page; lists carry the counts.
			listHidden: ["minions"],
			relations: { task: { resource: "tasks", service: "tasks", validate: false } },
			indexes: {
				minions: {},
				fun: {},
				user: {},
				origin: {},
				state: {},
				task: { sparse: true },
				rollout: { sparse: true },
				started: { ordered: true },
				finished: { ordered: true, sparse: true },
			},
		}),
	],
	actions: {
		/**
		 * A job started (or seen): its record, made once. Opened again (the bus showed the job before salt-api
		 * answered fleet-ctl), it takes the opener's word on where the job came from, never an `external`'s.
		 */
		open: {
			visibility: "public",
			params: { job: "object" },
			async handler(this: EveThis, ctx: Context<{ job: JobOpening }>) {
				const j = ctx.params.job;
				const started = j.started ? new Date(j.started) : new Date();
				// Stored masked (lib/security/masking.ts): the history never holds a run's secrets, whoever reads or filters it.
				const about: Doc = {
					fun: j.fun,
					args: maskSecrets(j.args ?? []),
					target: j.target,
					user: j.user,
					origin: j.origin,
					...(j.task ? { task: j.task } : {}),
					...(j.run ? { run: j.run } : {}),
					...(j.rollout ? { rollout: j.rollout } : {}),
					...(j.batch !== undefined ? { batch: j.batch } : {}),
				};
				const now = new Date();
				const record: Doc = {
					...about,
					minions: j.minions,
					expected: j.minions.length,
					returned: 0,
					succeeded: 0,
					failed: 0,
					timed_out: 0,
					started,
					finished: j.minions.length ? null : started,
					state: j.minions.length ? "running" : "finished",
				};
				const issues = this.eve.createCheck(record);
				if (issues || !JOB_ID.test(j.jid))
					throw new Error(`job ${j.jid} cannot be recorded: ${JSON.stringify(issues ?? { _id: "invalid" })}`);
				const doc: Doc = { _id: j.jid, ...record, _created: now, _updated: now };
				try {
					await this.store.insertMany([doc]);
				} catch (err) {
					if (!(err instanceof DuplicateKeyError)) throw err;
					if (j.origin === "external") return { jid: j.jid, opened: false };
					// A job adopted after a takeover is opened again without a user: the first opening's stays.
					const { user, ...rest } = about;
					await this.store.updateMany({ _id: j.jid }, { $set: { ...rest, ...(user ? { user } : {}), _updated: now } });
				}
				await this.notifyChanged(ctx, "created", [j.jid]);
				return { jid: j.jid, opened: true };
			},
		},
		/** The counts of these jobs, recounted from their hosts' records; a job none of whose hosts still runs is finished. */
		tally: {
			visibility: "public",
			params: { jids: { type: "array", items: "string", max: 1000 } },
			async handler(this: EveThis, ctx: Context<{ jids: string[] }>) {
				const jobs = await this.store.find(
					{ _id: { $in: ctx.params.jids } },
					{ only: ["expected", "state", "finished"] },
				);
				if (!jobs.length) return { tallied: 0 };
				const counts = new Map(
					(
						await ctx.call<JobCounts[], { jids: string[] }>("actions.jobCounts", { jids: jobs.map(j => String(j._id)) })
					).map(c => [c.jid, c]),
				);
				const now = new Date();
				const ended: string[] = [];
				for (const job of jobs) {
					const c = counts.get(String(job._id)) ?? noCounts(String(job._id));
					const done = c.running === 0 && c.returned + c.timed_out >= job.expected;
					const set: Doc = {
						returned: c.returned,
						succeeded: c.succeeded,
						failed: c.failed,
						timed_out: c.timed_out,
						state: done ? "finished" : "running",
						finished: done ? (job.finished ?? now) : null,
						_updated: now,
					};
					await this.store.updateMany({ _id: job._id }, { $set: set });
					if (done && job.state !== "finished") ended.push(String(job._id));
				}
				await this.notifyChanged(
					ctx,
					"updated",
					jobs.map(j => String(j._id)),
				);
				// Whoever waits for a job (a rollout's next batch) hears it at once.
				if (ended.length) ctx.broadcast("salt-jobs.finished", { jids: ended });
				return { tallied: jobs.length };
			},
		},
		/** Jobs as stored (but their hosts), with their counts, by jid (internal: rollouts follow their batches' jobs, conformity judges checks). */
		summaries: {
			visibility: "public",
			params: { jids: { type: "array", items: "string", max: 1000 } },
			async handler(this: EveThis, ctx: Context<{ jids: string[] }>) {
				const docs = await this.store.find({ _id: { $in: ctx.params.jids } }, { exclude: ["minions"] });
				return docs.map(d => ({
					jid: String(d._id),
					fun: d.fun,
					args: d.args ?? [],
					rollout: d.rollout ?? null,
					expected: d.expected,
					returned: d.returned,
					succeeded: d.succeeded,
					failed: d.failed,
					timed_out: d.timed_out,
					state: d.state,
					started: d.started,
					finished: d.finished ?? null,
				}));
			},
		},
		/** Drops the jobs started before the retention period, and their hosts' records (also run every hour). */
		prune: {
			visibility: "public",
			params: { before: { type: "date", convert: true, optional: true } },
			async handler(this: EveThis, ctx: Context<{ before?: Date }>) {
				const before = ctx.params.before ?? new Date(Date.now() - configOf(this.broker).jobsRetentionDays * 86_400_000);
				let removed = 0;
				for (;;) {
					const old = await this.store.find({ started: { $lt: before } }, { only: ["_id"], limit: PRUNE_BATCH });
					if (!old.length) break;
					const jids = old.map(d => String(d._id));
					// The hosts' records first: a sweep cut short leaves jobs to find again, never orphaned returns.
					await ctx.call("actions.removeJobs", { jids });
					removed += await this.store.removeMany({ _id: { $in: jids } });
					if (old.length < PRUNE_BATCH) break;
				}
				if (removed) {
					this.logger.info(
						`Retention: dropped ${removed} job(s) started before ${before.toISOString()} and their hosts' returns`,
					);
					await this.notifyChanged(ctx, "removed", []);
				}
				return { removed };
			},
		},
	},
	methods: {
		/** Besides the task link: the job's per-host returns, in `actions`. */
		relatedLinks(this: EveThis, doc: Doc, shown?: Doc): Record<string, Link | Link[]> | null {
			const related = readMethods.relatedLinks.call(this, doc, shown) ?? {};
			related.actions = {
				title: "actions",
				href: `actions?where=${encodeURIComponent(JSON.stringify({ jid: doc._id }))}`,
			};
			return related;
		},
	},
	started(this: EveThis & { pruneTimer?: NodeJS.Timeout }) {
		this.pruneTimer = setInterval(() => {
			this.broker
				.call("salt-jobs.prune", {})
				.catch((err: Error) => this.logger.warn("Job history retention sweep failed:", err.message));
		}, PRUNE_EVERY_MS);
		this.pruneTimer.unref?.();
	},
	stopped(this: EveThis & { pruneTimer?: NodeJS.Timeout }) {
		if (this.pruneTimer) clearInterval(this.pruneTimer);
	},
};

export default SaltJobsService;
