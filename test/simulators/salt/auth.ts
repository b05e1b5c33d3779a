/**
 * eauth as salt-api sees it: users and their ACL (`external_auth`), Salt eauth tokens (64 hex,
 * sha256-sized) and rest_cherrypy sessions (40 hex session ids that map to a Salt token).
 */
import { fnmatch, isPlainObject, nowMicros, pyReMatch, randomHex } from "./util";

export type Perm = string | Record<string, string[]>;

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

/**
 * The eauth ACL check: may this token run `fun` through `client` kind on these minions?
 * Strings are regexes on execution functions; `@runner`, `@wheel` and `@jobs` grant master functions;
 * `{"web*": ["test.*"]}` limits functions to minions matching the key.
 */
export function authorized(perms: Perm[], kind: "local" | "runner" | "wheel", fun: string, minions: string[] = []): boolean {
	const funMatch = (patterns: string[]) => patterns.some(p => pyReMatch(p, fun));
	for (const p of perms) {
		if (typeof p === "string") {
			if (p.startsWith("@")) {
				if (kind === "runner" && (p === "@runner" || (p === "@jobs" && fun.startsWith("jobs.")))) return true;
				if (kind === "wheel" && p === "@wheel") return true;
			} else if (kind === "local" && pyReMatch(p, fun)) return true;
			continue;
		}
		for (const [key, funs] of Object.entries(p)) {
			const list = Array.isArray(funs) ? funs.map(String) : [];
			if (key.startsWith("@")) {
				const k = key.slice(1);
				if ((kind === "runner" && (k === "runner" || (k === "jobs" && fun.startsWith("jobs.")))) || (kind === "wheel" && k === "wheel")) {
					if (funMatch(list)) return true;
				}
			} else if (kind === "local" && minions.length && minions.every(id => fnmatch(id, key)) && funMatch(list)) return true;
		}
	}
	return false;
}
