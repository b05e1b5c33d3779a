/**
 * A salt-api (rest_cherrypy) simulator for fleet-ctl's tests, demos and benchmarks.
 *
 * It speaks the wire protocol of `../shared/reference/protocols.md` Part A over node:http: login
 * with eauth and sessions, lowstates in JSON/YAML/form/text, the local, local_async, runner and
 * wheel clients (plus local_batch, local_subset, runner_async, wheel_async), jobs with 20-digit
 * jids and delayed returns, /minions, /jobs, /keys, /run, /token, /hook and the /events SSE stream.
 * Behind it is a simulated master with many minions (deterministic grains and keys), a job cache
 * and a file server holding patch state files.
 *
 * Tests drive scenarios through methods (not HTTP): minions up/down, key states and fingerprints,
 * grains, slow or silent minions, failing patches, injected HTTP failures and malformed responses,
 * salt-api or the master going away and coming back, execution counters for exactly-once checks.
 *
 * Custom event for VNC: a host that gets a VNC connection sends, on the minion,
 *   salt-call event.send ctl/vnc/connect '{"hostname": "<host>", "status": "connected"}'
 * which reaches the master bus (and /events) with tag `ctl/vnc/connect` and data
 *   {"id": "<minion id>", "tag": "ctl/vnc/connect", "data": {"__pub_fun": "event.send", "__pub_pid": …,
 *    "__pub_jid": "…", "__pub_tgt": "salt-call", "hostname": "<host>", "status": "connected"},
 *    "cmd": "_minion_event", "_stamp": "..."}
 * with the salt-call's own salt/auth, minion/refresh/<id> and return events around it (as
 * ../shared/reference/salt-3006/events5.txt shows). `vncConnect(id, status)` does exactly that.
 *
 * Standalone: `npm run sim:salt` (env SIM_PORT, SIM_HOST, SIM_MINIONS, SIM_IDS, SIM_USER, SIM_PASSWORD,
 * SIM_SEED, SIM_PERMS, SIM_LOOP_MS, SIM_RESTART_PRESENT_DELAY_MS, SIM_MASTER_DOWN_MS,
 * SIM_MASTER_REQ_TIMEOUT_MS, SIM_TIMEOUT, SIM_GATHER_JOB_TIMEOUT, SIM_LATENCY_MS, SIM_CONTROL=stdin,
 * SIM_CHURN=1, SIM_CHURN_MS; see README.md).
 */
import { createInterface } from "node:readline";
import { runStandalone } from "./standalone";
import { type Perm, Auth, DEFAULT_PERMS, type UserSpec } from "./salt/auth";
import { baseLatency, generateIds, type Grains, type KeyState, type MinionSpec } from "./salt/fleet";
import { type MalformKind, type RequestFilter, type RequestRecord, SaltApiServer } from "./salt/http";
import { type ExecutionRecord, type Job, Master, type MasterConfig, type SaltEvent } from "./salt/master";
import { Netapi } from "./salt/netapi";
import { DEFAULT_FILES, type StepFailure } from "./salt/states";
import type { Nodegroups } from "./salt/targeting";
import { Prng, keyPair, randomHex } from "./salt/util";

export type {
	KeyState,
	Grains,
	MinionSpec,
	SaltEvent,
	StepFailure,
	MalformKind,
	RequestFilter,
	RequestRecord,
	Nodegroups,
	Perm,
	UserSpec,
};

