/**
 * Remote execution: `POST /hosts/{id}` and `POST /groups/{id}` (and a task's runs). The body {cm_client, fun,
 * arg?, kwarg?} becomes the lowstate {client, tgt: [hostnames], tgt_type: "list", fun, arg, kwarg}. `local`
 * waits and answers every host's output (task_id = jid, status "finished"); `local_async` (the default)
 * answers the jid at once (status "scheduled") and the returns arrive later (Returns). Every run goes through
 * the run door (run-door.ts): authorized against the token in force on the resolved hosts, audited first.
 */
import type { Context } from "moleculer";
import { Invalid, NotFound, NothingToRun } from "../../lib/errors";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { compileSchema } from "../../lib/eve/validation";
import { RUN_BODY, RUN_TARGET_BODY } from "../../lib/http/bodies";
import { NO_RETURN, verdictOf, type JobOrigin, type JobReturn, type Verdict } from "./job-tracker";
import { SaltApiError, type Lowstate } from "./salt-client";
import {
	startRun as throughTheDoor,
	type DoorEffects,
	type Hold,
	type Requester,
	type RunBody,
	type RunRequest,
	type TokenHolder,
} from "./run-door";
import { taskDefinitionDigest, withoutTest, type Governance, type TaskSchedule } from "./governance";
import { canonicalDigest } from "../../lib/eve/etag";
import { JID, isObject, strings, type GatewayContext } from "./context";
import type { JobPoll } from "./job-poll";
import type { Returns } from "./returns";
import { historyEntry, type JobHistory } from "./history";
import { call } from "../../lib/contracts/call";
import type { AuditAnswer, AuditBegin, AuditComplete, AuditMeta } from "../../lib/contracts/audit";

export interface RunMeta extends AuditMeta {
	user?: { id: string; name: string; role: string };
	request?: { source?: string; agent?: string; method?: string; path?: string };
}

/** A scheduled task's run, as the tasks service hands it over (cm-gateway.runTask). */
export interface TaskRun {
	task: string;
	run?: string;
	/** The run was taken over from a scheduler replica that died: it may have been started already. */
	takeover?: boolean;
	owner?: string | null;
	cm_client: "local" | "local_async";
	fun: string;
	kwarg?: Record<string, unknown>;
	tgt: string[];
	/** A compound target (docs/targeting.md), resolved now with the hosts of `tgt`. */
	target?: string;
	/** When the task runs: part of the definition an approval covers. */
	schedule?: TaskSchedule;
}

/** A rollout's batch, as the rollouts service hands it over (cm-gateway.runRolloutBatch). */
export interface RolloutRun {
	rollout: string;
	batch: number;
	/** The batch's run id: the same for every ask of this batch (a dry run has its own). */
	run: string;
	/** How many hosts the whole rollout has (an approval policy's threshold counts them). */
	total?: number;
	takeover?: boolean;
	owner: string;
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
	hosts: string[];
	/** The rollout's target as given, for the job history. */
	target: string;
}

export interface RunAnswer {
	task_id: string | null;
	status: string;
	return: unknown;
	repeated?: boolean;
	/** The approval request that holds the run (status `pending_approval`): nothing ran. */
	approval?: Record<string, unknown>;
}

const checkBody = compileSchema(RUN_BODY, { wellFormed: true });
const checkTargetBody = compileSchema(RUN_TARGET_BODY, { wellFormed: true });

/**
 * Who asks, from the call's meta (the gateway's, the REPL's through the gateway). The request's audit record is the
 * run's only when this action is the one the request was routed to: runs another action starts on its behalf (a
 * conformity fix's) inherit the meta and get records of their own.
 */
export function requester(ctx: Context<unknown, RunMeta>): Requester {
	const { user, audit, request } = ctx.meta;
	const own =
		audit !== undefined &&
		typeof audit.id === "string" &&
		OBJECT_ID.test(audit.id) &&
		audit.action === ctx.action?.name;
	return {
		token: user?.id ?? "",
		name: user?.name ?? null,
		role: user?.role ?? null,
		auditId: own ? audit.id : undefined,
		source: String(request?.source ?? "").slice(0, 200),
		...(typeof request?.agent === "string" && request.agent ? { agent: request.agent.slice(0, 200) } : {}),
		method: String(request?.method ?? "CALL").slice(0, 10),
		path: String(request?.path ?? "").slice(0, 4096),
	};
}

