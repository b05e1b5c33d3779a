/**
 * Single sign-on at the gateway (docs/security.md, "Single sign-on"): OpenID Connect's authorization code flow with
 * PKCE against OIDC_ISSUER (openid-client, loaded only when it is configured), the provider's groups mapped to a role
 * and a scope by OIDC_ROLES, and the browser session that follows — a short-lived token (tokens.openSession) whose
 * secret lives in an http-only, SameSite=Lax cookie, with a CSRF token (double submit: the readable `fleet_csrf`
 * cookie, echoed in `X-CSRF-Token`) that every write made with the cookie must carry.
 *
 *   GET  /auth/config    whether sign-in is offered, and what its button says
 *   GET  /auth/login     to the provider (PKCE verifier, state and nonce in an encrypted, http-only cookie)
 *   GET  /auth/callback  back from it: code exchanged, claims read, role mapped, session opened, audited; to `/`
 *   POST /auth/logout    the session revoked and its cookies cleared; answers where to go (the provider's logout)
 *
 * A failed sign-in goes back to the dashboard with the reason (`/#signin-error=…`). Without OIDC_ISSUER only
 * /auth/config answers (`{"oidc": false}`); nothing else changes.
 */
import { createHash } from "node:crypto";
import type { Context } from "moleculer";
import type { OidcConfig, OidcRoleRule } from "../../lib/config";
import { EveError } from "../../lib/eve/errors";
import type { AuditBegin, AuditOutcome } from "../../lib/contracts/audit";
import { hashToken } from "../../lib/http/auth";
import { decryptSecret, encryptSecret, type SecretsSource } from "../../lib/security/secrets";

type OidcClient = typeof import("openid-client");

export const SESSION_COOKIE = "fleet_session";
export const CSRF_COOKIE = "fleet_csrf";
const LOGIN_COOKIE = "fleet_oidc";
/** A sign-in must come back from the provider within this long. */
const LOGIN_TTL_S = 600;

/** What the /auth actions read of the request (copied into meta by the route's onBeforeCall). */
export interface AuthMeta {
	cookies?: Record<string, string>;
	/** The request's path and query, as received. */
	url?: string;
	source?: string;
	agent?: string;
	csrfHeader?: string;
	$statusCode?: number;
	$location?: string;
	$responseHeaders?: Record<string, string | string[]>;
}

/** The cookies of a request, by name (the first of a name wins). */
export function parseCookies(header: string | undefined): Record<string, string> {
	const out: Record<string, string> = {};
	for (const raw of (header ?? "").split(";")) {
		const part = raw.trim();
		const eq = part.indexOf("=");
		if (eq <= 0) continue;
		const name = part.slice(0, eq).trim();
		if (name in out) continue;
		try {
			out[name] = decodeURIComponent(part.slice(eq + 1).trim());
		} catch {
			// malformed percent-encoding: not a cookie of ours
		}
	}
	return out;
}

/** The CSRF token of a session: derived from its secret, so nothing more is stored, and useless without the cookie. */
export function csrfOf(secret: string): string {
	return createHash("sha256").update(`fleet-ctl csrf\u0000${secret}`).digest("base64url").slice(0, 43);
}

/** The first rule of OIDC_ROLES that one of the user's groups (or `*`) matches; null: the groups give no role. */
export function roleFor(rules: OidcRoleRule[], groups: string[]): OidcRoleRule | null {
	return rules.find(r => r.group === "*" || groups.includes(r.group)) ?? null;
}

function cookie(
	name: string,
	value: string,
	opts: { maxAge: number; httpOnly: boolean; path: string; sameSite: "Lax" | "Strict"; secure: boolean },
): string {
	return `${name}=${encodeURIComponent(value)}; Path=${opts.path}; Max-Age=${opts.maxAge}; SameSite=${opts.sameSite}${opts.httpOnly ? "; HttpOnly" : ""}${opts.secure ? "; Secure" : ""}`;
}

/** The sign-in flow of one gateway: the provider's configuration, discovered once (again after a failure). */
export class SignIn {
	private discovered: Promise<{ lib: OidcClient; config: import("openid-client").Configuration }> | null = null;

	constructor(
		private readonly oidc: OidcConfig,
		private readonly log: (what: string, why: string) => void,
		/** Where the key of the login cookie's encryption comes from. */
		private readonly secrets: SecretsSource,
	) {}

	/** What the sign-in button says. */
	get name(): string {
		return this.oidc.name;
	}

	private get secure(): boolean {
		return this.oidc.publicUrl.startsWith("https://");
	}

	private get redirectUri(): string {
		return `${this.oidc.publicUrl}/auth/callback`;
	}

