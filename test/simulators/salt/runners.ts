/**
 * Master-side functions: runner modules (jobs, manage, config, fileserver, cache) and wheel modules
 * (key, file_roots, config), with Salt's argument handling for each client.
 */
import { KEY_DIRS, type KeyState } from "./fleet";
import type { Master } from "./master";
import { splitArgs, yamlify } from "./modules";
import { FILE_ROOT } from "./states";
import { fnmatch, isPlainObject, traverse } from "./util";

/** A function the master cannot find: RunnerClient raises (HTTP 500), the wheel reports it in `return`. */
export class UnknownFunctionError extends Error {}

interface MasterFn {
	/** Parameter names in order (positional args are mapped onto them). */
	params: string[];
	required?: string[];
	fn: (m: Master, a: Record<string, unknown>) => unknown;
}

const truthy = (v: unknown) => v === true || v === "True" || v === "true" || v === 1 || v === "1";
const splitList = (v: unknown): string[] | undefined =>
	v === undefined || v === null || v === "" ? undefined : Array.isArray(v) ? v.map(String) : String(v).split(",").map(s => s.trim()).filter(Boolean);

function manageStatus(m: Master, a: Record<string, unknown>): { up: string[]; down: string[] } {
	const { minions } = m.targeting.check(a.tgt ?? "*", a.tgt_type ?? "glob");
	const up: string[] = [];
	const down: string[] = [];
	for (const id of minions) (m.fleet.get(id)!.up ? up : down).push(id);
	return { up, down };
}

const RUNNERS: Record<string, MasterFn> = {
	"jobs.lookup_jid": {
		params: ["jid", "ext_source", "returned", "missing", "display_progress"],
		required: ["jid"],
		fn: (m, a) => m.lookupJid(String(a.jid), { missing: truthy(a.missing), returned: a.returned === undefined ? true : truthy(a.returned) }),
	},
	"jobs.list_job": { params: ["jid", "ext_source", "display_progress"], required: ["jid"], fn: (m, a) => m.listJob(String(a.jid)) },
	"jobs.list_jobs": {
		params: ["ext_source", "outputter", "search_metadata", "search_function", "search_target", "start_time", "end_time", "display_progress"],
		fn: (m, a) =>
			m.listJobs({
				searchFunction: splitList(a.search_function),
				searchTarget: splitList(a.search_target),
				searchMetadata: a.search_metadata && typeof a.search_metadata === "object" && !Array.isArray(a.search_metadata) ? (a.search_metadata as Record<string, unknown>) : undefined,
			}),
	},
	"jobs.active": { params: ["display_progress"], fn: m => m.activeJobs() },
	"jobs.print_job": {
		params: ["jid", "ext_source"],
		required: ["jid"],
		fn: (m, a) => {
			const j = m.listJob(String(a.jid));
			const { jid, ...rest } = j;
			return { [String(jid)]: rest };
		},
	},
	"manage.status": { params: ["output", "tgt", "tgt_type", "timeout", "gather_job_timeout"], fn: manageStatus },
	"manage.up": { params: ["tgt", "tgt_type", "timeout", "gather_job_timeout"], fn: (m, a) => manageStatus(m, a).up },
	"manage.down": { params: ["removekeys", "tgt", "tgt_type", "timeout", "gather_job_timeout"], fn: (m, a) => manageStatus(m, a).down },
	"manage.present": { params: ["subset", "show_ip"], fn: m => m.connectedIds() },
	"manage.not_present": { params: ["subset", "show_ip"], fn: m => m.fleet.acceptedIds().filter(id => !m.fleet.get(id)!.up) },
	"config.get": {
		params: ["key", "default", "delimiter"],
		required: ["key"],
		fn: (m, a) => traverse(m.opts(), String(a.key), a.default ?? "", typeof a.delimiter === "string" ? a.delimiter : ":"),
	},
	"fileserver.file_list": { params: ["saltenv", "backend"], fn: (m, a) => ((a.saltenv ?? "base") === "base" ? m.files.list() : []) },
	"fileserver.dir_list": { params: ["saltenv", "backend"], fn: (m, a) => ((a.saltenv ?? "base") === "base" ? m.files.dirs() : []) },
	"fileserver.envs": { params: ["backend", "sources"], fn: () => ["base"] },
	"fileserver.update": { params: ["backend"], fn: () => true },
	"cache.grains": {
		params: ["tgt", "tgt_type"],
		fn: (m, a) => {
			const { minions } = m.targeting.check(a.tgt ?? "*", a.tgt_type ?? "glob");
			return Object.fromEntries(minions.map(id => [id, structuredClone(m.fleet.get(id)!.grains)]));
		},
	},
	"cache.pillar": {
		params: ["tgt", "tgt_type"],
		fn: (m, a) => Object.fromEntries(m.targeting.check(a.tgt ?? "*", a.tgt_type ?? "glob").minions.map(id => [id, {}])),
	},
};

