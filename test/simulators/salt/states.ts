/**
 * The file server (`file_roots: {base: [/srv/salt]}`) and `state.apply`: SLS files are rendered (the grains
 * expressions of Jinja, then YAML) into steps, and a run returns Salt's state return dict, keyed
 * `<state>_|-<__id__>_|-<name>_|-<fun>`, with failing steps where the test configured them.
 */
import { fnmatch, hashString, isPlainObject, nowMicros, pyStr, timeOfDay, traverse } from "./util";
import { YamlError, parseYaml } from "./yaml";

export const FILE_ROOT = "/srv/salt";

/** Salt's exit codes used in job returns. */
export const EX_OK = 0;
export const EX_GENERIC = 1;
export const EX_STATE_FAILURE = 2;

export class FileServer {
	private readonly files = new Map<string, string>();

	constructor(initial: Record<string, string> = {}) {
		for (const [p, text] of Object.entries(initial)) this.write(p, text);
	}
	static normalise(path: string): string {
		return path.replace(/^\/+/, "").replace(/\/+/g, "/");
	}
	write(path: string, text: string): void {
		this.files.set(FileServer.normalise(path), text);
	}
	remove(path: string): boolean {
		return this.files.delete(FileServer.normalise(path));
	}
	read(path: string): string | undefined {
		return this.files.get(FileServer.normalise(path));
	}
	/** Sorted relative paths (`fileserver.file_list`). */
	list(): string[] {
		return [...this.files.keys()].sort();
	}
	dirs(): string[] {
		const out = new Set<string>();
		for (const p of this.files.keys()) {
			const parts = p.split("/");
			for (let i = 1; i < parts.length; i++) out.add(parts.slice(0, i).join("/"));
		}
		return [...out].sort();
	}
	/** `patches.fix1` → `patches/fix1.sls` or `patches/fix1/init.sls`. */
	slsPath(sls: string): string | undefined {
		const base = sls.replace(/\./g, "/");
		for (const cand of [`${base}.sls`, `${base}/init.sls`]) if (this.files.has(cand)) return cand;
		return undefined;
	}
}

