/**
 * The simulated Salt master: fleet, keys, presence, event bus, publishing jobs to minions, the job
 * cache, and the synchronous `local` wait logic (LocalClient.cmd). No HTTP here.
 */
import { type ExecResult, execute } from "./modules";
import { type Grains, type KeyState, type Minion, type MinionSpec, Fleet, baseLatency, makeMinion } from "./fleet";
import { FileServer, type StepFailure, slsName } from "./states";
import { type Nodegroups, Targeting } from "./targeting";
import { JidClock, fingerprintFrom, fnmatch, hashString, isJid, isPlainObject, isoStamp, jidToTime, Prng } from "./util";

// ------------------------------------------------------------------ Salt exceptions → HTTP status

/** SaltInvocationError: 400 with the message on the CherryPy error page. */
export class SaltInvocationError extends Error {}
/** EauthAuthenticationError / AuthorizationError: 401. */
export class SaltAuthError extends Error {}
/** SaltDaemonNotRunning / SaltReqTimeoutError: 503. */
export class SaltMasterDown extends Error {}

// ------------------------------------------------------------------ events

export interface SaltEvent {
	tag: string;
	data: Record<string, unknown>;
}

export class EventBus {
	private readonly subs = new Set<(e: SaltEvent) => void>();
	subscribe(fn: (e: SaltEvent) => void): () => void {
		this.subs.add(fn);
		return () => this.subs.delete(fn);
	}
	get subscribers(): number {
		return this.subs.size;
	}
	/** `SaltEvent.fire_event`: stamps the data (in place, as Salt does: `_stamp` is overwritten) and publishes it. */
	fire(tag: string, data: Record<string, unknown>): SaltEvent {
		data._stamp = isoStamp();
		const ev = { tag, data };
		for (const fn of this.subs) {
			try {
				fn(ev);
			} catch {
				// A broken subscriber must not stop the bus.
			}
		}
		return ev;
	}
}

// ------------------------------------------------------------------ jobs

export interface JobReturn {
	return: unknown;
	retcode: number;
	success: boolean;
	out?: string;
}

export interface Job {
	jid: string;
	kind: "minion" | "runner";
	fun: string;
	arg: unknown[];
	tgt: unknown;
	tgtType: string;
	user: string;
	/** Expected minions (accepted keys that matched). */
	minions: string[];
	/** `list` target ids with no accepted key. */
	missing: string[];
	returns: Map<string, JobReturn>;
	/** Minions whose return is scheduled and not yet delivered. */
	pending: Set<string>;
	createdMs: number;
	listeners: Set<() => void>;
	metadata?: Record<string, unknown>;
}

export interface MasterConfig {
	/** The master's minion id (runner jobs are stored under `<id>_master`). */
	masterId: string;
	timeout: number;
	gatherJobTimeout: number;
	keepJobsSeconds: number;
	maxJobs: number;
	tokenExpire: number;
	netapiEnableClients: string[];
	nodegroups: Nodegroups;
	presenceEvents: boolean;
	/** Interval of `salt/presence/present` events in ms (0: never). */
	presenceIntervalMs: number;
	/** Base return latency range of minions, in ms. */
	latencyMs: [number, number];
	storeRunnerJobs: boolean;
	/** `external_auth` as config.get/config.values show it (eauth → user → ACL). */
	externalAuth: Record<string, Record<string, unknown[]>>;
}

export interface PublishLoad {
	tgt: unknown;
	tgtType: string;
	fun: string;
	arg: unknown[];
	user: string;
	/** The job's `metadata` (LocalClient's metadata=): kept with the job, searchable by jobs.list_jobs. */
	metadata?: Record<string, unknown>;
}

export interface PubData {
	jid: string;
	minions: string[];
	missing: string[];
}

export interface ExecutionRecord {
	jid: string;
	id: string;
	fun: string;
	arg: unknown[];
	atMs: number;
}

/** `salt.utils.args.condition_input`: kwargs travel as a trailing `{"__kwarg__": true, ...}` arg. */
export function conditionInput(arg: unknown, kwarg: unknown): unknown[] {
	const args = arg === undefined || arg === null ? [] : Array.isArray(arg) ? [...arg] : [arg];
	const out = args.map(a => (typeof a === "number" && isJid(String(a)) ? String(a) : a));
	if (isPlainObject(kwarg) && Object.keys(kwarg).length) out.push({ __kwarg__: true, ...kwarg });
	return out;
}