// ------------------------------------------------------------------ wheel: keys

const KEY_ORDER: KeyState[] = ["accepted", "pending", "rejected", "denied"];
const MASTER_KEYS = ["master.pem", "master.pub"];

function keyMatchers(match: unknown): string[] {
	if (Array.isArray(match)) return match.map(String);
	return String(match ?? "").split(",").filter(Boolean);
}

/** `salt.key.Key.name_match`: matching keys grouped by key dir; `full` includes the master's keys. */
function nameMatch(m: Master, match: unknown, full = false): Record<string, string[]> {
	const pats = keyMatchers(match);
	const hit = (id: string) => pats.some(p => fnmatch(id, p));
	const out: Record<string, string[]> = {};
	if (full) {
		const local = MASTER_KEYS.filter(hit);
		if (local.length) out.local = local;
	}
	const byState = m.fleet.byKeyState();
	for (const st of KEY_ORDER) {
		const ids = byState[st].filter(hit);
		if (ids.length) out[KEY_DIRS[st]] = ids;
	}
	return out;
}

function moveKeys(m: Master, match: unknown, from: KeyState[], to: KeyState): Record<string, string[]> {
	for (const st of from) for (const id of nameMatch(m, match)[KEY_DIRS[st]] ?? []) m.setKeyState(id, to);
	return nameMatch(m, match);
}

function masterFingerprint(m: Master): string {
	return m.masterFingerprint;
}

