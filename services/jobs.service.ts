/**
 * Owns the `jobs` collection: progress of long work, one record per kind holding its latest run —
 * `build_graph` and `request_ips` (POST /graph), `load_updates` (POST /updates) and `inventory_sync`
 * (the cm-gateway's full reconciliation). A record has `status` (running, finished, failed), `progress`
 * {done, total}, `percent` (0–100, null while the total is unknown), `result` or `error`.
 *
 * The services doing the work claim a run (`jobs.claim`) and report on it (`jobs.update`); a run is
 * claimed atomically in the database, so one runs at a time per kind however many replicas there are,
 * and a run whose process died is taken over once its lease has passed (no sign of life for `leaseMs`).
 * `GET /api/jobs` reads them; `graph_jobs` (the name the graph jobs had first) is the same collection.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { formatHttpDate, nowSeconds } from "../lib/eve/dates";
import { Conflict } from "../lib/errors";
import { newObjectId } from "../lib/eve/ids";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";

export const JOB_KINDS = ["build_graph", "request_ips", "load_updates", "inventory_sync"] as const;
const DEFAULT_LEASE_MS = 60_000;

interface Progress {
	done: number;
	total: number;
}

function percentOf(p: Progress | undefined): number | null {
	if (!p || !(p.total > 0)) return null;
	return Math.max(0, Math.min(100, Math.floor((p.done / p.total) * 100)));
}

const JobsService: EveServiceSchema = {
	name: "jobs",
	mixins: [
		EveCollection({
			resource: "jobs",
			writes: [],
			idPattern: /^[a-z_]{1,40}$/,
			schema: {
				action: { type: "enum", values: [...JOB_KINDS] },
				status: { type: "enum", values: ["running", "finished", "failed"] },
				params: "object",
				started: "date",
				finished: { type: "date", optional: true, nullable: true },
				lease_until: { type: "date", optional: true, nullable: true },
				progress: { type: "object", props: { done: "number", total: "number" } },
				percent: { type: "number", optional: true, nullable: true, min: 0, max: 100 },
				result: { type: "object", optional: true, nullable: true },
				error: { type: "string", optional: true, nullable: true },
				run: "string",
			},
		}),
	],

	actions: {
		/** Takes the kind's record for a new run, or 409 while a live run holds it (internal). */
		claim: {
			visibility: "public",
			params: {
				kind: { type: "enum", values: [...JOB_KINDS] },
				params: { type: "object", optional: true, default: {} },
				leaseMs: { type: "number", integer: true, min: 1000, optional: true },
			},
			async handler(this: EveThis, ctx: Context<{ kind: string; params: Doc; leaseMs?: number }>) {
				const { kind, params } = ctx.params;
				const now = nowSeconds();
				const lease = ctx.params.leaseMs ?? DEFAULT_LEASE_MS;
				const fields = { action: kind, status: "running", params, started: now, finished: null, lease_until: new Date(now.getTime() + lease), lease_ms: lease, progress: { done: 0, total: 0 }, percent: null, result: null, error: null, run: newObjectId(), _updated: now };
				let doc = await this.store.findOneAndUpdate({ _id: kind, $or: [{ status: { $ne: "running" } }, { lease_until: { $lt: now } }] }, { $set: fields });
				if (!doc) {
					try {
						doc = { _id: kind, ...fields, _created: now };
						await this.store.insertMany([doc]);
					} catch (err) {
						if (!(err instanceof DuplicateKeyError)) throw err;
						const running = await this.store.findOne({ _id: kind });
						throw new Conflict(`${kind} is already running (started ${running?.started ? formatHttpDate(new Date(running.started)) : "just now"}); follow it at jobs/${kind}`);
					}
				}
				await this.notifyChanged(ctx, "updated", [kind]);
				return { ...doc, ...fields };
			},
		},

		/**
		 * Records progress, or the end (status finished|failed with result or error), of a run and keeps its
		 * lease; nothing when another run took the record over (internal). Returns whether it was written.
		 */
		update: {
			visibility: "public",
			params: {
				id: "string",
				run: "string",
				set: {
					type: "object",
					strict: true,
					props: {
						status: { type: "enum", values: ["running", "finished", "failed"], optional: true },
						progress: { type: "object", optional: true, props: { done: { type: "number", min: 0 }, total: { type: "number", min: 0 } } },
						result: { type: "object", optional: true, nullable: true },
						error: { type: "string", optional: true, nullable: true },
					},
				},
			},
			async handler(this: EveThis, ctx: Context<{ id: string; run: string; set: Doc }>) {
				const { id, run, set } = ctx.params;
				const now = nowSeconds();
				const current = await this.store.findOne({ _id: id, run });
				if (!current) return false;
				const ending = set.status && set.status !== "running";
				const progress: Progress | undefined = set.progress ?? (ending && set.status === "finished" && current.progress?.total > 0 ? { done: current.progress.total, total: current.progress.total } : undefined);
				const fields: Doc = { ...set, ...(progress ? { progress, percent: percentOf(progress) } : {}), _updated: now };
				if (ending) Object.assign(fields, { lease_until: null, finished: now, ...(set.status === "finished" ? { percent: 100 } : {}) });
				else fields.lease_until = new Date(now.getTime() + (current.lease_ms ?? DEFAULT_LEASE_MS));
				if (typeof fields.error === "string") fields.error = fields.error.slice(0, 1000);
				const n = await this.store.updateMany({ _id: id, run }, { $set: fields });
				await this.notifyChanged(ctx, "updated", [id]);
				return n > 0;
			},
		},
	},

	methods: {
		transformOutput(this: EveThis, doc: Doc): Doc {
			const { lease_ms: _lease, ...rest } = doc;
			return rest;
		},
	},
};

export default JobsService;