function asctime(ms: number): string {
	const d = new Date(ms);
	const days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
	const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
	const p2 = (n: number) => String(n).padStart(2, "0");
	return `${days[d.getDay()]} ${months[d.getMonth()]} ${String(d.getDate()).padStart(2, " ")} ${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())} ${d.getFullYear()}`;
}

export class Master {
	readonly fleet = new Fleet();
	readonly targeting: Targeting;
	readonly files: FileServer;
	readonly events = new EventBus();
	readonly jobs = new Map<string, Job>();
	private readonly jids = new JidClock();
	private readonly timers = new Set<NodeJS.Timeout>();
	private presenceTimer: NodeJS.Timeout | null = null;
	private presenceInterval: NodeJS.Timeout | null = null;
	private readonly presenceChanges = { new: new Set<string>(), lost: new Set<string>() };
	private readonly executionCounts = new Map<string, Map<string, number>>();
	private readonly executionLog: ExecutionRecord[] = [];
	private readonly patchFailures = new Map<string, { minions: Set<string> | "*"; failure: StepFailure }>();
	/** False while the master daemon is "down": netapi calls get 503. */
	running = true;
	private stopped = false;
	readonly seed: string;
	readonly referenceMs: number;

	constructor(
		readonly config: MasterConfig,
		opts: { seed: string; referenceMs: number; files: Record<string, string> },
	) {
		this.seed = opts.seed;
		this.referenceMs = opts.referenceMs;
		this.files = new FileServer(opts.files);
		this.targeting = new Targeting(this.fleet, () => this.config.nodegroups);
		this.restartPresenceInterval();
	}

	/** The master's configuration as `config.get` / `config.values` see it (a subset of Salt's opts). */
	opts(): Record<string, unknown> {
		return {
			id: `${this.config.masterId}_master`,
			interface: "0.0.0.0",
			publish_port: 4505,
			ret_port: 4506,
			user: "salt",
			timeout: this.config.timeout,
			gather_job_timeout: this.config.gatherJobTimeout,
			keep_jobs_seconds: this.config.keepJobsSeconds,
			token_expire: this.config.tokenExpire,
			hash_type: "sha256",
			presence_events: this.config.presenceEvents,
			loop_interval: 60,
			master_job_cache: "local_cache",
			minion_data_cache: true,
			file_roots: { base: ["/srv/salt"] },
			pillar_roots: { base: ["/srv/pillar"] },
			nodegroups: this.config.nodegroups,
			netapi_enable_clients: this.config.netapiEnableClients,
			external_auth: this.config.externalAuth,
			rest_cherrypy: { port: 8000, disable_ssl: true },
			saltversion: "3006.9",
		};
	}

	// ---------------------------------------------------------------- timers

	private setTimer(fn: () => void, ms: number): NodeJS.Timeout {
		const t = setTimeout(() => {
			this.timers.delete(t);
			fn();
		}, ms);
		this.timers.add(t);
		return t;
	}

	restartPresenceInterval(): void {
		if (this.presenceInterval) clearInterval(this.presenceInterval);
		this.presenceInterval = null;
		if (this.config.presenceEvents && this.config.presenceIntervalMs > 0) {
			this.presenceInterval = setInterval(() => this.firePresent(), this.config.presenceIntervalMs);
			this.presenceInterval.unref();
		}
	}

	shutdown(): void {
		this.stopped = true;
		for (const t of this.timers) clearTimeout(t);
		this.timers.clear();
		if (this.presenceTimer) clearTimeout(this.presenceTimer);
		if (this.presenceInterval) clearInterval(this.presenceInterval);
		this.presenceTimer = this.presenceInterval = null;
		for (const job of this.jobs.values()) {
			job.pending.clear();
			this.notify(job);
		}
	}

	// ---------------------------------------------------------------- minions, keys and presence

	addMinion(spec: MinionSpec, opts: { fireEvents?: boolean } = {}): Minion {
		const m = makeMinion(spec, this.seed, this.referenceMs);
		m.latencyMs = baseLatency(m.id, this.config.latencyMs[0], this.config.latencyMs[1]);
		this.fleet.add(m);
		if (opts.fireEvents) {
			this.fireAuth(m, m.key === "accepted" ? "accept" : m.key === "pending" ? "pend" : m.key === "rejected" ? "reject" : "denied");
			if (m.key === "accepted" && m.up) {
				this.fireStart(m);
				this.presenceChanged(m.id, true);
			}
		}
		return m;
	}

