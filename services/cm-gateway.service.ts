/**
 * The cm-gateway: fleet-ctl's side of the Salt master, through salt-api (lib/salt-client.ts). It owns no
 * collection; it writes hosts, actions, failed_patches, updates and alerts through their services.
 * docs/salt.md is the user-facing description; in short:
 *
 *  - Remote execution, `POST /hosts/{id}` (runOnHost) and `POST /groups/{id}` (runOnGroup): the body
 *    {cm_client, fun, arg?, kwarg?} becomes the lowstate {client, tgt: [hostnames], tgt_type: "list",
 *    fun, arg, kwarg}. `local` waits and answers every host's output (task_id = jid, status "finished");
 *    `local_async` (the default) answers the jid at once (status "scheduled") and the returns arrive later.
 *    Every return of every job started here becomes one `actions` record (_id = jid + hostname) and the
 *    host's `last_action`; a state run of a patch that failed also becomes a `failed_patches` record and a
 *    `patch.failed` alert. Hosts that never answer are recorded as "timeout" after CM_JOB_TIMEOUT_MS.
 *  - `POST /hosts/{id}/all_status` (allStatus): a live poll of `status.all_status` on one host every
 *    CM_ALL_STATUS_INTERVAL_MS, whose returns are `actions` records (they do not move `last_action`) and
 *    `cm.allStatus` events.
 *  - `POST /updates` (loadUpdates): the patch files under CM_PATCH_PREFIX on the master's file server.
 *  - The inventory: event-driven from the master's event bus (`GET /events`: presence, minion start,
 *    key and auth events, job returns, the hosts' custom `ctl/vnc/connect` event), with a full
 *    reconciliation (sync) at start, after every reconnection of the stream and every
 *    CM_SYNC_INTERVAL_MS as the safety net.
 *
 * Without CM_API_URL none of this runs and the salt actions are not published: the gateway answers 503.
 * Run one cm-gateway per master: each one follows the event stream and would raise every alert again.
 */
