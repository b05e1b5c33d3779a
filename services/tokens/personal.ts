/**
 * The tokens of people (docs/security.md, "Single sign-on"): the browser sessions a sign-in opens — a token like
 * any other, short-lived, `session: true`, made for the person (`subject`) with the role and scope their groups give
 * — and the API tokens a caller makes for themselves (`/api/tokens/mine`), never reaching further than the caller:
 * a role at most theirs, a scope within theirs, an expiry within a year (within the caller's own, for a token that
 * expires). A sign-in that gives a person less than before revokes their tokens that reach further (with what was
 * made from them; a session alone, as a sign-out ends it).
 *
 * A token made here belongs to its maker's principal (the person, or the service account of the token that made it)
 * and records its maker (`owner`): revoking a token revokes those made from it (family.ts). A sign-out ends only
 * the session: the tokens a person made while signed in are theirs, for scripts, and outlive it.
 */
import type { ActionSchema, Context } from "moleculer";
import type { EveThis, RestContext } from "../../mixins/eve-collection.mixin";
import { Forbidden, Invalid, NotFound, Unauthenticated } from "../../lib/errors";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import {
	arbitraryCodeFields,
	hashToken,
	newToken,
	roleAllows,
	scopeExceeds,
	type Caller,
	type Role,
	type Scope,
} from "../../lib/http/auth";
import type { Doc, Filter, Store } from "../../lib/storage/store";
import { familyOf, resolvePrincipal, revokeFamily } from "./family";

type PersonalThis = EveThis & {
	prepareInput(ctx: RestContext, doc: Doc): Promise<{ doc: Doc; issues?: Record<string, unknown> }>;
	usable(doc: Doc | null): boolean;
};

/** The 401 of a request whose token was revoked (or expired) since the gateway let it in. */
const GONE = "the API token is invalid, expired or revoked";

/** A personal token lasts at most this long (and 90 days unless asked otherwise). */
const MINE_MAX_MS = 365 * 86_400_000;
const MINE_DEFAULT_MS = 90 * 86_400_000;
/** Session records expired this long ago are dropped when a new one opens (the audit log keeps their names). */
const SESSION_KEEP_MS = 7 * 86_400_000;

/** A token record made here: its secret is returned once, only its hash kept. */
function tokenDoc(fields: Doc): { doc: Doc; secret: string } {
	const secret = newToken();
	const now = nowSeconds();
	return {
		secret,
		doc: {
			...fields,
			hash: hashToken(secret),
			prefix: secret.slice(0, 8),
			revoked: false,
			_id: newObjectId(),
			_created: now,
			_updated: now,
		},
	};
}

/** What a personal token shows its owner (never its hash). */
function shown(d: Doc): Doc {
	return {
		_id: String(d._id),
		name: d.name,
		role: d.role,
		...(d.scope ? { scope: d.scope } : {}),
		...arbitraryCodeFields(d.role, d.scope),
		expires: d.expires,
		prefix: d.prefix,
		revoked: d.revoked,
		principal: d.principal,
		...(d.owner ? { owner: d.owner } : {}),
		_created: d._created,
	};
}

/**
 * The tokens a caller lists and revokes as its own: a person's, every token of theirs but sessions; a service
 * account's token, those made from it at any depth (never the token that made it, nor its siblings).
 */
async function mineFilter(store: Store, caller: Caller): Promise<Filter> {
	if (caller.subject) return { principal: caller.principal, session: { $ne: true } };
	return { _id: { $in: (await familyOf(store, caller.id)).filter(id => id !== caller.id) } };
}