	/** A stand-in PEM public key for a minion (its bytes derive from the fingerprint). */
	publicKeyPem(id: string): string {
		const m = this.fleet.get(id);
		return m ? this.pubKey(m) : "";
	}

	private pubKey(m: Minion): string {
		const b64 = Buffer.from(m.fingerprint.replace(/:/g, "").repeat(4), "hex").toString("base64");
		return `-----BEGIN PUBLIC KEY-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----`;
	}

	fireAuth(m: Minion, act: string): void {
		this.events.fire("salt/auth", { result: act !== "denied" && act !== "reject", act, id: m.id, pub: this.pubKey(m) });
	}

	fireStart(m: Minion): void {
		const text = `Minion ${m.id} started at ${asctime(Date.now())}`;
		this.events.fire("minion_start", { cmd: "_minion_event", data: text, id: m.id, pretag: null, tag: "minion_start" });
		this.events.fire(`salt/minion/${m.id}/start`, { cmd: "_minion_event", data: text, id: m.id, pretag: null, tag: `salt/minion/${m.id}/start` });
	}

	/** A minion-originated event (`event.send` on the minion): the data arrives wrapped in the load. */
	fireMinionEvent(id: string, tag: string, data: unknown): void {
		this.events.fire(tag, { cmd: "_minion_event", id, tag, data, pretag: null });
	}

	/** Change a key's state; fires `salt/key` (accept/reject/pend/delete) or `salt/auth` (denied). */
	setKeyState(id: string, state: KeyState | "deleted"): boolean {
		const m = this.fleet.get(id);
		if (!m) return false;
		const wasConnected = m.key === "accepted" && m.up;
		if (state === "deleted") {
			this.fleet.remove(id);
			this.events.fire("salt/key", { result: true, act: "delete", id });
		} else {
			if (m.key === state) return true;
			m.key = state;
			this.fleet.invalidate();
			if (state === "denied") this.fireAuth(m, "denied");
			else this.events.fire("salt/key", { result: true, act: state === "accepted" ? "accept" : state === "rejected" ? "reject" : "pend", id });
		}
		const connected = state === "accepted" && m.up;
		if (wasConnected !== connected) this.presenceChanged(id, connected);
		return true;
	}

	/** Bring a minion up (fires salt/auth, minion_start, salt/minion/<id>/start) or take it down. */
	setUp(id: string, up: boolean): boolean {
		const m = this.fleet.get(id);
		if (!m) return false;
		if (m.up === up) return true;
		m.up = up;
		if (m.key !== "accepted") return true;
		if (up) {
			this.fireAuth(m, "accept");
			this.fireStart(m);
		}
		this.presenceChanged(id, up);
		return true;
	}

	private presenceChanged(id: string, connected: boolean): void {
		if (!this.config.presenceEvents) return;
		const [add, del] = connected ? [this.presenceChanges.new, this.presenceChanges.lost] : [this.presenceChanges.lost, this.presenceChanges.new];
		if (del.has(id)) del.delete(id);
		else add.add(id);
		this.presenceTimer ??= setTimeout(() => {
			this.presenceTimer = null;
			const data = { new: [...this.presenceChanges.new].sort(), lost: [...this.presenceChanges.lost].sort() };
			this.presenceChanges.new.clear();
			this.presenceChanges.lost.clear();
			if (data.new.length || data.lost.length) this.events.fire("salt/presence/change", data);
		}, 5);
	}

	firePresent(): void {
		this.events.fire("salt/presence/present", { present: this.connectedIds() });
	}

	connectedIds(): string[] {
		return this.fleet.acceptedIds().filter(id => this.fleet.get(id)!.up);
	}

	// ---------------------------------------------------------------- patch failures and executions

	failPatch(patch: string, minions: string[] | "*", failure: StepFailure = {}): void {
		this.patchFailures.set(slsName(patch), { minions: minions === "*" ? "*" : new Set(minions), failure });
	}