	private async provider() {
		this.discovered ??= (async () => {
			const lib: OidcClient = await import("openid-client");
			const auth = this.oidc.clientSecret ? lib.ClientSecretPost(this.oidc.clientSecret) : lib.None();
			const config = await lib.discovery(
				new URL(this.oidc.issuer),
				this.oidc.clientId,
				undefined,
				auth,
				this.oidc.allowHttp ? { execute: [lib.allowInsecureRequests] } : undefined,
			);
			return { lib, config };
		})().catch(err => {
			this.discovered = null;
			throw new EveError(
				502,
				`the sign-in provider ${this.oidc.issuer} could not be reached or read: ${(err as Error).message}`,
			);
		});
		return this.discovered;
	}

	/** GET /auth/login: to the provider, with PKCE (S256), state and nonce kept in an encrypted cookie. */
	async login(meta: AuthMeta): Promise<void> {
		const { lib, config } = await this.provider();
		const verifier = lib.randomPKCECodeVerifier();
		const state = lib.randomState();
		const nonce = lib.randomNonce();
		const url = lib.buildAuthorizationUrl(config, {
			redirect_uri: this.redirectUri,
			scope: this.oidc.scopes,
			code_challenge: await lib.calculatePKCECodeChallenge(verifier),
			code_challenge_method: "S256",
			state,
			nonce,
		});
		const tx = encryptSecret(
			this.secrets,
			JSON.stringify({ state, nonce, verifier, until: Date.now() + LOGIN_TTL_S * 1000 }),
		);
		meta.$responseHeaders = {
			"Set-Cookie": [
				cookie(LOGIN_COOKIE, tx, {
					maxAge: LOGIN_TTL_S,
					httpOnly: true,
					path: "/auth",
					sameSite: "Lax",
					secure: this.secure,
				}),
			],
			"Cache-Control": "no-store",
		};
		meta.$statusCode = 302;
		meta.$location = url.href;
	}

	/**
	 * GET /auth/callback: the code exchanged (PKCE, state, nonce and the issuer checked by openid-client), the
	 * groups read from the ID token (or the userinfo endpoint when it does not carry them), the role mapped, the
	 * session opened (revoking the person's tokens that reach further than their groups now give) and audited.
	 */
	async callback(ctx: Context, meta: AuthMeta): Promise<void> {
		const clearLogin = cookie(LOGIN_COOKIE, "", {
			maxAge: 0,
			httpOnly: true,
			path: "/auth",
			sameSite: "Lax",
			secure: this.secure,
		});
		const fail = (why: string) => {
			meta.$responseHeaders = { "Set-Cookie": [clearLogin], "Cache-Control": "no-store" };
			meta.$statusCode = 302;
			meta.$location = `/#signin-error=${encodeURIComponent(why)}`;
		};
		let tx: { state: string; nonce: string; verifier: string; until: number };
		try {
			tx = JSON.parse(decryptSecret(this.secrets, meta.cookies?.[LOGIN_COOKIE] ?? ""));
			if (!(tx.until > Date.now())) throw new Error("expired");
		} catch {
			return fail("the sign-in took too long or did not start here: sign in again");
		}
		const { lib, config } = await this.provider();
		let claims: Record<string, unknown>;
		let idToken: string | undefined;
		try {
			const tokens = await lib.authorizationCodeGrant(
				config,
				new URL(meta.url ?? "/", this.oidc.publicUrl.replace(/\/$/, "") + "/"),
				{ pkceCodeVerifier: tx.verifier, expectedState: tx.state, expectedNonce: tx.nonce },
			);
			claims = { ...(tokens.claims() ?? {}) };
			idToken = tokens.id_token;
			if (!Array.isArray(claims[this.oidc.groupsClaim]) && tokens.access_token && typeof claims.sub === "string") {
				// Providers that follow OIDC Core §5.4 strictly put profile claims only at userinfo.
				claims = { ...(await lib.fetchUserInfo(config, tokens.access_token, claims.sub)), ...claims };
			}
		} catch (err) {
			const e = err as { error?: string; error_description?: string; message: string };
			this.log("A sign-in failed at the provider:", e.error ? `${e.error}: ${e.error_description ?? ""}` : e.message);
			return fail(`the provider refused the sign-in (${e.error ?? e.message})`);
		}
		const sub = String(claims.sub ?? "");
		const raw = claims[this.oidc.groupsClaim];
		const groups = Array.isArray(raw) ? raw.filter((g): g is string => typeof g === "string") : [];
		const name = String(claims.name ?? claims.email ?? claims.preferred_username ?? sub).slice(0, 180);
		const rule = roleFor(this.oidc.roles, groups);
		const subject = `oidc:${sub}`;
		if (!rule) {
			await this.audit(ctx, meta, {
				method: "GET",
				name,
				role: null,
				status: 403,
				outcome: "denied",
				message: `sign-in of ${subject} refused: the groups [${groups.join(", ").slice(0, 500)}] give no role (OIDC_ROLES)`,
			});
			// What the person held before no longer applies either: their sessions and tokens are revoked.
			await ctx.call("tokens.revokeSubject", { subject });
			return fail(`your groups (${groups.join(", ") || "none"}) give no role in fleet-ctl`);
		}
		const session = await ctx.call<{ id: string; secret: string; revoked: number }, Record<string, unknown>>(
			"tokens.openSession",
			{ subject, name, role: rule.role, ...(rule.scope ? { scope: rule.scope } : {}), ttlS: this.oidc.sessionTtlS },
		);
		await this.audit(ctx, meta, {
			method: "GET",
			token: session.id,
			name: `${name} (session)`,
			role: rule.role,
			status: 200,
			outcome: "ok",
			message: `signed in as ${subject} through ${this.oidc.issuer}: role ${rule.role} (group ${rule.group})${session.revoked ? `; ${session.revoked} of their tokens that reached further were revoked` : ""}`,
		});
		const ttl = this.oidc.sessionTtlS;
		meta.$responseHeaders = {
			"Set-Cookie": [
				clearLogin,
				cookie(SESSION_COOKIE, session.secret, {
					maxAge: ttl,
					httpOnly: true,
					path: "/",
					sameSite: "Lax",
					secure: this.secure,
				}),
				cookie(CSRF_COOKIE, csrfOf(session.secret), {
					maxAge: ttl,
					httpOnly: false,
					path: "/",
					sameSite: "Strict",
					secure: this.secure,
				}),
				// For the provider's logout (id_token_hint): only /auth reads it.
				...(idToken
					? [
							cookie("fleet_idt", idToken, {
								maxAge: ttl,
								httpOnly: true,
								path: "/auth",
								sameSite: "Lax",
								secure: this.secure,
							}),
						]
					: []),
			],
			"Cache-Control": "no-store",
		};
		meta.$statusCode = 302;
		meta.$location = "/";
	}