const WHEELS: Record<string, MasterFn> = {
	"key.list_all": {
		params: [],
		fn: m => {
			const by = m.fleet.byKeyState();
			return { local: [...MASTER_KEYS], minions: by.accepted, minions_pre: by.pending, minions_rejected: by.rejected, minions_denied: by.denied };
		},
	},
	"key.list": {
		params: ["match"],
		required: ["match"],
		fn: (m, a) => {
			const by = m.fleet.byKeyState();
			const sel = String(a.match);
			const map: Record<string, KeyState> = { acc: "accepted", accepted: "accepted", minions: "accepted", pre: "pending", un: "pending", unaccepted: "pending", minions_pre: "pending", rej: "rejected", rejected: "rejected", minions_rejected: "rejected", den: "denied", denied: "denied", minions_denied: "denied" };
			if (sel === "all") return { local: [...MASTER_KEYS], minions: by.accepted, minions_pre: by.pending, minions_rejected: by.rejected, minions_denied: by.denied };
			if (sel === "local") return { local: [...MASTER_KEYS] };
			const st = map[sel];
			return st ? { [KEY_DIRS[st]]: by[st] } : {};
		},
	},
	"key.name_match": { params: ["match", "full"], required: ["match"], fn: (m, a) => nameMatch(m, a.match, truthy(a.full)) },
	"key.finger": {
		params: ["match", "hash_type"],
		required: ["match"],
		fn: (m, a) => {
			const out: Record<string, Record<string, string>> = {};
			for (const [dir, ids] of Object.entries(nameMatch(m, a.match, true))) {
				out[dir] = {};
				for (const id of ids) out[dir][id] = dir === "local" ? masterFingerprint(m) : m.fleet.get(id)!.fingerprint;
			}
			return out;
		},
	},
	"key.finger_master": { params: ["hash_type"], fn: m => ({ local: { "master.pub": masterFingerprint(m) } }) },
	"key.print": {
		params: ["match"],
		required: ["match"],
		fn: (m, a) => {
			const out: Record<string, Record<string, string>> = {};
			for (const [dir, ids] of Object.entries(nameMatch(m, a.match))) {
				out[dir] = {};
				for (const id of ids) out[dir][id] = m.publicKeyPem(id);
			}
			return out;
		},
	},
	"key.accept": {
		params: ["match", "include_rejected", "include_denied"],
		required: ["match"],
		fn: (m, a) => moveKeys(m, a.match, ["pending", ...(truthy(a.include_rejected) ? (["rejected"] as KeyState[]) : []), ...(truthy(a.include_denied) ? (["denied"] as KeyState[]) : [])], "accepted"),
	},
	"key.reject": {
		params: ["match", "include_accepted", "include_denied"],
		required: ["match"],
		fn: (m, a) => moveKeys(m, a.match, ["pending", ...(truthy(a.include_accepted) ? (["accepted"] as KeyState[]) : []), ...(truthy(a.include_denied) ? (["denied"] as KeyState[]) : [])], "rejected"),
	},
	"key.delete": {
		params: ["match"],
		required: ["match"],
		fn: (m, a) => {
			for (const ids of Object.values(nameMatch(m, a.match))) for (const id of ids) m.setKeyState(id, "deleted");
			return nameMatch(m, a.match);
		},
	},
	"file_roots.find": {
		params: ["path", "saltenv"],
		required: ["path"],
		fn: (m, a) => ((a.saltenv ?? "base") === "base" && m.files.read(String(a.path)) !== undefined ? [{ [`${FILE_ROOT}/${String(a.path).replace(/^\/+/, "")}`]: "txt" }] : []),
	},
	"file_roots.read": {
		params: ["path", "saltenv"],
		required: ["path"],
		fn: (m, a) => {
			if ((a.saltenv ?? "base") !== "base") return [];
			const text = m.files.read(String(a.path));
			return text === undefined ? [] : [{ [`${FILE_ROOT}/${String(a.path).replace(/^\/+/, "")}`]: text }];
		},
	},
	"file_roots.write": {
		params: ["data", "path", "saltenv", "index"],
		required: ["data", "path"],
		fn: (m, a) => {
			if ((a.saltenv ?? "base") !== "base") return "Named environment base is not present";
			const path = String(a.path);
			if (path.startsWith("/") || path.split("/").includes("..")) return "The path passed in base was not relative";
			m.files.write(path, String(a.data));
			return `Wrote data to file ${FILE_ROOT}/${path}`;
		},
	},
	"file_roots.list_roots": {
		params: [],
		fn: m => {
			const tree: Record<string, unknown> = {};
			for (const p of m.files.list()) {
				const parts = p.split("/");
				let node = tree;
				for (const dir of parts.slice(0, -1)) node = (node[dir] ??= {}) as Record<string, unknown>;
				node[parts[parts.length - 1]] = "f";
			}
			return { base: [{ [FILE_ROOT]: tree }] };
		},
	},
	"file_roots.list_env": {
		params: ["saltenv"],
		fn: (m, a) => ((a.saltenv ?? "base") === "base" ? ((WHEELS["file_roots.list_roots"].fn(m, {}) as { base: unknown[] }).base[0] as Record<string, unknown>) : {}),
	},
	"config.values": { params: [], fn: m => m.opts() },
};

// ------------------------------------------------------------------ argument handling

const CONTROL_KEYS = new Set(["client", "fun", "username", "password", "eauth", "token", "user", "key", "arg", "kwarg", "timeout", "full_return", "__current_eauth_user", "__current_eauth_groups", "print_event"]);

