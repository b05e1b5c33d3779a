/**
 * Owns the `jobs` collection: progress of long work, one record per kind holding its latest run —
 * `build_graph` and `request_ips` (POST /graph), `load_updates` (POST /updates) and `inventory_sync`
 * (the cm-gateway's full reconciliation). A record has `status` (running, finished, failed), `progress`
 * {done, total}, `percent` (0–100, null while the total is unknown), `result` or `error`.
 *
 * The services doing the work claim a run (`jobs.claim`) and report on it (`jobs.update`); a run is
 * claimed atomically in the database under the run's lease (lib/runtime/lease.ts: `lease` {owner: the run, until}),
 * so one runs at a time per kind however many replicas there are, and a run whose process died is taken over
 * once its lease has passed (no sign of life for `leaseMs`).
 * `GET /api/jobs` reads them; `graph_jobs` (the name the graph jobs had first) is the same collection.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { formatHttpDate, nowSeconds } from "../lib/eve/dates";
import { Conflict } from "../lib/errors";
import { newObjectId } from "../lib/eve/ids";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";
import { LEASE, claim, leaseFor, migrateLeases, release, renew, type OldLeases } from "../lib/runtime/lease";

export const JOB_KINDS = ["build_graph", "request_ips", "load_updates", "inventory_sync"] as const;
const DEFAULT_LEASE_MS = 60_000;

/** Leases as versions before issue 45 stored them: `lease_until` (null once the run ended), owned by the run. */
export const OLD_LEASES: OldLeases = {
	filter: { lease_until: { $exists: true } },
	lease: d =>
		d.lease_until && d.status === "running" ? { owner: String(d.run), until: new Date(d.lease_until) } : null,
	unset: ["lease_until"],
};

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
				lease: { type: "object", optional: true, props: { owner: "string", until: "date" } },
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
				const holder = { owner: newObjectId(), ms: ctx.params.leaseMs ?? DEFAULT_LEASE_MS, now };
				const fields = {
					action: kind,
					status: "running",
					params,
					started: now,
					finished: null,
					lease_ms: holder.ms,
					progress: { done: 0, total: 0 },
					percent: null,
					result: null,
					error: null,
					run: holder.owner,
					_updated: now,
				};
				// Free once the last run ended (its lease let go) or its process died (its lease passed).
				let doc = await claim(this.store, { _id: kind }, holder, { $set: fields });
				if (!doc) {
					try {
						doc = { _id: kind, ...fields, [LEASE]: leaseFor(holder), _created: now };
						await this.store.insertMany([doc]);
					} catch (err) {
						if (!(err instanceof DuplicateKeyError)) throw err;
						const running = await this.store.findOne({ _id: kind });
						throw new Conflict(
							`${kind} is already running (started ${running?.started ? formatHttpDate(new Date(running.started)) : "just now"}); follow it at jobs/${kind}`,
						);
					}
				}
				await this.notifyChanged(ctx, "updated", [kind]);
				return doc;
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
						progress: {
							type: "object",
							optional: true,
							props: { done: { type: "number", min: 0 }, total: { type: "number", min: 0 } },
						},
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
				const progress: Progress | undefined =
					set.progress ??
					(ending && set.status === "finished" && current.progress?.total > 0
						? { done: current.progress.total, total: current.progress.total }
						: undefined);
				const fields: Doc = { ...set, ...(progress ? { progress, percent: percentOf(progress) } : {}), _updated: now };
				if (ending) Object.assign(fields, { finished: now, ...(set.status === "finished" ? { percent: 100 } : {}) });
				if (typeof fields.error === "string") fields.error = fields.error.slice(0, 1000);
				// The run's lease is renewed by its progress, let go at its end.
				const written = ending
					? await release(this.store, { _id: id, run }, { $set: fields })
					: await renew(
							this.store,
							{ _id: id, run },
							{ owner: run, ms: current.lease_ms ?? DEFAULT_LEASE_MS, now },
							{ $set: fields },
						);
				await this.notifyChanged(ctx, "updated", [id]);
				return written;
			},
		},
	},

	async started(this: EveThis) {
		// Leases stored by an older version are moved first: a run claimed before the upgrade is taken over as usual.
		const moved = await migrateLeases(this.store, OLD_LEASES);
		if (moved) this.logger.info(`Moved the leases of ${moved} job records to \`lease\``);
	},

	methods: {
		transformOutput(this: EveThis, doc: Doc): Doc {
			const { lease_ms: _lease, ...rest } = doc;
			return rest;
		},
	},
};

export default JobsService;