/** `patches/fix1.sls` or `patches.fix1` → `patches.fix1`. */
export function slsName(nameOrPath: string): string {
	return FileServer.normalise(nameOrPath)
		.replace(/\/init\.sls$/, "")
		.replace(/\.sls$/, "")
		.replace(/\//g, ".");
}

export interface StateStep {
	state: string;
	fun: string;
	id: string;
	name: string;
	sls: string;
	args: Record<string, unknown>;
}

/**
 * A drift a test configured: one state of one minion is not in its desired state. With test=True Salt predicts the
 * change (result None, the changes it would make); a real run makes it (result True, those changes) and the drift
 * is gone.
 */
export interface Drift {
	changes: Record<string, unknown>;
	comment?: string;
}

/** A minion's drifts, by sls and state id: read by a run, cleared by a real one. */
export interface DriftBook {
	get(sls: string, id: string): Drift | undefined;
	fix(sls: string, id: string): void;
}

/** A failure injected by a test for one patch (sls) on some minions. */
export interface StepFailure {
	/** The `__id__` of the step (or steps) to fail; default the first `cmd.*` step, or the first step. */
	stepId?: string | string[];
	retcode?: number;
	stderr?: string;
	stdout?: string;
}

type Compiled = { steps: StateStep[] } | { errors: string[] };

class JinjaError extends Error {}

/** A Jinja literal argument: a quoted string or a number (anything else: undefined). */
function jinjaLiteral(text: string): { value: unknown } | undefined {
	const t = text.trim();
	const q = /^(['"])(.*)\1$/s.exec(t);
	if (q) return { value: q[2] };
	if (/^-?\d+(\.\d+)?$/.test(t)) return { value: Number(t) };
	if (t === "None") return { value: null };
	if (t === "True" || t === "False") return { value: t === "True" };
	return undefined;
}

/**
 * The value of one `{{ … }}` expression on the grains, as Salt's Jinja (StrictUndefined) gives it:
 * `grains['k']` / `grains.k` (a missing key is an error), `grains.get('k', dflt)` (the dict's get: None when
 * missing), `salt['grains.get']('a:b', dflt)` (traversed, "" when missing). Undefined: not an expression of these.
 */
function jinjaValue(expr: string, grains: Record<string, unknown>): { value: unknown } | undefined {
	let m = /^grains(?:\[\s*(['"])(.+?)\1\s*\]|\.([A-Za-z_]\w*))$/.exec(expr);
	if (m) {
		const key = m[2] ?? m[3];
		if (!Object.hasOwn(grains, key)) throw new JinjaError(`Jinja variable 'dict object' has no attribute '${key}'`);
		return { value: grains[key] };
	}
	m = /^(grains\.get|salt\[\s*(['"])grains\.get\2\s*\])\((.*)\)$/s.exec(expr);
	if (!m) return undefined;
	const args = m[3].trim() === "" ? [] : m[3].split(",").map(jinjaLiteral);
	if (!args.length || args.some(a => a === undefined) || typeof args[0]!.value !== "string") return undefined;
	const key = args[0]!.value as string;
	if (m[1] === "grains.get")
		return { value: Object.hasOwn(grains, key) ? grains[key] : args.length > 1 ? args[1]!.value : null };
	return { value: traverse(grains, key, args.length > 1 ? args[1]!.value : "", ":") };
}

/** Render the grains expressions of an SLS file's Jinja (`{{ grains['id'] }}`, …); other text is left as written. */
export function renderJinja(text: string, grains: Record<string, unknown>): string {
	return text.replace(/\{\{-?\s*([\s\S]*?)\s*-?\}\}/g, (whole, expr: string) => {
		const v = jinjaValue(expr.trim(), grains);
		return v === undefined ? whole : pyStr(v.value);
	});
}

/** Compile the given SLS names (with their includes) into ordered steps, or render errors. */
export function compileSls(
	files: FileServer,
	names: string[],
	saltenv = "base",
	grains: Record<string, unknown> = {},
): Compiled {
	const steps: StateStep[] = [];
	const errors: string[] = [];
	const done = new Set<string>();
	const visit = (sls: string) => {
		if (done.has(sls)) return;
		done.add(sls);
		const path = saltenv === "base" ? files.slsPath(sls) : undefined;
		if (!path) {
			errors.push(`No matching sls found for '${sls}' in env '${saltenv}'`);
			return;
		}
		let data: unknown;
		try {
			data = parseYaml(renderJinja(files.read(path)!, grains));
		} catch (e) {
			const msg = e instanceof YamlError || e instanceof JinjaError ? e.message : String(e);
			errors.push(`Rendering SLS '${saltenv}:${sls}' failed: ${msg}`);
			return;
		}
		if (data === null) return;
		if (!isPlainObject(data)) {
			errors.push(`SLS '${sls}' does not render to a dictionary`);
			return;
		}
		for (const [id, body] of Object.entries(data)) {
			if (id === "include") {
				for (const inc of Array.isArray(body) ? body : [body]) {
					const incName =
						typeof inc === "string" && inc.startsWith(".") ? sls.split(".").slice(0, -1).join(".") + inc : String(inc);
					visit(incName);
				}
				continue;
			}
			if (id === "extend") continue;
			if (!isPlainObject(body)) {
				errors.push(`ID '${id}' in SLS '${sls}' is not a dictionary`);
				continue;
			}
			for (const [decl, argsRaw] of Object.entries(body)) {
				if (decl.startsWith("__")) continue;
				let state = decl;
				let fun: string | undefined;
				const argList = argsRaw === null ? [] : Array.isArray(argsRaw) ? argsRaw : null;
				if (argList === null) {
					errors.push(`State '${id}' in SLS '${sls}' is not formed as a list`);
					continue;
				}
				if (decl.includes(".")) [state, fun] = [decl.slice(0, decl.indexOf(".")), decl.slice(decl.indexOf(".") + 1)];
				const args: Record<string, unknown> = {};
				for (const a of argList) {
					if (typeof a === "string" && !fun) fun = a;
					else if (isPlainObject(a)) Object.assign(args, a);
				}
				if (!fun) {
					errors.push(`Missing function in state declaration '${decl}' for ID '${id}' in SLS '${sls}'`);
					continue;
				}
				const names = Array.isArray(args.names)
					? args.names.map(String)
					: [typeof args.name === "string" ? args.name : id];
				for (const name of names) steps.push({ state, fun, id, name, sls, args });
			}
		}
	};
	for (const n of names) visit(n);
	return errors.length ? { errors } : { steps };
}

/** Parse `top.sls` (base env): the SLS names that apply to a minion. */
export function topMatches(
	files: FileServer,
	minionId: string,
	matchGrain: (expr: string) => boolean,
): string[] | null {
	const text = files.read("top.sls");
	if (text === undefined) return null;
	let top: unknown;
	try {
		top = parseYaml(text);
	} catch {
		return null;
	}
	const base = isPlainObject(top) ? top.base : undefined;
	if (!isPlainObject(base)) return [];
	const out: string[] = [];
	for (const [target, entries] of Object.entries(base)) {
		const list = Array.isArray(entries) ? entries : [];
		const matchType = list.find(e => isPlainObject(e) && "match" in e) as Record<string, unknown> | undefined;
		const type = matchType ? String(matchType.match) : "glob";
		const hit =
			type === "grain"
				? matchGrain(target)
				: type === "list"
					? target.split(",").includes(minionId)
					: fnmatch(minionId, target);
		if (hit) for (const e of list) if (typeof e === "string" && !out.includes(e)) out.push(e);
	}
	return out;
}

const REQUISITES = ["require", "watch", "onchanges", "prereq"];

/** Does a requisite entry (`{file: managed-dir}`, `{sls: common}` or a bare id) name this step? */
function requisiteNames(req: unknown, step: StateStep): boolean {
	if (typeof req === "string") return step.id === req || step.name === req;
	if (!isPlainObject(req)) return false;
	return Object.entries(req).some(([state, target]) =>
		state === "sls"
			? step.sls === String(target)
			: (state === step.state || state === "id") && (step.id === String(target) || step.name === String(target)),
	);
}

/**
 * The steps with `id` and, before each, the steps it requires (`require`, `watch`, `onchanges`, `prereq`,
 * transitively): what `state.sls_id` runs (state_sls_id_fix.json: `motd` and the `managed-dir` it requires).
 */
export function withRequisites(steps: StateStep[], id: string): StateStep[] {
	const out: StateStep[] = [];
	const visiting = new Set<StateStep>();
	const visit = (step: StateStep) => {
		if (out.includes(step) || visiting.has(step)) return;
		visiting.add(step);
		for (const kind of REQUISITES) {
			const reqs = step.args[kind];
			for (const req of Array.isArray(reqs) ? reqs : reqs === undefined ? [] : [reqs])
				for (const dep of steps) if (dep !== step && requisiteNames(req, dep)) visit(dep);
		}
		out.push(step);
	};
	for (const step of steps) if (step.id === id) visit(step);
	return out;
}

export interface StateRun {
	ret: unknown;
	retcode: number;
}

const NO_STATES_TAG = "no_|-states_|-states_|-None";

/** Run compiled steps for one minion and build the state return dict. */
export function runSteps(
	minionId: string,
	steps: StateStep[],
	failures: (sls: string) => StepFailure | undefined,
	test: boolean,
	drifts?: DriftBook,
): StateRun {
	const ret: Record<string, unknown> = {};
	let failed = false;
	let clock = nowMicros();
	const failingStep = new Map<string, string>();
	for (const sls of new Set(steps.map(s => s.sls))) {
		const f = failures(sls);
		if (!f) continue;
		const inSls = steps.filter(s => s.sls === sls);
		const ids = f.stepId === undefined ? undefined : Array.isArray(f.stepId) ? f.stepId : [f.stepId];
		const targets = ids ? inSls.filter(s => ids.includes(s.id)) : [inSls.find(s => s.state === "cmd") ?? inSls[0]];
		for (const target of targets) if (target) failingStep.set(`${target.sls}/${target.id}/${target.name}`, sls);
	}
	steps.forEach((step, runNum) => {
		const tag = `${step.state}_|-${step.id}_|-${step.name}_|-${step.fun}`;
		const failSls = failingStep.get(`${step.sls}/${step.id}/${step.name}`);
		const failure = failSls !== undefined ? failures(failSls) : undefined;
		const h = hashString(`${minionId}/${tag}`);
		const duration = Math.round(((h % 90_000) / 100 + 3.217) * 1000) / 1000;
		const drift = step.state === "cmd" || failure ? undefined : drifts?.get(step.sls, step.id);
		const outcome = drift ? driftOutcome(step, drift, test) : stepOutcome(step, h, failure, test);
		if (drift && !test) drifts?.fix(step.sls, step.id);
		if (outcome.result === false) failed = true;
		ret[tag] = {
			name: step.name,
			changes: outcome.changes,
			result: outcome.result,
			comment: outcome.comment,
			__sls__: step.sls,
			__run_num__: runNum,
			start_time: timeOfDay(clock),
			duration,
			__id__: step.id,
		};
		clock += Math.round(duration * 1000);
	});
	return { ret, retcode: failed ? EX_STATE_FAILURE : EX_OK };
}

function stepOutcome(
	step: StateStep,
	h: number,
	failure: StepFailure | undefined,
	test: boolean,
): { result: boolean | null; comment: string; changes: Record<string, unknown> } {
	const name = step.name;
	if (step.state === "cmd") {
		// Salt's cmd.run with test=True: result None, the comment, and no changes (states/cmd.py leaves them empty).
		if (test) return { result: null, comment: `Command "${name}" would have been executed`, changes: {} };
		const echo = /^echo\s+(.*)$/s.exec(name);
		const stdout = failure?.stdout ?? (echo ? unquote(echo[1]) : "");
		if (failure) {
			return {
				result: false,
				comment: `Command "${name}" run`,
				changes: {
					pid: 1000 + (h % 60000),
					retcode: failure.retcode ?? 1,
					stdout,
					stderr: failure.stderr ?? `${name.split(/\s+/)[0]}: patch step failed`,
				},
			};
		}
		return {
			result: true,
			comment: `Command "${name}" run`,
			changes: { pid: 1000 + (h % 60000), retcode: 0, stdout, stderr: "" },
		};
	}
	if (failure) {
		const msg = failure.stderr ?? "failed";
		const comments: Record<string, string> = {
			pkg: `The following packages failed to install/update: ${name}`,
			file: `Unable to manage file: ${msg}`,
			service: `Service ${name} failed to start`,
		};
		if (step.state === "file" && step.fun === "exists")
			return { result: false, comment: `Specified path ${name} does not exist`, changes: {} };
		return { result: false, comment: comments[step.state] ?? `${step.state}.${step.fun} failed: ${msg}`, changes: {} };
	}
	// Every state but `cmd` is already in its desired state here (its real run changes nothing), so with test=True
	// Salt predicts no change: result True and the same comment, as a real master answers (a `cmd` always would run).
	const comments: Record<string, string> = {
		pkg: "All specified packages are already installed",
		file: `File ${name} is in the correct state`,
		service: `The service ${name} is already running`,
	};
	return {
		result: true,
		comment: comments[step.state] ?? `State '${step.state}.${step.fun}' was executed`,
		changes: {},
	};
}

/** A drifted state's outcome: predicted with test=True, made by a real run (the comments Salt's state modules write). */
function driftOutcome(
	step: StateStep,
	drift: Drift,
	test: boolean,
): { result: boolean | null; comment: string; changes: Record<string, unknown> } {
	const name = step.name;
	const predicted: Record<string, string> = {
		pkg: `The following packages would be installed/updated: ${name}`,
		file: `The file ${name} is set to be changed`,
		service: `Service ${name} is set to start`,
	};
	const made: Record<string, string> = {
		pkg: `The following packages were installed/updated: ${name}`,
		file: `File ${name} updated`,
		service: `Service ${name} has been enabled, and is running`,
	};
	if (test)
		return {
			result: null,
			comment: drift.comment ?? predicted[step.state] ?? `${step.state}.${step.fun} would change ${name}`,
			changes: drift.changes,
		};
	return {
		result: true,
		comment: made[step.state] ?? `${step.state}.${step.fun} changed ${name}`,
		changes: drift.changes,
	};
}

function unquote(s: string): string {
	const t = s.trim();
	if ((t.startsWith('"') && t.endsWith('"')) || (t.startsWith("'") && t.endsWith("'"))) return t.slice(1, -1);
	return t;
}

/** The return of a highstate that matched nothing in the top file. */
export function noStatesReturn(comment: string): StateRun {
	return {
		ret: { [NO_STATES_TAG]: { result: false, comment, name: "No States", changes: {}, __run_num__: 0 } },
		retcode: EX_STATE_FAILURE,
	};
}

/** Default file server contents: a top file, a common state and two patches. */
export const DEFAULT_FILES: Record<string, string> = {
	"top.sls": "base:\n  '*':\n    - common\n",
	"common.sls": "base_packages:\n  pkg.installed:\n    - pkgs:\n      - vim\n      - curl\n",
	"patches/openssl-cve-2024-5535.sls":
		"# Upgrade OpenSSL and restart what links it\nupgrade_openssl:\n  cmd.run:\n    - name: apt-get install -y --only-upgrade openssl libssl3\n\nrestart_sshd:\n  cmd.run:\n    - name: systemctl restart ssh\n",
	"patches/fix-ntp.sls":
		"ntp_config:\n  file.managed:\n    - name: /etc/systemd/timesyncd.conf\n    - source: salt://patches/files/timesyncd.conf\n\nrestart_timesyncd:\n  cmd.run:\n    - name: systemctl restart systemd-timesyncd\n",
	"patches/files/timesyncd.conf": "[Time]\nNTP=ntp.example\n",
};