/** A task run's target in the job history: its `tgt` list (hosts and group ids as listed) as an `L@` term, or-ed with its compound target. */
export function taskTargetExpression(tgt: string[], target?: string): string {
	const parts = [
		...(tgt.length ? [`L@${tgt.join(",")}`] : []),
		...(target !== undefined ? [tgt.length ? `(${target})` : target] : []),
	];
	return parts.join(" or ");
}

/** Salt's `fun_args` for the job: arg, then kwarg as {"__kwarg__": true, ...}. */
export function funArgs(body: RunBody): unknown[] {
	return [
		...(body.arg ?? []),
		...(body.kwarg && Object.keys(body.kwarg).length ? [{ __kwarg__: true, ...body.kwarg }] : []),
	];
}

/** Whether a `local` full_return answer names its job: a host's `jid`, or salt's "Minion did not return" text naming it. */
function namesJid(answer: unknown): boolean {
	if (!isObject(answer)) return true;
	return Object.values(answer).some(v => {
		if (isObject(v) && typeof v.jid === "string") return true;
		const text = isObject(v) ? v.ret : v;
		return typeof text === "string" && text.includes("jobs.lookup_jid");
	});
}

export class Runs {
	/** Task runs being started here, by run id. */
	private readonly inFlight = new Map<string, Promise<RunAnswer>>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly returns: Returns,
		private readonly poll: JobPoll,
		private readonly history: JobHistory,
		private readonly governance: Governance,
	) {}

	/** A run's body checked (by `check`: the run fields alone, or with a compound `target`), `cm_client` defaulted. */
	validateBody<B extends RunBody = RunBody>(raw: unknown, check = checkBody): B {
		const issues = check(raw);
		if (issues) throw new Invalid(issues);
		const body = raw as Partial<B> & { fun: string };
		return { ...body, cm_client: body.cm_client ?? "local_async" } as B;
	}

	/** The run fields of a checked body, and its break-glass reason apart (it is not part of the Salt call). */
	splitBody<B extends RunBody & { break_glass?: string }>(
		body: B,
	): { call: Omit<B, "break_glass">; breakGlass?: string } {
		const { break_glass, ...call } = body;
		return { call, ...(break_glass !== undefined ? { breakGlass: break_glass } : {}) };
	}

	/** The host, if it is known and not soft-deleted. */
	async hostTarget(ctx: Context, id: string): Promise<string[]> {
		const found = await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: [id] });
		if (!found.includes(id)) throw new NotFound(`host '${id}' not found`);
		return [id];
	}

	/** The group's hostnames (its own and its subgroups', soft-deleted hosts left out). */
	async groupTargets(ctx: Context, id: string): Promise<string[]> {
		const names = await call(ctx, "groups.hostnames", { id });
		if (!names.length) throw new NothingToRun(`group '${id}' has no hosts to run on`);
		return names;
	}

	/** A task's targets now: group ids resolved to their hosts (groups.expandTargets), only live hosts kept, and the hosts its compound target selects. */
	async taskTargets(ctx: Context, tgt: string[], target?: string): Promise<string[]> {
		const listed = await this.listedTargets(ctx, tgt);
		if (target === undefined) return listed;
		const { hosts } = await call(ctx, "hosts.resolveTarget", { target });
		return [...new Set([...listed, ...hosts])].sort();
	}

	/** `tgt`'s group ids resolved to their hosts, only live hosts kept. */
	async listedTargets(ctx: Context, tgt: string[]): Promise<string[]> {
		if (!tgt.length) return [];
		const names = await call(ctx, "groups.expandTargets", { tgt });
		const known = new Set<string>(
			names.length ? await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: names }) : [],
		);
		const live = names.filter(h => known.has(h));
		const removed = new Set<string>(live.length ? await call(ctx, "hosts.softDeletedAmong", { ids: live }) : []);
		return live.filter(h => !removed.has(h)).sort();
	}

	/** `POST /hosts/{id}` or `POST /groups/{id}`: the body checked, the target resolved, the run started. */
	async onTarget(ctx: Context<{ id: string; body?: unknown }, RunMeta>, kind: "host" | "group"): Promise<RunAnswer> {
		const { call: body, breakGlass } = this.splitBody(
			this.validateBody<RunBody & { break_glass?: string }>(ctx.params.body),
		);
		const targets =
			kind === "host" ? await this.hostTarget(ctx, ctx.params.id) : await this.groupTargets(ctx, ctx.params.id);
		// The job history's `target`: the host as named, the group as the compound term that names it.
		return this.start(
			ctx,
			{ ...requester(ctx), ...(breakGlass ? { breakGlass } : {}) },
			targets,
			body,
			{},
			kind === "host" ? ctx.params.id : `F@${ctx.params.id}`,
		);
	}

	/**
	 * `POST /run`: the compound target resolved now by the hosts service (the evaluator a preview uses), the
	 * run started on that list: authorized, audited and sent to Salt as the list (`tgt_type: list`), never as the
	 * expression, so the minions Salt would select cannot differ from the ones checked.
	 */
	async onCompound(ctx: Context<{ body?: unknown }, RunMeta>): Promise<RunAnswer> {
		const { target, ...checked } = this.validateBody<RunBody & { target: string; break_glass?: string }>(
			ctx.params.body,
			checkTargetBody,
		);
		const { call: body, breakGlass } = this.splitBody(checked);
		const { hosts } = await call(ctx, "hosts.resolveTarget", { target });
		if (!hosts.length) throw new NothingToRun(`the target '${target.slice(0, 200)}' selects no live host`);
		return this.start(ctx, { ...requester(ctx), ...(breakGlass ? { breakGlass } : {}) }, hosts, body, {}, target);
	}

	/**
	 * One run of a scheduled task. `tgt` may name hosts and groups (a group is resolved now); the task's owner
	 * token must still allow it; a run handed over twice (its first scheduler replica died before recording it)
	 * is started once.
	 */
	async ofTask(ctx: Context<TaskRun>): Promise<RunAnswer> {
		const { task, run, takeover, owner, cm_client, fun, kwarg, tgt, target, schedule } = ctx.params;
		const expression = taskTargetExpression(tgt, target);
		const origin: JobOrigin = { task, run, history: { target: expression, user: null, origin: "task" } };
		return this.once(ctx, run, takeover, fun, funArgs({ cm_client, fun, kwarg }), origin, async () => {
			const targets = await this.taskTargets(ctx, tgt, target);
			if (!targets.length) throw new NothingToRun("none of the task's targets is a live host or a group with hosts");
			// A task runs as its owner's token as that token is now (docs/security.md).
			// Approved once per definition: what it runs, when and as whom (a change to any needs a new approval).
			const definition = {
				kind: "task" as const,
				id: task,
				digest: taskDefinitionDigest(ctx.params),
				...(schedule ? { schedule } : {}),
			};
			const by: Requester = {
				token: owner ?? "",
				source: `scheduler@${this.gw.broker.nodeID}`.slice(0, 200),
				method: "TASK",
				path: `/api/tasks/${task}`,
				definition,
			};
			return this.start(ctx, by, targets, { cm_client, fun, kwarg }, { task, run }, expression);
		});
	}

	/**
	 * One batch of a rollout (docs/rollouts.md): its hosts that are still live, as its owner's token allows now,
	 * `local_async`. Asked again with the same run id (the rollout replica that asked first died), it answers the
	 * job already started instead of starting another.
	 */
	async ofRollout(ctx: Context<RolloutRun>): Promise<RunAnswer> {
		const { rollout, batch, run, takeover, owner, fun, arg, kwarg, hosts, target, total } = ctx.params;
		const body: RunBody = { cm_client: "local_async", fun, ...(arg ? { arg } : {}), ...(kwarg ? { kwarg } : {}) };
		const origin: JobOrigin = { run, history: { target, user: null, origin: "rollout", rollout, batch } };
		return this.once(ctx, run, takeover, fun, funArgs(body), origin, async () => {
			const live = await this.listedTargets(ctx, hosts);
			if (!live.length) return { task_id: null, status: "no_minions", return: { return: [{}] } };
			// Approved once per rollout (its call and target; a batch's dry run is never held), its threshold counting the whole rollout.
			const definition = {
				kind: "rollout" as const,
				id: rollout,
				digest: canonicalDigest({ fun, arg: arg ?? [], kwarg: withoutTest(kwarg), target }),
				...(total ? { hosts: total } : {}),
			};
			const by: Requester = {
				token: owner ?? "",
				source: `rollout@${this.gw.broker.nodeID}`.slice(0, 200),
				method: "ROLLOUT",
				path: `/api/rollouts/${rollout}`,
				definition,
			};
			return this.start(ctx, by, live, body, { run }, target, { id: rollout, batch });
		});
	}

	/**
	 * A run that has an id (a task's run, a rollout's batch) is started once: asked again while it starts here, the
	 * same answer; asked again later, the job its hosts' records name; asked by a replica taking over from one that
	 * died, the job Salt knows by its metadata (adopted). Only when none exists does `start` run.
	 */
	private async once(
		ctx: Context,
		run: string | undefined,
		takeover: boolean | undefined,
		fun: string,
		args: unknown[],
		origin: JobOrigin,
		start: () => Promise<RunAnswer>,
	): Promise<RunAnswer> {
		const inFlight = run ? this.inFlight.get(run) : undefined;
		if (inFlight) return inFlight;
		const work = (async (): Promise<RunAnswer> => {
			if (run) {
				const started = await ctx.call<{ jid: string } | null, { run: string }>("actions.byRun", { run });
				if (started)
					return {
						task_id: started.jid,
						status: "scheduled",
						return: { return: [{ jid: started.jid }] },
						repeated: true,
					};
				// No record: the cm-gateway that started it may have died before writing them. Salt knows.
				if (takeover) {
					const adopted = await this.adopt(run, fun, args, origin);
					if (adopted)
						return { task_id: adopted, status: "scheduled", return: { return: [{ jid: adopted }] }, repeated: true };
				}
			}
			return start();
		})();
		if (!run) return work;
		this.inFlight.set(run, work);
		try {
			return await work;
		} finally {
			this.inFlight.delete(run);
		}
	}

	/**
	 * The one door to salt-api for runs (run-door.ts): the complete call on the resolved hosts is authorized
	 * against the requester's token as it is now (tokens.authorizeRun), written to the audit log — and only if
	 * that record is stored is the job handed to salt-api. Its outcome completes the same record.
	 */
	start(
		ctx: Context,
		by: Requester,
		targets: string[],
		body: RunBody,
		origin: JobOrigin,
		target: string,
		rollout?: { id: string; batch?: number },
	): Promise<RunAnswer> {
		const req: RunRequest = { by, targets, body, target };
		// The job's history record names the token that authorized it, as it was then.
		const execute = (holder: TokenHolder) =>
			this.execute(targets, body, { ...origin, history: historyEntry(by, holder, target, rollout) });
		const held = (hold: Hold): RunAnswer => {
			// Held for approval: 202, the request where it can be followed.
			const meta = ctx.meta as { $statusCode?: number; $responseHeaders?: Record<string, string> };
			meta.$statusCode = 202;
			meta.$responseHeaders = { ...meta.$responseHeaders, Location: `/api/approvals/${hold.approval._id}` };
			return { task_id: null, status: "pending_approval", return: null, approval: hold.approval };
		};
		return throughTheDoor(
			req,
			this.doorEffects(ctx, req, execute, res => res.task_id ?? null, held),
		);
	}

	/**
	 * An approved request (internal: the approvals service, once, after moving it to `running`): its exact call on its
	 * exact hosts, through the run door as its requester's token is now — authorized again, inside the maintenance
	 * windows (or with the break-glass reason it was asked with), audited — carrying the approval as its grant.
	 */
	async ofApproval(ctx: Context<{ id: string }>): Promise<RunAnswer> {
		const a = await ctx.call<
			{
				_id: string;
				call: RunBody;
				hosts: string[];
				target?: string;
				requester: { token: string };
				break_glass?: string;
			},
			{ id: string }
		>("approvals.forRun", { id: ctx.params.id });
		const by: Requester = {
			token: a.requester.token,
			source: `approval@${this.gw.broker.nodeID}`.slice(0, 200),
			method: "APPROVAL",
			path: `/api/approvals/${a._id}`,
			approval: String(a._id),
			...(a.break_glass ? { breakGlass: a.break_glass } : {}),
		};
		const body: RunBody = {
			cm_client: a.call.cm_client,
			fun: a.call.fun,
			...(a.call.arg ? { arg: a.call.arg } : {}),
			...(a.call.kwarg ? { kwarg: a.call.kwarg } : {}),
		};
		return this.start(ctx, by, a.hosts, body, {}, a.target ?? `L@${a.hosts.join(",")}`);
	}

	/** The door's effects for a run asked for in `ctx`: the token check, the audit writes, `execute`. */
	doorEffects<R>(
		ctx: Context,
		req: RunRequest,
		execute: (holder: TokenHolder) => Promise<R>,
		jidOf?: (result: R) => string | null,
		held?: (hold: Hold) => R,
	): DoorEffects<R> {
		const { by, targets, body } = req;
		return {
			authorize: () =>
				call(ctx, "tokens.authorizeRun", {
					token: by.token,
					client: body.cm_client,
					fun: body.fun,
					arg: body.arg,
					kwarg: body.kwarg,
					targets,
				}),
			govern: holder => this.governance.govern(ctx, req, holder),
			held,
			// A refusal's record is written in the refused call's context; a run's records by the gateway itself.
			beginAudit: async (id, facts, result) => {
				const params: AuditBegin = { id, ...facts, ...(result ? { result } : {}) };
				const stored = await (result?.outcome === "denied"
					? ctx.call<AuditAnswer, AuditBegin>("audit.begin", params)
					: this.gw.broker.call<AuditAnswer, AuditBegin>("audit.begin", params));
				// The request's own record: its gateway completes it rather than beginning another (lib/contracts/audit.ts).
				if (id === by.auditId) (ctx.meta as AuditMeta).auditBegun = id;
				return stored;
			},
			completeAudit: (id, result) => this.gw.broker.call<AuditAnswer, AuditComplete>("audit.complete", { id, result }),
			execute,
			jidOf,
			newId: newObjectId,
			log: (what, why) => this.gw.logger.error(what, why),
		};
	}

	/**
	 * The job Salt started for this task run, found by its metadata (runner jobs.list_jobs search_metadata):
	 * recorded and followed like one started here. Answers its jid, or null.
	 */
	private async adopt(run: string, fun: string, args: unknown[], origin: JobOrigin): Promise<string | null> {
		const jobs = await this.gw.salt.lowstate(
			{ client: "runner", fun: "jobs.list_jobs", search_metadata: { fleet_ctl_run: run } },
			{ safe: true },
		);
		const jid = isObject(jobs) ? Object.keys(jobs).find(j => JID.test(j)) : undefined;
		if (!jid) return null;
		const listed = await this.gw.salt.listJob(jid);
		const info = listed.info[0] ?? {};
		const minions = strings(info.Minions);
		const result: Record<string, { return?: unknown }> = isObject(info.Result)
			? (info.Result as Record<string, { return?: unknown }>)
			: {};
		this.gw.logger.warn(`Task run ${run} was already started as job ${jid}: following it instead of starting it again`);
		this.history.started(jid);
		await this.returns.writeRunning(jid, fun, args, minions, origin);
		this.returns.track(jid, fun, args, minions, this.gw.config.cmJobTimeoutMs, origin);
		for (const host of Object.keys(result)) this.returns.take(jid, host, result[host]?.return, verdictOf(result[host]));
		this.poll.schedule();
		return jid;
	}

	private async execute(targets: string[], body: RunBody, origin: JobOrigin = {}): Promise<RunAnswer> {
		const { task, run } = origin;
		const chunk: Lowstate = { client: body.cm_client, tgt: targets, tgt_type: "list", fun: body.fun };
		if (body.arg) chunk.arg = body.arg;
		if (body.kwarg) chunk.kwarg = body.kwarg;
		// A task run names itself in the job's metadata, so that a takeover can find the job in Salt.
		if (run) chunk.metadata = { fleet_ctl_run: run, ...(task ? { fleet_ctl_task: task } : {}) };
		const args = funArgs(body);

		if (body.cm_client === "local_async") {
			const started = await this.startAsync(chunk, args, this.gw.config.cmJobTimeoutMs, origin);
			if (!started) return { task_id: null, status: "no_minions", return: { return: [{}] } };
			return { task_id: started.jid, status: "scheduled", return: { return: [started.ret] } };
		}

		chunk.full_return = true;
		const startedAt = new Date();
		let busJid: string | null = null;
		const ret = await this.history.asking(body.fun, targets, async () => {
			const answer = await this.gw.salt.lowstate(chunk);
			// No host returned: salt-api names no jid (local_full_return_down.json); the bus showed the job.
			if (!namesJid(answer)) busJid = this.history.claimAsked(body.fun, targets);
			return answer;
		});
		if (!isObject(ret)) throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to local");
		const outputs: Record<string, unknown> = {};
		const answered: Array<{ host: string; jid: string; raw: unknown; verdict: Verdict }> = [];
		let jid: string | null = null;
		const missing: string[] = [];
		for (const [host, value] of Object.entries(ret)) {
			const full = isObject(value) && "ret" in value ? (value as { ret: unknown; jid?: unknown }) : null;
			if (full && typeof full.jid === "string" && JID.test(full.jid)) {
				jid ??= full.jid;
				outputs[host] = full.ret;
				answered.push({ host, jid: full.jid, raw: full.ret, verdict: verdictOf(full) });
			} else {
				// No return: salt's `false`, or its "Minion did not return" text (which names the jid).
				const output = full ? full.ret : value;
				outputs[host] = output;
				missing.push(host);
				const named = typeof output === "string" ? /jobs\.lookup_jid (\d{20}(?:_\d+)?)/.exec(output) : null;
				if (named) jid ??= named[1];
			}
		}
		jid ??= busJid;
		if (jid) {
			this.history.started(jid);
			await this.returns.openJob(jid, body.fun, args, Object.keys(ret), { ...origin, started: startedAt });
			const records: JobReturn[] = answered.map(a => ({
				jid: a.jid,
				action: body.fun,
				host: a.host,
				state: "finished",
				args,
				raw: a.raw,
				monitor: false,
				task,
				run,
				...a.verdict,
			}));
			for (const host of missing)
				records.push({
					jid,
					action: body.fun,
					host,
					state: "timeout",
					args,
					raw: outputs[host] === false ? NO_RETURN : outputs[host],
					monitor: false,
					task,
					run,
				});
			await this.returns.record(records);
		}
		return {
			task_id: jid,
			status: Object.keys(outputs).length ? "finished" : "no_minions",
			return: { return: [outputs] },
		};
	}

	/** Publishes a local_async job and tracks its hosts; null when no minion matched. */
	async startAsync(
		chunk: Lowstate,
		args: unknown[],
		timeoutMs: number,
		origin: JobOrigin,
	): Promise<{ jid: string; ret: unknown } | null> {
		const startedAt = new Date();
		const ret = await this.history.asking(chunk.fun, strings(chunk.tgt), () => this.gw.salt.lowstate(chunk));
		if (!isObject(ret) || Object.keys(ret).length === 0) return null;
		const { jid, minions } = ret as { jid?: unknown; minions?: unknown };
		if (typeof jid !== "string" || !JID.test(jid) || !Array.isArray(minions))
			throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to local_async");
		this.history.started(jid);
		origin = { ...origin, started: origin.started ?? startedAt };
		const hosts = minions.map(String);
		// Written before any return of the job (same lane), so that a return is never overwritten.
		const running = origin.monitor ? null : this.returns.writeRunning(jid, chunk.fun, args, hosts, origin);
		this.returns.track(jid, chunk.fun, args, hosts, timeoutMs, origin);
		this.poll.schedule();
		await running;
		return { jid, ret };
	}
}