export interface SaltApiSimulatorOptions {
	/** Number of generated minions (default 50). */
	minions?: number;
	/**
	 * Explicit minion ids instead of generated ones (e.g. the captured reference fleet `web-01`, `web-02`,
	 * `db-01`): every key accepted, every minion up, no other key state. `minions`, `downFraction` and `keyMix`
	 * are then ignored.
	 */
	ids?: string[];
	/** Seed for ids, grains, fingerprints, key states and presence (default "fleet-ctl"). */
	seed?: string;
	/** eauth credentials of the API user (default saltapi / saltapi, eauth pam). */
	username?: string;
	password?: string;
	eauth?: string;
	/** That user's external_auth ACL (default [".*", "@runner", "@wheel", "@jobs"]). */
	perms?: Perm[];
	/** More users. */
	users?: UserSpec[];
	/** netapi_enable_clients (default local, local_async, runner, wheel). */
	netapiEnableClients?: string[];
	nodegroups?: Nodegroups;
	/** Master `timeout` in seconds for the `local` client (default 5). */
	timeout?: number;
	/** Master `gather_job_timeout` in seconds (default 10). */
	gatherJobTimeout?: number;
	/** Lifetime of eauth tokens in seconds (`token_expire`, default 43200). */
	tokenExpire?: number;
	/** Range of minion return latencies in ms (default [2, 40]). */
	latencyMs?: [number, number];
	keepJobsSeconds?: number;
	/** Bound on the job cache size (default 20000 jobs). */
	maxJobs?: number;
	/**
	 * presence_events (default true) and the master's `loop_interval` (default 60000 ms, 0 = no loop): each loop
	 * fires `salt/presence/change` {new, lost} when the connected set changed since the last loop, then
	 * `salt/presence/present` with the full list. A minion going down or up is not announced before that loop
	 * (only a minion start is, at once, by `salt/minion/<id>/start`).
	 */
	presenceEvents?: boolean;
	presenceIntervalMs?: number;
	/** After a master start, its first loop (`present: []`, no minion reconnected yet) comes this late (default 3000 ms). */
	restartPresentDelayMs?: number;
	/**
	 * A master down at least this long (default 60000 ms) finds its minions already reconnected at its first loop:
	 * that loop's `change`/`present` list them, with no `present: []` first (events_master_restart_3min.txt).
	 */
	longOutageMs?: number;
	/** While the master is down, salt-api answers `local` calls 500 after this long (default 5000 ms), `local_async` after three times as long; runner and wheel calls wait up to masterReqTimeoutMs. */
	masterDownAnswerMs?: number;
	/** While the master is down, /login, /token and GET /events wait this long for it (default 180000 ms: 3 × 60 s). */
	masterReqTimeoutMs?: number;
	/** Store runner calls in the job cache like the master does (default true). */
	storeRunnerJobs?: boolean;
	/** File server contents (default: a top file, common.sls and two patches under patches/). */
	files?: Record<string, string>;
	/** Share of accepted minions that start down (default 0.06). */
	downFraction?: number;
	/** Shares of keys that start pending, rejected, denied (defaults 0.04, 0.01, 0.01; at least one each when minions ≥ 4). */
	keyMix?: { pending?: number; rejected?: number; denied?: number };
	/** Reference time for generated grain dates (default: start of the current UTC day). */
	referenceTime?: number | Date;
	/** Listen address (default 127.0.0.1). */
	host?: string;
}

export interface MinionView {
	id: string;
	key: KeyState;
	up: boolean;
	fingerprint: string;
	grains: Grains;
	delayMs: number | null;
	neverReturns: boolean;
	/** A second key under `minions_denied` (a minion that presented a new key), or null. */
	deniedFingerprint: string | null;
}

export interface JobView {
	jid: string;
	fun: string;
	arg: unknown[];
	tgt: unknown;
	tgtType: string;
	user: string;
	minions: string[];
	missing: string[];
	returned: string[];
	pending: string[];
	returns: Record<string, unknown>;
}

export class SaltApiSimulator {
	readonly master: Master;
	readonly auth: Auth;
	private readonly server: SaltApiServer;
	private readonly host: string;
	readonly username: string;
	readonly password: string;
	readonly eauth: string;
	private started = false;

