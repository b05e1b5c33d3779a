/**
 * eauth as salt-api sees it: users and their ACL (`external_auth`), Salt eauth tokens (64 hex,
 * sha256-sized) and rest_cherrypy sessions (40 hex session ids that map to a Salt token).
 */
import { isPlainObject, nowMicros, pyReMatch, pyStr, randomHex } from "./util";

/**
 * One `external_auth` ACL entry, in every form Salt 3006 reads (`CkMinions.auth_check`/`spec_check`):
 * - a string: a regex on execution functions (`"test.*"`), or `@runner`, `@wheel`, `@jobs`, `@runners`, … (a form
 *   or a module of master functions);
 * - `{"<target>": [...]}`: execution functions allowed on the minions the (compound) target matches;
 * - `{"@runner" | "@wheel" | "@<module>": [...]}`: master functions allowed.
 * The list holds function regexes, or `{"<fun regex>": {args?: [...], kwargs?: {...}}}` (or a list of such
 * `{args, kwargs}` dicts): positional args are matched in order with `re.match` (null: anything), extra args are
 * allowed, kwargs by name.
 */
export type ArgSpec = { args?: (string | null)[]; kwargs?: Record<string, string | null> };
export type FunCond = string | { [fun: string]: ArgSpec | ArgSpec[] | undefined };
export type Perm = string | { [target: string]: FunCond | FunCond[] | undefined };

export interface UserSpec {
	username: string;
	password: string;
	/** eauth backends this user may log in with; "auto" is always accepted too. Default ["pam"]. */
	eauth?: string[];
	/** The user's `external_auth` ACL. Default [".*", "@runner", "@wheel", "@jobs"]. */
	perms?: Perm[];
}

export interface SaltToken {
	token: string;
	name: string;
	eauth: string;
	start: number;
	expire: number;
	perms: Perm[];
}

export const DEFAULT_PERMS: Perm[] = [".*", "@runner", "@wheel", "@jobs"];

/** `salt.netapi.sorted_permissions`: strings sorted, then the dict entries. */
export function sortedPermissions(perms: Perm[]): Perm[] {
	const strs = [...new Set(perms.filter((p): p is string => typeof p === "string"))].sort();
	const dicts = perms.filter(p => typeof p !== "string");
	return [...strs, ...dicts];
}

export class Auth {
	private readonly users = new Map<string, UserSpec>();
	private readonly tokens = new Map<string, SaltToken>();
	private readonly sessions = new Map<string, string>();

	constructor(
		users: UserSpec[],
		private readonly tokenExpireS: () => number,
	) {
		for (const u of users) this.users.set(u.username, u);
	}

	addUser(u: UserSpec): void {
		this.users.set(u.username, u);
	}

	/** `LoadAuth.mk_token`: a Salt token for valid credentials, or null. */
	mkToken(creds: Record<string, unknown>): SaltToken | null {
		const user = this.check(creds);
		if (!user) return null;
		const start = nowMicros() / 1e6;
		const tok: SaltToken = {
			token: randomHex(32),
			name: user.username,
			eauth: String(creds.eauth),
			start,
			expire: start + this.tokenExpireS(),
			perms: user.perms ?? DEFAULT_PERMS,
		};
		this.tokens.set(tok.token, tok);
		return tok;
	}

	/** Check eauth credentials (username, password, eauth). */
	check(creds: Record<string, unknown>): UserSpec | null {
		if (!isPlainObject(creds)) return null;
		const eauth = creds.eauth;
		if (typeof eauth !== "string" || !eauth) return null;
		const user = this.users.get(String(creds.username ?? ""));
		if (!user || user.password !== creds.password) return null;
		if (eauth !== "auto" && !(user.eauth ?? ["pam"]).includes(eauth)) return null;
		return user;
	}

	/** A Salt token that exists and has not expired. */
	getToken(token: unknown): SaltToken | null {
		if (typeof token !== "string") return null;
		const tok = this.tokens.get(token);
		if (!tok) return null;
		if (tok.expire <= Date.now() / 1000) {
			this.tokens.delete(token);
			return null;
		}
		return tok;
	}

	newSession(tok: SaltToken): string {
		const sid = randomHex(20);
		this.sessions.set(sid, tok.token);
		return sid;
	}

	/** The session's Salt token id (even if that token expired), or null if there is no session. */
	sessionToken(sid: string | undefined): string | null {
		if (!sid) return null;
		return this.sessions.get(sid) ?? null;
	}

	endSession(sid: string): void {
		this.sessions.delete(sid);
	}

	/** Invalidate every session and token (a master restart or a token purge). */
	expireAll(): void {
		this.sessions.clear();
		this.tokens.clear();
	}

	/** Make every Salt token expire now but keep the sessions: the next call gets 401 from the master. */
	expireTokens(): void {
		const now = Date.now() / 1000;
		for (const t of this.tokens.values()) t.expire = now - 1;
	}
}