import { trackJob, type JobHandle } from "../lib/progress";
import type { Context, Logger, ServiceBroker, ServiceSchema } from "moleculer";
import { loadConfig, type Config } from "../lib/config";
import { formatHttpDate } from "../lib/eve/dates";
import { EveError, notFound, validationFailed } from "../lib/eve/errors";
import { HOSTNAME, OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { compileSchema } from "../lib/eve/validation";
import { ALL_STATUS_BODY, RUN_BODY } from "../lib/bodies";
import { JobTracker, NO_RETURN, type JobOrigin, type JobReturn } from "../lib/job-tracker";
import { batchesBySize, capText } from "../lib/batches";
import { SaltClient, type EventStream, type Lowstate, type SaltEvent } from "../lib/salt-client";
import { hostUpdate, keyViews, presenceChange, type KnownHost, type MasterView } from "../lib/salt-inventory";
import { PresenceGuard } from "../lib/presence-guard";
import { failedPatchSteps, patchOf, type PatchStep } from "../lib/salt-state";
import { countMetric, setMetric } from "../lib/metrics";
import { startRun as throughTheDoor, type DoorEffects, type Requester, type RunBody, type RunRequest, type TokenHolder } from "../lib/run-door";

export { grainDate, grainIp, sanitizeGrains } from "../lib/salt-inventory";
export type { Requester } from "../lib/run-door";

interface RunMeta {
	user?: { id: string; name: string; role: string };
	auditId?: string;
	request?: { source?: string; agent?: string; method?: string; path?: string };
}

function requester(ctx: Context<unknown, RunMeta>): Requester {
	const { user, auditId, request } = ctx.meta;
	return {
		token: user?.id ?? "",
		name: user?.name ?? null,
		role: user?.role ?? null,
		auditId: typeof auditId === "string" && OBJECT_ID.test(auditId) ? auditId : undefined,
		source: String(request?.source ?? "").slice(0, 200),
		...(typeof request?.agent === "string" && request.agent ? { agent: request.agent.slice(0, 200) } : {}),
		method: String(request?.method ?? "CALL").slice(0, 10),
		path: String(request?.path ?? "").slice(0, 4096),
	};
}

/** What the run door (lib/run-door.ts) needs of this service. */
interface DoorHost {
	broker: ServiceBroker;
	logger: Logger;
	doorEffects<R>(ctx: Context, req: RunRequest, execute: () => Promise<R>, jidOf?: (result: R) => string | null): DoorEffects<R>;
	execute(targets: string[], body: RunBody, origin: JobOrigin): Promise<{ task_id?: string | null }>;
}

interface RunParams {
	id: string;
	body?: unknown;
	query?: unknown;
}

interface Alert {
	type: string;
	level: "info" | "warning" | "error";
	payload: Record<string, unknown>;
}

interface Monitor {
	timer: NodeJS.Timeout;
	until: number;
	/** The token that started the poll: every poll is authorized against it again. */
	token: string;
}

/** The call a live status poll makes on its host. */
const ALL_STATUS_CALL: RunBody = { cm_client: "local_async", fun: "status.all_status" };

export interface SyncResult {
	_status: "OK";
	/** Minions with a key on the master. */
	hosts: number;
	created: number;
	updated: number;
	/** Hosts soft-deleted because their key left the master, and restored because it came back. */
	removed: number;
	restored: number;
	fingerprints_changed: number;
}

const JID = /^\d{20}(_\d+)?$/;
/** Most records handed to `*.upsertMany` / `*.record` at once (fewer when they are large: lib/batches.ts). */
const UPSERT_BATCH = 1000;
/** The tag of the event hosts send when a VNC session opens or closes (docs/salt.md). */
export const VNC_EVENT_TAG = "ctl/vnc/connect";
/** Returns of these functions change grains the host fields come from (`ctl` dates, versions). */
const GRAIN_CHANGING = /^(state\.|pkg\.(upgrade|install)|saltutil\.(sync_grains|refresh_grains|sync_all)|grains\.)/;
/** Minions whose cached grains one reconciliation call reads (and whose hosts it then writes). */
const SYNC_BATCH = 1000;
/** A refresh of this many hosts or more reads every fingerprint at once instead of one call per host. */
const FINGER_ALL_FROM = 20;
/** Hosts per answer when the cm-gateway reads the fleet's inventory state over NATS (~150 B each). */
const INVENTORY_PAGE = 2000;
/** A minion a return proved alive is not written up again for its returns within this long (ms). */
const ALIVE_MEMO_MS = 60_000;
/** How long returns are gathered before they are written (events arrive one host at a time). */
const RETURN_FLUSH_MS = 50;

const checkBody = compileSchema(RUN_BODY, { wellFormed: true });
const checkAllStatus = compileSchema(ALL_STATUS_BODY, { wellFormed: true });

/** The return as the `actions` record keeps it: text. */
function asText(value: unknown): string {
	if (typeof value === "string") return value;
	return JSON.stringify(value) ?? "null";
}

/** A step whose command output is cut to the size an `actions` return keeps. */
function capStep(step: PatchStep, maxBytes: number): PatchStep {
	const changes = { ...step.changes };
	for (const k of ["stdout", "stderr"]) if (typeof changes[k] === "string") changes[k] = capText(changes[k] as string, maxBytes);
	return { ...step, comment: capText(step.comment, maxBytes), changes };
}

/** The task and run an `actions` record links to, when the job is a task's run. */
const links = (o: { task?: string; run?: string }) => ({ ...(o.task ? { task: o.task } : {}), ...(o.run ? { run: o.run } : {}) });

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/**
 * The patch files among the file server's paths: `.sls` files under `prefix`, each with its sls name, as
 * `state.apply` takes it ("patches/fix1.sls" -> "patches.fix1"; "patches/web/init.sls" -> "patches.web"
 * unless "patches/web.sls" exists, which Salt prefers). Names with another "." cannot be given to
 * `state.apply` (Salt reads the dot as a directory): `skip` hears about them.
 */
export function patchPaths(paths: string[], prefix: string, skip: (path: string) => void = () => {}): Array<{ path: string; name: string }> {
	const byName = new Map<string, { path: string; name: string; init: boolean }>();
	for (const path of paths) {
		if (!path.startsWith(prefix) || !path.endsWith(".sls")) continue;
		const parts = path.slice(0, -".sls".length).split("/");
		if (parts.some(p => p === "" || p.includes("."))) {
			skip(path);
			continue;
		}
		const init = parts.length > 1 && parts[parts.length - 1] === "init";
		if (init) parts.pop();
		const name = parts.join(".");
		const seen = byName.get(name);
		if (!seen || (seen.init && !init)) byName.set(name, { path, name, init });
	}
	return [...byName.values()].map(({ path, name }) => ({ path, name }));
}

/** Runs `fn` over `items` with at most `limit` at a time; the first failure stops the rest and is thrown. */
async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
	let next = 0;
	let failed = false;
	const worker = async () => {
		while (!failed && next < items.length) {
			const item = items[next++];
			try {
				await fn(item);
			} catch (err) {
				failed = true;
				throw err;
			}
		}
	};
	await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export default function CmGatewayService(): ServiceSchema {
	const config: Config = loadConfig();
	const configured = config.cmApiUrl !== "";

	const run = (kind: "host" | "group") => ({
		visibility: "published" as const,
		params: { id: "string", body: { type: "any", optional: true }, query: { type: "any", optional: true } },
		async handler(this: any, ctx: Context<RunParams, RunMeta>) {
			const body = this.validateBody(ctx.params.body);
			const targets: string[] = kind === "host" ? await this.hostTarget(ctx, ctx.params.id) : await this.groupTargets(ctx, ctx.params.id);
			return this.startRun(ctx, requester(ctx), targets, body);
		},
	});

	return {
		name: "cm-gateway",
		// Without a master the actions do not exist: the gateway answers 503 for them.
		actions: configured
			? {
					runOnHost: run("host"),
					runOnGroup: run("group"),
					allStatus: {
						visibility: "published" as const,
						params: { id: "string", body: { type: "any", optional: true }, query: { type: "any", optional: true } },
						async handler(this: any, ctx: Context<RunParams>) {
							return this.controlAllStatus(ctx, ctx.params.id, ctx.params.body);
						},
					},
					/**
					 * One run of a scheduled task (internal: the tasks service). `tgt` may name hosts and groups (a
					 * group is resolved now); the task's owner token must still allow it (tokens.authorizeRun);
					 * the run is a normal execution whose `actions` records carry `task`.
					 */
					runTask: {
						visibility: "public" as const,
						params: {
							task: "string",
							run: { type: "string", optional: true },
							/** The run was taken over from a scheduler replica that died: it may have been started already. */
							takeover: { type: "boolean", optional: true },
							owner: { type: "string", optional: true, nullable: true },
							cm_client: { type: "enum", values: ["local", "local_async"] },
							fun: "string",
							kwarg: { type: "object", optional: true },
							tgt: { type: "array", items: "string", max: 100_000 },
						},
						async handler(this: any, ctx: Context<{ task: string; run?: string; takeover?: boolean; owner?: string | null; cm_client: "local" | "local_async"; fun: string; kwarg?: Record<string, unknown>; tgt: string[] }>) {
							const { task, run, takeover, owner, cm_client, fun, kwarg, tgt } = ctx.params;
							// A run handed over twice (its first scheduler replica died before recording it) is started once.
							if (run && this.runsInFlight.has(run)) return this.runsInFlight.get(run);
							const work = (async () => {
								if (run) {
									const started: { jid: string } | null = await ctx.call("actions.byRun", { run });
									if (started) return { task_id: started.jid, status: "scheduled", return: { return: [{ jid: started.jid }] }, repeated: true };
									// No record: the cm-gateway that started it may have died before writing them. Salt knows.
									if (takeover) {
										const adopted = await this.adoptRun(run, fun, this.funArgs({ cm_client, fun, kwarg }), { task, run });
										if (adopted) return { task_id: adopted, status: "scheduled", return: { return: [{ jid: adopted }] }, repeated: true };
									}
								}
								const targets = await this.taskTargets(ctx, tgt);
								if (!targets.length) throw new EveError(422, "none of the task's targets is a live host or a group with hosts");
								// A task runs as its owner's token as that token is now (docs/security.md).
								const by: Requester = { token: owner ?? "", source: `scheduler@${this.broker.nodeID}`.slice(0, 200), method: "TASK", path: `/api/tasks/${task}` };
								return this.startRun(ctx, by, targets, { cm_client, fun, kwarg }, { task, run });
							})();
							if (!run) return work;
							this.runsInFlight.set(run, work);
							try {
								return await work;
							} finally {
								this.runsInFlight.delete(run);
							}
						},
					},
					/** POST /api/inventory/sync (and the scheduled reconciliation's own calls). */
					sync: {
						visibility: "published" as const,
						params: { query: { type: "any", optional: true } },
						async handler(this: any): Promise<SyncResult> {
							return this.syncInventory();
						},
					},
					loadUpdates: {
						visibility: "published" as const,
						params: { query: { type: "any", optional: true } },
						async handler(this: any, ctx: Context) {
							return this.loadPatches(ctx);
						},
					},
					/** Is the event stream open? (internal: readiness, tests) */
					eventStreamStatus: {
						visibility: "public" as const,
						handler(this: any) {
							return { connected: this.stream?.connected === true, events: this.eventCount };
						},
					},
				}
			: {},

		events: {
			/** Every replica stops the live polls it runs (the POST may have reached another one). */
			"cm-gateway.allStatusStop": {
				handler(this: any, ctx: Context<{ hosts?: string[] }>) {
					for (const host of ctx.params.hosts ?? [...this.monitors.keys()]) this.stopMonitor(host);
				},
			},
		},

		created(this: any) {
			this.tracker = new JobTracker();
			/** Task runs being started here, by run id. */
			this.runsInFlight = new Map<string, Promise<unknown>>();
			this.returnBuffer = [] as JobReturn[];
			this.flushTimer = null;
			this.flushing = Promise.resolve();
			/** The "running" records being written, by jid: that job's returns are written after them. */
			this.runningWrites = new Map<string, Promise<void>>();
			this.pollTimer = null;
			this.polling = false;
			this.syncTimer = null;
			this.syncing = null;
			this.eventQueue = [] as SaltEvent[];
			this.eventLane = null;
			this.eventCount = 0;
			this.refreshQueue = new Set<string>();
			/** Minions a job return just proved alive, for the lane to mark up (those not up already). */
			this.aliveQueue = new Set<string>();
			/**
			 * When a return last proved a minion alive and the host was written up: its next returns within
			 * ALIVE_MEMO_MS cost nothing (a job on 5,000 hosts, run again and again, is not 5,000 reads each time).
			 * Forgotten when this gateway writes the host down.
			 */
			this.aliveSeen = new Map<string, number>();
			/** Whether a presence reading is believed at once (lib/presence-guard.ts). */
			this.presenceGuard = new PresenceGuard({ maxLoss: config.cmPresenceMaxLossPercent / 100, minHosts: 2, confirmMs: config.cmPresenceConfirmMs });
			/** When an event last changed a host: a reconciliation whose reads are older leaves it alone. */
			this.touched = new Map<string, number>();
			this.monitors = new Map<string, Monitor>();
			this.stream = null as EventStream | null;
			this.streamWasUp = false;
			this.salt = configured
				? new SaltClient({
						url: config.cmApiUrl,
						username: config.cmApiUser,
						password: config.cmApiPassword,
						eauth: config.cmApiEauth,
						timeoutMs: config.cmApiTimeoutMs,
						concurrency: config.cmApiConcurrency,
						tlsVerify: config.cmApiTlsVerify,
						caFile: config.cmApiCa || undefined,
						onMasterUnanswering: () => this.presenceGuard.masterUnanswering(),
					})
				: null;
		},

		started(this: any) {
			if (!configured) return;
			// The inventory is written through these services: start following the master once they are there.
			void this.broker
				.waitForServices(["hosts", "actions", "failed-patches", "alerts"])
				.then(() => {
					if (this.stopping) return;
					if (config.cmEvents) this.openEventStream();
					if (config.cmSyncIntervalMs > 0) this.scheduleSync(0);
					void this.resumeJobs().catch((err: Error) => this.logger.warn("Could not resume the jobs started before this restart:", err.message));
				})
				.catch((err: Error) => this.logger.error("The cm-gateway cannot follow the master:", err.message));
		},

		async stopped(this: any) {
			this.stopping = true;
			this.stream?.close();
			for (const t of [this.pollTimer, this.syncTimer, this.flushTimer]) if (t) clearTimeout(t);
			this.pollTimer = this.syncTimer = this.flushTimer = null;
			for (const host of [...this.monitors.keys()]) this.stopMonitor(host);
			// Returns already received are written before the service goes.
			await this.flushReturns().catch(() => undefined);
			this.tracker.clear();
			this.salt?.close();
		},

		methods: {
			validateBody(this: any, raw: unknown): RunBody {
				const issues = checkBody(raw);
				if (issues) throw validationFailed(issues);
				const body = raw as Partial<RunBody> & { fun: string };
				return { ...body, cm_client: body.cm_client ?? "local_async" };
			},

			/** The host, if it is known and not soft-deleted. */
			async hostTarget(this: any, ctx: Context, id: string): Promise<string[]> {
				const found: string[] = await ctx.call("hosts.exist", { ids: [id] });
				if (!found.includes(id)) throw notFound(`host '${id}' not found`);
				return [id];
			},

			/** The group's hostnames (its own and its subgroups', soft-deleted hosts left out). */
			async groupTargets(this: any, ctx: Context, id: string): Promise<string[]> {
				const names: string[] = await ctx.call("groups.hostnames", { id });
				if (!names.length) throw new EveError(422, `group '${id}' has no hosts to run on`);
				return names;
			},

			/** A task's targets now: group ids resolved to their hosts (groups.expandTargets), only live hosts kept. */
			async taskTargets(this: any, ctx: Context, tgt: string[]): Promise<string[]> {
				const names: string[] = await ctx.call("groups.expandTargets", { tgt });
				const known = new Set<string>(names.length ? await ctx.call("hosts.exist", { ids: names }) : []);
				const live = names.filter(h => known.has(h));
				const removed = new Set<string>(live.length ? await ctx.call("hosts.softDeletedAmong", { ids: live }) : []);
				return live.filter(h => !removed.has(h)).sort();
			},

			/**
			 * The one door to salt-api for runs (lib/run-door.ts): the complete call on the resolved hosts is
			 * authorized against the requester's token as it is now (tokens.authorizeRun), written to the audit
			 * log — and only if that record is stored is the job handed to salt-api. Its outcome completes the
			 * same record.
			 */
			startRun(this: DoorHost, ctx: Context, by: Requester, targets: string[], body: RunBody, origin: JobOrigin = {}) {
				const req: RunRequest = { by, targets, body };
				return throughTheDoor(req, this.doorEffects(ctx, req, () => this.execute(targets, body, origin), res => res.task_id ?? null));
			},

			/** The door's effects for a run asked for in `ctx`: the token check, the audit writes, `execute`. */
			doorEffects<R>(this: DoorHost, ctx: Context, req: RunRequest, execute: () => Promise<R>, jidOf?: (result: R) => string | null): DoorEffects<R> {
				const { by, targets, body } = req;
				return {
					authorize: () => ctx.call<TokenHolder, Record<string, unknown>>("tokens.authorizeRun", { token: by.token, client: body.cm_client, fun: body.fun, arg: body.arg, kwarg: body.kwarg, targets }),
					// A refusal's record is written in the refused call's context; a run's records by the gateway itself.
					writeAudit: (id, entry) => (entry.outcome === "denied" ? ctx.call("audit.record", { id, entry }) : this.broker.call("audit.record", { id, entry })),
					execute,
					jidOf,
					newId: newObjectId,
					log: (what, why) => this.logger.error(what, why),
				};
			},

			/**
			 * The job Salt started for this task run, found by its metadata (runner jobs.list_jobs
			 * search_metadata): recorded and followed like one started here. Answers its jid, or null.
			 */
			async adoptRun(this: any, run: string, fun: string, args: unknown[], origin: JobOrigin): Promise<string | null> {
				const jobs = await this.salt.lowstate({ client: "runner", fun: "jobs.list_jobs", search_metadata: { fleet_ctl_run: run } }, { safe: true });
				const jid = isObject(jobs) ? Object.keys(jobs).find(j => JID.test(j)) : undefined;
				if (!jid) return null;
				const listed = await this.salt.listJob(jid);
				const info = listed.info[0] ?? {};
				const minions = strings(info.Minions);
				const result: Record<string, { return?: unknown }> = isObject(info.Result) ? (info.Result as Record<string, { return?: unknown }>) : {};
				this.logger.warn(`Task run ${run} was already started as job ${jid}: following it instead of starting it again`);
				await this.writeRunning(jid, fun, args, minions, origin);
				for (const r of this.tracker.track(jid, fun, args, minions, config.cmJobTimeoutMs, origin)) this.bufferReturn(r);
				for (const host of Object.keys(result)) {
					const r = this.tracker.take(jid, host, result[host]?.return);
					if (r) this.bufferReturn(r);
				}
				this.schedulePoll();
				return jid;
			},

			/** Salt's `fun_args` for the job: arg, then kwarg as {"__kwarg__": true, ...}. */
			funArgs(this: any, body: RunBody): unknown[] {
				return [...(body.arg ?? []), ...(body.kwarg && Object.keys(body.kwarg).length ? [{ __kwarg__: true, ...body.kwarg }] : [])];
			},

			async execute(this: any, targets: string[], body: RunBody, origin: JobOrigin = {}) {
				const { task, run } = origin;
				const chunk: Lowstate = { client: body.cm_client, tgt: targets, tgt_type: "list", fun: body.fun };
				if (body.arg) chunk.arg = body.arg;
				if (body.kwarg) chunk.kwarg = body.kwarg;
				// A task run names itself in the job's metadata, so that a takeover can find the job in Salt.
				if (run) chunk.metadata = { fleet_ctl_run: run, ...(task ? { fleet_ctl_task: task } : {}) };
				const args = this.funArgs(body);

				if (body.cm_client === "local_async") {
					const started = await this.startAsync(chunk, args, config.cmJobTimeoutMs, { task, run });
					if (!started) return { task_id: null, status: "no_minions", return: { return: [{}] } };
					return { task_id: started.jid, status: "scheduled", return: { return: [started.ret] } };
				}

				chunk.full_return = true;
				const ret = await this.salt.lowstate(chunk);
				if (!isObject(ret)) throw new EveError(502, "salt-api sent a malformed answer to local");
				const outputs: Record<string, unknown> = {};
				const answered: Array<{ host: string; jid: string; raw: unknown }> = [];
				let jid: string | null = null;
				const missing: string[] = [];
				for (const [host, value] of Object.entries(ret)) {
					const full = isObject(value) && "ret" in value ? (value as { ret: unknown; jid?: unknown }) : null;
					if (full && typeof full.jid === "string" && JID.test(full.jid)) {
						jid ??= full.jid;
						outputs[host] = full.ret;
						answered.push({ host, jid: full.jid, raw: full.ret });
					} else {
						// No return: salt's `false`, or its "Minion did not return" text (which names the jid).
						const output = full ? full.ret : value;
						outputs[host] = output;
						missing.push(host);
						const named = typeof output === "string" ? /jobs\.lookup_jid (\d{20}(?:_\d+)?)/.exec(output) : null;
						if (named) jid ??= named[1];
					}
				}
				if (jid) {
					const records: JobReturn[] = answered.map(a => ({ jid: a.jid, action: body.fun, host: a.host, state: "finished", args, raw: a.raw, monitor: false, task, run }));
					for (const host of missing) records.push({ jid, action: body.fun, host, state: "timeout", args, raw: outputs[host] === false ? NO_RETURN : outputs[host], monitor: false, task, run });
					await this.record(records);
				}
				return { task_id: jid, status: Object.keys(outputs).length ? "finished" : "no_minions", return: { return: [outputs] } };
			},

			/** Publishes a local_async job and tracks its hosts; null when no minion matched. */
			async startAsync(this: any, chunk: Lowstate, args: unknown[], timeoutMs: number, origin: JobOrigin): Promise<{ jid: string; ret: unknown } | null> {
				const ret = await this.salt.lowstate(chunk);
				if (!isObject(ret) || Object.keys(ret).length === 0) return null;
				const { jid, minions } = ret as { jid?: unknown; minions?: unknown };
				if (typeof jid !== "string" || !JID.test(jid) || !Array.isArray(minions)) throw new EveError(502, "salt-api sent a malformed answer to local_async");
				const hosts = minions.map(String);
				// Written before any return of the job (same lane), so that a return is never overwritten.
				const running = origin.monitor ? null : this.writeRunning(jid, chunk.fun, args, hosts, origin);
				const early: JobReturn[] = this.tracker.track(jid, chunk.fun, args, hosts, timeoutMs, origin);
				for (const r of early) this.bufferReturn(r);
				this.schedulePoll();
				await running;
				return { jid, ret };
			},

			/**
			 * The job's hosts as `actions` records in state "running": operators see who has not answered yet,
			 * and a restarted cm-gateway knows which returns it still waits for (resumeJobs).
			 */
			writeRunning(this: any, jid: string, fun: string, args: unknown[], hosts: string[], origin: JobOrigin = {}): Promise<void> {
				const written = (async () => {
					for (const returns of batchesBySize(hosts.map(host => ({ jid, action: fun, host, state: "running", args, return: "", ...links(origin) })), UPSERT_BATCH)) {
						try {
							await this.broker.call("actions.record", { returns });
						} catch (err) {
							this.logger.error(`Could not record the running hosts of job ${jid}:`, (err as Error).message);
						}
					}
				})();
				// Returns of this job wait for it (flushReturns); other jobs' returns do not.
				this.runningWrites.set(jid, written);
				void written.finally(() => this.runningWrites.delete(jid));
				return written;
			},

			/** After a restart: waits again for the jobs whose hosts are still "running", until their deadlines. */
			async resumeJobs(this: any) {
				const running: Array<{ jid: string; action: string; host: string; args: unknown[]; task?: string; run?: string; _created: Date | string }> = await this.broker.call("actions.running");
				const jobs = new Map<string, { fun: string; args: unknown[]; hosts: string[]; created: number; task?: string; run?: string }>();
				for (const r of running) {
					const job = jobs.get(r.jid) ?? { fun: r.action, args: r.args ?? [], hosts: [], created: new Date(r._created).getTime(), task: r.task, run: r.run };
					job.hosts.push(r.host);
					jobs.set(r.jid, job);
				}
				for (const [jid, job] of jobs) this.tracker.track(jid, job.fun, job.args, job.hosts, Math.max(0, job.created + config.cmJobTimeoutMs - Date.now()), { task: job.task, run: job.run });
				if (jobs.size) {
					this.logger.info(`Waiting again for the returns of ${jobs.size} job(s) started before this restart`);
					await this.pollJobs();
					this.schedulePoll();
				}
			},

			// ------------------------------------------------------------ recording returns

			bufferReturn(this: any, r: JobReturn) {
				this.returnBuffer.push(r);
				if (!this.flushTimer && !this.stopping) {
					this.flushTimer = setTimeout(() => {
						this.flushTimer = null;
						void this.flushReturns();
					}, RETURN_FLUSH_MS);
				}
			},

			/** Writes the buffered returns, one flush after another. */
			flushReturns(this: any): Promise<void> {
				this.flushing = this.flushing.then(async () => {
					while (this.returnBuffer.length) {
						const batch: JobReturn[] = this.returnBuffer.splice(0, UPSERT_BATCH);
						await Promise.all([...new Set(batch.map(r => r.jid))].map(jid => this.runningWrites.get(jid)));
						try {
							await this.record(batch);
						} catch (err) {
							this.logger.error(`Could not record ${batch.length} job return(s):`, (err as Error).message);
						}
					}
				});
				return this.flushing;
			},

			/**
			 * Writes returns: `actions` records, the hosts' `last_action` (not for monitoring polls), the
			 * failed patches with their alerts, and a grain refresh of hosts whose grains the job changed.
			 */
			async record(this: any, records: JobReturn[]) {
				if (!records.length) return;
				const returns = records.map(r => ({ jid: r.jid, action: r.action, host: r.host, state: r.state, args: r.args, return: capText(asText(r.raw), config.cmReturnMaxBytes), ...links(r) }));
				const byState = new Map<string, number>();
				for (const r of records) byState.set(r.state, (byState.get(r.state) ?? 0) + 1);
				for (const [state, n] of byState) countMetric(this.broker, "fleet.job.returns.total", { state }, n);
				for (const batch of batchesBySize(returns, UPSERT_BATCH)) await this.broker.call("actions.record", { returns: batch });
				const hosts = [...new Set(records.map(r => r.host))];
				const known = new Set<string>(await this.broker.call("hosts.exist", { ids: hosts }));
				const latest = new Map<string, string>();
				for (const r of records) if (!r.monitor && known.has(r.host)) latest.set(r.host, `${r.jid}${r.host}`);
				if (latest.size) await this.broker.call("hosts.upsertMany", { hosts: [...latest].map(([_id, last_action]) => ({ _id, last_action })) });

				const failed = [];
				for (const r of records) {
					if (r.state !== "finished") continue;
					const patch = patchOf(r.action, r.args);
					const steps = patch ? failedPatchSteps(r.raw, patch) : null;
					if (patch && steps) failed.push({ jid: r.jid, action: r.action, host: r.host, state: r.state, patch, return: steps.map(step => capStep(step, config.cmReturnMaxBytes)) });
				}
				if (failed.length) {
					for (const batch of batchesBySize(failed, UPSERT_BATCH)) await this.broker.call("failed-patches.record", { returns: batch });
					await this.raiseAlerts(failed.map(f => ({ type: "patch.failed", level: "error", payload: { hostname: f.host, patch: f.patch, jid: f.jid, failed_patch: `${f.jid}${f.host}` } })));
				}
				for (const r of records) if (r.state === "finished" && known.has(r.host) && GRAIN_CHANGING.test(r.action)) this.queueRefresh(r.host);
				for (const r of records) if (r.action === "status.all_status") this.broker.broadcast("cm.allStatus", { hostname: r.host, jid: r.jid, state: r.state, return: r.raw });
			},

			/** Raises alerts; more host.down (or host.up) alerts than CM_ALERT_BURST become one summary. */
			async raiseAlerts(this: any, alerts: Alert[]) {
				if (!alerts.length) return;
				const out: Alert[] = [];
				const byType = new Map<string, Alert[]>();
				for (const a of alerts) {
					if (a.type === "host.down" || a.type === "host.up") byType.set(a.type, [...(byType.get(a.type) ?? []), a]);
					else out.push(a);
				}
				for (const [type, list] of byType) {
					if (list.length <= config.cmAlertBurst) out.push(...list);
					else out.push({ type, level: list[0].level, payload: { count: list.length, hostnames: list.slice(0, 100).map(a => a.payload.hostname) } });
				}
				try {
					await this.broker.call("alerts.raiseMany", { alerts: out });
				} catch (err) {
					this.logger.warn(`Could not raise ${out.length} alert(s):`, (err as Error).message);
				}
			},

			// ------------------------------------------------------------ the /jobs/<jid> fallback

			schedulePoll(this: any) {
				if (this.pollTimer || this.stopping || this.tracker.size === 0) return;
				this.pollTimer = setTimeout(() => {
					this.pollTimer = null;
					void this.pollJobs().finally(() => this.schedulePoll());
				}, config.cmJobPollMs);
			},

			/** Reads the jobs still waiting from the job cache; past their deadline, the silent hosts time out. */
			async pollJobs(this: any) {
				if (this.polling) return;
				this.polling = true;
				try {
					for (const { jid, hosts } of this.tracker.pendingJobs()) {
						if (this.stopping) return;
						try {
							const res = await this.salt.listJob(jid);
							const result: Record<string, { return?: unknown }> = res.info[0]?.Result ?? {};
							for (const host of hosts) {
								if (!(host in result)) continue;
								const r = this.tracker.take(jid, host, result[host]?.return);
								if (r) this.bufferReturn(r);
							}
						} catch (err) {
							this.logger.warn(`Could not read job ${jid} from salt-api:`, (err as Error).message);
						}
					}
					for (const r of this.tracker.expire()) this.bufferReturn(r);
				} finally {
					this.polling = false;
				}
			},

			// ------------------------------------------------------------ the event stream

			openEventStream(this: any) {
				this.stream = this.salt.streamEvents({
					onEvent: (ev: SaltEvent) => this.onSaltEvent(ev),
					onConnect: () => {
						setMetric(this.broker, "fleet.salt.events.connected", 1);
						this.logger.info("Following the Salt master's event stream");
						if (this.streamWasUp) {
							// Events were missed while the stream was down: catch up from the job cache and a full sync.
							void this.pollJobs();
							if (config.cmSyncIntervalMs > 0) this.scheduleSync(0);
						}
						this.streamWasUp = true;
					},
					onDisconnect: (reason: string) => {
						setMetric(this.broker, "fleet.salt.events.connected", 0);
						this.logger.warn(`Salt event stream lost (${reason}); reconnecting`);
					},
				});
			},

			onSaltEvent(this: any, ev: SaltEvent) {
				this.eventCount++;
				const ret = /^salt\/job\/(\d{20}(?:_\d+)?)\/ret\/(.+)$/.exec(ev.tag);
				if (ret) {
					const host = typeof ev.data.id === "string" ? ev.data.id : ret[2];
					const r = this.tracker.take(ret[1], host, ev.data.return);
					if (r) this.bufferReturn(r);
					else if (!this.tracker.has(ret[1])) this.tracker.keepEarly(ret[1], host, ev.data.return);
					// Any return proves its minion alive now, sooner than the master's next presence loop.
					if (HOSTNAME.test(host) && !(Date.now() - (this.aliveSeen.get(host) ?? -Infinity) < ALIVE_MEMO_MS)) {
						this.aliveQueue.add(host);
						this.kickLane();
					}
					return;
				}
				if (!/^salt\/(presence\/|minion\/|key$|auth$)/.test(ev.tag) && ev.tag !== VNC_EVENT_TAG) return;
				this.eventQueue.push(ev);
				this.kickLane();
			},

			/**
			 * The one lane inventory events and host refreshes are applied in, in order, a batch at a time
			 * (the next batch gathers while one is written).
			 */
			kickLane(this: any) {
				if (this.eventLane || this.stopping) return;
				// Started on the next tick, so that `eventLane` is set before any of its code runs.
				this.eventLane = Promise.resolve().then(async () => {
					for (;;) {
						const batch: SaltEvent[] = this.eventQueue.splice(0);
						try {
							if (batch.length) await this.inventoryTurn(() => this.applyEvents(batch));
							else
								await this.inventoryTurn(async () => {
									await this.flushRefresh();
									await this.flushAlive();
								});
						} catch (err) {
							this.logger.warn(`Could not apply ${batch.length} Salt event(s); the next reconciliation will:`, (err as Error).message);
						}
						// Checked and cleared in one tick, so that nothing queued meanwhile is left waiting.
						if (this.stopping || (!this.eventQueue.length && !this.refreshQueue.size && !this.aliveQueue.size)) {
							this.eventLane = null;
							return;
						}
					}
				});
			},

			async applyEvents(this: any, events: SaltEvent[]) {
				const presence = new Map<string, boolean>();
				let present: string[] | null = null;
				const alerts: Alert[] = [];
				for (const { tag, data } of events) {
					if (tag === "salt/presence/change") {
						for (const id of strings(data.new)) presence.set(id, true);
						for (const id of strings(data.lost)) presence.set(id, false);
					} else if (tag === "salt/presence/present") {
						present = strings(data.present);
						presence.clear();
					} else if (tag.startsWith("salt/minion/") && tag.endsWith("/start")) {
						const id = typeof data.id === "string" ? data.id : tag.slice("salt/minion/".length, -"/start".length);
						presence.set(id, true);
						this.queueRefresh(id);
					} else if ((tag === "salt/key" || tag === "salt/auth") && typeof data.id === "string") {
						this.queueRefresh(data.id);
					} else if (tag === VNC_EVENT_TAG) {
						// `hostname` is the sender's minion id (the host's _id, vouched for by the master), not the name the host wrote.
						const inner = isObject(data.data) ? data.data : {};
						const hostname = typeof data.id === "string" ? data.id : typeof inner.hostname === "string" ? inner.hostname : "";
						alerts.push({ type: "vnc.connect", level: "info", payload: { hostname, status: typeof inner.status === "string" ? inner.status.slice(0, 100) : "" } });
					}
				}
				// Hosts first (a minion that just started may be new), then presence.
				await this.flushRefresh();
				const upSet = new Set<string>(present ?? []);
				for (const [id, isUp] of presence) isUp ? upSet.add(id) : upSet.delete(id);
				for (const id of this.aliveQueue) upSet.add(id);
				this.aliveQueue.clear();
				const up = [...upSet];
				let down = [...presence].filter(([, isUp]) => !isUp).map(([id]) => id);
				let complete = present !== null;
				if (complete || (down.length && this.presenceGuard.couldHold(down.length))) {
					// A reading that takes down a mass of the fleet (a master that just restarted knows no one yet) waits for confirmation.
					const loss: { up: number; losing: number } = await this.broker.call("hosts.presenceLoss", { up, down, complete });
					if (this.presenceGuard.judge(loss.up, loss.losing) === "hold") {
						this.logger.warn(`Presence: a reading would take ${loss.losing} of ${loss.up} hosts down at once; holding it until a later reading confirms it (docs/salt.md, "Presence")`);
						countMetric(this.broker, "fleet.hosts.presence.held.total");
						down = [];
						complete = false;
					}
				}
				if (up.length || down.length || complete) await this.applyPresence(up, down, complete, alerts);
				await this.raiseAlerts(alerts);
			},

			/** Writes a presence reading, raising host.down / host.up into `alerts`. */
			async applyPresence(this: any, up: string[], down: string[], complete: boolean, alerts: Alert[], changesOnly = false) {
				const res: { wentUp: string[]; wentDown: string[] } = await this.broker.call("hosts.setPresence", { up, down, complete, changesOnly });
				const now = Date.now();
				if (!changesOnly) for (const id of [...up, ...down]) this.touched.set(id, now);
				else for (const id of res.wentUp) this.touched.set(id, now);
				for (const id of down) this.aliveSeen.delete(id);
				for (const id of res.wentDown) this.aliveSeen.delete(id);
				this.countPresenceChanges(res.wentUp.length, res.wentDown.length);
				for (const id of res.wentDown) alerts.push({ type: "host.down", level: "warning", payload: { hostname: id, status: "down" } });
				for (const id of res.wentUp) alerts.push({ type: "host.up", level: "info", payload: { hostname: id, status: "up" } });
			},

			/** Marks up the minions job returns proved alive (only those not up already: a job's returns rewrite nothing). */
			async flushAlive(this: any) {
				if (!this.aliveQueue.size) return;
				const ids: string[] = [...this.aliveQueue];
				this.aliveQueue.clear();
				const alerts: Alert[] = [];
				await this.applyPresence(ids, [], false, alerts, true);
				const now = Date.now();
				if (this.aliveSeen.size > 200_000) this.aliveSeen.clear();
				for (const id of ids) this.aliveSeen.set(id, now);
				await this.raiseAlerts(alerts);
			},

			/**
			 * Runs `write` when no other inventory write is running. The event lane and the reconciliation both check
			 * "did an event change this host after my reads?" (`touched`) and then write; without turns, a reconciliation
			 * could check before a refresh wrote a newer key state and write its older view after it.
			 */
			inventoryTurn<T>(this: any, write: () => Promise<T>): Promise<T> {
				const turn = (this.inventoryWrites ?? Promise.resolve()).then(write);
				this.inventoryWrites = turn.then(
					() => undefined,
					() => undefined,
				);
				return turn;
			},

			queueRefresh(this: any, id: string) {
				if (!HOSTNAME.test(id)) return;
				this.refreshQueue.add(id);
				this.kickLane();
			},

			async flushRefresh(this: any) {
				if (!this.refreshQueue.size) return;
				const ids: string[] = [...this.refreshQueue];
				this.refreshQueue.clear();
				try {
					await this.refreshHosts(ids);
				} catch (err) {
					this.logger.warn(`Could not refresh ${ids.length} host(s) from the master; the next reconciliation will:`, (err as Error).message);
				}
			},

			/**
			 * Reads these minions' keys, fingerprints and cached grains from the master and writes them:
			 * new minions become hosts, a key that left soft-deletes its host, one that came back restores it.
			 * Presence is not read here (events bring it); a new host starts "unknown".
			 */
			async refreshHosts(this: any, ids: string[]) {
				const startedAt = Date.now();
				const views = new Map<string, MasterView>();
				const record = (fingers: Record<string, unknown>, wanted: Set<string>) => {
					for (const [id, view] of keyViews(null, fingers, id => wanted.has(id))) views.set(id, view);
				};
				const wanted = new Set(ids);
				if (ids.length >= FINGER_ALL_FROM) record(await this.wheel("key.finger", { match: "*" }), wanted);
				else await eachLimited(ids, config.cmApiConcurrency, async id => record(await this.wheel("key.finger", { match: id }), new Set([id])));
				const present = [...views.keys()];
				if (present.length) {
					const grains = await this.salt.lowstate({ client: "runner", fun: "cache.grains", tgt: present, tgt_type: "list" }, { safe: true });
					if (!isObject(grains)) throw new EveError(502, "salt-api sent a malformed answer to cache.grains");
					for (const id of present) if (isObject(grains[id])) views.get(id)!.grains = grains[id] as Record<string, unknown>;
				}
				await this.applyMasterView(views, ids.filter(id => !views.has(id)), startedAt);
				for (const id of ids) this.touched.set(id, Math.max(this.touched.get(id) ?? 0, startedAt));
			},

			// ------------------------------------------------------------ inventory reconciliation

			scheduleSync(this: any, delay = config.cmSyncIntervalMs) {
				if (this.stopping) return;
				if (this.syncTimer) {
					if (delay !== 0) return;
					clearTimeout(this.syncTimer);
				}
				this.syncTimer = setTimeout(() => {
					this.syncTimer = null;
					void this.syncInventory()
						.catch((err: Error) => this.logger.warn("Inventory reconciliation failed; the hosts are left as they were:", err.message))
						.finally(() => this.scheduleSync());
				}, delay);
				this.syncTimer.unref?.();
			},

			/** One full reconciliation; joins the one under way if any. */
			syncInventory(this: any): Promise<SyncResult> {
				if (!this.syncing) {
					const startedAt = Date.now();
					this.syncing = this.trackedReconcile()
						.then((result: SyncResult) => {
							setMetric(this.broker, "fleet.inventory.sync.last_success_timestamp_seconds", Date.now() / 1000);
							setMetric(this.broker, "fleet.inventory.sync.duration_seconds", (Date.now() - startedAt) / 1000);
							return result;
						})
						.catch((err: Error) => {
							countMetric(this.broker, "fleet.inventory.sync.failures.total");
							throw err;
						})
						.finally(() => {
							this.syncing = null;
						});
				}
				return this.syncing;
			},

			countPresenceChanges(this: any, wentUp: number, wentDown: number) {
				if (wentUp) countMetric(this.broker, "fleet.hosts.presence.changes.total", { to: "up" }, wentUp);
				if (wentDown) countMetric(this.broker, "fleet.hosts.presence.changes.total", { to: "down" }, wentDown);
			},

			/** A wheel function's `data.return` (an object), or a 502. */
			async wheel(this: any, fun: string, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
				const event = await this.salt.lowstate({ client: "wheel", fun, ...extra }, { safe: true });
				const data = isObject(event) ? event.data : undefined;
				if (!isObject(data) || data.success === false || !isObject(data.return)) throw new EveError(502, `salt-api sent a malformed answer to ${fun}`);
				return data.return;
			},

			/** A reconciliation whose progress is the `inventory_sync` record of `jobs`. */
			async trackedReconcile(this: any): Promise<SyncResult> {
				const job = await trackJob(this.broker, "inventory_sync", { master: config.cmApiUrl });
				try {
					const result: SyncResult = await this.reconcile((done: number, total: number) => job.progress(done, total));
					await job.finish(result as unknown as Record<string, unknown>);
					return result;
				} catch (err) {
					await job.fail(err);
					throw err;
				}
			},

			/**
			 * Three reads of the whole fleet that publish nothing to minions (key.list_all, key.finger "*", and
			 * manage.present: who the master sees connected), then the cached grains (cache.grains) SYNC_BATCH
			 * minions at a time, each batch written as it is read, so that memory stays bounded by a batch, not the
			 * fleet. A read that fails ends the sync: the batches already written stay (they hold what the master
			 * said), and no host is soft-deleted unless every read succeeded. Presence goes through the presence
			 * guard like the events' (a master that just restarted sees no one connected).
			 */
			async reconcile(this: any, progress: (done: number, total: number) => Promise<void> = async () => undefined): Promise<SyncResult> {
				const startedAt = Date.now();
				const keys = await this.wheel("key.list_all");
				const fingers = await this.wheel("key.finger", { match: "*" });
				const present = await this.salt.lowstate({ client: "runner", fun: "manage.present" }, { safe: true });
				if (!Array.isArray(present)) throw new EveError(502, "salt-api sent a malformed answer to manage.present");
				for (const dir of ["minions", "minions_pre", "minions_rejected", "minions_denied"]) {
					if (keys[dir] !== undefined && !Array.isArray(keys[dir])) throw new EveError(502, "salt-api sent a malformed answer to key.list_all");
				}

				const up = new Set(strings(present));
				const views: Map<string, MasterView> = keyViews(keys, fingers, id => HOSTNAME.test(id));
				for (const [id, view] of views) if (view.key === "accepted") view.status = up.has(id) ? "up" : "down";

				const known: Map<string, KnownHost> = await this.fleetState();
				const live = [...known.values()].filter(h => h.status === "up" && h.key === "accepted" && !h._soft_deleted);
				const losing = live.filter(h => views.get(h._id)?.status === "down");
				if (this.presenceGuard.judge(live.length, losing.length) === "hold") {
					this.logger.warn(`Presence: the master sees ${losing.length} of ${live.length} hosts up as gone; holding their status until a later reading confirms it (docs/salt.md, "Presence")`);
					countMetric(this.broker, "fleet.hosts.presence.held.total");
					for (const h of losing) delete views.get(h._id)!.status;
				}
				const total = { created: 0, updated: 0, removed: 0, restored: 0, fingerprints_changed: 0 };
				const add = (r: typeof total) => {
					for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += r[k];
				};
				const ids = [...views.keys()];
				for (let i = 0; i < ids.length; i += SYNC_BATCH) {
					const batch = ids.slice(i, i + SYNC_BATCH);
					const grains = await this.salt.lowstate({ client: "runner", fun: "cache.grains", tgt: batch, tgt_type: "list" }, { safe: true });
					if (!isObject(grains)) throw new EveError(502, "salt-api sent a malformed answer to cache.grains");
					const batchViews = new Map<string, MasterView>();
					for (const id of batch) batchViews.set(id, isObject(grains[id]) ? { ...views.get(id)!, grains: grains[id] as Record<string, unknown> } : views.get(id)!);
					add(await this.inventoryTurn(() => this.applyMasterView(batchViews, [], startedAt, known)));
					await progress(Math.min(ids.length, i + SYNC_BATCH), ids.length);
				}
				const gone = [...known.values()].filter(h => !h._soft_deleted && !views.has(h._id)).map(h => h._id);
				if (gone.length) add(await this.inventoryTurn(() => this.applyMasterView(new Map(), gone, startedAt, known)));
				for (const [id, at] of this.touched) if (at < startedAt) this.touched.delete(id);
				return { _status: "OK", hosts: views.size, ...total };
			},

			/**
			 * What the inventory knows of every host. Over a transporter in pages (a fleet of 100,000 in one
			 * answer would be ~15 MB, beyond a NATS message); in one process in one pass.
			 */
			async fleetState(this: any): Promise<Map<string, KnownHost>> {
				const known = new Map<string, KnownHost>();
				if (!this.broker.transit) {
					for (const h of (await this.broker.call("hosts.inventoryState")) as KnownHost[]) known.set(h._id, h);
					return known;
				}
				for (let after: string | undefined; ; ) {
					const page = (await this.broker.call("hosts.inventoryState", { after, limit: INVENTORY_PAGE })) as KnownHost[];
					for (const h of page) known.set(h._id, h);
					if (page.length < INVENTORY_PAGE) return known;
					after = page[page.length - 1]._id;
				}
			},

			/**
			 * Writes the master's view: creates and updates hosts, restores hosts whose key came back,
			 * soft-deletes the `gone` ones, raises fingerprint and presence alerts. Hosts an event changed after
			 * `readAt` are left alone: the event is newer than these reads.
			 */
			async applyMasterView(this: any, views: Map<string, MasterView>, gone: string[], readAt: number, knownHosts?: Map<string, KnownHost>) {
				const fresher = (id: string) => (this.touched.get(id) ?? 0) >= readAt;
				const ids = [...views.keys(), ...gone];
				const known: Map<string, KnownHost> = knownHosts ?? new Map(((ids.length ? await this.broker.call("hosts.inventoryState", { ids }) : []) as KnownHost[]).map(h => [h._id, h]));
				const now = new Date();
				const changes: Record<string, unknown>[] = [];
				const alerts: Alert[] = [];
				const restore: string[] = [];
				for (const [id, view] of views) {
					if (fresher(id)) continue;
					const host = known.get(id);
					const { doc, fingerprintChange, keyConflict } = hostUpdate(id, view, host, now);
					changes.push(doc);
					if (fingerprintChange) alerts.push({ type: "fingerprint.changed", level: "warning", payload: { ...fingerprintChange } });
					if (keyConflict) alerts.push({ type: "key.conflict", level: "warning", payload: { ...keyConflict } });
					if (doc.status === "down") this.aliveSeen.delete(id);
					const moved = presenceChange(host, doc.status as string | undefined);
					if (moved) alerts.push({ type: moved, level: moved === "host.down" ? "warning" : "info", payload: { hostname: id, status: doc.status } });
					// Soft-deleted by an earlier reconciliation (its `key` was forgotten), and the key is back.
					if (host?._soft_deleted && !host.key) restore.push(id);
				}
				const removeIds = gone.filter(id => known.has(id) && !known.get(id)!._soft_deleted && !fresher(id));

				let created = 0;
				let updated = 0;
				for (const batch of batchesBySize(changes, UPSERT_BATCH)) {
					const res: { created: number; updated: number } = await this.broker.call("hosts.upsertMany", { hosts: batch });
					created += res.created;
					updated += res.updated;
				}
				const restored: string[] = restore.length ? await this.broker.call("hosts.setPresent", { ids: restore, present: true }) : [];
				const removed: string[] = removeIds.length ? await this.broker.call("hosts.setPresent", { ids: removeIds, present: false }) : [];
				await this.raiseAlerts(alerts);
				this.countPresenceChanges(alerts.filter(a => a.type === "host.up").length, alerts.filter(a => a.type === "host.down").length);
				const fingerprints = alerts.filter(a => a.type === "fingerprint.changed").length;
				if (removed.length || restored.length || fingerprints) this.logger.info(`Inventory: ${removed.length} host(s) soft-deleted, ${restored.length} restored, ${fingerprints} fingerprint(s) changed`);
				return { created, updated, removed: removed.length, restored: restored.length, fingerprints_changed: fingerprints };
			},

			// ------------------------------------------------------------ patches (POST /updates)

			/** Reads the patch files from the master and upserts them: {_status, loaded, created}. */
			async loadPatches(this: any, ctx: Context): Promise<{ _status: "OK"; loaded: number; created: number }> {
				const job = await trackJob(this.broker, "load_updates", { prefix: config.cmPatchPrefix });
				try {
					const result = await this.readPatches(ctx, job);
					await job.finish(result);
					return result;
				} catch (err) {
					await job.fail(err);
					throw err;
				}
			},

			async readPatches(this: any, ctx: Context, job: JobHandle): Promise<{ _status: "OK"; loaded: number; created: number }> {
				const listed = await this.salt.lowstate({ client: "runner", fun: "fileserver.file_list", saltenv: "base" }, { safe: true });
				if (!Array.isArray(listed) || listed.some(p => typeof p !== "string")) throw new EveError(502, "salt-api sent a malformed answer to fileserver.file_list");
				const paths = patchPaths(listed as string[], config.cmPatchPrefix, (path: string) => this.logger.warn(`Skipping patch file '${path}': its name cannot be given to state.apply`));

				const patches: Array<{ name: string; text: string }> = [];
				const unreadable: string[] = [];
				let read = 0;
				await eachLimited(paths, config.cmApiConcurrency, async ({ path, name }) => {
					const text: string | null = await this.readPatch(path);
					if (text !== null) patches.push({ name, text });
					else unreadable.push(path);
					await job.progress(++read, paths.length);
				});

				patches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
				let created = 0;
				for (const batch of batchesBySize(patches, UPSERT_BATCH)) {
					const res: { created: number } = await ctx.call("updates.upsertMany", { patches: batch });
					created += res.created;
				}
				// What could be read is kept, but a listed patch that could not be read is never a success.
				if (unreadable.length) {
					unreadable.sort();
					const names = unreadable.slice(0, 20).join(", ") + (unreadable.length > 20 ? `, … (${unreadable.length - 20} more)` : "");
					throw new EveError(502, `the master listed ${paths.length} patch file(s) but sent ${unreadable.length} of them as no text: ${names}; ${patches.length} loaded (${created} new)`, {
						issues: { unreadable: unreadable.slice(0, 100) },
					});
				}
				return { _status: "OK", loaded: patches.length, created };
			},

			/**
			 * One file's text, read through the master's file server: runner `salt.cmd` with `cp.get_file_str`
			 * (wheel `file_roots.read` reads only files directly in a file root: `[]` for `patches/x.sls` on Salt
			 * 3006). The eauth grant it needs is narrowed to that function and prefix (docs/salt.md). null when the
			 * master sends no text (the file is gone, or is not text).
			 */
			async readPatch(this: any, path: string): Promise<string | null> {
				let text: unknown;
				try {
					text = await this.salt.lowstate({ client: "runner", fun: "salt.cmd", arg: ["cp.get_file_str", `salt://${path}`], kwarg: { saltenv: "base" } }, { safe: true });
				} catch (err) {
					if ((err as { kind?: string }).kind === "auth") {
						throw new EveError(502, `the master refused to read '${path}' through runner salt.cmd cp.get_file_str: grant it to CM_API_USER in external_auth (docs/salt.md, "The API user and its permissions")`);
					}
					throw err;
				}
				if (typeof text === "string") return text;
				this.logger.warn(`Patch file '${path}': the master sent no text (${text === false ? "not found" : typeof text})`);
				return null;
			},

			// ------------------------------------------------------------ live status poll (all_status)

			async controlAllStatus(this: any, ctx: Context, id: string, raw: unknown) {
				const body = raw ?? {};
				const issues = checkAllStatus(body);
				if (issues) throw validationFailed(issues);
				const action = (body as { action?: string }).action ?? "start";
				if (action === "stop_all") {
					const polled = [...this.monitors.keys()];
					ctx.broadcast("cm-gateway.allStatusStop", {});
					return { _status: "OK", action, stopped: polled.length };
				}
				await this.hostTarget(ctx, id);
				if (action === "stop") {
					const was = this.monitors.has(id);
					ctx.broadcast("cm-gateway.allStatusStop", { hosts: [id] });
					return { _status: "OK", action, host: id, polling: false, stopped: was ? 1 : 0 };
				}
				// Starting (or extending) a poll is a run: through the same door as any other (its record has no jid).
				const by = requester(ctx as Context<unknown, RunMeta>);
				const req: RunRequest = { by, targets: [id], body: ALL_STATUS_CALL };
				const until: number = await throughTheDoor(
					req,
					this.doorEffects(ctx, req, async () => {
						const ends = Date.now() + config.cmAllStatusMaxMs;
						const running: Monitor | undefined = this.monitors.get(id);
						if (running) Object.assign(running, { until: ends, token: by.token });
						else {
							const timer = setInterval(() => void this.pollStatus(id), config.cmAllStatusIntervalMs);
							timer.unref?.();
							this.monitors.set(id, { timer, until: ends, token: by.token });
							// The first poll runs now, so that a salt-api that is down is reported to the caller.
							await this.pollStatus(id, true);
						}
						return ends;
					}),
				);
				return { _status: "OK", action, host: id, polling: true, interval: config.cmAllStatusIntervalMs / 1000, until: formatHttpDate(new Date(until)) };
			},

			/** One `status.all_status` on the host, unless the previous one is still out. */
			async pollStatus(this: any, host: string, rethrow = false) {
				const monitor: Monitor | undefined = this.monitors.get(host);
				if (!monitor || this.stopping) return;
				if (Date.now() >= monitor.until) return this.stopMonitor(host);
				if (this.tracker.monitorPending(host)) return;
				try {
					// Every poll is a run: the token that started the poll must still allow it (revoked: it stops).
					if (!rethrow) await this.broker.call("tokens.authorizeRun", { token: monitor.token, client: ALL_STATUS_CALL.cm_client, fun: ALL_STATUS_CALL.fun, targets: [host] });
				} catch (err) {
					if ((err as { code?: number }).code === 403) {
						this.logger.warn(`Stopping the status.all_status poll of '${host}':`, (err as Error).message);
						this.stopMonitor(host);
					} else this.logger.warn(`status.all_status poll of '${host}' skipped:`, (err as Error).message);
					return;
				}
				try {
					const started = await this.startAsync({ client: "local_async", tgt: [host], tgt_type: "list", fun: "status.all_status" }, [], Math.max(config.cmAllStatusIntervalMs * 3, 5000), { monitor: true });
					if (!started && rethrow) throw new EveError(422, `host '${host}' has no accepted key on the master: nothing to poll`);
				} catch (err) {
					if (rethrow) {
						this.stopMonitor(host);
						throw err;
					}
					this.logger.warn(`status.all_status poll of '${host}' failed:`, (err as Error).message);
				}
			},

			stopMonitor(this: any, host: string) {
				const m: Monitor | undefined = this.monitors.get(host);
				if (!m) return;
				clearInterval(m.timer);
				this.monitors.delete(host);
			},
		},
	};
}