	constructor(opts: SaltApiSimulatorOptions = {}) {
		const seed = opts.seed ?? "fleet-ctl";
		const ref =
			opts.referenceTime instanceof Date
				? opts.referenceTime.getTime()
				: (opts.referenceTime ?? Math.floor(Date.now() / 86_400_000) * 86_400_000);
		const config: MasterConfig = {
			masterId: "salt",
			timeout: opts.timeout ?? 5,
			gatherJobTimeout: opts.gatherJobTimeout ?? 10,
			keepJobsSeconds: opts.keepJobsSeconds ?? 86_400,
			maxJobs: opts.maxJobs ?? 20_000,
			tokenExpire: opts.tokenExpire ?? 43_200,
			netapiEnableClients: opts.netapiEnableClients ?? ["local", "local_async", "runner", "wheel"],
			nodegroups: opts.nodegroups ?? {
				web: "G@roles:web",
				databases: "E@^db-\\d+\\.",
				"site-a": "*.site-a.example",
				"gpu-or-build": ["G@roles:gpu", "or", "G@roles:build"],
			},
			presenceEvents: opts.presenceEvents ?? true,
			presenceIntervalMs: opts.presenceIntervalMs ?? 60_000,
			restartPresentDelayMs: opts.restartPresentDelayMs ?? 3000,
			longOutageMs: opts.longOutageMs ?? 60_000,
			masterDownAnswerMs: opts.masterDownAnswerMs ?? 5000,
			masterReqTimeoutMs: opts.masterReqTimeoutMs ?? 180_000,
			latencyMs: opts.latencyMs ?? [2, 40],
			storeRunnerJobs: opts.storeRunnerJobs ?? true,
			externalAuth: {},
		};
		this.master = new Master(config, { seed, referenceMs: ref, files: opts.files ?? DEFAULT_FILES });
		this.username = opts.username ?? "saltapi";
		this.password = opts.password ?? "saltapi";
		this.eauth = opts.eauth ?? "pam";
		const users: UserSpec[] = [
			{ username: this.username, password: this.password, eauth: [this.eauth], perms: opts.perms },
			...(opts.users ?? []),
		];
		this.auth = new Auth(users, () => this.master.config.tokenExpire);
		for (const u of users)
			for (const e of u.eauth ?? ["pam"]) (config.externalAuth[e] ??= {})[u.username] = [...(u.perms ?? DEFAULT_PERMS)];
		this.server = new SaltApiServer(this.master, this.auth, new Netapi(this.master, this.auth));
		this.host = opts.host ?? "127.0.0.1";
		if (opts.ids) {
			if (new Set(opts.ids).size !== opts.ids.length) throw new Error("ids: duplicate minion ids");
			for (const id of opts.ids) this.master.addMinion({ id, key: "accepted", up: true });
		} else this.populate(opts.minions ?? 50, seed, opts);
		// The master has been running: its next maintenance loop compares with the fleet as it is now.
		this.master.restartPresenceInterval();
	}

	private populate(count: number, seed: string, opts: SaltApiSimulatorOptions): void {
		const ids = generateIds(count);
		const prng = new Prng(`${seed}/population`);
		const order = ids.map((_, i) => i);
		for (let i = order.length - 1; i > 0; i--) {
			const j = Math.floor(prng.next() * (i + 1));
			[order[i], order[j]] = [order[j], order[i]];
		}
		const mix = { pending: 0.04, rejected: 0.01, denied: 0.01, ...opts.keyMix };
		const atLeast = count >= 4 ? 1 : 0;
		const counts: [KeyState, number][] = [
			["pending", Math.max(atLeast, Math.round(count * mix.pending))],
			["rejected", Math.max(atLeast, Math.round(count * mix.rejected))],
			["denied", Math.max(atLeast, Math.round(count * mix.denied))],
		];
		const keyOf = new Map<number, KeyState>();
		let pos = 0;
		for (const [state, n] of counts) for (let k = 0; k < n && pos < order.length; k++) keyOf.set(order[pos++], state);
		const accepted = order.slice(pos);
		const down = new Set(accepted.slice(0, Math.round(accepted.length * (opts.downFraction ?? 0.06))));
		ids.forEach((id, i) => this.master.addMinion({ id, key: keyOf.get(i) ?? "accepted", up: !down.has(i) }));
	}

	// ---------------------------------------------------------------- lifecycle

	/** Start listening (port 0: any free port). */
	async start(port = 0): Promise<{ url: string; port: number }> {
		const p = await this.server.listen(port, this.host);
		this.started = true;
		return { url: this.url, port: p };
	}

	async stop(): Promise<void> {
		this.master.shutdown();
		if (this.started) await this.server.close();
		this.started = false;
	}

	get url(): string {
		return `http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.server.boundPort}`;
	}

	get credentials(): { username: string; password: string; eauth: string } {
		return { username: this.username, password: this.password, eauth: this.eauth };
	}

	/** The fleet-ctl settings that point the cm-gateway at this simulator. */
	get cmApiEnv(): Record<string, string> {
		return {
			CM_API_URL: this.url,
			CM_API_USER: this.username,
			CM_API_PASSWORD: this.password,
			CM_API_EAUTH: this.eauth,
		};
	}

	// ---------------------------------------------------------------- minions and keys

