/**
 * The cm-gateway: fleet-ctl's side of the Salt master, through salt-api (lib/salt-client.ts).
 *
 * Remote execution, `POST /hosts/{id}` (runOnHost) and `POST /groups/{id}` (runOnGroup), as the spec
 * says: the body {cm_client, fun, arg?, kwarg?} is forwarded as the lowstate
 * {client: cm_client, tgt: [hostname(s)], tgt_type: "list", fun, arg, kwarg}. The gateway (api service)
 * has already authenticated the caller, checked its role and its token's scope, and audits the request
 * with the `task_id` answered here as its jid.
 *
 * The answer is {task_id, status, return: {return: [ ... ]}}:
 *  - `cm_client: "local_async"` (the default): salt-api only publishes the job. `task_id` is the
 *    job's 20-digit jid, `status` is "scheduled", and `return.return` holds salt's own answer,
 *    [{jid, minions}] (`minions`: the hosts expected to answer). The returns are collected later by
 *    polling GET /jobs/<jid> every CM_JOB_POLL_MS; each becomes an `actions` record as it arrives, and the
 *    hosts that have not answered after CM_JOB_TIMEOUT_MS get a record with state "timeout".
 *  - `cm_client: "local"`: synchronous; salt-api waits for the minions (the master's `timeout` plus
 *    `gather_job_timeout`). It is sent with `full_return: true`, so each host's return carries the
 *    job's jid: `task_id` is that jid, `status` is "finished", and `return.return` is
 *    [{host: output}] (a host that did not answer has salt's `false` or its "Minion did not return"
 *    text). The `actions` records are written before the answer: state "finished" for hosts that
 *    answered, "timeout" for the others. Should no host name the jid at all (every host answered with
 *    a bare `false`), `task_id` is null and nothing can be recorded (an action's `_id` needs the jid).
 *  - Nothing targeted (salt-api answers {} because no accepted minion matches): `task_id` null,
 *    `status` "no_minions", `return.return` [{}]; nothing is recorded.
 * Every record has `_id` = jid + hostname, `action` = fun, `args` = arg plus {"__kwarg__": true, ...kwarg}
 * (as salt shows `fun_args`), `return` as text; the host's `last_action` is set to the record's id.
 *
 * Errors (Eve's shape): a body that is not {cm_client?, fun, arg?, kwarg?} 422; unknown or
 * soft-deleted host, unknown group 404; a group without hosts 422; salt-api unreachable, failing or
 * malformed 502; timed out 504. Without CM_API_URL the remote-execution actions are not published at all,
 * so the gateway answers 503 (the service that handles the request is not available).
 *
 * Loading patches, `POST /updates` (loadUpdates; protocols.md Part A §5): the runner
 * `fileserver.file_list` (saltenv base) lists the master's file server; every `.sls` file under
 * CM_PATCH_PREFIX (default "patches/") is read with the wheel `file_roots.read` (a few at a time: at most
 * CM_API_CONCURRENCY reads in flight) and handed to `updates.upsertMany`, which creates the new patches
 * and refreshes the text of the known ones by name, keeping their local `description`.
 *  - A patch's `name` is its sls name, exactly what `state.apply` takes as `mods`: the path without
 *    ".sls", "/" turned into "." ("patches/fix1.sls" -> "patches.fix1"; "patches/web/init.sls" ->
 *    "patches.web", as Salt resolves it, unless "patches/web.sls" exists, which Salt prefers). Files whose
 *    base name has another "." cannot be named for `state.apply` (Salt reads the dot as a directory) and
 *    are skipped with a warning. `text` is the file's content as the master serves it (no Jinja rendering).
 *  - Patches that are no longer on the master are kept: their records carry the operators'
 *    descriptions and are what `failed_patches` and past runs refer to. Removing them is a deliberate
 *    act, not a side effect of a reload.
 *  - The answer is 200 {_status: "OK", loaded: <patch files read>, created: <new updates records>}.
 *  - Both calls are reads, so the client retries them after transient failures; salt-api down, failing
 *    or malformed is 502, timed out 504 (never 500). Nothing is written unless every file was read.
 *    Without CM_API_URL the action is not published either: 503.
 *
 * Inventory reconciliation (syncInventory; the internal action `cm-gateway.sync`, and every
 * CM_SYNC_INTERVAL_MS, default five minutes, 0 off): the periodic safety net of the inventory. Four reads,
 * one call each whatever the fleet's size (protocols.md Part A): wheel `key.list_all` (minions → key
 * "accepted", minions_pre "pending", minions_rejected "rejected", minions_denied "denied"), wheel
 * `key.finger` match "*" (the fingerprints), runner `manage.status` (up/down of the accepted minions) and
 * runner `cache.grains` tgt "*" (the grains the master has cached). Every read must succeed before anything is
 * written: salt-api down, failing or malformed fails the sync (502/504 for the caller, a warning for the
 * timer) and leaves every host as it was. Then, in batches of `hosts.upsertMany`, every minion with a key:
 *  - `key`; `status` "up" (and `heartbeat` now) or "down" for accepted minions, "unknown" for the others
 *    (the master does not track the presence of minions it does not accept);
 *  - `fingerprint`; a changed one is pushed, with the time, to `fingerprint_history` and raises the
 *    alert {type: "fingerprint.changed", level: "warning", payload: {hostname, fingerprint, previous}};
 *  - from the grains, when the master has them: `grain` (sanitized: MongoDB and NeDB refuse keys with a
 *    "." or a leading "$", so every "." in a key becomes "_" and a leading "$" becomes "_", at any depth;
 *    e.g. a custom grain "ctl.version" is stored as "ctl_version"), `version` (grain `cmversion`, else
 *    `saltversion`), `ip` (grain `ip`, else the first non-loopback address of `ip_interfaces`, IPv4
 *    first), `last_distupgrade` and `last_stateapply` (grain `ctl`'s "YYYY-MM-DD HH:MM:SS+00:00" strings).
 * Known hosts whose key is no longer on the master are soft-deleted (`hosts.setPresent`), and their `key`
 * is forgotten; when the key comes back, the host is restored. A host an operator soft-deleted while its
 * key was still there keeps its `key` and stays soft-deleted (it is still updated). Only one sync runs at
 * a time: a sync asked for while one runs gets that one's result.
 */
