/**
 * Owns the `tokens` collection: API bearer tokens. A token's secret is shown once, in the response that
 * creates it; only its SHA-256 is stored. Tokens expire (`expires`) and are revoked by DELETE, which keeps
 * the record (revoked: true) so the audit log still names who acted.
 *
 * Also the one place that decides whether a caller may run a Salt function on some hosts
 * (`tokens.authorizeRun`): the gateway asks it for remote execution and task creation, the scheduler
 * for every task run.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext, type WriteInfo } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds, parseHttpDate } from "../lib/eve/dates";
import { EveError, type Issues } from "../lib/eve/errors";
import { ROLES, FUNCTION_GLOB, functionAllowed, hashToken, newToken, type Caller, type Scope } from "../lib/auth";
import { loadConfig } from "../lib/config";
import { DuplicateKeyError, type Doc } from "../lib/store";

const BOOTSTRAP_NAME = "bootstrap-admin";

const TokensService: EveServiceSchema = {
	name: "tokens",
	mixins: [
		EveCollection({
			resource: "tokens",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			readOnlyFields: ["revoked", "prefix", "bootstrap"],
			schema: {
				name: { type: "string", min: 1, max: 200 },
				role: { type: "enum", values: [...ROLES] },
				scope: {
					type: "object",
					optional: true,
					strict: true,
					props: {
						groups: { type: "array", items: { type: "string", pattern: OBJECT_ID }, max: 1000, optional: true },
						functions: { type: "array", items: { type: "string", pattern: FUNCTION_GLOB }, min: 1, max: 200, optional: true },
					},
				},
				expires: { type: "date", optional: true },
			},
		}),
	],

	actions: {
		/** The caller a token hash belongs to, or null when it is unknown, revoked or expired (internal). */
		verify: {
			visibility: "public",
			params: { hash: { type: "string", length: 64 } },
			async handler(this: EveThis, ctx: Context<{ hash: string }>): Promise<(Caller & { expires?: Date }) | null> {
				const doc = await this.store.findOne({ hash: ctx.params.hash });
				if (!this.usable(doc)) return null;
				return { id: String(doc!._id), name: doc!.name, role: doc!.role, scope: doc!.scope, expires: doc!.expires };
			},
		},

		/**
		 * May this token (still) run `fun` on `targets`? Throws 403 naming what is out of scope. Checks the
		 * token as it is now: a revoked or expired token runs nothing, a narrowed one only what is left.
		 */
		authorizeRun: {
			visibility: "public",
			params: {
				token: { type: "string", pattern: OBJECT_ID },
				fun: { type: "string", min: 1, max: 200 },
				targets: { type: "array", items: "string", max: 100_000 },
			},
			async handler(this: EveThis, ctx: Context<{ token: string; fun: string; targets: string[] }>) {
				const doc = await this.store.findOne({ _id: ctx.params.token });
				if (!this.usable(doc)) throw new EveError(403, "the token is revoked or expired");
				if (doc!.role === "viewer") throw new EveError(403, "a viewer token cannot run functions");
				const scope: Scope | undefined = doc!.scope;
				if (!functionAllowed(scope, ctx.params.fun)) throw new EveError(403, `function '${ctx.params.fun}' is outside the token's scope`);
				if (scope?.groups) {
					const allowed = new Set<string>();
					for (const group of scope.groups) {
						try {
							for (const host of await ctx.call<string[], { id: string }>("groups.hostnames", { id: group })) allowed.add(host);
						} catch (err) {
							// A scope group that was deleted allows nothing.
							if ((err as { code?: number }).code !== 404) throw err;
						}
					}
					const outside = ctx.params.targets.filter(t => !allowed.has(t));
					if (outside.length) throw new EveError(403, `targets outside the token's scope: ${outside.slice(0, 20).join(", ")}${outside.length > 20 ? ", …" : ""}`);
				}
				return true;
			},
		},
	},

	methods: {
		usable(this: EveThis, doc: Doc | null): boolean {
			return !!doc && doc.revoked !== true && !(doc.expires instanceof Date && doc.expires.getTime() <= Date.now());
		},

		async prepareInput(this: EveThis, _ctx: RestContext, doc: Doc) {
			if (!("expires" in doc) || doc.expires instanceof Date) return { doc };
			const when = typeof doc.expires === "string" ? parseHttpDate(doc.expires) ?? (/^\d{4}-\d{2}-\d{2}T/.test(doc.expires) ? new Date(doc.expires) : null) : null;
			if (!when || Number.isNaN(when.getTime())) return { doc, issues: { expires: "must be of datetime type (an HTTP-date or ISO 8601)" } };
			return { doc: { ...doc, expires: when } };
		},

		async checkRules(this: EveThis, ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Issues | null> {
			if (doc.expires instanceof Date && doc.expires.getTime() <= Date.now()) return { expires: "must be in the future" };
			const groups: string[] = doc.scope?.groups ?? [];
			if (groups.length === 0) return null;
			const found = new Set(await ctx.call<string[], { ids: string[] }>("groups.exist", { ids: groups }));
			const missing = groups.filter(g => !found.has(g));
			return missing.length ? { scope: { groups: `unknown groups: ${missing.join(", ")}` } } : null;
		},

		async beforeStore(this: EveThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.op !== "create") return doc;
			const secret = newToken();
			// The secret goes back to the creator once (see writeResponse) and is never stored.
			(ctx.locals as Record<string, string[]>).secrets ??= [];
			(ctx.locals as Record<string, string[]>).secrets.push(secret);
			return { ...doc, hash: hashToken(secret), prefix: secret.slice(0, 8), revoked: false };
		},

		async eveCreate(this: EveThis, ctx: RestContext, body: unknown) {
			const res = await this.createRecords(ctx, body);
			const secrets: string[] = (ctx.locals as Record<string, string[]>).secrets ?? [];
			if (res._items) res._items.forEach((item: Doc, i: number) => (item.token = secrets[i]));
			else res.token = secrets[0];
			return res;
		},

		/** Revoking keeps the record, so the audit log can still say whose token it was. */
		async removeDocs(this: EveThis, ctx: RestContext, docs: Doc[]) {
			const ids = docs.map(d => String(d._id));
			await this.store.updateMany({ _id: { $in: ids } }, { $set: { revoked: true, _updated: nowSeconds() } });
			await this.notifyChanged(ctx, "removed", ids);
		},

		/** CTL_ADMIN_TOKEN, or on the embedded default a token made now and printed once. */
		async bootstrap(this: EveThis) {
			const config = loadConfig();
			const fromEnv = process.env.CTL_ADMIN_TOKEN;
			if (fromEnv) {
				const hash = hashToken(fromEnv);
				// A changed CTL_ADMIN_TOKEN replaces the previous one.
				await this.store.updateMany({ bootstrap: true, hash: { $ne: hash } }, { $set: { revoked: true, _updated: nowSeconds() } });
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
				// Printed once, on purpose, outside the logger: the only time this secret is shown.
				process.stdout.write(`\nfleet-ctl: admin token (shown once, keep it safe): ${secret}\n\n`);
			}
		},

		async insertBootstrap(this: EveThis, hash: string, prefix: string): Promise<boolean> {
			const now = nowSeconds();
			try {
				await this.store.insertMany([{ name: BOOTSTRAP_NAME, role: "admin", hash, prefix, revoked: false, bootstrap: true, _id: newObjectId(), _created: now, _updated: now }]);
				this.forgetCachedReads();
				return true;
			} catch (err) {
				if (err instanceof DuplicateKeyError) return false;
				throw err;
			}
		},
	},

	async started(this: EveThis) {
		await this.store.ensureIndex("hash", true);
		await this.bootstrap();
	},
};

export default TokensService;
