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
	/** Default values of the optional parameters (wheel: `format_call` lists them in `fun_args`). */
	defaults?: Record<string, unknown>;
	/** The function takes `*args` / `**kwargs` (extra positional args and any keyword reach it). */
	varargs?: boolean;
	varkw?: boolean;
	fn: (m: Master, a: Record<string, unknown>, rest: { args: unknown[]; kwargs: Record<string, unknown> }) => unknown;
}

const truthy = (v: unknown) => v === true || v === "True" || v === "true" || v === 1 || v === "1";
const splitList = (v: unknown): string[] | undefined =>
	v === undefined || v === null || v === ""
		? undefined
		: Array.isArray(v)
			? v.map(String)
			: String(v)
					.split(",")
					.map(s => s.trim())
					.filter(Boolean);

const seconds = (v: unknown): number | undefined => {
	const n = Number(v);
	return v === undefined || v === null || v === "" || !Number.isFinite(n) || n <= 0 ? undefined : n;
};

/** `manage.status` (and up/down): publishes test.ping to the target and waits like the CLI does. */
function manageStatus(m: Master, a: Record<string, unknown>): Promise<{ up: string[]; down: string[] }> {
	return m.managePing(a.tgt ?? "*", String(a.tgt_type ?? "glob"), seconds(a.timeout), seconds(a.gather_job_timeout));
}

/** `manage.list_state` / `list_not_state`: what the master sees connected now; nothing is published. */
const listState = (m: Master) => m.connectedIds();
const listNotState = (m: Master) => {
	const connected = new Set(m.connectedIds());
	return m.fleet.acceptedIds().filter(id => !connected.has(id));
};

/** `cp.get_file_str` as the `salt.cmd` runner runs it on the master: the file's text, or false. */
function getFileStr(m: Master, path: unknown, saltenv: unknown): string | false {
	if (typeof path !== "string" || !path.startsWith("salt://")) return false;
	let rel = path.slice("salt://".length);
	let env = typeof saltenv === "string" && saltenv ? saltenv : "base";
	const q = rel.indexOf("?");
	if (q >= 0) {
		const qs = new URLSearchParams(rel.slice(q + 1));
		rel = rel.slice(0, q);
		if (qs.get("saltenv")) env = qs.get("saltenv")!;
	}
	if (env !== "base") return false;
	const text = m.files.read(rel);
	return text === undefined ? false : text;
}

/** Execution functions the `salt.cmd` runner knows here; any other answers like an unknown function does. */
const SALT_CMD: Record<string, (m: Master, args: unknown[], kwargs: Record<string, unknown>) => unknown> = {
	"cp.get_file_str": (m, args, kwargs) => getFileStr(m, args[0] ?? kwargs.path, args[1] ?? kwargs.saltenv),
	"test.ping": () => true,
	"test.echo": (_m, args, kwargs) => String(args[0] ?? kwargs.text ?? ""),
};

/**
 * `salt/utils/verify.py clean_path(root, path)` without `subdir` (wheel `file_roots`): the path, normalised,
 * must name a file directly in the root; anything below a subfolder (or outside the root) is refused.
 */
export function cleanRootPath(path: string): string | null {
	const abs = path.startsWith("/") ? path : `${FILE_ROOT}/${path}`;
	const parts: string[] = [];
	for (const seg of abs.split("/")) {
		if (seg === "" || seg === ".") continue;
		if (seg === "..") parts.pop();
		else parts.push(seg);
	}
	const norm = `/${parts.join("/")}`;
	const dir = norm.slice(0, norm.lastIndexOf("/")) || "/";
	return dir === FILE_ROOT ? norm : null;
}

/** `file_roots.find`: `[{"/srv/salt/<file>": "txt"}]` for a file directly in the root, else []. */
function fileRootsFind(m: Master, a: Record<string, unknown>): Record<string, string>[] {
	if ((a.saltenv ?? "base") !== "base") return [];
	const full = cleanRootPath(String(a.path));
	if (!full) return [];
	const text = m.files.read(full.slice(FILE_ROOT.length + 1));
	if (text === undefined) return [];
	return [{ [full]: text.includes("\u0000") ? "bin" : "txt" }];
}