	minionIds(filter: { key?: KeyState; up?: boolean } = {}): string[] {
		return this.master.fleet.ids().filter(id => {
			const m = this.master.fleet.get(id)!;
			return (
				(filter.key === undefined || m.key === filter.key) &&
				(filter.up === undefined || (m.up && m.key === "accepted") === filter.up)
			);
		});
	}

	/** Accepted minions that are up: the ones that answer. */
	upMinions(): string[] {
		return this.master.fleet.acceptedIds().filter(id => this.master.fleet.get(id)!.up);
	}

	/** What the master sees connected now (`manage.present`): none while it is down or its minions reconnect. */
	connectedMinions(): string[] {
		return this.master.connectedIds();
	}

	minion(id: string): MinionView | undefined {
		const m = this.master.fleet.get(id);
		if (!m) return undefined;
		return {
			id: m.id,
			key: m.key,
			up: m.up,
			fingerprint: m.fingerprint,
			grains: structuredClone(m.grains),
			delayMs: m.delayMs,
			neverReturns: m.neverReturns,
			deniedFingerprint: m.deniedFingerprint ?? null,
		};
	}

	/** Add a minion (fires salt/auth, and the start events when it is accepted and up). Returns its id. */
	addMinion(spec: Partial<MinionSpec> = {}): string {
		let id = spec.id;
		if (!id) {
			let n = this.master.fleet.size + 1;
			do id = `new-${String(n++).padStart(2, "0")}.site-z.example`;
			while (this.master.fleet.has(id));
		}
		if (this.master.fleet.has(id)) throw new Error(`minion ${id} exists`);
		this.master.addMinion({ ...spec, id, key: spec.key ?? "pending" }, { fireEvents: true });
		return id;
	}

	/** Delete the minion's key (fires salt/key act=delete). */
	removeMinion(id: string): boolean {
		return this.master.setKeyState(id, "deleted");
	}

	setKeyState(id: string, state: KeyState): boolean {
		return this.master.setKeyState(id, state);
	}

	/**
	 * Start a minion (salt/auth and salt/minion/<id>/start at once) or stop it (nothing at once). Either way the
	 * master's next maintenance loop reports the change (`salt/presence/change`, `salt/presence/present`).
	 */
	setUp(id: string, up = true): boolean {
		return this.master.setUp(id, up);
	}

	setDown(id: string): boolean {
		return this.master.setUp(id, false);
	}

	/**
	 * The minion presents a new key (random unless given; returned): its old, still-trusted key stays under
	 * `minions` and the new one appears under `minions_denied` (key.list_all lists the id in both, key.finger
	 * gives both fingerprints); salt/auth `{result: false, id, act: "denied", pub}`; the minion process exits.
	 */
	presentNewKey(id: string, fingerprint?: string): string {
		const fp = fingerprint ?? keyPair(randomHex(32)).fingerprint;
		this.master.presentNewKey(id, fp);
		return fp;
	}

	/** The denied key is removed and the minion starts again with its old key (salt/auth accept, salt/minion/<id>/start). */
	restoreOldKey(id: string): void {
		this.master.restoreOldKey(id);
	}

	/**
	 * Give the minion a new key in place (the master's accepted key changes too): a new fingerprint (random
	 * unless given), announced by salt/auth. For what a real master does with a minion's new key, see
	 * `presentNewKey`.
	 */
	changeFingerprint(id: string, fingerprint?: string): string {
		const m = this.master.fleet.get(id);
		if (!m) throw new Error(`no minion ${id}`);
		m.fingerprint = fingerprint ?? keyPair(randomHex(32)).fingerprint;
		this.master.fireAuth(m, m.key === "accepted" ? "accept" : "pend");
		return m.fingerprint;
	}

	/** Merge (or replace) a minion's grains. */
	setGrains(id: string, grains: Grains, opts: { replace?: boolean } = {}): boolean {
		return this.master.setGrains(id, grains, opts.replace);
	}

	/** Make a minion answer after `ms` (null: back to its normal latency). */
	setMinionDelay(id: string, ms: number | null): boolean {
		const m = this.master.fleet.get(id);
		if (!m) return false;
		m.delayMs = ms;
		return true;
	}

	/** The minion runs jobs but its returns are lost (`local` reports false after the timeouts). */
	setNeverReturns(id: string, never = true): boolean {
		const m = this.master.fleet.get(id);
		if (!m) return false;
		m.neverReturns = never;
		return true;
	}

