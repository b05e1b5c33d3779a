/**
 * The simulated Salt master: fleet, keys, presence, event bus, publishing jobs to minions, the job
 * cache, and the synchronous `local` wait logic (LocalClient.cmd). No HTTP here.
 */
import { type ExecResult, execute } from "./modules";
import { type Grains, type KeyState, type Minion, type MinionSpec, Fleet, baseLatency, makeMinion } from "./fleet";
import { FileServer, type Drift, type DriftBook, type StepFailure, slsName } from "./states";
import { type Nodegroups, Targeting } from "./targeting";
import {
	JidClock,
	fingerprintFrom,
	fnmatch,
	publicKeyOf,
	hashString,
	isJid,
	isPlainObject,
	isoStamp,
	jidToTime,
	Prng,
	pyJson,
} from "./util";

// ------------------------------------------------------------------ Salt exceptions → HTTP status

/** SaltInvocationError: 400 with the message on the CherryPy error page. */
export class SaltInvocationError extends Error {}
/** EauthAuthenticationError / AuthorizationError: 401. */
export class SaltAuthError extends Error {}
/** SaltDaemonNotRunning / SaltReqTimeoutError: 503. */
export class SaltMasterDown extends Error {}
/**
 * The master did not answer a client call in time (LocalClient's `connect_pub` times out, and the
 * SaltReqTimeoutError is wrapped in a SaltClientError): salt-api's generic JSON 500.
 */
export class MasterUnanswering extends Error {}

// ------------------------------------------------------------------ events

export interface SaltEvent {
	tag: string;
	data: Record<string, unknown>;
}

