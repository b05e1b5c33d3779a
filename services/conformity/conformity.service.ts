/**
 * Conformity (issue 22, docs/conformity.md): which hosts differ from their declared state, what differs, since
 * when. Owns `conformity` (per host: its state, the states that differ with their predicted changes, since when,
 * when last checked) and `conformity_transitions` (each host's timeline).
 *
 * Fed by every check of the declared state that ends — a job of `state.apply` (no mods) or `state.highstate` with
 * `test=True`, whoever started it (an operator, a task, a rollout's dry run, the `salt` command on the master):
 * each host's return is judged (lib/fleet/conformity.ts) and written only where the judgement changed; its
 * `checked` time moves by CONFORMITY_CHECKED_RESOLUTION_MS at least (a pass that changes nothing writes little).
 * A transition into drift or back is a `host.drifted` / `host.conformant` alert (a burst becomes one summary);
 * the host record shows the summary (`hosts.setConformity`), so hosts filter by `conformity.state`.
 *
 * Remediation: `POST /api/hosts/{id}/conformity/fix` applies only the drifted states (`state.sls_id`), then checks
 * again; `POST /api/conformity/fix` does it on a target, as a rollout per drifted state, then one re-check. Every run of
 * a fix is authorized for the caller before the first is made (./fix-plan.ts): refused whole or made whole. Each check judged adds a point to the fleet's series (`conformity_passes`: how many hosts are conformant,
 * drifted, failing after it; a few numbers per check). Reads: `GET /api/hosts/{id}/conformity` (the host's differing
 * states and timeline), `GET /api/conformity` (the fleet: hosts by state, the states that differ most often, the
 * series).
 */
import crypto from "node:crypto";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { Storage, type StorageThis } from "../../mixins/storage.mixin";
import { configOf } from "../../lib/config";
import { Invalid, NotFound, NothingToRun, RunRefused } from "../../lib/errors";
import { newObjectId } from "../../lib/eve/ids";
import { formatHttpDate } from "../../lib/eve/dates";
import { summarizeBursts, type AlertDraft } from "../../lib/fleet/alert-bursts";
import {
	isHighstateTest,
	isStateTest,
	judge,
	transitionAlert,
	type ConformityState,
	type Suppression,
} from "../../lib/fleet/conformity";
import { returnValue } from "../../lib/fleet/state-results";
import type { Doc } from "../../lib/storage/store";
import {
	appliedOrFailed,
	authorizeFix,
	hostFixCalls,
	isFixable,
	planTargetFix,
	targetFixCalls,
	type FixCall,
	type HostConformity,
	type StoredState,
} from "./fix-plan";
import { call } from "../../lib/contracts/call";

type ConformityThis = Service &
	StorageThis & {
		checkedResolutionMs: number;
		alertBurst: number;
		judgeJob(jid: string): Promise<{ judged: number; changed: number }>;
		fixOne(
			ctx: Context<unknown, { user?: { id: string } }>,
			host: string,
			doc: Doc | null,
		): Promise<Record<string, unknown>>;
		recheckFixes(rolloutIds: string[]): Promise<void>;
		judgeFinished(jids: string[], attempt: number): Promise<void>;
	};

/** An id of 24 hex digits derived from `seed`: the same on every replica. */
const derivedId = (seed: string) => crypto.createHash("sha256").update(seed).digest("hex").slice(0, 24);

interface JobSummary {
	jid: string;
	fun: string;
	args?: unknown[];
	rollout?: string | null;
	state: string;
}

const BURSTY = new Set(["host.drifted", "host.conformant"]);
/** Transitions a host's view shows, newest first. */
const TIMELINE_MAX = 100;
/** States the fleet view ranks. */
const TOP_MAX = 20;
/** Attempts at judging the jobs that ended (waits of 0.5, 1, 2, 4, 8 s between them). */
const JUDGE_TRIES = 6;
/** Checks the fleet view's series shows, the latest. */
const SERIES_MAX = 500;
const STATES: ConformityState[] = ["conformant", "drifted", "failing", "unknown"];

const ConformityService: ServiceSchema<
	ServiceSettingSchema,
	Record<string, any>,
	Record<string, any>,
	ConformityThis