	// ---------------------------------------------------------------- events

	/** The custom VNC event a host sends with salt-call (see the file comment for its shape). */
	vncConnect(id: string, status = "connected", hostname?: string): void {
		const m = this.master.fleet.get(id);
		this.master.saltCallEvent(id, "ctl/vnc/connect", { hostname: hostname ?? String(m?.grains.host ?? id), status });
	}

	/**
	 * `salt-call event.send <tag> '<data as JSON>'` on a minion: salt/auth (every salt-call authenticates),
	 * minion/refresh/<id>, the event (its data with salt-call's `__pub_fun`, `__pub_pid`, `__pub_jid`,
	 * `__pub_tgt` keys), then the salt-call's return `salt/job/<jid>/ret/<id>` (fun event.send).
	 */
	fireMinionEvent(id: string, tag: string, data: unknown): void {
		this.master.saltCallEvent(id, tag, data);
	}

	/** Any event on the master bus. */
	fireEvent(tag: string, data: Record<string, unknown>): void {
		this.master.events.fire(tag, data);
	}

	/** Run one maintenance loop's presence handling now (salt/presence/change if changed, salt/presence/present). */
	firePresence(): void {
		this.master.firePresent();
	}

	/** Watch the master bus (returns the unsubscribe function). */
	onEvent(fn: (e: SaltEvent) => void): () => void {
		return this.master.events.subscribe(fn);
	}

	// ---------------------------------------------------------------- file server and patches

	setFile(path: string, text: string): void {
		this.master.files.write(path, text);
	}

	removeFile(path: string): boolean {
		return this.master.files.remove(path);
	}

	files(): string[] {
		return this.master.files.list();
	}

	/** Shortcut: `setPatch("fix1", text)` writes `patches/fix1.sls`. */
	setPatch(name: string, text: string): string {
		const path = `patches/${name.replace(/^patches[./]/, "").replace(/\.sls$/, "")}.sls`;
		this.master.files.write(path, text);
		return path;
	}

	/**
	 * Make `state.apply` of a patch fail on some minions ("*": all): the chosen step (default the first
	 * cmd step) returns result false with `retcode`/`stderr`, and the job retcode becomes 2.
	 */
	failPatch(patch: string, minions: string[] | "*", failure: StepFailure = {}): void {
		this.master.failPatch(patch, minions, failure);
	}

	clearPatchFailures(patch?: string): void {
		this.master.clearPatchFailures(patch);
	}

	/**
	 * One state of a minion drifts from its desired state: `state.apply test=True` predicts `changes` (result None,
	 * the comment Salt's module writes, or `comment`); a real run makes them (result True) and the drift is gone.
	 * Only states other than `cmd` drift (a `cmd` state always would run).
	 */
	setDrift(id: string, sls: string, stateId: string, changes: Record<string, unknown>, comment?: string): void {
		this.master.setDrift(id, sls, stateId, { changes, ...(comment ? { comment } : {}) });
	}

	clearDrift(id?: string): void {
		this.master.clearDrift(id);
	}

	/** The states of a minion still drifted, as `<sls>/<state id>`. */
	driftsOf(id: string): string[] {
		return this.master.driftsOf(id);
	}

	// ---------------------------------------------------------------- executions and jobs

	/** How many times `fun` (or any function) ran on a minion. */
	executionCount(id: string, fun?: string): number {
		return this.master.executionCount(id, fun);
	}

	/** { minion: { function: count } }. */
	executionCounts(): Record<string, Record<string, number>> {
		return this.master.executionCountsByMinion();
	}

	/** Every execution on a minion, in order (jid, minion, function, args). */
	executions(): ExecutionRecord[] {
		return this.master.executions();
	}

	resetExecutions(): void {
		this.master.resetExecutions();
	}

	/** Jobs published to minions (runner jobs and the master's own saltutil.find_job jobs excluded), oldest first. */
	jobs(): JobView[] {
		return [...this.master.jobs.values()].filter(j => j.kind === "minion" && !j.internal).map(viewJob);
	}

