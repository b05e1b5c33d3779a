/**
 * Owns the `tokens` collection: API bearer tokens. A token's secret is shown once, in the response that
 * creates it; only its SHA-256 is stored. Tokens expire (`expires`) and are revoked by DELETE, which keeps
 * the record (revoked: true) so the audit log still names who acted.
 *
 * People's tokens — the sessions a sign-in opens, the tokens a caller makes for themselves — are in personal.ts;
 * principals and the families of tokens minted from tokens (revoked together) in family.ts; the checks on one
 * record (acts now, the caller it is, the expiry sent) in token-checks.ts.
 *
 * Also the one place that decides whether a token may run a complete Salt call on some hosts
 * (`tokens.authorizeRun`, the rule in lib/http/auth.ts `runDenial`): the cm-gateway asks it for every run it
 * starts, the tasks service for every task created or changed.
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { nowSeconds } from "../../lib/eve/dates";
import type { Issues } from "../../lib/eve/errors";
import { ErrorType, isError, runRefused } from "../../lib/errors";
import { SCOPE_CALLS_SCHEMA, SCOPE_FUNCTIONS_SCHEMA } from "../../lib/security/scopes";
import {
	ROLES,
	arbitraryCodeFields,
	hashToken,
	newToken,
	runDenial,
	type Caller,
	type Scope,
} from "../../lib/http/auth";
import { configOf } from "../../lib/config";
import { announceAdminToken } from "../../lib/runtime/first-screen";
import { DuplicateKeyError, type Doc } from "../../lib/storage/store";
import { personalActions } from "./personal";
import { migratePrincipals, resolvePrincipal, revokeFamily, servicePrincipal } from "./family";
import { expiryIssue, parseExpires, runCaller, tokenRefusal, usable, verifiedCaller } from "./token-checks";
import { action, call } from "../../lib/contracts/call";

const BOOTSTRAP_NAME = "bootstrap-admin";

/** What this service has on `this` besides the Eve mixin's. */
interface TokensMembers {
	scopeHosts(ctx: Context, groups: string[]): Promise<Set<string>>;
	usable(doc: Doc | null): boolean;
	bootstrap(): Promise<unknown>;
	insertBootstrap(hash: string, prefix: string): Promise<boolean>;
	announceRevoked(ids: string[]): Promise<void>;
}

type TokensThis = EveThis & TokensMembers;