import type { Context, ServiceSchema } from "moleculer";
import { loadConfig, type Config } from "../lib/config";
import { EveError, notFound, validationFailed } from "../lib/eve/errors";
import { HOSTNAME } from "../lib/eve/ids";
import { compileSchema } from "../lib/eve/validation";
import { SaltClient, type Lowstate } from "../lib/salt-client";

interface RunBody {
	cm_client?: "local" | "local_async";
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
}

interface RunParams {
	id: string;
	body?: unknown;
	query?: unknown;
}

interface ActionRecord {
	jid: string;
	action: string;
	host: string;
	state: string;
	args: unknown[];
	return: string;
}

interface TrackedJob {
	jid: string;
	fun: string;
	args: unknown[];
	pending: Set<string>;
	deadline: number;
}

const JID = /^\d{20}(_\d+)?$/;
/** Largest batch handed to `updates.upsertMany` (its params allow 10,000). */
const UPSERT_BATCH = 1000;
const NO_RETURN = "Minion did not return";
/** `key.list_all`'s key directories and the host `key` each one means. */
const KEY_DIRS: Array<[string, "accepted" | "pending" | "rejected" | "denied"]> = [
	["minions", "accepted"],
	["minions_pre", "pending"],
	["minions_rejected", "rejected"],
	["minions_denied", "denied"],
];

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

/** Grains as MongoDB and NeDB store them: "." in keys becomes "_", so does a leading "$" (at any depth). */
export function sanitizeGrains(value: unknown): unknown {
	if (Array.isArray(value)) return value.map(sanitizeGrains);
	if (!value || typeof value !== "object") return value;
	const out: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k.replace(/\./g, "_").replace(/^\$/, "_")] = sanitizeGrains(v);
	return out;
}

/** A grain date "YYYY-MM-DD HH:MM:SS+00:00" (or any ISO-like form) as a Date; undefined if not one. */
export function grainDate(value: unknown): Date | undefined {
	if (typeof value !== "string") return undefined;
	const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(Z|[+-]\d{2}:?\d{2})?$/.exec(value.trim());
	if (!m) return undefined;
	const d = new Date(`${m[1]}T${m[2]}${m[3] ? (m[3] === "Z" ? "Z" : m[3].includes(":") ? m[3] : `${m[3].slice(0, 3)}:${m[3].slice(3)}`) : "Z"}`);
	return Number.isNaN(d.getTime()) ? undefined : d;
}