	/**
	 * A job published on the master outside salt-api — the `salt` command run by `user` (default root): its
	 * `salt/job/<jid>/new` event and its returns reach the bus like any job's. Null when no minion matched.
	 */
	cliJob(
		tgt: unknown,
		fun: string,
		arg: unknown[] = [],
		opts: { tgtType?: string; user?: string } = {},
	): { jid: string; minions: string[] } | null {
		const pub = this.master.publish({ tgt, tgtType: opts.tgtType ?? "glob", fun, arg, user: opts.user ?? "root" });
		return pub ? { jid: pub.jid, minions: [...pub.minions] } : null;
	}

	/**
	 * `salt <tgt> <fun> --static` (or any batch run) on the master: the CLI publishes twice
	 * (events_cli_static_batch.txt) — first a gather `test.ping` on the target as given, waited for like
	 * `manage.status` waits, then the run itself as a `list` job to the minions that answered. Resolves once the
	 * run is published; null when no minion answered the gather.
	 */
	async cliStaticJob(
		tgt: unknown,
		fun: string,
		arg: unknown[] = [],
		opts: { tgtType?: string; user?: string } = {},
	): Promise<{ jid: string; minions: string[] } | null> {
		const user = opts.user ?? "root";
		const { up } = await this.master.managePing(tgt, opts.tgtType ?? "glob", undefined, undefined, user);
		return up.length ? this.cliJob(up, fun, arg, { tgtType: "list", user }) : null;
	}

	job(jid: string): JobView | undefined {
		const j = this.master.jobs.get(jid);
		return j ? viewJob(j) : undefined;
	}

	// ---------------------------------------------------------------- master configuration

	setNodegroups(groups: Nodegroups): void {
		this.master.config.nodegroups = groups;
	}

	setEnabledClients(clients: string[]): void {
		this.master.config.netapiEnableClients = [...clients];
	}

	setTimeouts(t: { timeout?: number; gatherJobTimeout?: number; tokenExpire?: number }): void {
		if (t.timeout !== undefined) this.master.config.timeout = t.timeout;
		if (t.gatherJobTimeout !== undefined) this.master.config.gatherJobTimeout = t.gatherJobTimeout;
		if (t.tokenExpire !== undefined) this.master.config.tokenExpire = t.tokenExpire;
	}

	setLatency(minMs: number, maxMs: number): void {
		this.master.config.latencyMs = [minMs, maxMs];
		for (const m of this.master.fleet.all()) m.latencyMs = baseLatency(m.id, minMs, maxMs);
	}

	// ---------------------------------------------------------------- HTTP faults and outages

	/** The next `count` requests (optionally only matching ones; /events excluded unless named) fail with `status`. 401 and 503 come as CherryPy HTML pages, 500 as salt-api's JSON. */
	failNext(count: number, status: number, opts: { message?: string; filter?: RequestFilter } = {}): void {
		this.server.failNext(count, status, opts);
	}

	/** The next `count` responses are processed normally but sent malformed (truncated JSON, garbage, HTML, empty, wrong shape, or the connection reset). */
	malformNext(count: number, kind: MalformKind = "truncated", filter?: RequestFilter): void {
		this.server.malformNext(count, kind, filter);
	}

	clearFaults(): void {
		this.server.clearFaults();
	}

	/** Session expiry: every session and token becomes unknown (next call 401, event streams end). */
	expireSessions(): void {
		this.auth.expireAll();
	}

	/** The Salt tokens behind the sessions expire (sessions stay; calls get 401 from the master). */
	expireTokens(): void {
		this.auth.expireTokens();
	}

	/**
	 * Take salt-api away: "refuse" (stops listening, open connections dropped), "hang" (accepts but never
	 * answers), or "master-down" (the master daemon stops: client calls get salt-api's generic 500 after
	 * `masterDownAnswerMs`, /login, /token and GET /events wait for the master, open event streams stay open and
	 * quiet). Jobs already running keep going; their returns reach the master once it is back.
	 */
	async goDown(mode: "refuse" | "hang" | "master-down" = "refuse"): Promise<void> {
		await this.server.goDown(mode);
	}

	/** End the outage. After "master-down" this is a master start (see `restartMaster`; `late` as there). */
	async comeBack(opts: { late?: string[] } = {}): Promise<void> {
		await this.server.comeBack(opts);
	}