export const personalActions: Record<string, ActionSchema<PersonalThis>> = {
	/** A browser session for a signed-in person (internal: the gateway's sign-in); its secret goes into an http-only cookie. */
	openSession: {
		visibility: "public",
		params: {
			subject: { type: "string", min: 1, max: 300 },
			name: { type: "string", min: 1, max: 200 },
			role: { type: "enum", values: ["viewer", "operator", "admin"] },
			scope: { type: "object", optional: true },
			ttlS: { type: "number", integer: true, min: 1 },
		},
		async handler(
			this: PersonalThis,
			ctx: Context<{ subject: string; name: string; role: Role; scope?: Scope; ttlS: number }>,
		) {
			const { subject, name, role, scope, ttlS } = ctx.params;
			const now = Date.now();
			// What the person's groups give now is all they keep: their tokens that reach further are revoked, with
			// what was made from them — but a session ends alone, as at a sign-out: the tokens made while signed in
			// are the person's (they carry the subject), each kept or revoked here by its own reach.
			const theirs = await this.store.find({ subject, revoked: false });
			const beyond = theirs.filter(t => !roleAllows(role, t.role) || scopeExceeds(scope, t.scope) !== null);
			const sessions: string[] = [];
			const tokens: string[] = [];
			for (const t of beyond) (t.session === true ? sessions : tokens).push(String(t._id));
			if (sessions.length)
				await this.store.updateMany({ _id: { $in: sessions } }, { $set: { revoked: true, _updated: nowSeconds() } });
			await revokeFamily(this.store, tokens);
			await this.store.removeMany({ session: true, expires: { $lt: new Date(now - SESSION_KEEP_MS) } });
			const { doc, secret } = tokenDoc({
				name: `${name} (session)`,
				role,
				...(scope ? { scope } : {}),
				expires: new Date(now + ttlS * 1000),
				session: true,
				subject,
				principal: subject,
			});
			await this.store.insertMany([doc]);
			await this.notifyChanged(ctx, "created", [doc._id]);
			return { id: doc._id, secret, expires: doc.expires, revoked: beyond.length };
		},
	},

	/** Revokes every token of a person, and whatever was made from them (internal: a sign-in whose groups no longer give any role). */
	revokeSubject: {
		visibility: "public",
		params: { subject: { type: "string", min: 1, max: 300 } },
		async handler(this: PersonalThis, ctx: Context<{ subject: string }>) {
			const theirs = await this.store.find(
				{ $or: [{ subject: ctx.params.subject }, { principal: ctx.params.subject }] },
				{ only: ["_id"] },
			);
			const revoked = await revokeFamily(
				this.store,
				theirs.map(t => String(t._id)),
			);
			if (revoked.length) await this.notifyChanged(ctx, "updated", revoked);
			return { revoked: revoked.length };
		},
	},

	/** Ends a session (internal: sign-out): its token is revoked at once, on every gateway. */
	closeSession: {
		visibility: "public",
		params: { hash: { type: "string", length: 64 } },
		async handler(this: PersonalThis, ctx: Context<{ hash: string }>) {
			const n = await this.store.updateMany(
				{ hash: ctx.params.hash, session: true },
				{ $set: { revoked: true, _updated: nowSeconds() } },
			);
			if (n) await this.notifyChanged(ctx, "updated", []);
			return { closed: n > 0 };
		},
	},

	/**
	 * POST /api/tokens/mine `{name, role?, scope?, expires?}`: an API token for the caller (for scripts), never
	 * reaching further than the caller (403, saying why). Its secret is in the answer, once.
	 */
	createMine: {
		params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
		async handler(this: PersonalThis, ctx: Context<{ body?: unknown }, { user?: Caller; $statusCode?: number }>) {
			const caller = ctx.meta.user;
			if (!caller) throw new Unauthenticated();
			const body = ctx.params.body;
			if (!body || typeof body !== "object" || Array.isArray(body))
				throw new Invalid({ body: 'a token: {"name": "…", "role"?, "scope"?, "expires"?}' });
			const input = { role: caller.role, ...(body as Doc) };
			const { doc, issues } = await this.prepareInput(ctx as unknown as RestContext, input);
			const problems = issues ?? this.eve.createCheck(doc);
			if (problems) throw new Invalid(problems);
			if (!roleAllows(caller.role, doc.role))
				throw new Forbidden(`a token you make may not have a role above yours (${caller.role})`);
			const exceeds = scopeExceeds(caller.scope, doc.scope);
			if (exceeds) throw new Forbidden(`a token you make may not reach further than you: ${exceeds}`);
			const now = Date.now();
			// The maker as it is now (the gateway may have let the request in just before a revocation reached it).
			const maker = await this.store.findOne({ _id: caller.id });
			if (!this.usable(maker)) throw new Unauthenticated(GONE);
			const callerExpiry = caller.session ? null : ((maker!.expires as Date | undefined) ?? null);
			const limit = Math.min(now + MINE_MAX_MS, callerExpiry ? callerExpiry.getTime() : Infinity);
			const expires: Date = doc.expires ?? new Date(Math.min(now + MINE_DEFAULT_MS, limit));
			if (expires.getTime() <= now) throw new Invalid({ expires: "must be in the future" });
			if (expires.getTime() > limit)
				throw new Invalid({
					expires: `must be at most ${new Date(limit).toISOString()} (a year, and no later than the token you use)`,
				});
			const principal = await resolvePrincipal(this.store, maker!);
			const made = tokenDoc({
				name: doc.name,
				role: doc.role,
				...(doc.scope ? { scope: doc.scope } : {}),
				expires,
				...(caller.subject ? { subject: caller.subject } : {}),
				principal,
				owner: caller.id,
			});
			await this.store.insertMany([made.doc]);
			// Checked again once written: a revocation of the maker that began before this write found nothing to
			// cascade to, so this one goes now; one that begins after it finds this token (family.ts).
			if (!this.usable(await this.store.findOne({ _id: caller.id }))) {
				await revokeFamily(this.store, [String(made.doc._id)]);
				await this.notifyChanged(ctx, "updated", [made.doc._id]);
				throw new Unauthenticated(GONE);
			}
			await this.notifyChanged(ctx, "created", [made.doc._id]);
			ctx.meta.$statusCode = 201;
			return { _status: "OK", ...shown(made.doc), token: made.secret };
		},
	},

	/**
	 * GET /api/tokens/mine: the caller's own API tokens, newest first, never their hashes: a person's, every one of
	 * their principal but sessions; a service account's token, those made from it, at any depth. Each names its
	 * maker (`owner`), so the list reads as a tree.
	 */
	listMine: {
		params: { query: { type: "any", optional: true } },
		async handler(this: PersonalThis, ctx: Context<unknown, { user?: Caller }>) {
			const caller = ctx.meta.user;
			if (!caller) throw new Unauthenticated();
			const docs = await this.store.find(await mineFilter(this.store, caller), { sort: [["_id", -1]], limit: 1000 });
			return { _items: docs.map(shown) };
		},
	},

	/** DELETE /api/tokens/mine/{id}: revokes one of the caller's own tokens (404 for anyone else's), and those made from it. */
	revokeMine: {
		params: { id: "string", query: { type: "any", optional: true } },
		async handler(this: PersonalThis, ctx: Context<{ id: string }, { user?: Caller; $statusCode?: number }>) {
			const caller = ctx.meta.user;
			if (!caller) throw new Unauthenticated();
			const found = OBJECT_ID.test(ctx.params.id)
				? await this.store.findOne({ $and: [{ _id: ctx.params.id }, await mineFilter(this.store, caller)] })
				: null;
			if (!found) throw new NotFound(`no token '${ctx.params.id.slice(0, 24)}' of yours`);
			const revoked = await revokeFamily(this.store, [ctx.params.id]);
			await this.notifyChanged(ctx, "updated", [ctx.params.id, ...revoked]);
			ctx.meta.$statusCode = 204;
			return null;
		},
	},
};