export class EventBus {
	private readonly subs = new Set<(e: SaltEvent) => void>();
	/** While this answers false (the master is down) there is no bus: events are dropped. */
	gate: () => boolean = () => true;
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
		if (!this.gate()) return ev;
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
	/** The master's own `saltutil.find_job` publications (kept out of the simulator's `jobs()` view). */
	internal?: boolean;
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
	/** The master's `loop_interval` in ms: each maintenance loop fires the presence events (0: no loop). */
	presenceIntervalMs: number;
	/** After a master start, the first loop (its `salt/presence/present` still empty) comes this much later. */
	restartPresentDelayMs: number;
	/**
	 * A master down at least this long finds its minions already reconnected at its first loop (they were retrying
	 * all along): that loop lists them (events_master_restart_3min.txt), with no `present: []` first.
	 */
	longOutageMs: number;
	/** While the master is down, client calls through salt-api fail (generic 500) after this long. */
	masterDownAnswerMs: number;
	/** While the master is down, /login, /token and GET /events wait this long for it (its ReqChannel's retries). */
	masterReqTimeoutMs: number;
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
	/** A function run by another on the minion (`test.try module=cmd.run`: cmd.run via test.try), not published itself. */
	via?: string;
	/** Scheduled to run later on the minion (`schedule.add function=cmd.run`), not run yet. */
	scheduled?: boolean;
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

/** A return that is due while the master cannot take it (down, or its minions not reconnected yet). */
interface Delivery {
	id: string;
	dueMs: number;
	result: ExecResult;
}

/** `_return` event data the way the master fires it: kwargs travel without `__kwarg__` in `fun_args`. */
export function funArgsOf(arg: unknown[]): unknown[] {
	return arg.map(a => {
		if (!isPlainObject(a) || a.__kwarg__ !== true) return a;
		const { __kwarg__: _drop, ...rest } = a;
		return rest;
	});
}

export class Master {
	readonly fleet = new Fleet();
	readonly targeting: Targeting;
	readonly files: FileServer;
	readonly events = new EventBus();
	readonly jobs = new Map<string, Job>();
	private readonly jids = new JidClock();
	private readonly timers = new Set<NodeJS.Timeout>();
	/** The maintenance loop (presence) and the reconnection of the minions after a master start. */
	private loopTimer: NodeJS.Timeout | null = null;
	private reconnectTimer: NodeJS.Timeout | null = null;
	/** `old_present` of the maintenance process: the connected set of its last loop. */
	private oldPresent = new Set<string>();
	/** Minions that must authenticate again (the master restarted with a new AES key). */
	private readonly reauth = new Set<string>();
	/** Returns due while the master could not take them: delivered once it can (the minions retry). */
	private held: { job: Job; item: Delivery }[] = [];
	private readonly runWaiters = new Set<(up: boolean) => void>();
	private readonly executionCounts = new Map<string, Map<string, number>>();
	private readonly executionLog: ExecutionRecord[] = [];
	private readonly patchFailures = new Map<string, { minions: Set<string> | "*"; failure: StepFailure }>();
	/** States a test made drift, by minion, then by `<sls>\0<state id>`. */
	private readonly drifts = new Map<string, Map<string, Drift>>();
	/** False while the master daemon is down (salt-api's calls fail, /login and /events wait). */
	running = true;
	/** False after a master start until the minions have reconnected to its publisher. */
	reconnected = true;
	/** Minions that reconnect only one loop after the first one of a master start that followed a long outage. */
	private readonly late = new Set<string>();
	/** Maintenance loops since the master started. */
	private loopsSinceStart = 0;
	/** When the master daemon stopped. */
	private downSinceMs = 0;
	/**
	 * Minions whose key was deleted: the process runs on (not connected, so lost at the next loop) and presents its
	 * key again when it starts next, which the master then keeps as pending (events_key_delete_reaccept.txt).
	 */
	private readonly keyless = new Map<string, Minion>();
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
		this.events.gate = () => this.running;
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
			loop_interval: Math.max(1, Math.round(this.config.presenceIntervalMs / 1000)),
			master_job_cache: "local_cache",
			minion_data_cache: true,
			file_roots: { base: ["/srv/salt"] },
			pillar_roots: { base: ["/srv/pillar"] },
			nodegroups: this.config.nodegroups,
			netapi_enable_clients: this.config.netapiEnableClients,
			external_auth: this.config.externalAuth,
			rest_cherrypy: { port: 8000, disable_ssl: true },
			saltversion: "3006.0",
		};
	}

	// ---------------------------------------------------------------- timers

	/** `<jid>/<minion>` of state runs whose data-cache refresh has not been fired yet. */
	private readonly refreshesDue = new Set<string>();

	private setTimer(fn: () => void, ms: number): NodeJS.Timeout {
		const t = setTimeout(() => {
			this.timers.delete(t);
			fn();
		}, ms);
		this.timers.add(t);
		return t;
	}

	/**
	 * (Re)start the maintenance loop: every `presenceIntervalMs`, the presence events of a master that has been
	 * running (the connected set of now is the baseline: the first loop announces no change).
	 */
	restartPresenceInterval(): void {
		this.oldPresent = new Set(this.connectedIds());
		this.scheduleLoop(this.config.presenceIntervalMs);
	}

	private clearLoop(): void {
		if (this.loopTimer) clearTimeout(this.loopTimer);
		if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
		this.loopTimer = this.reconnectTimer = null;
	}

	private scheduleLoop(firstMs: number): void {
		if (this.loopTimer) clearTimeout(this.loopTimer);
		this.loopTimer = null;
		if (this.stopped || this.config.presenceIntervalMs <= 0) return;
		this.loopTimer = setTimeout(
			() => {
				this.loopTimer = null;
				this.handlePresence();
				this.scheduleLoop(this.config.presenceIntervalMs);
			},
			Math.max(0, firstMs),
		);
		this.loopTimer.unref();
	}

	/**
	 * One maintenance loop's `handle_presence`: `salt/presence/change` {new, lost} when the connected set changed
	 * since the last loop, then `salt/presence/present` with the full list.
	 */
	handlePresence(): void {
		if (!this.running) return;
		// The minions that were late after a long outage have reconnected by the second loop.
		if (this.loopsSinceStart++ >= 1 && this.late.size) {
			this.late.clear();
			this.flushHeld();
		}
		if (!this.config.presenceEvents) return;
		const present = this.connectedIds();
		const now = new Set(present);
		const added = present.filter(id => !this.oldPresent.has(id));
		const lost = [...this.oldPresent].filter(id => !now.has(id)).sort();
		if (added.length || lost.length) this.events.fire("salt/presence/change", { new: added, lost });
		this.events.fire("salt/presence/present", { present });
		this.oldPresent = now;
	}

	/** The master daemon stops: no bus, no loop; salt-api's calls wait for it or fail. */
	stopMaster(): void {
		if (!this.running) return;
		this.running = false;
		this.downSinceMs = Date.now();
		this.clearLoop();
	}

	/**
	 * The master daemon starts: a new maintenance loop (its first loop `restartPresentDelayMs` later, before any
	 * minion has reconnected: `present: []`; the loop timer restarts here), a new AES key (every minion
	 * authenticates again at the next publication it receives). The minions reconnect right after that first loop.
	 * After an outage of `longOutageMs` or more they reconnect at once instead (that first loop lists them), but for
	 * `late` ones, which reconnect just before the second loop (events_master_restart_3min.txt).
	 */
	startMaster(opts: { late?: string[] } = {}): void {
		if (this.running || this.stopped) return;
		const long = Date.now() - this.downSinceMs >= this.config.longOutageMs;
		this.running = true;
		this.reconnected = long;
		this.late.clear();
		if (long) for (const id of opts.late ?? []) this.late.add(id);
		this.loopsSinceStart = 0;
		this.oldPresent = new Set();
		for (const m of this.fleet.all()) if (m.key === "accepted") this.reauth.add(m.id);
		this.clearLoop();
		for (const fn of [...this.runWaiters]) fn(true);
		if (long) this.flushHeld();
		this.reconnectTimer = setTimeout(
			() => {
				this.reconnectTimer = null;
				this.handlePresence();
				this.reconnected = true;
				this.flushHeld();
				this.scheduleLoop(this.config.presenceIntervalMs);
			},
			Math.max(0, this.config.restartPresentDelayMs),
		);
		this.reconnectTimer.unref();
	}

	/** Resolves true as soon as the master runs (at once if it does), false after `ms`. */
	whenRunning(ms: number): Promise<boolean> {
		if (this.running) return Promise.resolve(true);
		if (this.stopped) return Promise.resolve(false);
		return new Promise(resolve => {
			const done = (up: boolean) => {
				this.runWaiters.delete(done);
				clearTimeout(timer);
				resolve(up);
			};
			const timer = setTimeout(() => done(false), Math.max(0, ms));
			this.runWaiters.add(done);
		});
	}

	shutdown(): void {
		this.stopped = true;
		for (const t of this.timers) clearTimeout(t);
		this.timers.clear();
		this.clearLoop();
		for (const fn of [...this.runWaiters]) fn(false);
		this.held = [];
		for (const job of this.jobs.values()) {
			job.pending.clear();
			this.notify(job);
		}
	}

	// ---------------------------------------------------------------- minions, keys and presence

	addMinion(spec: MinionSpec, opts: { fireEvents?: boolean } = {}): Minion {
		this.keyless.delete(spec.id);
		const m = makeMinion(spec, this.seed, this.referenceMs);
		m.latencyMs = baseLatency(m.id, this.config.latencyMs[0], this.config.latencyMs[1]);
		this.fleet.add(m);
		if (opts.fireEvents) {
			this.fireAuth(
				m,
				m.key === "accepted" ? "accept" : m.key === "pending" ? "pend" : m.key === "rejected" ? "reject" : "denied",
			);
			if (m.key === "accepted" && m.up) this.fireStart(m);
		}
		return m;
	}

	/** A stand-in PEM public key for a minion (its bytes derive from the fingerprint). */
	publicKeyPem(id: string, fingerprint?: string): string {
		const m = this.fleet.get(id);
		return m ? publicKeyOf(fingerprint ?? m.fingerprint) : "";
	}

	/**
	 * `salt/auth` as the master fires it (salt/channel/server.py): accept and pend `{result, act, id, pub}`, a
	 * key that does not match the accepted one `{result: false, id, act: "denied", pub}`, a rejected key
	 * `{result: false, id, pub}`; `pub` is the key the minion presented.
	 */
	fireAuth(m: Minion, act: "accept" | "pend" | "reject" | "denied" | "rejected", fingerprint?: string): void {
		const pub = publicKeyOf(fingerprint ?? m.presentedFingerprint ?? m.fingerprint);
		if (act === "denied") this.events.fire("salt/auth", { result: false, id: m.id, act: "denied", pub });
		else if (act === "rejected") this.events.fire("salt/auth", { result: false, id: m.id, pub });
		else this.events.fire("salt/auth", { result: act !== "reject", act, id: m.id, pub });
	}

	/** `salt/minion/<id>/start` (Salt 3006 no longer fires the legacy `minion_start` by default). */
	fireStart(m: Minion): void {
		const text = `Minion ${m.id} started at ${asctime(Date.now())}`;
		this.events.fire(`salt/minion/${m.id}/start`, {
			id: m.id,
			cmd: "_minion_event",
			pretag: null,
			data: text,
			tag: `salt/minion/${m.id}/start`,
		});
	}

	/** An event a running minion sends to the master (`_fire_master`: the load without its `tok`). */
	fireMinionEvent(id: string, tag: string, data: unknown): void {
		this.events.fire(tag, { id, cmd: "_minion_event", pretag: null, data, tag });
	}

	/**
	 * A load minion `sender` sent over a request channel of its own (`event.fire_master` with `preload`), handled
	 * as Salt 3006.0's master does (test/simulators/captures/salt-3006.0-2026-11-29-forged-events):
	 * - `_minion_event` (the token checked against `id`, then dropped): each of `events` fired as it is, with no
	 *   wrapper (`masterapi._minion_event`), else the load itself on its `tag`;
	 * - `_return`: NOT checked against the sender (3006.0's `AESFuncs._return`): fired as the return of the `id` it
	 *   names, `tok` included (bytes: salt-api cannot encode it and cuts its event streams), and kept by the job
	 *   cache when that minion has not returned yet (the cache keeps a minion's first return).
	 */
	minionLoad(sender: string, load: Record<string, unknown>): void {
		if (load.cmd === "_minion_event") {
			if (load.id !== sender) return;
			const { tok: _checked, ...rest } = load;
			if (Array.isArray(rest.events)) {
				for (const ev of rest.events) {
					if (!isPlainObject(ev) || typeof ev.tag !== "string") continue;
					const data = "data" in ev ? ev.data : ev;
					if (isPlainObject(data)) this.events.fire(ev.tag, { ...data });
				}
			} else if (typeof rest.tag === "string" && "data" in rest) this.events.fire(rest.tag, rest);
			return;
		}
		if (load.cmd !== "_return" || typeof load.id !== "string" || typeof load.jid !== "string" || !("return" in load))
			return;
		this.events.fire(`salt/job/${load.jid}/ret/${load.id}`, { ...load });
		const job = this.jobs.get(load.jid);
		if (job && !job.returns.has(load.id))
			job.returns.set(load.id, {
				return: load.return,
				retcode: Number.isInteger(load.retcode) ? (load.retcode as number) : 0,
				success: load.success !== false,
			});
	}

	/**
	 * `salt-call event.send <tag> '<json>'` on a minion: the salt-call authenticates (`salt/auth`), compiles its
	 * pillar (`minion/refresh/<id>`), sends the event (its data carries salt-call's `__pub_*` keys), and returns
	 * its own job to the master (`salt/job/<jid>/ret/<id>`, a jid of the master's: salt-call sends jid "req").
	 */
	saltCallEvent(id: string, tag: string, data: unknown): void {
		const m = this.fleet.get(id);
		if (m) {
			if (m.key !== "accepted") {
				this.fireAuth(m, m.key === "pending" ? "pend" : m.key === "rejected" ? "rejected" : "denied");
				return;
			}
			this.fireAuth(m, "accept");
			this.reauth.delete(id);
		}
		this.events.fire(`minion/refresh/${id}`, { "Minion data cache refresh": id });
		const pubJid = this.newJid();
		const payload: Record<string, unknown> = {
			__pub_fun: "event.send",
			__pub_pid: 1000 + (hashString(`${id}/${pubJid}`) % 60000),
			__pub_jid: pubJid,
			__pub_tgt: "salt-call",
		};
		if (isPlainObject(data)) Object.assign(payload, data);
		this.events.fire(tag, { id, tag, data: payload, cmd: "_minion_event" });
		const cliArgs = [tag, typeof data === "string" ? data : pyJson(data ?? {})];
		const jid = this.newJid();
		this.events.fire(`salt/job/${jid}/ret/${id}`, {
			cmd: "_return",
			id,
			jid,
			return: true,
			retcode: 0,
			fun: "event.send",
			fun_args: cliArgs,
			arg: [...cliArgs],
			tgt_type: "glob",
			tgt: id,
		});
	}

	/** Change a key's state; fires `salt/key` (accept/reject/pend/delete) or `salt/auth` (denied). */
	setKeyState(id: string, state: KeyState | "deleted"): boolean {
		const m = this.fleet.get(id);
		if (!m) return false;
		if (state === "deleted") {
			this.fleet.remove(id);
			this.keyless.set(id, m);
			this.reauth.delete(id);
			this.events.fire("salt/key", { result: true, act: "delete", id });
			return true;
		}
		if (m.key === state) return true;
		const was = m.key;
		m.key = state;
		this.fleet.invalidate();
		if (state === "denied") this.fireAuth(m, "denied");
		else
			this.events.fire("salt/key", {
				result: true,
				act: state === "accepted" ? "accept" : state === "rejected" ? "reject" : "pend",
				id,
			});
		// A minion waiting for acceptance retries its auth: once accepted it authenticates and starts.
		if (state === "accepted" && was === "pending" && m.up && this.running && this.keyMatches(m)) {
			this.fireAuth(m, "accept");
			this.fireStart(m);
		}
		return true;
	}

	/** `key.accept … include_denied`: the denied (new) key replaces the accepted one. */
	acceptDeniedKey(id: string): boolean {
		const m = this.fleet.get(id);
		if (!m || m.deniedFingerprint === undefined) return false;
		m.fingerprint = m.deniedFingerprint;
		m.deniedFingerprint = undefined;
		if (m.presentedFingerprint === m.fingerprint) m.presentedFingerprint = undefined;
		this.fleet.invalidate();
		this.events.fire("salt/key", { result: true, act: "accept", id });
		return true;
	}

	/** Drop the denied second key (`key.reject`/`key.delete` of it, or restoring the old key on the minion). */
	dropDeniedKey(id: string): boolean {
		const m = this.fleet.get(id);
		if (!m || m.deniedFingerprint === undefined) return false;
		m.deniedFingerprint = undefined;
		this.fleet.invalidate();
		return true;
	}

	private keyMatches(m: Minion): boolean {
		return m.presentedFingerprint === undefined || m.presentedFingerprint === m.fingerprint;
	}

	/**
	 * A minion process starts (salt/auth, then salt/minion/<id>/start, at once) or stops (nothing at once: the
	 * master's next maintenance loop reports it lost). A minion holding a key other than the accepted one is
	 * refused (salt/auth denied) and exits again.
	 */
	setUp(id: string, up: boolean): boolean {
		const gone = this.keyless.get(id);
		if (gone) {
			// A minion whose key was deleted: stopped, nothing; started, it presents its key again (pending).
			if (gone.up === up) return true;
			gone.up = up;
			if (!up) return true;
			this.keyless.delete(id);
			gone.key = "pending";
			this.fleet.add(gone);
			this.fireAuth(gone, "pend");
			return true;
		}
		const m = this.fleet.get(id);
		if (!m) return false;
		if (m.up === up) return true;
		if (!up) {
			m.up = false;
			return true;
		}
		if (m.key === "accepted" && !this.keyMatches(m)) {
			m.deniedFingerprint = m.presentedFingerprint;
			this.fleet.invalidate();
			this.fireAuth(m, "denied");
			return true;
		}
		m.up = true;
		if (m.key !== "accepted") return true;
		this.reauth.delete(id);
		this.fireAuth(m, "accept");
		this.fireStart(m);
		return true;
	}

	/**
	 * The minion presents a new key: the master keeps the old, still-trusted key under `minions`, writes the
	 * new one under `minions_denied`, fires salt/auth (denied), and the minion process exits.
	 */
	presentNewKey(id: string, fingerprint: string): void {
		const m = this.fleet.get(id);
		if (!m) throw new Error(`no minion ${id}`);
		if (m.key !== "accepted") throw new Error(`minion ${id}: its key is ${m.key}, not accepted`);
		m.presentedFingerprint = fingerprint;
		m.deniedFingerprint = fingerprint;
		this.fleet.invalidate();
		this.fireAuth(m, "denied", fingerprint);
		m.up = false;
	}

	/** The denied key is removed and the minion starts again with its old key (auth accepted, start event). */
	restoreOldKey(id: string): void {
		const m = this.fleet.get(id);
		if (!m) throw new Error(`no minion ${id}`);
		m.deniedFingerprint = undefined;
		m.presentedFingerprint = undefined;
		this.fleet.invalidate();
		m.up = false;
		this.setUp(id, true);
	}

	/** Run one maintenance loop's presence handling now. */
	firePresent(): void {
		this.handlePresence();
	}

	/**
	 * What the master sees connected to its publisher now (`CkMinions.connected_ids`): accepted minions that
	 * are up, none while the master is down or before its minions reconnected after a start.
	 */
	connectedIds(): string[] {
		if (!this.running || !this.reconnected) return [];
		return this.fleet.acceptedIds().filter(id => this.fleet.get(id)!.up && !this.late.has(id));
	}

	// ---------------------------------------------------------------- patch failures and executions

	failPatch(patch: string, minions: string[] | "*", failure: StepFailure = {}): void {
		this.patchFailures.set(slsName(patch), { minions: minions === "*" ? "*" : new Set(minions), failure });
	}

	clearPatchFailures(patch?: string): void {
		if (patch === undefined) this.patchFailures.clear();
		else this.patchFailures.delete(slsName(patch));
	}

	/** A state of a minion drifts from its desired state (test=True predicts `changes`; a real run makes them, and it is gone). */
	setDrift(minionId: string, sls: string, stateId: string, drift: Drift): void {
		let book = this.drifts.get(minionId);
		if (!book) this.drifts.set(minionId, (book = new Map()));
		book.set(`${sls}\0${stateId}`, drift);
	}

	/** Drops the drifts of a minion (of every minion without one). */
	clearDrift(minionId?: string): void {
		if (minionId === undefined) this.drifts.clear();
		else this.drifts.delete(minionId);
	}

	/** The drifted states left on a minion, as `<sls>/<state id>`. */
	driftsOf(minionId: string): string[] {
		return [...(this.drifts.get(minionId)?.keys() ?? [])].map(k => k.replace("\0", "/")).sort();
	}

	private driftBook(minionId: string): DriftBook {
		return {
			get: (sls, id) => this.drifts.get(minionId)?.get(`${sls}\0${id}`),
			fix: (sls, id) => void this.drifts.get(minionId)?.delete(`${sls}\0${id}`),
		};
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
	 * Publish a job (`LocalClient.run_job` → master `publish`): resolve the target, store the job, fire
	 * `<jid>` {minions} and `salt/job/<jid>/new`, execute on every connected minion and schedule each return.
	 * Returns null when no minion matched (the API then answers `{}`).
	 */
	publish(load: PublishLoad, opts: { internal?: boolean } = {}): PubData | null {
		const { minions, missing } = this.targeting.check(load.tgt, load.tgtType);
		if (minions.length === 0) return null;
		// LocalClient._prep_pub: a nodegroup goes out as the compound expression it stands for.
		if (load.tgtType === "nodegroup")
			load = { ...load, tgt: this.targeting.nodegroupComp(String(load.tgt)), tgtType: "compound" };
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
			...(opts.internal ? { internal: true } : {}),
		};
		this.storeJob(job);
		this.events.fire(jid, { minions: [...minions] });
		this.events.fire(`salt/job/${jid}/new`, {
			jid,
			tgt_type: load.tgtType,
			tgt: load.tgt,
			user: load.user,
			fun: load.fun,
			arg: load.arg,
			minions,
			missing,
		});
		// Minions that have not reconnected since a master start miss the publication.
		if (!this.running || !this.reconnected) return { jid, minions, missing };
		// Every connected minion receives every publication: after a master restart each one fails to decrypt it
		// with the old AES key and authenticates again first.
		if (this.reauth.size) {
			for (const id of [...this.reauth]) {
				const m = this.fleet.get(id);
				if (m?.key !== "accepted") {
					this.reauth.delete(id);
					continue;
				}
				if (!m.up || this.late.has(id)) continue;
				this.reauth.delete(id);
				this.fireAuth(m, "accept");
			}
		}
		const pub = {
			fun: load.fun,
			arg: funArgsOf(load.arg),
			tgt: load.tgt,
			jid,
			ret: "",
			tgt_type: load.tgtType,
			user: load.user,
		};
		const pubKeys: Record<string, unknown> = {};
		for (const [k, v] of Object.entries(pub)) pubKeys[`__pub_${k}`] = v;
		const deliveries: Delivery[] = [];
		for (const id of minions) {
			const m = this.fleet.get(id)!;
			if (!m.up || !this.keyMatches(m) || this.late.has(id)) continue;
			this.recordExecution(jid, id, load.fun, load.arg);
			const result =
				load.fun === "saltutil.find_job"
					? { ret: this.findJob(id, String(load.arg[0] ?? "")), retcode: 0 }
					: execute({
							minion: m,
							jid,
							fun: load.fun,
							arg: load.arg,
							files: this.files,
							patchFailure: this.patchFailureFor(id),
							drifts: this.driftBook(id),
							recordInner: (fun, arg, via, scheduled) => {
								this.executionLog.push({
									jid,
									id,
									fun,
									arg,
									atMs: Date.now(),
									via,
									...(scheduled ? { scheduled } : {}),
								});
							},
							fireMinionEvent: (tag, data) => this.fireMinionEvent(id, tag, data),
							sendLoad: l => this.minionLoad(id, l),
							pub: pubKeys,
							nowMs,
						});
			if (m.neverReturns) continue;
			const latency = load.fun === "saltutil.find_job" ? m.latencyMs : (m.delayMs ?? m.latencyMs);
			// A state run compiles the minion's pillar first: the master refreshes its data cache.
			// Always ahead of the return, as on a real master (a timer alone could fire after it under load).
			if (/^state\.(apply|sls|sls_id|highstate|single|top)$/.test(load.fun)) {
				const key = `${jid}/${id}`;
				this.refreshesDue.add(key);
				this.setTimer(() => this.fireRefresh(key, id), Math.floor(latency / 2));
			}
			job.pending.add(id);
			deliveries.push({ id, dueMs: nowMs + latency, result });
		}
		this.scheduleReturns(job, deliveries);
		return { jid, minions, missing };
	}

	/** `saltutil.find_job` on a minion: the job's data while the minion still runs it, else {}. */
	private findJob(id: string, jid: string): Record<string, unknown> {
		const job = this.jobs.get(jid);
		if (!job?.pending.has(id)) return {};
		return {
			fun: job.fun,
			arg: job.arg,
			tgt: job.tgt,
			jid: job.jid,
			ret: "",
			tgt_type: job.tgtType,
			user: job.user,
			pid: 1000 + (hashString(`${jid}/${id}`) % 60000),
		};
	}

	private scheduleReturns(job: Job, items: Delivery[]): void {
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

	private flushHeld(): void {
		const held = this.held;
		this.held = [];
		for (const { job, item } of held) this.deliver(job, item);
	}

	/** The master's data-cache refresh a state run causes, once (refreshesDue: not fired yet). */
	private fireRefresh(key: string, id: string): void {
		if (this.refreshesDue.delete(key)) this.events.fire(`minion/refresh/${id}`, { "Minion data cache refresh": id });
	}

	private deliver(job: Job, item: Delivery): void {
		if (!job.pending.has(item.id)) return;
		// The master is down (or its minions have not reconnected): the minion keeps its return and sends it later.
		if (!this.running || !this.reconnected || this.late.has(item.id)) {
			this.held.push({ job, item });
			return;
		}
		this.fireRefresh(`${job.jid}/${item.id}`, item.id);
		job.pending.delete(item.id);
		const m = this.fleet.get(item.id);
		// A minion that went down (or lost its key) before answering never returns.
		if (!m?.up || m.key !== "accepted") {
			this.notify(job);
			return;
		}
		if (this.reauth.delete(item.id)) this.fireAuth(m, "accept");
		const ret: JobReturn = {
			return: item.result.ret,
			retcode: item.result.retcode,
			success: item.result.retcode === 0,
		};
		if (item.result.out) ret.out = item.result.out;
		// The job cache keeps a minion's first return (a forged one may have come first: minionLoad).
		if (!job.returns.has(item.id)) job.returns.set(item.id, ret);
		const data: Record<string, unknown> = {
			cmd: "_return",
			id: item.id,
			success: ret.success,
			return: ret.return,
			retcode: ret.retcode,
			jid: job.jid,
			fun: job.fun,
			fun_args: funArgsOf(job.arg),
		};
		if (ret.out) data.out = ret.out;
		if (job.metadata) data.metadata = job.metadata;
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
	 * `LocalClient.get_iter_returns`: wait for the job's returns. After `timeout` the master publishes
	 * `saltutil.find_job` to the minions that have not returned: a minion still running the job keeps the wait
	 * going (find_job again every `gather_job_timeout`, or every `timeout` when that is 0); when none is, the
	 * wait ends `gather_job_timeout` later. So a down minion costs `timeout + gather_job_timeout`.
	 */
	private async gather(job: Job, timeoutS: number, gjtS: number): Promise<void> {
		const timeoutMs = timeoutS * 1000;
		const gjtMs = gjtS * 1000;
		let checkAt = job.createdMs + timeoutMs;
		let giveUpAt = Infinity;
		for (;;) {
			if (this.stopped || job.minions.every(id => job.returns.has(id))) return;
			const now = Date.now();
			if (now >= giveUpAt) return;
			if (now >= checkAt) {
				const missing = job.minions.filter(id => !job.returns.has(id));
				if (this.running)
					this.publish(
						{ tgt: missing, tgtType: "list", fun: "saltutil.find_job", arg: [job.jid], user: job.user },
						{ internal: true },
					);
				const busy = missing.some(
					id => job.pending.has(id) && this.running && this.reconnected && !this.late.has(id) && this.fleet.get(id)?.up,
				);
				if (busy) checkAt = now + (gjtMs > 0 ? gjtMs : Math.max(timeoutMs, 1000));
				else {
					checkAt = Infinity;
					giveUpAt = now + gjtMs;
				}
				continue;
			}
			await this.waitForChange(job, Math.min(checkAt, giveUpAt) - now);
		}
	}

	/**
	 * `LocalClient.cmd`: publish, then wait (see `gather`). Minions that did not return are `false`; with
	 * `full_return` each value is `{ret, [out], retcode, jid}`.
	 */
	async localCmd(
		load: PublishLoad,
		opts: { timeout?: number; gatherJobTimeout?: number; fullReturn?: boolean },
	): Promise<Record<string, unknown>> {
		const pub = this.publish(load);
		if (!pub) return {};
		const job = this.jobs.get(pub.jid)!;
		await this.gather(job, opts.timeout ?? this.config.timeout, opts.gatherJobTimeout ?? this.config.gatherJobTimeout);
		const out: Record<string, unknown> = {};
		for (const [id, r] of job.returns) {
			if (opts.fullReturn) {
				const full: Record<string, unknown> = { ret: r.return };
				if (r.out) full.out = r.out;
				full.retcode = r.retcode;
				full.jid = job.jid;
				out[id] = full;
			} else out[id] = r.return;
		}
		const noResponse =
			"Minion did not return. [No response]\nThe minions may not have all finished running and any remaining minions will return upon completion. " +
			`To look up the return data for this job later, run the following command:\n\nsalt-run jobs.lookup_jid ${job.jid}`;
		for (const id of job.missing)
			out[id] = opts.fullReturn ? { out: "no_return", ret: noResponse, retcode: 1 } : noResponse;
		for (const id of job.minions) if (!(id in out)) out[id] = false;
		return out;
	}

	/**
	 * The manage runner's `_ping` (and the `salt` command's batch gather): publish `test.ping` (as the master's
	 * user, root, by default) to the target and wait like
	 * `get_cli_event_returns`: 0.1 s when all answer, `timeout + gather_job_timeout` with one down.
	 */
	async managePing(
		tgt: unknown,
		tgtType: string,
		timeoutS?: number,
		gjtS?: number,
		user = "root",
	): Promise<{ up: string[]; down: string[] }> {
		const pub = this.publish({ tgt, tgtType, fun: "test.ping", arg: [], user });
		if (!pub) return { up: [], down: [] };
		const job = this.jobs.get(pub.jid)!;
		await this.gather(job, timeoutS || this.config.timeout, gjtS || this.config.gatherJobTimeout);
		const up = job.minions.filter(id => job.returns.has(id)).sort();
		const down = job.minions.filter(id => !job.returns.has(id)).sort();
		return { up, down };
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
		if (job.metadata) out.Metadata = job.metadata;
		if (job.kind === "minion") out.Minions = [...job.minions].sort();
		out.StartTime = jidToTime(job.jid);
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
	listJobs(
		filters: { searchFunction?: string[]; searchTarget?: string[]; searchMetadata?: Record<string, unknown> } = {},
	): Record<string, unknown> {
		const out: Record<string, unknown> = {};
		const cutoff = Date.now() - this.config.keepJobsSeconds * 1000;
		for (const job of this.jobs.values()) {
			if (job.createdMs < cutoff) continue;
			const inst = this.jobInstance(job, job.jid);
			delete inst.Minions;
			if (filters.searchFunction && !filters.searchFunction.some(p => globMatch(job.fun, p))) continue;
			// Salt's search_metadata: every key given must be in the job's metadata with that value.
			if (filters.searchMetadata && !Object.entries(filters.searchMetadata).every(([k, v]) => job.metadata?.[k] === v))
				continue;
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

	/** `master.pem`'s fingerprint (key.finger lists both of the master's keys). */
	get masterPemFingerprint(): string {
		return (this.masterPemFp ??= fingerprintFrom(new Prng(`${this.seed}/master.pem`).hex(32)));
	}
	private masterPemFp: string | undefined;

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