	/**
	 * Restart the salt-master: it stops for `downMs` (default 1000; see "master-down"), then starts. Resolves at
	 * the start. About `restartPresentDelayMs` later its first loop fires `salt/presence/present` with
	 * `"present": []`; the minions reconnect right after (a job published before then reaches none) and the true
	 * list follows one loop later (`salt/presence/change` {new: all}, then `present`). The event streams stay
	 * open; no minion fires a start event; each minion authenticates again (`salt/auth`) at the first
	 * publication it receives (the master's new AES key).
	 *
	 * After a long outage (`downMs` ≥ `longOutageMs`) the minions, retrying all along, reconnect at the start: the
	 * first loop already lists them (`change` {new}, then `present`), but for the `late` ones, which miss the
	 * publications until they reconnect just before the second loop (events_master_restart_3min.txt).
	 */
	async restartMaster(opts: { downMs?: number; late?: string[] } = {}): Promise<void> {
		await this.server.goDown("master-down");
		await new Promise(r => setTimeout(r, Math.max(0, opts.downMs ?? 1000)));
		await this.server.comeBack({ late: opts.late });
	}

	/** Whether the master daemon runs (false during "master-down" and the down phase of `restartMaster`). */
	get masterRunning(): boolean {
		return this.master.running;
	}

	/** Close every /events stream now. */
	dropEventStreams(): void {
		this.server.dropEventStreams();
	}

	get eventStreamCount(): number {
		return this.server.eventStreams;
	}

	/** Requests served so far (method, path, status), newest last (bounded). */
	requests(): RequestRecord[] {
		return [...this.server.log];
	}

	/** Unexpected exceptions while serving (should stay empty). */
	internalErrors(): unknown[] {
		return [...this.server.internalErrors];
	}
}

function viewJob(j: Job): JobView {
	return {
		jid: j.jid,
		fun: j.fun,
		arg: j.arg,
		tgt: j.tgt,
		tgtType: j.tgtType,
		user: j.user,
		minions: [...j.minions],
		missing: [...j.missing],
		returned: [...j.returns.keys()],
		pending: [...j.pending],
		returns: Object.fromEntries([...j.returns].map(([id, r]) => [id, r.return])),
	};
}

// ------------------------------------------------------------------ standalone

/** Methods the standalone's control channel (SIM_CONTROL=stdin) may call. */
const CONTROL_METHODS = new Set([
	"cliJob",
	"cliStaticJob",
	"minionIds",
	"upMinions",
	"connectedMinions",
	"minion",
	"addMinion",
	"removeMinion",
	"setKeyState",
	"setUp",
	"setDown",
	"presentNewKey",
	"restoreOldKey",
	"changeFingerprint",
	"setGrains",
	"setMinionDelay",
	"setNeverReturns",
	"vncConnect",
	"fireMinionEvent",
	"fireEvent",
	"firePresence",
	"setFile",
	"removeFile",
	"files",
	"setPatch",
	"failPatch",
	"clearPatchFailures",
	"setDrift",
	"clearDrift",
	"driftsOf",
	"executionCount",
	"executionCounts",
	"executions",
	"resetExecutions",
	"jobs",
	"job",
	"setNodegroups",
	"setTimeouts",
	"setLatency",
	"failNext",
	"clearFaults",
	"expireSessions",
	"expireTokens",
	"goDown",
	"comeBack",
	"restartMaster",
	"dropEventStreams",
	"internalErrors",
]);

/**
 * SIM_CONTROL=stdin: one JSON command a line, `{"id": 1, "method": "setDown", "args": ["web-02"]}`; each is
 * answered on stdout by a line `control {"id": 1, "result": …}` (or `"error": "…"`), in the order they finish.
 */
function controlChannel(sim: SaltApiSimulator): void {
	const rl = createInterface({ input: process.stdin });
	rl.on("line", line => {
		if (!line.trim()) return;
		let cmd: { id?: unknown; method?: unknown; args?: unknown };
		try {
			cmd = JSON.parse(line);
		} catch {
			console.log(`control ${JSON.stringify({ id: null, error: "not JSON" })}`);
			return;
		}
		const { id, method } = cmd;
		const args = Array.isArray(cmd.args) ? cmd.args : [];
		if (typeof method !== "string" || !CONTROL_METHODS.has(method)) {
			console.log(`control ${JSON.stringify({ id, error: `unknown method ${String(method)}` })}`);
			return;
		}
		Promise.resolve()
			.then(() => (sim as unknown as Record<string, (...a: unknown[]) => unknown>)[method](...args))
			.then(
				result => console.log(`control ${JSON.stringify({ id, result: result === undefined ? null : result })}`),
				(err: unknown) =>
					console.log(`control ${JSON.stringify({ id, error: err instanceof Error ? err.message : String(err) })}`),
			);
	});
}