	clearPatchFailures(patch?: string): void {
		if (patch === undefined) this.patchFailures.clear();
		else this.patchFailures.delete(slsName(patch));
	}

	private patchFailureFor(minionId: string): (sls: string) => StepFailure | undefined {
		return sls => {
			const f = this.patchFailures.get(sls);
			if (!f) return undefined;
			return f.minions === "*" || f.minions.has(minionId) ? f.failure : undefined;
		};
	}

	executionCount(id: string, fun?: string): number {
		const per = this.executionCounts.get(id);
		if (!per) return 0;
		if (fun !== undefined) return per.get(fun) ?? 0;
		let n = 0;
		for (const v of per.values()) n += v;
		return n;
	}

	executionCountsByMinion(): Record<string, Record<string, number>> {
		const out: Record<string, Record<string, number>> = {};
		for (const [id, per] of this.executionCounts) out[id] = Object.fromEntries(per);
		return out;
	}

	executions(): ExecutionRecord[] {
		return [...this.executionLog];
	}

	resetExecutions(): void {
		this.executionCounts.clear();
		this.executionLog.length = 0;
	}

	private recordExecution(jid: string, id: string, fun: string, arg: unknown[]): void {
		let per = this.executionCounts.get(id);
		if (!per) this.executionCounts.set(id, (per = new Map()));
		per.set(fun, (per.get(fun) ?? 0) + 1);
		this.executionLog.push({ jid, id, fun, arg, atMs: Date.now() });
		if (this.executionLog.length > 200_000) this.executionLog.splice(0, 100_000);
	}

	// ---------------------------------------------------------------- publishing and returns

	newJid(): string {
		return this.jids.next();
	}

	private storeJob(job: Job): void {
		this.jobs.set(job.jid, job);
		const cutoff = Date.now() - this.config.keepJobsSeconds * 1000;
		for (const [jid, j] of this.jobs) {
			const tooMany = this.jobs.size > this.config.maxJobs;
			const expired = j.createdMs < cutoff && j.pending.size === 0;
			if (!tooMany && !expired) break;
			this.jobs.delete(jid);
		}
	}

	/**
	 * Publish a job (`LocalClient.run_job` → master `publish`): resolve the target, store the job,
	 * fire `salt/job/<jid>/new`, execute on every connected minion and schedule each return.
	 * Returns null when no minion matched (the API then answers `{}`).
	 */
	publish(load: PublishLoad): PubData | null {
		const { minions, missing } = this.targeting.check(load.tgt, load.tgtType);
		if (minions.length === 0) return null;
		const jid = this.newJid();
		const nowMs = Date.now();
		const job: Job = {
			jid,
			kind: "minion",
			fun: load.fun,
			arg: load.arg,
			tgt: load.tgt,
			tgtType: load.tgtType,
			user: load.user,
			minions,
			missing,
			returns: new Map(),
			pending: new Set(),
			createdMs: nowMs,
			listeners: new Set(),
			...(load.metadata ? { metadata: load.metadata } : {}),
		};
		this.storeJob(job);
		this.events.fire(`salt/job/${jid}/new`, { jid, tgt_type: load.tgtType, tgt: load.tgt, user: load.user, fun: load.fun, arg: load.arg, minions, missing });
		const deliveries: { id: string; dueMs: number; result: ExecResult }[] = [];
		for (const id of minions) {
			const m = this.fleet.get(id)!;
			if (!m.up) continue;
			this.recordExecution(jid, id, load.fun, load.arg);
			const result = execute({
				minion: m,
				jid,
				fun: load.fun,
				arg: load.arg,
				files: this.files,
				patchFailure: this.patchFailureFor(id),
				fireMinionEvent: (tag, data) => this.fireMinionEvent(id, tag, data),
				nowMs,
			});
			if (m.neverReturns) continue;
			job.pending.add(id);
			deliveries.push({ id, dueMs: nowMs + (m.delayMs ?? m.latencyMs), result });
		}
		this.scheduleReturns(job, deliveries);
		return { jid, minions, missing };
	}

	private scheduleReturns(job: Job, items: { id: string; dueMs: number; result: ExecResult }[]): void {
		if (!items.length) return;
		items.sort((a, b) => a.dueMs - b.dueMs);
		let i = 0;
		const tick = () => {
			const now = Date.now();
			while (i < items.length && items[i].dueMs <= now) this.deliver(job, items[i++]);
			if (i < items.length) this.setTimer(tick, Math.max(1, items[i].dueMs - Date.now()));
		};
		this.setTimer(tick, Math.max(0, items[0].dueMs - Date.now()));
	}