/** The host's address from its grains: `ip`, else the first non-loopback address of `ip_interfaces` (IPv4 first). */
export function grainIp(grains: Record<string, unknown>): string | undefined {
	if (typeof grains.ip === "string" && grains.ip) return grains.ip;
	const ifaces = grains.ip_interfaces;
	if (!ifaces || typeof ifaces !== "object") return undefined;
	const all = Object.values(ifaces as Record<string, unknown>).flatMap(a => (Array.isArray(a) ? a.filter((x): x is string => typeof x === "string") : []));
	const usable = all.filter(a => !/^127\./.test(a) && a !== "::1" && !/^fe80:/i.test(a));
	return usable.find(a => a.includes(".")) ?? usable[0];
}

const checkBody = compileSchema({
	cm_client: { type: "enum", values: ["local", "local_async"], optional: true },
	fun: { type: "string", pattern: /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$/, max: 200 },
	arg: { type: "array", optional: true, max: 1000 },
	kwarg: { type: "object", optional: true },
});

/** The return as the `actions` record keeps it: text. */
function asText(value: unknown): string {
	if (typeof value === "string") return value;
	return JSON.stringify(value) ?? "null";
}

/**
 * The patch files among the file server's paths: `.sls` files under `prefix`, each with its sls name
 * (see the header). `skip` hears about the files that cannot be named.
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

export default function CmGatewayService(): ServiceSchema {
	const config: Config = loadConfig();
	const configured = config.cmApiUrl !== "";

	const run = (kind: "host" | "group") => ({
		visibility: "published" as const,
		params: { id: "string", body: { type: "any", optional: true }, query: { type: "any", optional: true } },
		async handler(this: any, ctx: Context<RunParams>) {
			const body = this.validateBody(ctx.params.body);
			const targets: string[] = kind === "host" ? await this.hostTarget(ctx, ctx.params.id) : await this.groupTargets(ctx, ctx.params.id);
			return this.execute(ctx, targets, body);
		},
	});

	return {
		name: "cm-gateway",
		// Without a master the actions do not exist: the gateway answers 503 for them.
		actions: configured
			? {
					runOnHost: run("host"),
					runOnGroup: run("group"),
					sync: {
						visibility: "public" as const,
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
				}
			: {},

		created(this: any) {
			this.jobs = new Map<string, TrackedJob>();
			this.pollTimer = null;
			this.polling = false;
			this.syncTimer = null;
			this.syncing = null;
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
					})
				: null;
		},

		started(this: any) {
			if (configured && config.cmSyncIntervalMs > 0) this.scheduleSync();
		},

		stopped(this: any) {
			this.stopping = true;
			if (this.pollTimer) clearTimeout(this.pollTimer);
			this.pollTimer = null;
			if (this.syncTimer) clearTimeout(this.syncTimer);
			this.syncTimer = null;
			this.jobs.clear();
			this.salt?.close();
		},

		methods: {
			validateBody(this: any, raw: unknown): Required<Pick<RunBody, "cm_client" | "fun">> & RunBody {
				const issues = checkBody(raw);
				if (issues) throw validationFailed(issues);
				const body = raw as RunBody;
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

			async execute(this: any, ctx: Context, targets: string[], body: RunBody & { cm_client: "local" | "local_async" }) {
				const chunk: Lowstate = { client: body.cm_client, tgt: targets, tgt_type: "list", fun: body.fun };
				if (body.arg) chunk.arg = body.arg;
				if (body.kwarg) chunk.kwarg = body.kwarg;
				const args = [...(body.arg ?? []), ...(body.kwarg && Object.keys(body.kwarg).length ? [{ __kwarg__: true, ...body.kwarg }] : [])];

				if (body.cm_client === "local_async") {
					const ret = await this.salt.lowstate(chunk);
					if (!ret || typeof ret !== "object" || Object.keys(ret).length === 0) return { task_id: null, status: "no_minions", return: { return: [{}] } };
					const { jid, minions } = ret as { jid?: unknown; minions?: unknown };
					if (typeof jid !== "string" || !JID.test(jid) || !Array.isArray(minions)) throw new EveError(502, "salt-api sent a malformed answer to local_async");
					this.track(jid, body.fun, args, minions.map(String));
					return { task_id: jid, status: "scheduled", return: { return: [ret] } };
				}

				chunk.full_return = true;
				const ret = await this.salt.lowstate(chunk);
				if (!ret || typeof ret !== "object" || Array.isArray(ret)) throw new EveError(502, "salt-api sent a malformed answer to local");
				const outputs: Record<string, unknown> = {};
				const records: ActionRecord[] = [];
				let jid: string | null = null;
				const missing: string[] = [];
				for (const [host, value] of Object.entries(ret as Record<string, unknown>)) {
					const full = value && typeof value === "object" && !Array.isArray(value) && "ret" in value ? (value as { ret: unknown; jid?: unknown; out?: unknown }) : null;
					if (full && typeof full.jid === "string" && JID.test(full.jid)) {
						jid ??= full.jid;
						outputs[host] = full.ret;
						records.push({ jid: full.jid, action: body.fun, host, state: "finished", args, return: asText(full.ret) });
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
					for (const host of missing) records.push({ jid, action: body.fun, host, state: "timeout", args, return: asText(outputs[host] === false ? NO_RETURN : outputs[host]) });
					await this.record(records);
				}
				return { task_id: jid, status: Object.keys(outputs).length ? "finished" : "no_minions", return: { return: [outputs] } };
			},

			/** Writes the records and points each known host's `last_action` at its record. */
			async record(this: any, records: ActionRecord[]) {
				if (!records.length) return;
				await this.broker.call("actions.record", { returns: records });
				const hosts = [...new Set(records.map(r => r.host))];
				const known = new Set<string>(await this.broker.call("hosts.exist", { ids: hosts }));
				const latest = new Map<string, string>();
				for (const r of records) if (known.has(r.host)) latest.set(r.host, `${r.jid}${r.host}`);
				if (latest.size) await this.broker.call("hosts.upsertMany", { hosts: [...latest].map(([_id, last_action]) => ({ _id, last_action })) });
			},

			// ------------------------------------------------------------ patches (POST /updates)

			/** Reads the patch files from the master and upserts them: {_status, loaded, created}. */
			async loadPatches(this: any, ctx: Context): Promise<{ _status: "OK"; loaded: number; created: number }> {
				const listed = await this.salt.lowstate({ client: "runner", fun: "fileserver.file_list", saltenv: "base" }, { safe: true });
				if (!Array.isArray(listed) || listed.some(p => typeof p !== "string")) throw new EveError(502, "salt-api sent a malformed answer to fileserver.file_list");
				const paths = patchPaths(listed as string[], config.cmPatchPrefix, (path: string) => this.logger.warn(`Skipping patch file '${path}': its name cannot be given to state.apply`));

				const patches: Array<{ name: string; text: string }> = [];
				let next = 0;
				let failed = false;
				const worker = async () => {
					while (!failed && next < paths.length) {
						const { path, name } = paths[next++];
						try {
							const text: string | null = await this.readPatch(path);
							if (text !== null) patches.push({ name, text });
						} catch (err) {
							failed = true;
							throw err;
						}
					}
				};
				await Promise.all(Array.from({ length: Math.min(config.cmApiConcurrency, paths.length) }, worker));

				patches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
				let created = 0;
				for (let i = 0; i < patches.length; i += UPSERT_BATCH) {
					const res: { created: number } = await ctx.call("updates.upsertMany", { patches: patches.slice(i, i + UPSERT_BATCH) });
					created += res.created;
				}
				return { _status: "OK", loaded: patches.length, created };
			},

			/** One file's text through wheel `file_roots.read`; null when it is gone or not text. */
			async readPatch(this: any, path: string): Promise<string | null> {
				const event = await this.salt.lowstate({ client: "wheel", fun: "file_roots.read", path, saltenv: "base" }, { safe: true });
				const data = event && typeof event === "object" ? (event as { data?: { return?: unknown; success?: unknown } }).data : undefined;
				if (!data || typeof data !== "object") throw new EveError(502, `salt-api sent a malformed answer to file_roots.read of '${path}'`);
				if (data.success === false) throw new EveError(502, `the master could not read '${path}': ${asText(data.return).slice(0, 300)}`);
				const ret = data.return;
				if (!Array.isArray(ret)) throw new EveError(502, `salt-api sent a malformed answer to file_roots.read of '${path}'`);
				// One {absolute path: text} per file root holding the file; the first root wins, as in Salt's file server.
				for (const entry of ret) {
					if (!entry || typeof entry !== "object") continue;
					const text = Object.values(entry as Record<string, unknown>)[0];
					if (typeof text === "string") return text;
				}
				if (ret.length) this.logger.warn(`Skipping patch file '${path}': the master did not send it as text`);
				return null;
			},

			// ------------------------------------------------------------ inventory reconciliation

			scheduleSync(this: any) {
				if (this.syncTimer || this.stopping) return;
				this.syncTimer = setTimeout(() => {
					this.syncTimer = null;
					void this.syncInventory()
						.catch((err: Error) => this.logger.warn("Inventory reconciliation failed; the hosts are left as they were:", err.message))
						.finally(() => this.scheduleSync());
				}, config.cmSyncIntervalMs);
				this.syncTimer.unref?.();
			},

			/** One full reconciliation (see the header); joins the one under way if any. */
			syncInventory(this: any): Promise<SyncResult> {
				if (!this.syncing) {
					this.syncing = this.reconcile().finally(() => {
						this.syncing = null;
					});
				}
				return this.syncing;
			},

			async reconcile(this: any): Promise<SyncResult> {
				const wheel = async (fun: string, extra: Record<string, unknown> = {}) => {
					const event = await this.salt.lowstate({ client: "wheel", fun, ...extra }, { safe: true });
					const data = event && typeof event === "object" ? (event as { data?: { return?: unknown; success?: unknown } }).data : undefined;
					if (!data || typeof data !== "object" || data.success === false || !data.return || typeof data.return !== "object" || Array.isArray(data.return)) {
						throw new EveError(502, `salt-api sent a malformed answer to ${fun}`);
					}
					return data.return as Record<string, unknown>;
				};
				const keys = await wheel("key.list_all");
				const fingers = await wheel("key.finger", { match: "*" });
				const status = await this.salt.lowstate({ client: "runner", fun: "manage.status" }, { safe: true });
				if (!status || typeof status !== "object" || !Array.isArray(status.up) || !Array.isArray(status.down)) throw new EveError(502, "salt-api sent a malformed answer to manage.status");
				const grains = await this.salt.lowstate({ client: "runner", fun: "cache.grains", tgt: "*", tgt_type: "glob" }, { safe: true });
				if (!grains || typeof grains !== "object" || Array.isArray(grains)) throw new EveError(502, "salt-api sent a malformed answer to cache.grains");

				// The master's view, by minion id.
				const keyOf = new Map<string, string>();
				const fingerOf = new Map<string, string>();
				for (const [dir, state] of KEY_DIRS) {
					const ids = keys[dir];
					if (ids !== undefined && !Array.isArray(ids)) throw new EveError(502, "salt-api sent a malformed answer to key.list_all");
					for (const id of (ids ?? []) as unknown[]) if (typeof id === "string" && HOSTNAME.test(id)) keyOf.set(id, state);
					const fps = fingers[dir];
					if (fps && typeof fps === "object") for (const [id, fp] of Object.entries(fps as Record<string, unknown>)) if (typeof fp === "string" && fp) fingerOf.set(id, fp);
				}
				const up = new Set<string>((status.up as unknown[]).map(String));
				const down = new Set<string>((status.down as unknown[]).map(String));

				const known = new Map<string, { key?: string; fingerprint?: string; fingerprint_history: Array<{ added: Date; fingerprint: string }>; _soft_deleted: boolean }>(
					((await this.broker.call("hosts.inventoryState")) as any[]).map(h => [h._id, h]),
				);
				const now = new Date();
				const changes: Record<string, unknown>[] = [];
				const alerts: Array<{ hostname: string; fingerprint: string; previous: string }> = [];
				for (const [id, key] of keyOf) {
					const doc: Record<string, unknown> = { _id: id, key };
					doc.status = key !== "accepted" ? "unknown" : up.has(id) ? "up" : down.has(id) ? "down" : "unknown";
					if (doc.status === "up") doc.heartbeat = now;
					const fp = fingerOf.get(id);
					const host = known.get(id);
					if (fp) {
						doc.fingerprint = fp;
						if (host?.fingerprint && host.fingerprint !== fp) {
							doc.fingerprint_history = [...host.fingerprint_history, { added: now, fingerprint: host.fingerprint }];
							alerts.push({ hostname: id, fingerprint: fp, previous: host.fingerprint });
						}
					}
					const g = (grains as Record<string, unknown>)[id];
					if (g && typeof g === "object" && !Array.isArray(g)) {
						const gr = g as Record<string, unknown>;
						doc.grain = sanitizeGrains(gr);
						const version = typeof gr.cmversion === "string" ? gr.cmversion : typeof gr.saltversion === "string" ? gr.saltversion : undefined;
						if (version) doc.version = version;
						const ip = grainIp(gr);
						if (ip) doc.ip = ip;
						const ctl = gr.ctl && typeof gr.ctl === "object" ? (gr.ctl as Record<string, unknown>) : {};
						const dist = grainDate(ctl.last_distupgrade);
						if (dist) doc.last_distupgrade = dist;
						const apply = grainDate(ctl.last_stateapply);
						if (apply) doc.last_stateapply = apply;
					}
					changes.push(doc);
				}

				// Hosts soft-deleted by an earlier reconciliation (their `key` was forgotten) whose key is back.
				const restore = [...keyOf.keys()].filter(id => {
					const h = known.get(id);
					return h && h._soft_deleted && !h.key;
				});
				const gone = [...known.values()].filter(h => !h._soft_deleted && !keyOf.has((h as any)._id)).map(h => (h as any)._id as string);

				let created = 0;
				let updated = 0;
				for (let i = 0; i < changes.length; i += UPSERT_BATCH) {
					const res: { created: number; updated: number } = await this.broker.call("hosts.upsertMany", { hosts: changes.slice(i, i + UPSERT_BATCH) });
					created += res.created;
					updated += res.updated;
				}
				const restored: string[] = restore.length ? await this.broker.call("hosts.setPresent", { ids: restore, present: true }) : [];
				const removed: string[] = gone.length ? await this.broker.call("hosts.setPresent", { ids: gone, present: false }) : [];
				for (const a of alerts) {
					try {
						await this.broker.call("alerts.raise", { type: "fingerprint.changed", level: "warning", payload: a });
					} catch (err) {
						this.logger.warn(`Could not raise the fingerprint alert of '${a.hostname}':`, (err as Error).message);
					}
				}
				if (removed.length || restored.length || alerts.length) this.logger.info(`Inventory: ${removed.length} host(s) soft-deleted, ${restored.length} restored, ${alerts.length} fingerprint(s) changed`);
				return { _status: "OK", hosts: keyOf.size, created, updated, removed: removed.length, restored: restored.length, fingerprints_changed: alerts.length };
			},

			// ------------------------------------------------------------ local_async returns

			track(this: any, jid: string, fun: string, args: unknown[], minions: string[]) {
				if (!minions.length) return;
				this.jobs.set(jid, { jid, fun, args, pending: new Set(minions), deadline: Date.now() + config.cmJobTimeoutMs });
				this.schedulePoll();
			},

			schedulePoll(this: any) {
				if (this.pollTimer || this.stopping || this.jobs.size === 0) return;
				this.pollTimer = setTimeout(() => {
					this.pollTimer = null;
					void this.pollJobs().finally(() => this.schedulePoll());
				}, config.cmJobPollMs);
			},

			/** One round over the tracked jobs: new returns become records; past the deadline, the rest time out. */
			async pollJobs(this: any) {
				if (this.polling) return;
				this.polling = true;
				try {
					for (const job of [...this.jobs.values()] as TrackedJob[]) {
						if (this.stopping) return;
						const records: ActionRecord[] = [];
						try {
							const res = await this.salt.listJob(job.jid);
							const result: Record<string, { return?: unknown }> = res.info[0]?.Result ?? {};
							for (const host of [...job.pending]) {
								if (!(host in result)) continue;
								job.pending.delete(host);
								records.push({ jid: job.jid, action: job.fun, host, state: "finished", args: job.args, return: asText(result[host]?.return) });
							}
						} catch (err) {
							this.logger.warn(`Could not read job ${job.jid} from salt-api:`, (err as Error).message);
						}
						if (job.pending.size && Date.now() >= job.deadline) {
							for (const host of job.pending) records.push({ jid: job.jid, action: job.fun, host, state: "timeout", args: job.args, return: NO_RETURN });
							job.pending.clear();
						}
						if (!job.pending.size) this.jobs.delete(job.jid);
						if (records.length && !this.stopping) {
							try {
								await this.record(records);
							} catch (err) {
								this.logger.error(`Could not record the returns of job ${job.jid}:`, (err as Error).message);
							}
						}
					}
				} finally {
					this.polling = false;
				}
			},
		},
	};
}