	/** POST /auth/logout (with the CSRF header): the session revoked everywhere, its cookies cleared, and where to go next. */
	async logout(ctx: Context, meta: AuthMeta): Promise<{ redirect: string }> {
		const secret = meta.cookies?.[SESSION_COOKIE];
		if (!secret) throw new EveError(401, "no session to sign out of");
		if (meta.csrfHeader !== csrfOf(secret))
			throw new EveError(403, "the request lacks its CSRF token (X-CSRF-Token, the value of the fleet_csrf cookie)");
		await ctx.call("tokens.closeSession", { hash: hashToken(secret) });
		await this.audit(ctx, meta, {
			method: "POST",
			name: null,
			role: null,
			status: 200,
			outcome: "ok",
			message: "signed out",
		});
		const idToken = meta.cookies?.fleet_idt;
		const clear = (name: string, path: string, httpOnly: boolean) =>
			cookie(name, "", { maxAge: 0, httpOnly, path, sameSite: "Lax", secure: this.secure });
		meta.$responseHeaders = {
			"Set-Cookie": [
				clear(SESSION_COOKIE, "/", true),
				clear(CSRF_COOKIE, "/", false),
				clear("fleet_idt", "/auth", true),
			],
			"Cache-Control": "no-store",
		};
		let redirect = "/";
		try {
			const { lib, config } = await this.provider();
			if (config.serverMetadata().end_session_endpoint)
				redirect = lib.buildEndSessionUrl(config, {
					post_logout_redirect_uri: `${this.oidc.publicUrl}/`,
					...(idToken ? { id_token_hint: idToken } : {}),
				}).href;
		} catch (err) {
			this.log("Signed out here, but not at the provider:", (err as Error).message);
		}
		return { redirect };
	}

	/** A sign-in or sign-out, told to the audit service (which builds the record): who, from where, how it went. */
	private async audit(
		ctx: Context,
		meta: AuthMeta,
		entry: {
			method: "GET" | "POST";
			token?: string;
			name: string | null;
			role: string | null;
			status: number;
			outcome: AuditOutcome;
			message: string;
		},
	) {
		const facts: AuditBegin = {
			who: { token: entry.token ?? null, name: entry.name, role: entry.role },
			request: {
				source: meta.source ?? "",
				...(meta.agent ? { agent: meta.agent } : {}),
				method: entry.method,
				path: (meta.url ?? "").split("?")[0],
			},
			result: { status: entry.status, outcome: entry.outcome, message: entry.message },
		};
		await ctx
			.call<unknown, AuditBegin>("audit.begin", facts)
			.catch(err => this.log("Could not audit a sign-in:", (err as Error).message));
	}
}

/** The gateway's sign-in, when OIDC is configured. */
export function signInFor(
	config: SecretsSource & { oidc: OidcConfig | null },
	log: (what: string, why: string) => void,
): SignIn | null {
	return config.oidc ? new SignIn(config.oidc, log, config) : null;
}
