/**
 * Owns the `tasks` collection and runs them (docs/scheduling.md). `start`/`end` are given as
 * "YYYY-MM-DD HH:MM" in the task's `timezone` (default TASK_TIMEZONE, UTC) or as HTTP-dates, and shown as
 * HTTP-dates; `next`, `count_of_execution` and `last_run` are kept by the scheduler, never by clients.
 *
 * Status moves (PATCH /tasks/{id}/{status}): scheduled <-> paused. A finished task stays finished.
 *
 * The scheduler: every replica looks for due tasks (`next` <= now) and claims each due run with one atomic
 * update conditional on that `next` (so exactly one replica wins it), which also moves `next` on and records
 * the run as `pending` with a lease. The winner sends the run to the cm-gateway (`cm-gateway.runTask`) and
 * then records `last_run`; a replica finding a pending run whose lease passed (its process died) takes it
 * over. The database is the only truth: timers only decide when to look again.
 */
import type { Context } from "moleculer";
import { writeMethods } from "../../mixins/eve-collection/writes";
import {
	EveCollection,
	type EveServiceSchema,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import {
	FIRST_YEAR,
	LAST_YEAR,
	firstDue,
	neverDueReason,
	nextDue,
	parseCron,
	parseWallTime,
	preview,
	resumedNext,
	validTimeZone,
	type Schedule,
} from "../../lib/fleet/schedule";
import { QueryArgs } from "../../lib/eve/query";
import { formatHttpDate, parseHttpDate } from "../../lib/eve/dates";
import type { Issues } from "../../lib/eve/errors";
import { ErrorType, Invalid, isError, Malformed, NotFound, RunRefused } from "../../lib/errors";
import type { Doc } from "../../lib/storage/store";
import { SALT_FUN } from "../../lib/http/bodies";
import { authorizeScopedWork, scopedCaller } from "../../lib/http/work-scope";
import { keepMasked, maskSecrets } from "../../lib/security/masking";
import { RunArgs } from "../../mixins/run-args.mixin";
import { migrateLeases } from "../../lib/runtime/lease";
import { OLD_LEASES } from "./task-claims";

import { cfg, scheduleOf, schedulerMethods, type TasksThis } from "./scheduler";
import { call } from "../../lib/contracts/call";

export const TASK_STATUSES = ["scheduled", "paused", "finished"];
/** The fields that decide what a task runs, or when: changing one needs the changer's scope to cover the task. */
export const RUN_FIELDS = [
	"fun",
	"tgt",
	"target",
	"kwarg",
	"cm_client",
	"start",
	"end",
	"interval",
	"cron",
	"timezone",
	"misfire",
	"overlap",
];
/** Which status a client may move a task to, from each status. */
const MOVES: Record<string, string[]> = {
	scheduled: ["paused", "scheduled"],
	paused: ["scheduled", "paused"],
	finished: ["finished"],
};

/** What a task's secrets were given for: a mask sent back keeps them only while these stay as they are. */
const CALL_FIELDS = ["fun", "cm_client", "tgt", "target"];

/** The fields of a task's schedule (what POST /tasks/preview reads). */
const SCHEDULE_FIELDS = ["start", "end", "interval", "cron", "timezone"];

/** `?count=` of a preview: 1 to 1000, default 10. */
function previewCount(query: unknown): number {
	const raw = QueryArgs.from(query).get("count");
	const count = raw === undefined ? 10 : Number(raw);
	if (!Number.isInteger(count) || count < 1 || count > 1000)
		throw new Malformed("`count` must be an integer from 1 to 1000");
	return count;
}

const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/;

/** "YYYY-MM-DD HH:MM" (a wall time in `tz`, default UTC) or an HTTP-date; null when it is neither or names no real moment. */
export function parseTaskTime(value: unknown, tz = "UTC"): Date | null {
	if (value instanceof Date) return value;
	if (typeof value !== "string") return null;
	if (!LOCAL_TIME.test(value.trim())) return parseHttpDate(value);
	return parseWallTime(value, tz);
}

/** The year a `start`/`end` string states: "YYYY-…" or an HTTP-date's "Ddd, DD Mon YYYY …". */
const STATED_YEAR = /^\s*(\d{4})-|^\s*([A-Za-z]{3}), \d{2} [A-Za-z]{3} (\d{4}) /;
const WEEKDAY_NAMES = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/**
 * Why a `start`/`end` is refused beyond its format, or null: its year is outside FIRST_YEAR–LAST_YEAR
 * (Date would read "0000" as 1900), or it is an HTTP-date whose weekday is not its date's (it names two
 * different days). `date` is what it parsed to, if anything.
 */
function taskTimeProblem(value: unknown, date: Date | null): string | null {
	const m = typeof value === "string" ? STATED_YEAR.exec(value) : null;
	if (!m) return null;
	const year = m[1] ?? m[3];
	if (Number(year) < FIRST_YEAR || Number(year) > LAST_YEAR)
		return `must be in the years ${FIRST_YEAR} to ${LAST_YEAR} (${year} given)`;
	if (!date || m[2] === undefined) return null;
	const weekday = WEEKDAY_NAMES[date.getUTCDay()];
	if (m[2].toLowerCase() !== weekday.slice(0, 3).toLowerCase())
		return `names another date than the one given: ${date.toUTCString().slice(5, 16)} is a ${weekday}, not ${m[2]}`;
	return null;
}

/**
 * Why a task's schedule can never fire, or null: its first due time (lib/fleet/schedule.ts firstDue, a bounded
 * search) does not exist because `end` comes before it (or the cron expression matches no date).
 */
function neverFiresIssue(s: Schedule): Issues | null {
	let first: Date | null;
	try {
		first = firstDue(s);
	} catch (err) {
		return { cron: (err as Error).message };
	}
	if (first) return null;
	const unbounded = s.end ? firstDue({ ...s, end: null }) : null;
	if (unbounded)
		return { end: `the task would never run: its first due time (${unbounded.toUTCString()}) is after end` };
	return { cron: "never due after start" };
}

const TasksService: EveServiceSchema<TasksThis> = {
	name: "tasks",
	mixins: [
		// `kwarg` shown masked, or withheld from viewers; stored whole (the scheduler runs it).
		RunArgs,
		EveCollection({
			resource: "tasks",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			clientIds: true,
			readOnlyFields: ["next", "count_of_execution", "owner", "last_run", "pending", "lease", "window_wait"],
			// Stored whole: a filter on it would reveal a secret a comparison at a time.
			secretPaths: ["kwarg"],
			schema: {
				cm_client: { type: "enum", values: ["local", "local_async"], optional: true, default: "local_async" },
				name: { type: "string", min: 1, max: 200 },
				fun: { type: "string", min: 1, max: 200, pattern: SALT_FUN },
				kwarg: { type: "object", optional: true, default: {} },
				start: "date",
				end: { type: "date", optional: true },
				status: { type: "enum", values: ["scheduled", "paused"], optional: true, default: "scheduled" },
				// Required unless `target` is given (checkRules).
				// null (a change through PUT) drops it: the task then runs on its `target` alone.
				tgt: {
					type: "array",
					items: { type: "string", min: 1, max: 253 },
					min: 1,
					max: 100_000,
					optional: true,
					nullable: true,
				},
				// Beyond the spec: a compound target (docs/targeting.md), resolved at each run like the groups of `tgt`.
				target: { type: "string", min: 1, max: 10_000, optional: true, nullable: true },
				interval: { type: "number", integer: true, min: 0, max: 366 * 24 * 3600, optional: true, default: 0 },
				// Beyond the spec (docs/scheduling.md); absent means the default.
				cron: { type: "string", min: 1, max: 200, optional: true, nullable: true },
				timezone: { type: "string", min: 1, max: 64, optional: true },
				misfire: { type: "enum", values: ["run_once", "skip"], optional: true },
				overlap: { type: "enum", values: ["skip", "allow"], optional: true },
			},
		}),
	],

	actions: {
		/** PATCH /tasks/{id}/{status} */
		setStatus: {
			params: { id: "string", status: "string", query: { type: "any", optional: true } },
			async handler(this: TasksThis, ctx: Context<{ id: string; status: string }, RestContext["meta"]>) {
				const task = await this.visibleItem(ctx.params.id);
				const wanted = ctx.params.status;
				if (!TASK_STATUSES.includes(wanted)) {
					throw new Invalid(
						{ status: `unallowed value '${wanted}' (one of: scheduled, paused)` },
						"Update failure: the document contains errors",
					);
				}
				if (!MOVES[task.status]?.includes(wanted)) {
					throw new Invalid(
						{ status: `a ${task.status} task cannot become ${wanted}` },
						"Update failure: the document contains errors",
					);
				}
				// Resuming does not make up for the runs missed while paused: the next one is the next due from now.
				if (task.status === "paused" && wanted === "scheduled") {
					// Resuming makes runs happen: the resumer must be allowed to run the task too (its owner stays).
					await this.authorizeTask(ctx as unknown as RestContext, task);
					const next = resumedNext(scheduleOf(task, cfg(this).taskTimezone), new Date());
					return this.applyPatch(
						ctx,
						task,
						next ? { status: wanted, next } : { status: "finished", next: null },
						false,
					);
				}
				return this.applyPatch(ctx, task, { status: wanted }, false);
			},
		},

		/** GET /tasks/{id}/preview?count=N (default 10, at most 1000): the next N due times, as HTTP-dates. */
		preview: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: TasksThis, ctx: Context<{ id: string; query?: unknown }>) {
				const count = previewCount(ctx.params.query);
				const task = await this.visibleItem(ctx.params.id);
				if (task.status === "finished") return { _id: task._id, next: [] };
				const from =
					task.status === "scheduled" && task.next ? new Date(new Date(task.next).getTime() - 1) : new Date();
				return {
					_id: task._id,
					next: preview(scheduleOf(task, cfg(this).taskTimezone), from, count).map(formatHttpDate),
				};
			},
		},

		/**
		 * POST /tasks/preview?count=N: the next N due times of a schedule not saved yet (`start`, `end`, `interval`,
		 * `cron`, `timezone` as a task takes them, checked as a new task's: the same 422s), from its start or from
		 * now, whichever is later. The task form shows them as they are typed.
		 */
		previewSchedule: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: TasksThis, ctx: RestContext) {
				const count = previewCount(ctx.params.query);
				const body = ctx.params.body;
				if (body === null || typeof body !== "object" || Array.isArray(body))
					throw new Malformed("a JSON object is required");
				// Only the schedule is read; what saving needs besides it (a name, a function, targets) is stood in for.
				const schedule = Object.fromEntries(Object.entries(body as Doc).filter(([k]) => SCHEDULE_FIELDS.includes(k)));
				const { doc, issues } = await this.validateDoc(
					ctx,
					{ name: "preview", fun: "test.ping", tgt: ["preview"], ...schedule },
					{ op: "create" },
				);
				if (issues || !doc) throw new Invalid(issues ?? {}, "the schedule contains errors");
				const from = new Date(Math.max(doc.start.getTime() - 1, Date.now()));
				return { next: preview(scheduleOf(doc, cfg(this).taskTimezone), from, count).map(formatHttpDate) };
			},
		},

		/** PUT /tasks: the body names the task by `_id` and carries the fields to replace. */
		replace: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: TasksThis, ctx: RestContext) {
				const body = ctx.params.body as Doc;
				if (body === null || typeof body !== "object" || Array.isArray(body))
					throw new Malformed("a JSON object is required");
				const { _id, ...changes } = body;
				if (_id === undefined)
					throw new Invalid({ _id: "required field" }, "Update failure: the document contains errors");
				if (typeof _id !== "string" || !OBJECT_ID.test(_id)) throw new NotFound();
				const existing = await this.visibleItem(_id);
				const { doc, issues } = await this.validateDoc(ctx, changes, { op: "patch", existing });
				if (issues) throw new Invalid(issues, "Update failure: the document contains errors");
				return this.applyPatch(ctx, existing, doc as Doc, false);
			},
		},
	},

	methods: {
		...schedulerMethods,
		async prepareInput(this: TasksThis, _ctx: RestContext, doc: Doc, info: WriteInfo) {
			const issues: Issues = {};
			const out = { ...doc };
			const tz = typeof doc.timezone === "string" ? doc.timezone : (info.existing?.timezone ?? cfg(this).taskTimezone);
			if (typeof doc.timezone === "string" && !validTimeZone(doc.timezone))
				issues.timezone = `unknown time zone '${doc.timezone}' (an IANA name such as Europe/Berlin)`;
			if (typeof doc.cron === "string") {
				try {
					// A cron no date matches (Feb 30) would never fire.
					const never = neverDueReason(parseCron(doc.cron));
					if (never) issues.cron = never;
				} catch (err) {
					issues.cron = (err as Error).message;
				}
			}
			for (const field of ["start", "end"]) {
				if (!(field in doc)) continue;
				if (field === "end" && doc.end === null && info.op === "patch") continue;
				const date = issues.timezone ? parseTaskTime(doc[field]) : parseTaskTime(doc[field], tz);
				const problem = taskTimeProblem(doc[field], date);
				if (date && !problem) out[field] = date;
				else issues[field] = problem || `must be of datetime type (YYYY-MM-DD HH:MM in ${tz}, or an HTTP-date)`;
			}
			if (info.op === "patch" && "status" in doc) issues.status = "use PATCH /tasks/{id}/{status} to change the status";
			if ("kwarg" in doc || (info.existing && CALL_FIELDS.some(k => k in doc))) {
				const kept = this.keptSecrets(doc, info.existing);
				if ("problem" in kept) issues.kwarg = kept.problem;
				else if ("kwarg" in doc) out.kwarg = kept.kwarg;
			}
			return { doc: out, issues };
		},

		/**
		 * A `kwarg` sent back as shown, masks in it (the dashboard's form does): each mask keeps the secret this task
		 * stores at the same place (lib/security/masking.ts keepMasked), while the task runs the same function on the
		 * same targets — a secret given for one call is not carried to another. A change that leaves `kwarg` out
		 * keeps it all, as if sent back masked. Answers the kwarg to store, or why not.
		 */
		keptSecrets(this: TasksThis, doc: Doc, existing: Doc | undefined): { kwarg: unknown } | { problem: string } {
			const sent = "kwarg" in doc ? doc.kwarg : maskSecrets(existing?.kwarg ?? {});
			const { value, kept, unkept } = keepMasked(sent, existing?.kwarg, "kwarg");
			if (unkept.length)
				return {
					problem: `${unkept.join(", ")}: the mask (********) keeps a secret this task stores there, and it stores none: give the value`,
				};
			const moved = existing
				? CALL_FIELDS.filter(k => k in doc && JSON.stringify(doc[k] ?? null) !== JSON.stringify(existing[k] ?? null))
				: [];
			if (kept.length && moved.length)
				return {
					problem: `${kept.join(", ")}: the mask (********) keeps a stored secret only for the call it was given for, and this change also changes ${moved.join(", ")}: give the value again`,
				};
			return { kwarg: value };
		},

		async checkRules(this: TasksThis, _ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null> {
			const tgt = "tgt" in doc ? doc.tgt : info.existing?.tgt;
			const target = "target" in doc ? doc.target : info.existing?.target;
			if (!(Array.isArray(tgt) && tgt.length) && !target) return { tgt: "required field" };
			const start = doc.start ?? info.existing?.start;
			const end = "end" in doc ? doc.end : info.existing?.end;
			if (start instanceof Date && end instanceof Date && end <= start) return { end: "must be later than start" };
			const cron = "cron" in doc ? doc.cron : info.existing?.cron;
			const interval = "interval" in doc ? doc.interval : info.existing?.interval;
			if (cron && interval > 0) return { cron: "give either cron or interval, not both" };
			// A schedule that can never fire is refused, whatever the clock says (a past one-shot still runs once).
			if (start instanceof Date && cron)
				return neverFiresIssue(scheduleOf({ ...info.existing, ...doc, start, end }, cfg(this).taskTimezone));
			return null;
		},

		/**
		 * A task is a deferred run: whoever creates it, or changes what it runs or when, must be allowed to run
		 * the whole resulting task (fun, its targets resolved now, kwarg, client) and becomes its owner; every
		 * run is then authorized again against the owner's token (docs/security.md). Answers the owner.
		 */
		async authorizeTask(this: TasksThis, ctx: RestContext, task: Doc): Promise<string> {
			const user = (ctx.meta as { user?: { id: string } }).user;
			if (!user?.id) throw new RunRefused("the task is refused: no token authorizes it", "no token authorizes it");
			const targets = await this.taskTargetsNow(ctx, task);
			// What the write leaves to run, for its audit record, refused or not (the gateway reads it from meta).
			const meta = ctx.meta as { auditRun?: { fun: string; targets: string[] } };
			meta.auditRun = meta.auditRun
				? {
						fun: [...new Set([...meta.auditRun.fun.split(","), task.fun])].join(",").slice(0, 200),
						targets: [...new Set([...meta.auditRun.targets, ...targets])],
					}
				: { fun: task.fun, targets };
			await call(ctx, "tokens.authorizeRun", {
				token: user.id,
				client: task.cm_client ?? "local_async",
				fun: task.fun,
				kwarg: task.kwarg ?? {},
				targets,
			});
			return user.id;
		},

		/** What a task would run on now: its `tgt` (groups resolved) and the hosts its compound `target` selects. */
		async taskTargetsNow(this: TasksThis, ctx: RestContext, task: Doc): Promise<string[]> {
			const named =
				Array.isArray(task.tgt) && task.tgt.length ? await call(ctx, "groups.expandTargets", { tgt: task.tgt }) : [];
			if (typeof task.target !== "string") return named;
			// An expression that cannot be evaluated is the document's fault: 422 on the field.
			const resolved = await call(ctx, "hosts.resolveTarget", { target: task.target, field: "target" });
			return [...new Set([...named, ...resolved.hosts])];
		},

		/**
		 * A scoped caller may touch (change, pause, resume, rename, delete) an existing task only when it lies wholly
		 * inside the caller's scope: its call on its hosts resolved now (403 otherwise; docs/security.md).
		 */
		async taskInScope(this: TasksThis, ctx: RestContext, task: Doc, action: string): Promise<void> {
			if (!scopedCaller(ctx)) return;
			let hosts: string[];
			try {
				hosts = await this.taskTargetsNow(ctx, task);
			} catch (err) {
				// A target that no longer evaluates bounds nothing: not shown to be inside the scope.
				if (!isError(err, ErrorType.TargetUnevaluable)) throw err;
				throw new RunRefused(
					`your token may not ${action} this task: its target cannot be evaluated now, so nothing shows it lies inside the token's scope`,
				);
			}
			await authorizeScopedWork(ctx, action, "this task", {
				client: task.cm_client ?? "local_async",
				fun: task.fun,
				kwarg: task.kwarg ?? {},
				hosts,
			});
		},

		async removeDocs(this: TasksThis, ctx: RestContext, docs: Doc[]) {
			for (const doc of docs) await this.taskInScope(ctx, doc, "delete");
			await writeMethods.removeDocs.call(this, ctx, docs);
		},

		async beforeStore(this: TasksThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.existing) await this.taskInScope(ctx, info.existing, "change");
			if (info.op === "create") {
				const owner = await this.authorizeTask(ctx, doc);
				const next = nextDue(scheduleOf(doc, cfg(this).taskTimezone), new Date(doc.start.getTime() - 1));
				// A cron task keeps the zone it was made in: changing TASK_TIMEZONE later does not move its runs.
				const zone = doc.cron && !doc.timezone ? { timezone: cfg(this).taskTimezone } : {};
				return { ...doc, ...zone, next, ...(next ? {} : { status: "finished" }), count_of_execution: 0, owner };
			}
			// A change of what runs or when makes the changer the owner, if they may run the whole result.
			const changed: Doc =
				RUN_FIELDS.some(k => k in doc) && info.existing
					? { ...doc, owner: await this.authorizeTask(ctx, { ...info.existing, ...doc }) }
					: doc;
			// A change of when the task runs moves `next`: from start while it has not run, else from now.
			if (
				["start", "end", "interval", "cron", "timezone"].some(k => k in doc) &&
				info.existing &&
				info.existing.status !== "finished"
			) {
				const zone: Doc =
					doc.cron && !doc.timezone && !info.existing.timezone ? { timezone: cfg(this).taskTimezone } : {};
				const merged: Doc = { ...info.existing, ...changed, ...zone };
				const from = merged.count_of_execution === 0 ? new Date(merged.start.getTime() - 1) : new Date();
				return { ...changed, ...zone, next: nextDue(scheduleOf(merged, cfg(this).taskTimezone), from) };
			}
			return changed;
		},
	},

	events: {
		"tasks.created": {
			handler(this: TasksThis) {
				this.kickScheduler();
			},
		},
		"tasks.updated": {
			handler(this: TasksThis) {
				this.kickScheduler();
			},
		},
		/** A maintenance window was written: the runs waiting for one are looked at again now (it may be open). */
		"maintenance-windows.*": {
			async handler(this: TasksThis) {
				const n = await this.store.updateMany(
					{ status: "scheduled", window_wait: { $exists: true }, pending: { $exists: false } },
					{ $set: { next: new Date() } },
				);
				if (n) this.kickScheduler();
			},
		},
	},

	async started(this: TasksThis) {
		await this.store.ensureIndex("status");
		await this.store.ensureIndex("next", { ordered: true });
		// Leases stored by an older version are moved first: a run claimed before the upgrade is taken over as usual.
		const moved = await migrateLeases(this.store, OLD_LEASES);
		if (moved) this.logger.info(`Moved the leases of ${moved} pending task runs to \`lease\``);
		if (!cfg(this).taskScheduler) return;
		this.createScheduler();
		// Runs go to the cm-gateway; the scheduler starts looking once the services it writes through are there.
		void this.broker
			.waitForServices(["actions", "alerts"], 600_000)
			.then(() => this.kickScheduler(0))
			.catch(() => this.logger.warn("The actions and alerts services did not appear: the scheduler waits"));
	},

	async stopped(this: TasksThis) {
		await this.scheduler?.stop();
	},
};

export default TasksService;