> = {
	name: "conformity",
	mixins: [Storage("conformity", ["conformity_transitions", "conformity_passes", "conformity_fixes"])],

	actions: {
		/** GET /api/hosts/{id}/conformity */
		hostView: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: ConformityThis, ctx: Context<{ id: string }>) {
				const [live] = await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: [ctx.params.id] });
				if (!live) throw new NotFound(`host '${ctx.params.id.slice(0, 253)}' not found`);
				const doc = await this.store.findOne({ _id: live });
				const timeline = await this.stores.conformity_transitions.find(
					{ host: live },
					{ sort: [["at", -1]], limit: TIMELINE_MAX },
				);
				const date = (d: unknown) => (d ? formatHttpDate(new Date(d as string)) : null);
				return {
					host: live,
					state: doc?.state ?? "unknown",
					since: date(doc?.since),
					checked: date(doc?.checked),
					jid: doc?.jid ?? null,
					drifted: doc?.drifted ?? 0,
					failing: doc?.failing ?? 0,
					suppressed: doc?.suppressed ?? 0,
					states: doc?.states ?? [],
					timeline: timeline.map(t => ({
						from: t.from,
						to: t.to,
						at: date(t.at),
						jid: t.jid,
						drifted: t.drifted,
						failing: t.failing,
					})),
				};
			},
		},

		/** GET /api/conformity: the fleet's hosts by state (never checked: `unknown`), and the states that differ most often. */
		fleetView: {
			params: { query: { type: "any", optional: true } },
			async handler(this: ConformityThis, ctx: Context) {
				const counts: Record<string, number> = Object.fromEntries(STATES.map(s => [s, 0]));
				const top = new Map<string, { sls: string; state_id: string; fun: string; hosts: number; failing: number }>();
				let judged = 0;
				const live = new Set<string>(await call(ctx, "hosts.liveIds", {}));
				await this.store.scan({}, ["state", "states"], d => {
					if (!live.has(d._id)) return;
					judged++;
					counts[d.state] = (counts[d.state] ?? 0) + 1;
					for (const s of (d.states ?? []) as Array<{
						sls: string;
						state_id: string;
						fun: string;
						result: boolean | null;
					}>) {
						const key = `${s.sls}\0${s.state_id}`;
						const t =
							top.get(key) ??
							top.set(key, { sls: s.sls, state_id: s.state_id, fun: s.fun, hosts: 0, failing: 0 }).get(key)!;
						t.hosts++;
						if (s.result === false) t.failing++;
					}
				});
				counts.unknown += live.size - judged;
				const ranked = [...top.values()]
					.sort((a, b) => b.hosts - a.hosts || a.sls.localeCompare(b.sls) || a.state_id.localeCompare(b.state_id))
					.slice(0, TOP_MAX);
				const passes = await this.stores.conformity_passes.find({}, { sort: [["at", -1]], limit: SERIES_MAX });
				const series = passes.reverse().map(p => ({
					at: formatHttpDate(new Date(p.at)),
					jid: p._id,
					judged: p.judged,
					changed: p.changed,
					conformant: p.conformant,
					drifted: p.drifted,
					failing: p.failing,
				}));
				return { hosts: live.size, counts, top: ranked, series };
			},
		},

		/**
		 * POST /api/hosts/{id}/conformity/fix: applies only the states the host's last check found drifted, one
		 * `state.sls_id <state id> <sls>` each, then checks the host again. Each is a run through the cm-gateway's
		 * door, as the caller: authorized on the host and the call, audited — every one of them (the check too) authorized
		 * before the first runs, so a fix the token allows only in part is refused whole. States that would fail, or
		 * that could not be rendered, are not applied (they are answered as `skipped`).
		 */
		fixHost: {
			params: { id: "string", body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: ConformityThis, ctx: Context<{ id: string }>) {
				const [live] = await ctx.call<string[], { ids: string[] }>("hosts.exist", { ids: [ctx.params.id] });
				if (!live) throw new NotFound(`host '${ctx.params.id.slice(0, 253)}' not found`);
				return this.fixOne(ctx, live, await this.store.findOne({ _id: live }));
			},
		},

		/**
		 * POST /api/conformity/fix `{"target"}`: the drifted states of the hosts the target selects, fixed only where
		 * they drifted. One host: as `fixHost`. Several: one rollout per drifted state (`state.sls_id` with `queue=True`,
		 * Salt running one state job per minion at a time) on exactly the hosts drifted on it, a canary then batches of
		 * 10%, paused at the first failure, as the caller's token allows (all of them and the re-check authorized before
		 * any is made, every batch again as it starts); once every one of them ended, the hosts are checked again (a
		 * rollout of `test=True` judged like a check).
		 */
		fixTarget: {
			params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
			async handler(this: ConformityThis, ctx: Context<{ body?: unknown }, { user?: { id: string } }>) {
				const body = ctx.params.body as { target?: unknown } | undefined;
				if (
					!body ||
					typeof body !== "object" ||
					typeof body.target !== "string" ||
					!body.target.length ||
					body.target.length > 10_000
				)
					throw new Invalid({ target: "a compound target (a string of 1 to 10,000 characters) is required" });
				const { hosts } = await call(ctx, "hosts.resolveTarget", { target: body.target, field: "target" });
				const docs = await this.store.find({ _id: { $in: hosts } }, { only: ["state", "states"] });
				const plan = planTargetFix(docs as HostConformity[]);
				const drifted = plan.hosts;
				if (!drifted.length)
					throw new NothingToRun(`none of the ${hosts.length} host(s) the target selects has a drifted state to fix`);
				if (drifted.length === 1)
					return {
						target: body.target,
						...(await this.fixOne(ctx, drifted[0], docs.find(d => d._id === drifted[0]) ?? null)),
					};
				const owner = ctx.meta.user?.id;
				if (!owner) throw new RunRefused("the fix is refused: no token authorizes it", "no token authorizes it");
				// Everything authorized before anything is made, the re-check included: a fix is refused whole, saying why.
				const calls = targetFixCalls(plan);
				await authorizeFix(calls, fixCall => call(ctx, "tokens.authorizeRun", { token: owner, ...fixCall }));
				const fix = newObjectId();
				const fixes = [];
				for (const [i, g] of plan.groups.entries()) {
					const rollout = derivedId(`${fix}:${i}`);
					const { fun, arg, kwarg } = calls[i];
					await ctx.call("rollouts.startFix", {
						id: rollout,
						fix,
						name: `fix ${g.sls}/${g.state_id}`,
						hosts: g.hosts,
						fun,
						arg,
						kwarg,
						owner,
					});
					fixes.push({ state_id: g.state_id, sls: g.sls, hosts: g.hosts.length, rollout });
				}
				await this.stores.conformity_fixes.insertMany([
					{ _id: fix, owner, hosts: drifted, rollouts: fixes.map(f => f.rollout), recheck: null, at: new Date() },
				]);
				return { target: body.target, fix, hosts: drifted.length, fixes, recheck: null };
			},
		},

		/** Judges the hosts of a check job that ended (internal; also what `salt-jobs.finished` does). */
		judgeJob: {
			visibility: "public",
			params: { jid: "string" },
			handler(this: ConformityThis, ctx: Context<{ jid: string }>) {
				return this.judgeJob(ctx.params.jid);
			},
		},
	},

	events: {
		/** A rollout moved: a fix whose rollouts all ended gets its re-check. */
		async "rollouts.updated"(this: ConformityThis, ctx: Context<{ ids: string[] }>) {
			const look = (attempt: number): Promise<void> =>
				this.recheckFixes(ctx.params.ids).catch((err: Error) => {
					// A peer gone for a moment: looked at again (the fix's last update may be the only one there is).
					if (attempt + 1 >= JUDGE_TRIES) return this.logger.warn("Could not look at the fixes:", err.message);
					setTimeout(() => void look(attempt + 1), 500 * 2 ** attempt).unref?.();
				});
			await look(0);
		},
		/** A job ended: a check of the declared state is judged. */
		"salt-jobs.finished"(this: ConformityThis, ctx: Context<{ jids: string[] }>) {
			return this.judgeFinished(ctx.params.jids, 0);
		},
	},

	methods: {
		/**
		 * Judges the checks among jobs that ended. A failure (a replica of the history or of the rollouts that just
		 * died and is still in the registry) is tried again, up to JUDGE_TRIES times with a growing wait: a check
		 * that ended is never left unjudged because a peer was gone for a moment.
		 */
		async judgeFinished(this: ConformityThis, jids: string[], attempt: number): Promise<void> {
			try {
				const jobs = await this.broker.call<JobSummary[], { jids: string[] }>("salt-jobs.summaries", { jids });
				// A batch of a scheduled check (a rollout the check made) is judged whatever its mods.
				const rollouts = [...new Set(jobs.map(j => j.rollout).filter((r): r is string => !!r))];
				const checks: Record<string, string> = rollouts.length
					? await this.broker.call("rollouts.checksOf", { ids: rollouts })
					: {};
				for (const job of jobs) {
					const fromCheck = !!job.rollout && job.rollout in checks && isStateTest(job.fun, job.args ?? []);
					if (fromCheck || isHighstateTest(job.fun, job.args ?? [])) await this.judgeJob(job.jid);
				}
			} catch (err) {
				if (attempt + 1 >= JUDGE_TRIES) {
					this.logger.error(
						`Could not judge the conformity of job(s) ${jids.join(", ")}; the next check will:`,
						(err as Error).message,
					);
					return;
				}
				this.logger.warn(
					`Could not judge the conformity of job(s) ${jids.join(", ")} yet (tried again):`,
					(err as Error).message,
				);
				setTimeout(() => void this.judgeFinished(jids, attempt + 1), 500 * 2 ** attempt).unref?.();
			}
		},

		/** One host's drifted states applied one `state.sls_id` each (as the caller, audited each), then a check. */
		async fixOne(
			this: ConformityThis,
			ctx: Context<unknown, { user?: { id: string } }>,
			host: string,
			doc: Doc | null,
		) {
			const states: StoredState[] = doc?.states ?? [];
			const drifted = states.filter(isFixable);
			if (!drifted.length)
				throw new NothingToRun(
					`host '${host}' has no drifted state to fix (its last check found it ${doc?.state ?? "never checked"})`,
				);
			const owner = ctx.meta.user?.id;
			if (!owner) throw new RunRefused("the fix is refused: no token authorizes it", "no token authorizes it");
			// The drifted states one run each, then the check: every run authorized before the first (a fix is refused
			// whole, saying why, never applied in part).
			const calls = hostFixCalls(host, drifted);
			await authorizeFix(calls, fixCall => call(ctx, "tokens.authorizeRun", { token: owner, ...fixCall }));
			// Each run gets an audit record of its own, the request its own: a run writes under the request's record only
			// when it is the action the request was routed to (services/cm-gateway/runs.ts `requester`).
			const run = (fix: FixCall) =>
				ctx.call<
					{
						task_id: string | null;
						status: string;
						approval?: { _id: string };
						return: { return: Array<Record<string, unknown>> };
					},
					Record<string, unknown>
				>("cm-gateway.runOnHost", {
					id: host,
					body: {
						cm_client: fix.client,
						fun: fix.fun,
						...(fix.arg ? { arg: fix.arg } : {}),
						...(Object.keys(fix.kwarg).length ? { kwarg: fix.kwarg } : {}),
					},
				});
			const fixed = [];
			for (const [i, s] of drifted.entries()) {
				const res = await run(calls[i]);
				if (res.status === "pending_approval" && res.approval) {
					// An approval policy holds it (docs/security.md): nothing ran; it runs once approved.
					fixed.push({
						state_id: s.state_id,
						sls: s.sls,
						jid: null,
						result: "awaiting_approval",
						approval: res.approval._id,
					});
					continue;
				}
				fixed.push({
					state_id: s.state_id,
					sls: s.sls,
					jid: res.task_id,
					result: appliedOrFailed(res.return?.return?.[0]?.[host]),
				});
			}
			const checked = await run(calls[drifted.length]);
			return {
				host,
				fixed,
				skipped: states
					.filter(s => !drifted.includes(s))
					.map(s => ({ state_id: s.state_id, sls: s.sls, result: s.result })),
				check: checked.task_id,
			};
		},

		/** Fixes whose rollouts all ended: their hosts checked again, once (a rollout of test=True under a derived id). */
		async recheckFixes(this: ConformityThis, rolloutIds: string[]) {
			for (const f of await this.stores.conformity_fixes.find({ recheck: null, rollouts: { $in: rolloutIds } })) {
				const statuses = await this.broker.call<Record<string, string>, { ids: string[] }>("rollouts.statuses", {
					ids: f.rollouts,
				});
				if (!f.rollouts.every((id: string) => statuses[id] === "finished" || statuses[id] === "aborted")) continue;
				const recheck = derivedId(`${f._id}:recheck`);
				try {
					await this.broker.call("rollouts.startCheck", {
						id: recheck,
						check: String(f._id),
						name: "after the fix",
						target: `fix ${f._id}`,
						hosts: f.hosts,
						kwarg: { test: true },
						batch: "10%",
						jitter_s: 0,
						owner: f.owner,
					});
					await this.stores.conformity_fixes.updateMany({ _id: f._id, recheck: null }, { $set: { recheck } });
				} catch (err) {
					this.logger.warn(`Could not check again the hosts of fix ${f._id}:`, (err as Error).message);
				}
			}
		},

		async judgeJob(this: ConformityThis, jid: string) {
			const returns = await this.broker.call<Array<{ host: string; state: string; return: string }>, { jid: string }>(
				"actions.returnsOf",
				{ jid },
			);
			const hosts = returns.map(r => r.host);
			const stored = new Map((await this.store.find({ _id: { $in: hosts } })).map(d => [String(d._id), d]));
			// The suppression rules as they are now (a store that cannot be read counts as none: nothing is hidden).
			const rules = await this.broker.call<Suppression[]>("conformity-rules.all").catch((err: Error) => {
				this.logger.warn("Could not read the conformity rules; judging without them:", err.message);
				return [] as Suppression[];
			});
			const now = new Date();
			const summaries: Array<{ _id: string; conformity: Doc }> = [];
			const transitions: Doc[] = [];
			const alerts: AlertDraft[] = [];
			let changed = 0;
			for (const r of returns) {
				const j = judge(returnValue(r.return), r.state === "finished", rules);
				const was = stored.get(r.host);
				const from: ConformityState | null = was?.state ?? null;
				const moved = from !== j.state;
				// Silence says nothing new of a host already judged: it keeps its state, only `checked` is not moved.
				if (j.state === "unknown" && was) continue;
				const stale = !was || now.getTime() - new Date(was.checked).getTime() >= this.checkedResolutionMs;
				if (!moved && was?.digest === j.digest && !stale) continue;
				changed++;
				const since = moved || !was ? now : new Date(was.since);
				const doc = {
					state: j.state,
					since,
					checked: now,
					jid,
					digest: j.digest,
					drifted: j.drifted,
					failing: j.failing,
					suppressed: j.suppressed,
					states: j.states,
				};
				if (was) await this.store.updateMany({ _id: r.host }, { $set: doc });
				else await this.store.insertMany([{ _id: r.host, ...doc }]);
				summaries.push({
					_id: r.host,
					conformity: { state: j.state, since, checked: now, drifted: j.drifted, failing: j.failing },
				});
				if (!moved) continue;
				transitions.push({
					_id: newObjectId(),
					host: r.host,
					from,
					to: j.state,
					at: now,
					jid,
					drifted: j.drifted,
					failing: j.failing,
				});
				const alert = transitionAlert(from, j.state);
				if (alert === "host.drifted")
					alerts.push({
						type: alert,
						level: "warning",
						payload: { hostname: r.host, state: j.state, drifted: j.drifted, failing: j.failing, jid },
					});
				if (alert === "host.conformant")
					alerts.push({ type: alert, level: "info", payload: { hostname: r.host, jid } });
			}
			if (transitions.length) await this.stores.conformity_transitions.insertMany(transitions);
			if (summaries.length) await call(this.broker, "hosts.setConformity", { hosts: summaries });
			if (alerts.length)
				await call(this.broker, "alerts.raiseMany", { alerts: summarizeBursts(alerts, BURSTY, this.alertBurst) });
			// The fleet after this check: one small point of the series (a few numbers, whatever the fleet's size).
			const point: Doc = { _id: jid, at: now, judged: returns.length, changed };
			for (const st of ["conformant", "drifted", "failing"]) point[st] = await this.store.count({ state: st });
			await this.stores.conformity_passes.removeMany({ _id: jid });
			await this.stores.conformity_passes.insertMany([point]);
			return { judged: returns.length, changed };
		},
	},

	created(this: ConformityThis) {
		const config = configOf(this.broker);
		this.checkedResolutionMs = config.conformityCheckedResolutionMs;
		this.alertBurst = config.cmAlertBurst;
	},
	async started(this: ConformityThis) {
		await this.store.ensureIndex("state");
		await this.stores.conformity_transitions.ensureIndex("host");
		await this.stores.conformity_passes.ensureIndex("at", { ordered: true });
		await this.stores.conformity_fixes.ensureIndex("rollouts");
	},
};

export default ConformityService;
