/**
 * Owns the `tasks` collection: scheduled Salt runs. `start` is given as "YYYY-MM-DD HH:MM" (UTC) and
 * shown as an HTTP-date; `next` and `count_of_execution` are kept by the scheduler, never by clients.
 *
 * Status moves (PATCH /tasks/{id}/{status}): scheduled <-> paused. A finished task stays finished.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext, type WriteInfo } from "../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../lib/eve/ids";
import { parseHttpDate } from "../lib/eve/dates";
import { badRequest, notFound, validationFailed, type Issues } from "../lib/eve/errors";
import type { Doc } from "../lib/store";

export const TASK_STATUSES = ["scheduled", "paused", "finished"];
/** Which status a client may move a task to, from each status. */
const MOVES: Record<string, string[]> = { scheduled: ["paused", "scheduled"], paused: ["scheduled", "paused"], finished: ["finished"] };

const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?$/;

/** "YYYY-MM-DD HH:MM" (UTC) or an HTTP-date; null when it is neither or names no real moment. */
export function parseTaskTime(value: unknown): Date | null {
	if (value instanceof Date) return value;
	if (typeof value !== "string") return null;
	const m = LOCAL_TIME.exec(value.trim());
	if (!m) return parseHttpDate(value);
	const [, y, mo, d, h, mi, s] = m.map(Number);
	const date = new Date(Date.UTC(y, mo - 1, d, h, mi, s || 0));
	return date.getUTCMonth() === mo - 1 && date.getUTCDate() === d && h < 24 && mi < 60 ? date : null;
}

const TasksService: EveServiceSchema = {
	name: "tasks",
	mixins: [
		EveCollection({
			resource: "tasks",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			clientIds: true,
			readOnlyFields: ["next", "count_of_execution", "owner"],
			schema: {
				cm_client: { type: "enum", values: ["local", "local_async"], optional: true, default: "local_async" },
				name: { type: "string", min: 1, max: 200 },
				fun: { type: "string", min: 1, max: 200, pattern: /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$/ },
				kwarg: { type: "object", optional: true, default: {} },
				start: "date",
				end: { type: "date", optional: true },
				status: { type: "enum", values: ["scheduled", "paused"], optional: true, default: "scheduled" },
				tgt: { type: "array", items: { type: "string", min: 1, max: 253 }, min: 1, max: 100_000 },
				interval: { type: "number", integer: true, min: 0, max: 366 * 24 * 3600, optional: true, default: 0 },
			},
		}),
	],

	actions: {

		/** PATCH /tasks/{id}/{status} */
		setStatus: {
			params: { id: "string", status: "string", query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: Context<{ id: string; status: string }, RestContext["meta"]>) {
				const task = await this.visibleItem(ctx.params.id);
				const wanted = ctx.params.status;
				if (!TASK_STATUSES.includes(wanted)) {
					throw validationFailed({ status: `unallowed value '${wanted}' (one of: scheduled, paused)` }, "Update failure: the document contains errors");
				}
				if (!MOVES[task.status]?.includes(wanted)) {
					throw validationFailed({ status: `a ${task.status} task cannot become ${wanted}` }, "Update failure: the document contains errors");
				}
				return this.applyPatch(ctx, task, { status: wanted }, false);
			},
		},

		/** What a task runs, for the gateway's scope check of PUT /tasks (internal). */
		runSpec: {
			visibility: "public",
			params: { id: "string" },
			async handler(this: EveThis, ctx: Context<{ id: string }>) {
				if (!OBJECT_ID.test(ctx.params.id)) return null;
				const task = await this.store.findOne({ _id: ctx.params.id });
				return task ? { fun: task.fun, tgt: task.tgt } : null;
			},
		},

		/** PUT /tasks: the body names the task by `_id` and carries the fields to replace. */
		replace: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: EveThis, ctx: RestContext) {
				const body = ctx.params.body as Doc;
				if (body === null || typeof body !== "object" || Array.isArray(body)) throw badRequest("a JSON object is required");
				const { _id, ...changes } = body;
				if (_id === undefined) throw validationFailed({ _id: "required field" }, "Update failure: the document contains errors");
				if (typeof _id !== "string" || !OBJECT_ID.test(_id)) throw notFound();
				const existing = await this.visibleItem(_id);
				const { doc, issues } = await this.validateDoc(ctx, changes, { op: "patch", existing });
				if (issues) throw validationFailed(issues, "Update failure: the document contains errors");
				return this.applyPatch(ctx, existing, doc as Doc, false);
			},
		},
	},

	methods: {
		async prepareInput(this: EveThis, _ctx: RestContext, doc: Doc, info: WriteInfo) {
			const issues: Issues = {};
			const out = { ...doc };
			for (const field of ["start", "end"]) {
				if (!(field in doc)) continue;
				if (field === "end" && doc.end === null && info.op === "patch") continue;
				const date = parseTaskTime(doc[field]);
				if (date) out[field] = date;
				else issues[field] = "must be of datetime type (YYYY-MM-DD HH:MM in UTC, or an HTTP-date)";
			}
			if (info.op === "patch" && "status" in doc) issues.status = "use PATCH /tasks/{id}/{status} to change the status";
			return { doc: out, issues };
		},

		async checkRules(this: EveThis, _ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null> {
			const start = doc.start ?? info.existing?.start;
			const end = "end" in doc ? doc.end : info.existing?.end;
			if (start instanceof Date && end instanceof Date && end <= start) return { end: "must be later than start" };
			return null;
		},

		async beforeStore(this: EveThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			// A task runs as the token that created it: the scheduler checks that token's scope at every run.
			if (info.op === "create") return { ...doc, next: doc.start, count_of_execution: 0, owner: (ctx.meta as { user?: { id: string } }).user?.id ?? null };
			if (doc.start instanceof Date && info.existing?.count_of_execution === 0) return { ...doc, next: doc.start };
			return doc;
		},
	},

	async started(this: EveThis) {
		await this.store.ensureIndex("status");
		await this.store.ensureIndex("next");
	},
};

export default TasksService;