	private deliver(job: Job, item: { id: string; result: ExecResult }): void {
		if (!job.pending.delete(item.id)) return;
		const m = this.fleet.get(item.id);
		// A minion that went down (or lost its key) before answering never returns.
		if (!m || !m.up || m.key !== "accepted") {
			this.notify(job);
			return;
		}
		const ret: JobReturn = { return: item.result.ret, retcode: item.result.retcode, success: item.result.retcode === 0 };
		if (item.result.out) ret.out = item.result.out;
		job.returns.set(item.id, ret);
		const data: Record<string, unknown> = {
			cmd: "_return",
			id: item.id,
			jid: job.jid,
			fun: job.fun,
			fun_args: job.arg,
			return: ret.return,
			retcode: ret.retcode,
			success: ret.success,
		};
		if (ret.out) data.out = ret.out;
		this.events.fire(`salt/job/${job.jid}/ret/${item.id}`, data);
		this.notify(job);
	}

	private notify(job: Job): void {
		for (const fn of [...job.listeners]) fn();
	}

	/** Resolves when the job changes (a return arrived or a scheduled one was dropped) or after ms. */
	private waitForChange(job: Job, ms: number): Promise<void> {
		return new Promise(resolve => {
			let timer: NodeJS.Timeout | undefined;
			const done = () => {
				job.listeners.delete(done);
				if (timer) {
					clearTimeout(timer);
					this.timers.delete(timer);
				}
				resolve();
			};
			job.listeners.add(done);
			if (Number.isFinite(ms)) timer = this.setTimer(done, Math.max(0, ms));
		});
	}

	/**
	 * `LocalClient.cmd`: publish, then wait. A minion that is still running the job is waited for
	 * (the master's find_job sees it busy), however slow; minions that cannot answer (down, returns
	 * lost) are given up after `timeout` + `gather_job_timeout` and reported as `false`.
	 */
	async localCmd(load: PublishLoad, opts: { timeout?: number; gatherJobTimeout?: number; fullReturn?: boolean }): Promise<Record<string, unknown>> {
		const pub = this.publish(load);
		if (!pub) return {};
		const job = this.jobs.get(pub.jid)!;
		const timeoutS = opts.timeout ?? this.config.timeout;
		const gjtS = opts.gatherJobTimeout ?? this.config.gatherJobTimeout;
		const giveUpAt = job.createdMs + (timeoutS + gjtS) * 1000;
		for (;;) {
			if (this.stopped || job.returns.size >= job.minions.length) break;
			if (job.pending.size > 0) await this.waitForChange(job, Infinity);
			else {
				const left = giveUpAt - Date.now();
				if (left <= 0) break;
				await this.waitForChange(job, left);
			}
		}
		const out: Record<string, unknown> = {};
		for (const [id, r] of job.returns) {
			if (opts.fullReturn) {
				const full: Record<string, unknown> = { ret: r.return, retcode: r.retcode, jid: job.jid };
				if (r.out) full.out = r.out;
				out[id] = full;
			} else out[id] = r.return;
		}
		const noResponse =
			"Minion did not return. [No response]\nThe minions may not have all finished running and any remaining minions will return upon completion. " +
			`To look up the return data for this job later, run the following command:\n\nsalt-run jobs.lookup_jid ${job.jid}`;
		for (const id of job.missing) out[id] = opts.fullReturn ? { out: "no_return", ret: noResponse, retcode: 1 } : noResponse;
		for (const id of job.minions) if (!(id in out)) out[id] = false;
		return out;
	}

	// ---------------------------------------------------------------- runner jobs in the job cache

	/** Runner calls are stored in the job cache like the real master does (`<master>_master`). */
	storeRunnerJob(jid: string, fun: string, funArgs: unknown[], user: string, data: Record<string, unknown>): void {
		if (!this.config.storeRunnerJobs) return;
		const id = `${this.config.masterId}_master`;
		this.storeJob({
			jid,
			kind: "runner",
			fun,
			arg: funArgs,
			tgt: id,
			tgtType: "list",
			user,
			minions: [],
			missing: [],
			returns: new Map([[id, { return: data, retcode: 0, success: data.success !== false }]]),
			pending: new Set(),
			createdMs: Date.now(),
			listeners: new Set(),
		});
	}