const envNum = (v: string | undefined): number | undefined =>
	v === undefined || v === "" || !Number.isFinite(Number(v)) ? undefined : Number(v);

async function main(): Promise<() => Promise<void>> {
	const env = process.env;
	const latency = env.SIM_LATENCY_MS ? (env.SIM_LATENCY_MS.split(",").map(Number) as [number, number]) : undefined;
	const sim = new SaltApiSimulator({
		minions: env.SIM_MINIONS ? Number(env.SIM_MINIONS) : 50,
		ids: env.SIM_IDS
			? env.SIM_IDS.split(",")
					.map(s => s.trim())
					.filter(Boolean)
			: undefined,
		username: env.SIM_USER || undefined,
		password: env.SIM_PASSWORD || undefined,
		seed: env.SIM_SEED || undefined,
		perms: env.SIM_PERMS ? (JSON.parse(env.SIM_PERMS) as Perm[]) : undefined,
		presenceIntervalMs: envNum(env.SIM_LOOP_MS),
		restartPresentDelayMs: envNum(env.SIM_RESTART_PRESENT_DELAY_MS),
		longOutageMs: envNum(env.SIM_LONG_OUTAGE_MS),
		masterDownAnswerMs: envNum(env.SIM_MASTER_DOWN_MS),
		masterReqTimeoutMs: envNum(env.SIM_MASTER_REQ_TIMEOUT_MS),
		timeout: envNum(env.SIM_TIMEOUT),
		gatherJobTimeout: envNum(env.SIM_GATHER_JOB_TIMEOUT),
		latencyMs: latency && latency.length === 2 && latency.every(Number.isFinite) ? latency : undefined,
		host: env.SIM_HOST || "127.0.0.1",
	});
	const { url } = await sim.start(env.SIM_PORT ? Number(env.SIM_PORT) : 8000);
	const keys = sim.master.fleet.byKeyState();
	const up = sim.upMinions().length;
	const { username, password, eauth } = sim.credentials;
	const lines = [
		`salt-api simulator (rest_cherrypy, Salt 3006) listening on ${url}`,
		`  minions:     ${sim.master.fleet.size} keys: ${keys.accepted.length} accepted (${up} up, ${keys.accepted.length - up} down), ${keys.pending.length} pending, ${keys.rejected.length} rejected, ${keys.denied.length} denied`,
		`  credentials: username=${username} password=${password} eauth=${eauth}`,
		`  environment: ${Object.entries(sim.cmApiEnv)
			.map(([k, v]) => `${k}=${v}`)
			.join(" ")}`,
		`  try:         curl -sS ${url}/login -H 'Accept: application/json' -d username=${username} -d password=${password} -d eauth=${eauth}`,
	];
	console.log(lines.join("\n"));
	let churn: NodeJS.Timeout | undefined;
	if (env.SIM_CHURN === "1") {
		const every = Number(env.SIM_CHURN_MS || 5000);
		const prng = new Prng(`${env.SIM_SEED || "fleet-ctl"}/churn`);
		churn = setInterval(() => {
			const accepted = sim.minionIds({ key: "accepted" });
			const down = accepted.filter(id => !sim.minion(id)!.up);
			// Keep about a tenth of the fleet down: bring one back when more are down, else take one down.
			const bringUp = down.length > 0 && (down.length >= accepted.length * 0.1 || prng.chance(0.5));
			const pool = bringUp ? down : accepted.filter(id => sim.minion(id)!.up);
			if (!pool.length) return;
			const id = prng.pick(pool);
			sim.setUp(id, bringUp);
			console.log(`churn: ${id} is now ${bringUp ? "up" : "down"}`);
		}, every);
		console.log(`  churn:       flipping a random minion up/down every ${every} ms`);
	}
	if (env.SIM_CONTROL === "stdin") {
		controlChannel(sim);
		console.log("  control:     JSON commands on stdin, answers on stdout (SIM_CONTROL=stdin)");
	}
	return async () => {
		if (churn) clearInterval(churn);
		await sim.stop();
	};
}

if (require.main === module) runStandalone(main);