// ------------------------------------------------------------------ ACL checks (salt/utils/minions.py CkMinions)

/** `CkMinions.match_check`: `re.match` (anchored at the start only); an invalid regex never matches. */
export function matchCheck(regex: unknown, fun: string): boolean {
	return typeof regex === "string" && pyReMatch(regex, fun);
}

/** `CkMinions.__args_check`: `{args: [...], kwargs: {...}}` (or a list of them) against the call's arguments. */
function argsCheck(valid: unknown, args: unknown[] | undefined, kwargs: Record<string, unknown> | undefined): boolean {
	for (const cond of Array.isArray(valid) ? valid : [valid]) {
		if (!isPlainObject(cond)) continue;
		let good = true;
		const condArgs = Array.isArray(cond.args) ? cond.args : [];
		for (let i = 0; i < condArgs.length; i++) {
			if (!args || args.length <= i) {
				good = false;
				break;
			}
			if (condArgs[i] === null) continue;
			if (!matchCheck(condArgs[i], pyStr(args[i]))) {
				good = false;
				break;
			}
		}
		if (!good) continue;
		const condKwargs = isPlainObject(cond.kwargs) ? cond.kwargs : {};
		for (const [k, v] of Object.entries(condKwargs)) {
			if (!kwargs || !(k in kwargs)) {
				good = false;
				break;
			}
			if (v === null) continue;
			if (!matchCheck(v, pyStr(kwargs[k]))) {
				good = false;
				break;
			}
		}
		if (good) return true;
	}
	return false;
}

/** `CkMinions.__fun_check`: function regexes, or `{fun regex: arg conditions}`. */
function funCheck(valid: unknown, fun: string, args?: unknown[], kwargs?: Record<string, unknown>): boolean {
	for (const cond of Array.isArray(valid) ? valid : [valid]) {
		if (typeof cond === "string") {
			if (matchCheck(cond, fun)) return true;
		} else if (isPlainObject(cond)) {
			const keys = Object.keys(cond);
			if (keys.length !== 1) continue;
			if (matchCheck(keys[0], fun) && argsCheck(cond[keys[0]], args, kwargs)) return true;
		}
	}
	return false;
}

/**
 * `CkMinions.spec_check` for the runner and wheel forms: `"syntax"` when `fun` is not `module.function` (Salt's
 * "Check syntax." error), else whether the ACL allows the call. `args`/`kwargs` are what the master checks:
 * for runners the positional and keyword arguments of the call, for wheel the `arg`/`kwarg` members of the
 * chunk's `kwarg` (so argument conditions on wheel functions rarely match, as in Salt).
 */
export function specCheck(
	perms: Perm[],
	fun: string,
	args: unknown[] | undefined,
	kwargs: Record<string, unknown> | undefined,
	form: "runner" | "wheel",
): boolean | "syntax" {
	if (!perms.length) return false;
	const comps = fun.split(".");
	if (comps.length !== 2) return "syntax";
	const [mod] = comps;
	const funName = comps[1];
	for (const ind of perms) {
		if (typeof ind === "string") {
			if (ind.startsWith("@") && (ind.slice(1) === mod || ind.slice(1) === form || ind === `@${form}s`)) return true;
		} else if (isPlainObject(ind)) {
			const keys = Object.keys(ind);
			if (keys.length !== 1 || !keys[0].startsWith("@")) continue;
			const valid = keys[0];
			if (valid.slice(1) === mod && funCheck(ind[valid], funName, args, kwargs)) return true;
			if ((valid.slice(1) === form || valid === `@${form}s`) && funCheck(ind[valid], fun, args, kwargs)) return true;
		}
	}
	return false;
}

/**
 * `CkMinions.auth_check` for a publication (the `local` clients): string entries allow the function on every
 * minion, `{target: [...]}` entries when every targeted minion is in the target (`inTarget`, a compound
 * match). `arg` is the publication's arg list: a trailing `{"__kwarg__": true, …}` is checked as kwargs.
 * `saltutil.find_job` is always allowed (the master's whitelist).
 */
export function authCheck(perms: Perm[], fun: string, arg: unknown[], inTarget: (target: string) => boolean): boolean {
	if (fun === "saltutil.find_job") return true;
	let args = arg;
	let kwargs: Record<string, unknown> | undefined;
	const last = arg[arg.length - 1];
	if (isPlainObject(last) && "__kwarg__" in last) {
		args = arg.slice(0, -1);
		kwargs = last;
	}
	for (const ind of perms) {
		if (typeof ind === "string") {
			if (matchCheck(ind, fun)) return true;
		} else if (isPlainObject(ind)) {
			const keys = Object.keys(ind);
			if (keys.length !== 1) continue;
			if (inTarget(keys[0]) && funCheck(ind[keys[0]], fun, args, kwargs)) return true;
		}
	}
	return false;
}