	// ---------------------------------------------------------------- job cache views (jobs runner)

	private jobInstance(job: Job | undefined, jid: string): Record<string, unknown> {
		if (!job) return { Error: "Cannot contact returner or no job with this jid", StartTime: jidToTime(jid) };
		const out: Record<string, unknown> = {
			Function: job.fun,
			Arguments: job.arg,
			Target: job.tgt,
			"Target-type": job.tgtType,
			User: job.user,
		};
		if (job.kind === "minion") out.Minions = job.minions;
		out.StartTime = jidToTime(job.jid);
		if (job.metadata) out.Metadata = job.metadata;
		return out;
	}

	private liveJob(jid: string): Job | undefined {
		const job = this.jobs.get(jid);
		if (job && job.createdMs < Date.now() - this.config.keepJobsSeconds * 1000) return undefined;
		return job;
	}

	/** `jobs.list_job`. */
	listJob(jid: string): Record<string, unknown> {
		const job = this.liveJob(jid);
		const result: Record<string, JobReturn> = {};
		if (job) for (const [id, r] of job.returns) result[id] = { ...r };
		return { jid, ...this.jobInstance(job, jid), Result: result };
	}

	/** `jobs.list_jobs` with the usual filters. */
	listJobs(filters: { searchFunction?: string[]; searchTarget?: string[]; searchMetadata?: Record<string, unknown> } = {}): Record<string, unknown> {
		const out: Record<string, unknown> = {};
		const cutoff = Date.now() - this.config.keepJobsSeconds * 1000;
		for (const job of this.jobs.values()) {
			if (job.createdMs < cutoff) continue;
			const inst = this.jobInstance(job, job.jid);
			delete inst.Minions;
			if (filters.searchFunction && !filters.searchFunction.some(p => globMatch(job.fun, p))) continue;
			// Salt's search_metadata: every key given must be in the job's metadata with that value.
			if (filters.searchMetadata && !Object.entries(filters.searchMetadata).every(([k, v]) => job.metadata?.[k] === v)) continue;
			if (filters.searchTarget) {
				const targets = Array.isArray(job.tgt) ? job.tgt.map(String) : [String(job.tgt)];
				if (!targets.some(t => filters.searchTarget!.some(p => globMatch(t, p)))) continue;
			}
			out[job.jid] = inst;
		}
		return out;
	}

	/** `jobs.lookup_jid`. */
	lookupJid(jid: string, opts: { missing?: boolean; returned?: boolean } = {}): unknown {
		const job = this.liveJob(jid);
		const ret: Record<string, unknown> = {};
		if (job && opts.returned !== false) for (const [id, r] of job.returns) ret[id] = r.return;
		if (job && opts.missing) for (const id of job.minions) if (!job.returns.has(id)) ret[id] = "Minion did not return";
		const first = job ? job.returns.values().next().value : undefined;
		if (first?.out) return { outputter: first.out, data: ret };
		return ret;
	}

	/** `jobs.active`: jobs still waiting for returns of connected minions. */
	activeJobs(): Record<string, unknown> {
		const out: Record<string, unknown> = {};
		for (const job of this.jobs.values()) {
			if (job.kind !== "minion" || job.pending.size === 0) continue;
			const inst = this.jobInstance(job, job.jid);
			delete inst.Minions;
			out[job.jid] = {
				...inst,
				Running: [...job.pending].map(id => ({ [id]: 1000 + (hashString(`${job.jid}/${id}`) % 60000) })),
				Returned: [...job.returns.keys()],
			};
		}
		return out;
	}

	get masterFingerprint(): string {
		return (this.masterFp ??= fingerprintFrom(new Prng(`${this.seed}/master.pub`).hex(32)));
	}
	private masterFp: string | undefined;

	setGrains(id: string, grains: Grains, replace = false): boolean {
		const m = this.fleet.get(id);
		if (!m) return false;
		m.grains = replace ? structuredClone(grains) : { ...m.grains, ...structuredClone(grains) };
		return true;
	}
}

function globMatch(s: string, pattern: string): boolean {
	return fnmatch(s, pattern);
}