/**
 * `RunnerClient._reformat_low`: positional `arg` (with `k=v` strings), `kwarg`, and any other
 * top-level key are merged into keyword arguments; unknown keywords are dropped.
 */
function reformatLow(def: MasterFn, low: Record<string, unknown>, isWheel: boolean): { args: unknown[]; kwargs: Record<string, unknown> } {
	const rawArgs = low.arg === undefined || low.arg === null ? [] : Array.isArray(low.arg) ? low.arg : [low.arg];
	const split = splitArgs(rawArgs);
	const kwargs: Record<string, unknown> = { ...split.kwargs };
	if (isPlainObject(low.kwarg)) Object.assign(kwargs, low.kwarg);
	for (const [k, v] of Object.entries(low)) {
		// A function's own `key` parameter (config.get) is not the master key when given top-level.
		if (CONTROL_KEYS.has(k) && !(k === "key" && def.params.includes("key"))) continue;
		kwargs[k] = v;
	}
	const args = split.args.slice(0, def.params.length).map(v => (typeof v === "string" && !isWheel ? yamlify(v) : v));
	return { args, kwargs: Object.fromEntries(Object.entries(kwargs).filter(([k]) => def.params.includes(k))) };
}

function invoke(m: Master, kind: "runner" | "wheel", fun: string, low: Record<string, unknown>): { ret: unknown; funArgs: unknown[] } {
	const table = kind === "runner" ? RUNNERS : WHEELS;
	const def = Object.prototype.hasOwnProperty.call(table, fun) ? table[fun] : undefined;
	if (!def) throw new UnknownFunctionError(`'${fun}' is not available.`);
	const { args, kwargs } = reformatLow(def, low, kind === "wheel");
	const named: Record<string, unknown> = { ...kwargs };
	args.forEach((v, i) => (named[def.params[i]] = v));
	const funArgs = [...args, ...(Object.keys(kwargs).length ? [kwargs] : [])];
	const missing = (def.required ?? []).filter(p => named[p] === undefined);
	if (missing.length) {
		const name = fun.split(".")[1];
		const plural = missing.length > 1 ? "s" : "";
		return { ret: `\nPassed invalid arguments: ${name}() missing ${missing.length} required positional argument${plural}: ${missing.map(p => `'${p}'`).join(" and ")}\n\nUsage:\n${fun}`, funArgs };
	}
	return { ret: def.fn(m, named), funArgs };
}

/**
 * Run a runner function: fires salt/run/<jid>/new and /ret and stores the job. Returns the full
 * event data (`return` holds the value the `runner` client answers with).
 */
export function runRunner(m: Master, fun: string, low: Record<string, unknown>, user: string, jid = m.newJid()): Record<string, unknown> {
	const { ret, funArgs } = invoke(m, "runner", fun, low);
	const data: Record<string, unknown> = { fun: `runner.${fun}`, jid, user, fun_args: funArgs };
	m.events.fire(`salt/run/${jid}/new`, data);
	data.return = ret;
	data.success = true;
	m.events.fire(`salt/run/${jid}/ret`, data);
	m.storeRunnerJob(jid, `runner.${fun}`, funArgs, user, { ...data });
	return data;
}

/** Run a wheel function through the master: returns the full event `{tag, data}`. */
export function runWheel(m: Master, fun: string, low: Record<string, unknown>, user: string, jid = m.newJid()): { tag: string; data: Record<string, unknown> } {
	const tag = `salt/wheel/${jid}`;
	const data: Record<string, unknown> = { fun: `wheel.${fun}`, jid, tag, user };
	m.events.fire(`${tag}/new`, data);
	try {
		data.return = invoke(m, "wheel", fun, low).ret;
		data.success = true;
	} catch (e) {
		const cls = e instanceof UnknownFunctionError ? "CommandExecutionError" : "Exception";
		data.return = `Exception occurred in wheel ${fun}: ${cls}: ${e instanceof Error ? e.message : String(e)}`;
		data.success = false;
	}
	m.events.fire(`${tag}/ret`, data);
	return { tag, data };
}