const RUNNERS: Record<string, MasterFn> = {
	"jobs.lookup_jid": {
		params: ["jid", "ext_source", "returned", "missing", "display_progress"],
		required: ["jid"],
		fn: (m, a) =>
			m.lookupJid(String(a.jid), {
				missing: truthy(a.missing),
				returned: a.returned === undefined ? true : truthy(a.returned),
			}),
	},
	"jobs.list_job": {
		params: ["jid", "ext_source", "display_progress"],
		required: ["jid"],
		fn: (m, a) => m.listJob(String(a.jid)),
	},
	"jobs.list_jobs": {
		params: [
			"ext_source",
			"outputter",
			"search_metadata",
			"search_function",
			"search_target",
			"start_time",
			"end_time",
			"display_progress",
		],
		fn: (m, a) =>
			m.listJobs({
				searchFunction: splitList(a.search_function),
				searchTarget: splitList(a.search_target),
				searchMetadata:
					a.search_metadata && typeof a.search_metadata === "object" && !Array.isArray(a.search_metadata)
						? (a.search_metadata as Record<string, unknown>)
						: undefined,
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
	"manage.up": {
		params: ["tgt", "tgt_type", "timeout", "gather_job_timeout"],
		fn: async (m, a) => (await manageStatus(m, a)).up,
	},
	"manage.down": {
		params: ["removekeys", "tgt", "tgt_type", "timeout", "gather_job_timeout"],
		fn: async (m, a) => {
			const { down } = await manageStatus(m, a);
			if (truthy(a.removekeys)) for (const id of down) m.setKeyState(id, "deleted");
			return down;
		},
	},
	"manage.list_state": { params: ["subset", "show_ip"], fn: listState },
	"manage.list_not_state": { params: ["subset", "show_ip"], fn: listNotState },
	...Object.fromEntries(
		["present", "joined", "allowed", "alived", "reaped"].flatMap(name => [
			[`manage.${name}`, { params: ["subset", "show_ip"], fn: listState }],
			[`manage.not_${name}`, { params: ["subset", "show_ip"], fn: listNotState }],
		]),
	),
	"salt.cmd": {
		params: ["fun"],
		required: ["fun"],
		varargs: true,
		varkw: true,
		fn: (m, a, rest) => {
			const fun = String(a.fun);
			const kwargs = Object.fromEntries(
				Object.entries(rest.kwargs).filter(([k]) => !k.startsWith("__") && k !== "with_pillar"),
			);
			const impl = Object.hasOwn(SALT_CMD, fun) ? SALT_CMD[fun] : undefined;
			return impl ? impl(m, rest.args, kwargs) : `'${fun}' is not available.`;
		},
	},
	"config.get": {
		params: ["key", "default", "delimiter"],
		required: ["key"],
		fn: (m, a) =>
			traverse(m.opts(), String(a.key), a.default ?? "", typeof a.delimiter === "string" ? a.delimiter : ":"),
	},
	"fileserver.file_list": {
		params: ["saltenv", "backend"],
		fn: (m, a) => ((a.saltenv ?? "base") === "base" ? m.files.list() : []),
	},
	"fileserver.dir_list": {
		params: ["saltenv", "backend"],
		fn: (m, a) => ((a.saltenv ?? "base") === "base" ? m.files.dirs() : []),
	},
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
	return String(match ?? "")
		.split(",")
		.filter(Boolean);
}

/** `salt.key.Key.name_match`: matching keys grouped by key dir; `full` includes the master's keys. */
function nameMatch(m: Master, match: unknown, full = false): Record<string, string[]> {
	const pats = keyMatchers(match);
	const hit = (id: string) => pats.some(p => fnmatch(id, p));
	const out: Record<string, string[]> = {};
	const byState = m.fleet.byKeyState();
	for (const st of KEY_ORDER) {
		const ids = byState[st].filter(hit);
		if (ids.length) out[KEY_DIRS[st]] = ids;
	}
	// `Key.all_keys()`: the key directories, then the master's own keys.
	if (full) {
		const local = MASTER_KEYS.filter(hit);
		if (local.length) out.local = local;
	}
	return out;
}

/** A minion's key in one key directory (a minion with a denied new key has two). */
function keyFingerprint(m: Master, dir: string, id: string): string {
	if (dir === "local") return id === "master.pem" ? m.masterPemFingerprint : m.masterFingerprint;
	const minion = m.fleet.get(id)!;
	return dir === "minions_denied" && minion.key !== "denied" && minion.deniedFingerprint !== undefined
		? minion.deniedFingerprint
		: minion.fingerprint;
}

function moveKeys(m: Master, match: unknown, from: KeyState[], to: KeyState): Record<string, string[]> {
	for (const st of from) {
		for (const id of nameMatch(m, match)[KEY_DIRS[st]] ?? []) {
			const minion = m.fleet.get(id)!;
			// The denied second key of an accepted minion: accepting it replaces the old key; rejecting drops it.
			if (st === "denied" && minion.key !== "denied") {
				if (to === "accepted") m.acceptDeniedKey(id);
				else if (m.dropDeniedKey(id)) m.events.fire("salt/key", { result: true, act: "reject", id });
				continue;
			}
			m.setKeyState(id, to);
		}
	}
	return nameMatch(m, match);
}

const WHEELS: Record<string, MasterFn> = {
	"key.list_all": {
		params: [],
		fn: m => {
			const by = m.fleet.byKeyState();
			return {
				minions: by.accepted,
				minions_pre: by.pending,
				minions_rejected: by.rejected,
				minions_denied: by.denied,
				local: [...MASTER_KEYS],
			};
		},
	},
	"key.list": {
		params: ["match"],
		required: ["match"],
		fn: (m, a) => {
			const by = m.fleet.byKeyState();
			const sel = String(a.match);
			const map: Record<string, KeyState> = {
				acc: "accepted",
				accepted: "accepted",
				minions: "accepted",
				pre: "pending",
				un: "pending",
				unaccepted: "pending",
				minions_pre: "pending",
				rej: "rejected",
				rejected: "rejected",
				minions_rejected: "rejected",
				den: "denied",
				denied: "denied",
				minions_denied: "denied",
			};
			if (sel === "all")
				return {
					minions: by.accepted,
					minions_pre: by.pending,
					minions_rejected: by.rejected,
					minions_denied: by.denied,
				};
			if (sel === "local") return { local: [...MASTER_KEYS] };
			const st = map[sel];
			return st ? { [KEY_DIRS[st]]: by[st] } : {};
		},
	},
	"key.name_match": { params: ["match"], required: ["match"], fn: (m, a) => nameMatch(m, a.match) },
	"key.finger": {
		params: ["match", "hash_type"],
		required: ["match"],
		defaults: { hash_type: null },
		fn: (m, a) => {
			const out: Record<string, Record<string, string>> = {};
			for (const [dir, ids] of Object.entries(nameMatch(m, a.match, true))) {
				out[dir] = {};
				for (const id of ids) out[dir][id] = keyFingerprint(m, dir, id);
			}
			return out;
		},
	},
	"key.finger_master": {
		params: ["hash_type"],
		defaults: { hash_type: null },
		fn: m => ({ local: { "master.pub": m.masterFingerprint } }),
	},
	"key.print": {
		params: ["match"],
		required: ["match"],
		fn: (m, a) => {
			const out: Record<string, Record<string, string>> = {};
			for (const [dir, ids] of Object.entries(nameMatch(m, a.match))) {
				out[dir] = {};
				for (const id of ids) out[dir][id] = m.publicKeyPem(id, keyFingerprint(m, dir, id));
			}
			return out;
		},
	},
	"key.accept": {
		params: ["match", "include_rejected", "include_denied"],
		required: ["match"],
		defaults: { include_rejected: false, include_denied: false },
		fn: (m, a) =>
			moveKeys(
				m,
				a.match,
				[
					"pending",
					...(truthy(a.include_rejected) ? (["rejected"] as KeyState[]) : []),
					...(truthy(a.include_denied) ? (["denied"] as KeyState[]) : []),
				],
				"accepted",
			),
	},
	"key.reject": {
		params: ["match", "include_accepted", "include_denied"],
		required: ["match"],
		defaults: { include_accepted: false, include_denied: false },
		fn: (m, a) =>
			moveKeys(
				m,
				a.match,
				[
					"pending",
					...(truthy(a.include_accepted) ? (["accepted"] as KeyState[]) : []),
					...(truthy(a.include_denied) ? (["denied"] as KeyState[]) : []),
				],
				"rejected",
			),
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
		defaults: { saltenv: "base" },
		fn: fileRootsFind,
	},
	"file_roots.read": {
		params: ["path", "saltenv"],
		required: ["path"],
		defaults: { saltenv: "base" },
		fn: (m, a) => {
			const out: Record<string, string>[] = [];
			for (const found of fileRootsFind(m, a)) {
				const [full, form] = Object.entries(found)[0];
				if (form === "txt") out.push({ [full]: m.files.read(full.slice(FILE_ROOT.length + 1))! });
			}
			return out;
		},
	},
	"file_roots.write": {
		params: ["data", "path", "saltenv", "index"],
		required: ["data", "path"],
		defaults: { saltenv: "base", index: 0 },
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
		defaults: { saltenv: "base" },
		fn: (m, a) =>
			(a.saltenv ?? "base") === "base"
				? ((WHEELS["file_roots.list_roots"].fn(m, {}, { args: [], kwargs: {} }) as { base: unknown[] })
						.base[0] as Record<string, unknown>)
				: {},
	},
	"config.values": { params: [], fn: m => m.opts() },
};

// ------------------------------------------------------------------ argument handling

const CONTROL_KEYS = new Set([
	"client",
	"fun",
	"username",
	"password",
	"eauth",
	"token",
	"user",
	"key",
	"arg",
	"kwarg",
	"timeout",
	"full_return",
	"__current_eauth_user",
	"__current_eauth_groups",
	"print_event",
]);

/** A runner or wheel call, its arguments resolved as the master does, ready for the ACL check and to run. */
export interface PreparedCall {
	kind: "runner" | "wheel";
	fun: string;
	def: MasterFn;
	/** Positional arguments (runner: after `k=v` strings became keywords). */
	args: unknown[];
	/** Keyword arguments the function takes (runner: unknown ones dropped, as `load_args_and_kwargs` does). */
	kwargs: Record<string, unknown>;
	/** What the job events show as `fun_args`. */
	funArgs: unknown[];
	/** What the master's ACL check (`spec_check`) looks at. */
	acl: { args: unknown[] | undefined; kwargs: Record<string, unknown> | undefined };
}

/**
 * `RunnerClient._reformat_low`: positional `arg` (with `k=v` strings), `kwarg`, and any other top-level key are
 * merged into keyword arguments; unknown keywords are dropped unless the function takes `**kwargs`.
 */
function reformatLow(
	def: MasterFn,
	low: Record<string, unknown>,
	isWheel: boolean,
): { args: unknown[]; kwargs: Record<string, unknown> } {
	const rawArgs = low.arg === undefined || low.arg === null ? [] : Array.isArray(low.arg) ? low.arg : [low.arg];
	const split = splitArgs(rawArgs);
	const kwargs: Record<string, unknown> = { ...split.kwargs };
	if (isPlainObject(low.kwarg)) Object.assign(kwargs, low.kwarg);
	for (const [k, v] of Object.entries(low)) {
		// A function's own `key` parameter (config.get) is not the master key when given top-level.
		if (CONTROL_KEYS.has(k) && !(k === "key" && def.params.includes("key"))) continue;
		kwargs[k] = v;
	}
	const all = split.args.map(v => (typeof v === "string" && !isWheel ? yamlify(v) : v));
	const args = def.varargs ? all : all.slice(0, def.params.length);
	return {
		args,
		kwargs: def.varkw ? kwargs : Object.fromEntries(Object.entries(kwargs).filter(([k]) => def.params.includes(k))),
	};
}

/** Resolve a runner or wheel call (throws UnknownFunctionError for a function the master does not have). */
export function prepareCall(kind: "runner" | "wheel", fun: string, low: Record<string, unknown>): PreparedCall {
	const table = kind === "runner" ? RUNNERS : WHEELS;
	const def = Object.hasOwn(table, fun) ? table[fun] : undefined;
	if (!def) throw new UnknownFunctionError(`'${fun}' is not available.`);
	const { args, kwargs } = reformatLow(def, low, kind === "wheel");
	let funArgs: unknown[];
	if (kind === "runner") funArgs = [...args, ...(Object.keys(kwargs).length ? [kwargs] : [])];
	else {
		// `salt.utils.args.format_call`: required parameters as positional args, the ones with defaults as keywords.
		const named: Record<string, unknown> = { ...kwargs };
		args.forEach((v, i) => (named[def.params[i]] = v));
		const defaults = def.defaults ?? {};
		const pos = def.params.filter(p => !(p in defaults) && named[p] !== undefined).map(p => named[p]);
		const kw: Record<string, unknown> = {};
		for (const p of def.params) if (p in defaults) kw[p] = named[p] === undefined ? defaults[p] : named[p];
		funArgs = [...pos, ...(Object.keys(kw).length ? [kw] : [])];
	}
	const acl =
		kind === "runner"
			? { args, kwargs }
			: {
					args: isPlainObject(low.kwarg) && Array.isArray(low.kwarg.arg) ? low.kwarg.arg : undefined,
					kwargs: isPlainObject(low.kwarg) && isPlainObject(low.kwarg.kwarg) ? low.kwarg.kwarg : undefined,
				};
	return { kind, fun, def, args, kwargs, funArgs, acl };
}

async function invoke(m: Master, call: PreparedCall): Promise<unknown> {
	const { def, fun, args, kwargs } = call;
	const named: Record<string, unknown> = { ...kwargs };
	const positional = def.varargs ? args.slice(0, def.params.length) : args;
	positional.forEach((v, i) => (named[def.params[i]] = v));
	const missing = (def.required ?? []).filter(p => named[p] === undefined);
	if (missing.length) {
		const name = fun.split(".")[1];
		const plural = missing.length > 1 ? "s" : "";
		return `\nPassed invalid arguments: ${name}() missing ${missing.length} required positional argument${plural}: ${missing.map(p => `'${p}'`).join(" and ")}\n\nUsage:\n${fun}`;
	}
	const restKwargs = def.varkw
		? Object.fromEntries(Object.entries(kwargs).filter(([k]) => !def.params.includes(k)))
		: {};
	return def.fn(m, named, { args: def.varargs ? args.slice(def.params.length) : [], kwargs: restKwargs });
}

/**
 * Run a runner function: fires salt/run/<jid>/new, waits for the function (manage.status publishes and
 * waits), fires /ret and stores the job. Returns the full event data (`return` holds the runner's value).
 */
export async function runRunner(
	m: Master,
	call: PreparedCall,
	user: string,
	jid = m.newJid(),
): Promise<Record<string, unknown>> {
	const data: Record<string, unknown> = { fun: `runner.${call.fun}`, jid, user, fun_args: call.funArgs };
	m.events.fire(`salt/run/${jid}/new`, data);
	data.return = await invoke(m, call);
	data.success = true;
	m.events.fire(`salt/run/${jid}/ret`, data);
	m.storeRunnerJob(jid, `runner.${call.fun}`, call.funArgs, user, { ...data });
	return data;
}

/**
 * Run a wheel function through the master (`ClearFuncs.wheel`): its `salt/wheel/<jid>/new` {fun, jid, tag, user},
 * then the wheel client's own job inside (`salt/wheel/<jid2>/new|ret` with user "UNKNOWN" and `fun_args`), then
 * `salt/wheel/<jid>/ret`. Returns the full event `{tag, data}`.
 */
export async function runWheel(
	m: Master,
	fun: string,
	low: Record<string, unknown>,
	user: string,
	jid = m.newJid(),
	prepared?: PreparedCall,
): Promise<{ tag: string; data: Record<string, unknown> }> {
	const tag = `salt/wheel/${jid}`;
	const data: Record<string, unknown> = { fun: `wheel.${fun}`, jid, tag, user };
	m.events.fire(`${tag}/new`, data);
	try {
		const call = prepared ?? prepareCall("wheel", fun, low);
		const inner = m.newJid();
		const innerData: Record<string, unknown> = {
			fun: `wheel.${fun}`,
			jid: inner,
			user: "UNKNOWN",
			fun_args: call.funArgs,
		};
		m.events.fire(`salt/wheel/${inner}/new`, innerData);
		innerData.return = await invoke(m, call);
		innerData.success = true;
		m.events.fire(`salt/wheel/${inner}/ret`, innerData);
		data.return = innerData.return;
		data.success = true;
	} catch (e) {
		const cls = e instanceof UnknownFunctionError ? "CommandExecutionError" : "Exception";
		data.return = `Exception occurred in wheel ${fun}: ${cls}: ${e instanceof Error ? e.message : String(e)}`;
		data.success = false;
	}
	m.events.fire(`${tag}/ret`, data);
	return { tag, data };
}