const TokensService: EveServiceSchema<TokensThis> = {
	name: "tokens",
	mixins: [
		EveCollection({
			resource: "tokens",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			readOnlyFields: [
				"revoked",
				"prefix",
				"bootstrap",
				"session",
				"subject",
				"owner",
				"principal",
				"arbitrary_code",
				"warning",
			],
			schema: {
				name: { type: "string", min: 1, max: 200 },
				role: { type: "enum", values: [...ROLES] },
				scope: {
					type: "object",
					optional: true,
					strict: true,
					props: {
						groups: { type: "array", items: { type: "string", pattern: OBJECT_ID }, max: 1000, optional: true },
						functions: SCOPE_FUNCTIONS_SCHEMA,
						calls: SCOPE_CALLS_SCHEMA,
					},
				},
				expires: { type: "date", optional: true },
			},
		}),
	],

	actions: {
		...personalActions,

		/** The caller a token hash belongs to, or null when it is unknown, revoked or expired (internal). */
		verify: {
			visibility: "public",
			params: { hash: { type: "string", length: 64 } },
			async handler(this: TokensThis, ctx: Context<{ hash: string }>): Promise<(Caller & { expires?: Date }) | null> {
				const doc = await this.store.findOne({ hash: ctx.params.hash });
				if (!this.usable(doc)) return null;
				return verifiedCaller(doc!, await resolvePrincipal(this.store, doc!));
			},
		},

		/**
		 * May this token run this complete call on these hosts, now? Answers who the token is (for the audit
		 * log); throws 403 saying why not. The token is taken as it is at this moment: a revoked or expired
		 * token runs nothing, a narrowed one only what is left. Every path to a run asks this, where the run
		 * starts (the cm-gateway), and task creates and changes ask it for the task they leave behind.
		 */
		authorizeRun: action("tokens.authorizeRun", {
			visibility: "public",
			async handler(this: TokensThis, ctx) {
				const doc = OBJECT_ID.test(ctx.params.token) ? await this.store.findOne({ _id: ctx.params.token }) : null;
				const refusal = tokenRefusal(doc, Date.now());
				if (refusal) throw runRefused(refusal);
				const scope: Scope | undefined = doc!.scope;
				const allowed = scope?.groups ? await this.scopeHosts(ctx, scope.groups) : null;
				const denial = runDenial(doc!.role, scope, ctx.params, allowed);
				if (denial) throw runRefused(denial);
				return runCaller(doc!, await resolvePrincipal(this.store, doc!));
			},
		}),
	},

	methods: {
		/** The hostnames a scope's groups resolve to now; a group that was deleted allows nothing. */
		async scopeHosts(this: TokensThis, ctx: Context, groups: string[]): Promise<Set<string>> {
			const allowed = new Set<string>();
			for (const group of groups) {
				try {
					for (const host of await call(ctx, "groups.hostnames", { id: group })) allowed.add(host);
				} catch (err) {
					if (!isError(err, ErrorType.NotFound)) throw err;
				}
			}
			return allowed;
		},

		usable(this: TokensThis, doc: Doc | null): boolean {
			return usable(doc, Date.now());
		},

		async prepareInput(this: TokensThis, _ctx: RestContext, doc: Doc) {
			return parseExpires(doc);
		},

		async checkRules(this: TokensThis, ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Issues | null> {
			const expiry = expiryIssue(doc, Date.now());
			if (expiry) return expiry;
			const groups: string[] = doc.scope?.groups ?? [];
			if (groups.length === 0) return null;
			const found = new Set(await ctx.call<string[], { ids: string[] }>("groups.exist", { ids: groups }));
			const missing = groups.filter(g => !found.has(g));
			return missing.length ? { scope: { groups: `unknown groups: ${missing.join(", ")}` } } : null;
		},

		async beforeStore(this: TokensThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.op !== "create") return doc;
			const secret = newToken();
			// The secret goes back to the creator once (see writeResponse) and is never stored.
			(ctx.locals as Record<string, string[]>).secrets ??= [];
			(ctx.locals as Record<string, string[]>).secrets.push(secret);
			// A token an admin makes is a service account of its own (family.ts).
			const _id = newObjectId();
			return {
				...doc,
				_id,
				principal: servicePrincipal(_id),
				hash: hashToken(secret),
				prefix: secret.slice(0, 8),
				revoked: false,
			};
		},

		async eveCreate(this: TokensThis, ctx: RestContext, body: unknown) {
			const res = (await this.createRecords(ctx, body)) as Doc;
			const secrets: string[] = (ctx.locals as Record<string, string[]>).secrets ?? [];
			const sent = (Array.isArray(body) ? body : [body]) as Doc[];
			// What the new token can do is said where it is made, as in its record (transformOutput).
			if (res._items)
				res._items.forEach((item: Doc, i: number) =>
					Object.assign(item, { token: secrets[i] }, arbitraryCodeFields(sent[i].role, sent[i].scope)),
				);
			else Object.assign(res, { token: secrets[0] }, arbitraryCodeFields(sent[0].role, sent[0].scope));
			return res;
		},

		transformOutput(this: TokensThis, doc: Doc): Doc {
			return { ...doc, ...arbitraryCodeFields(doc.role, doc.scope) };
		},

		/**
		 * Revoking keeps the record, so the audit log can still say whose token it was; the tokens minted from it go
		 * with it, at any depth (family.ts).
		 */
		async removeDocs(this: TokensThis, ctx: RestContext, docs: Doc[]) {
			const ids = docs.map(d => String(d._id));
			const revoked = await revokeFamily(this.store, ids);
			await this.notifyChanged(ctx, "removed", [...new Set([...ids, ...revoked])]);
		},

		/** CTL_ADMIN_TOKEN, or on the embedded default a token made now and printed once. */
		async bootstrap(this: TokensThis) {
			const config = configOf(this.broker);
			// Checked by loadConfig: a token a request could not carry stops the start.
			const fromEnv = config.adminToken;
			if (fromEnv) {
				const hash = hashToken(fromEnv);
				// A changed CTL_ADMIN_TOKEN replaces the previous one, and the tokens minted from it.
				const previous = await this.store.find(
					{ bootstrap: true, hash: { $ne: hash }, revoked: { $ne: true } },
					{ only: ["_id"] },
				);
				if (previous.length)
					await this.announceRevoked(
						await revokeFamily(
							this.store,
							previous.map(d => String(d._id)),
						),
					);
				if (!(await this.store.findOne({ hash }))) await this.insertBootstrap(hash, fromEnv.slice(0, 8));
				return;
			}
			if (await this.store.findOne({ bootstrap: true, revoked: false })) return;
			if (config.mongoUri) {
				this.logger.warn("No admin token exists: set CTL_ADMIN_TOKEN to create one.");
				return;
			}
			const secret = newToken();
			if (await this.insertBootstrap(hashToken(secret), secret.slice(0, 8))) {
				// Printed once, outside the logger, with the address once the broker started (lib/runtime/first-screen.ts):
				// the only time this secret is shown.
				announceAdminToken(secret);
			}
		},

		/** Tokens revoked at the start: the gateways already running (other replicas) forget them at once. */
		async announceRevoked(this: TokensThis, ids: string[]) {
			if (ids.length) await this.notifyChanged(this.broker as unknown as Context, "updated", ids);
		},

		async insertBootstrap(this: TokensThis, hash: string, prefix: string): Promise<boolean> {
			const now = nowSeconds();
			try {
				const _id = newObjectId();
				await this.store.insertMany([
					{
						name: BOOTSTRAP_NAME,
						role: "admin",
						hash,
						prefix,
						revoked: false,
						bootstrap: true,
						principal: servicePrincipal(_id),
						_id,
						_created: now,
						_updated: now,
					},
				]);
				this.forgetCachedReads();
				return true;
			} catch (err) {
				if (err instanceof DuplicateKeyError) return false;
				throw err;
			}
		},
	},

	async started(this: TokensThis) {
		await this.store.ensureIndex("hash", { unique: true });
		await this.store.ensureIndex("subject", { sparse: true });
		await this.store.ensureIndex("principal", { sparse: true });
		await this.store.ensureIndex("owner", { sparse: true });
		// Records from before principals get theirs (and past revocations their cascade), once, on either store.
		const migrated = await migratePrincipals(this.store);
		if (migrated.assigned)
			this.logger.info(
				`Tokens: ${migrated.assigned} records given their principal, ${migrated.revoked.length} tokens minted from revoked ones revoked`,
			);
		await this.announceRevoked(migrated.revoked);
		await this.bootstrap();
	},
};

export default TokensService;
