/**
 * The Eve REST layer, written once. A service that owns a collection composes this mixin with its
 * record schema and gets Eve's list, item, create, patch and delete behaviour: `_items`, `_links`,
 * `_meta`, HTTP-dates, projection, embedding, soft delete, ETags with If-Match (compare-and-write on
 * the record's revision), dotted PATCH keys, and 4xx errors in Eve's shape.
 *
 * Published actions take what the gateway sends: `query` (the query string as ordered pairs, so links
 * can repeat it as Eve does), `body` and the path `id`. Services override the `prepare*`/`after*`
 * methods for the rules that are theirs alone.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { ValidationSchema } from "fastest-validator";
import { Storage, type StorageThis } from "./storage.mixin";
import { loadConfig } from "../lib/config";
import { EveError, badRequest, notFound, conflict, validationFailed, type Issues } from "../lib/eve/errors";
import { REVISION_FIELD, documentEtag, ifMatchPasses, newRevision, parseEtagCondition, preconditionFailed, quoteEtag, type EtagCondition } from "../lib/eve/etag";
import { mergeNested, resolveDottedKeys } from "../lib/eve/patch";
import { nowSeconds, renderDates, formatHttpDate } from "../lib/eve/dates";
import { newObjectId } from "../lib/eve/ids";
import {
	QueryArgs,
	parseWhere,
	parseSort,
	parseProjection,
	parseEmbedded,
	parsePaging,
	linkQuery,
	filterMentions,
	filterTouches,
	pathsOverlap,
	queryFlag,
	checkFilter,
	type Filter,
	type Projection,
} from "../lib/eve/query";
import { compileSchema, partialSchema, type Check } from "../lib/eve/validation";
import { HOME_LINK, itemTitle, project, MASK, type Link } from "../lib/eve/render";
import { pageLinks, pageMeta, pageWindow } from "../lib/eve/paging";
import { DuplicateKeyError, type Doc, type Update } from "../lib/storage/store";
import { ReadCache, READ_CACHE_MS } from "../lib/http/read-cache";
import { describeCollection, type CollectionDescription } from "../lib/http/openapi";

export interface Relation {
	/** Collection the reference points into (URL name, e.g. "groups"). */
	resource: string;
	/** Service that owns that collection. */
	service: string;
	/** Field of the target that the stored value names. */
	field?: "_id" | "name";
	many?: boolean;
	embeddable?: boolean;
	/** Check on write that the target exists (default true). */
	validate?: boolean;
}

export interface SoftDelete {
	/** Stored flag, e.g. "_soft_deleted". */
	flag: string;
	/** Query parameter that includes flagged records, e.g. "show_soft_deleted". */
	showParam: string;
}

export interface EveCollectionOptions {
	resource: string;
	schema: ValidationSchema;
	patchSchema?: ValidationSchema;
	/** What an id in an item URL must look like; anything else is a 404, as in Eve's item_url regex. */
	idPattern: RegExp;
	/** Fields shown besides the schema's (server-maintained, read-only ones). */
	readOnlyFields?: string[];
	relations?: Record<string, Relation>;
	softDelete?: SoftDelete;
	/** Fields never shown in list items, only in single-record responses. */
	listHidden?: string[];
	/** Fields always replaced by asterisks on the way out. */
	masked?: string[];
	/**
	 * Paths of secrets stored in clear (and masked by transformOutput): `where` and `sort` may not name
	 * them or an object holding them, or a filter would reveal them a comparison at a time.
	 */
	secretPaths?: string[];
	/** Eve's additional_lookup: items are also addressable by this field. */
	lookupField?: string;
	/** Client-supplied `_id` accepted on create (as Eve allows). */
	clientIds?: boolean;
	/** Other collections the service keeps besides this one (`this.stores[name]`). */
	extraCollections?: string[];
	/** Which Eve writes the collection publishes (default all); read-only collections give []. */
	writes?: Array<"create" | "patch" | "remove">;
}

export interface HttpMeta {
	$cacheable?: boolean;
	$statusCode?: number;
	$location?: string;
	$responseHeaders?: Record<string, string>;
	$responseType?: string;
	/**
	 * Set by item reads: the response is a function of the record its ETag names, so the gateway may answer
	 * a matching If-None-Match with 304. Never set by lists, nor by item reads with `embedded` (docs/api.md).
	 */
	$conditional?: boolean;
	/** The request's If-Match header, which the gateway passes on for writes (docs/api.md). */
	ifMatch?: string;
}

export type RestParams = { query?: unknown; body?: unknown; id?: string };
export type RestContext = Context<RestParams, HttpMeta>;

export interface WriteInfo {
	op: "create" | "patch";
	existing?: Doc;
}

/** What a collection service has on `this` besides Moleculer's Service: its store, its Eve state, its methods. */
export interface EveVars extends StorageThis {
	eve: EveState;
	[member: string]: any;
}

export type EveThis = Service & EveVars;

/** The schema type of a service that composes EveCollection. */
export type EveServiceSchema = ServiceSchema<ServiceSettingSchema & Record<string, any>, Record<string, any>, EveVars>;

interface EveState {
	opts: EveCollectionOptions;
	title: string;
	fields: Set<string>;
	autoFields: Set<string>;
	createCheck: Check;
	patchCheck: Check;
	pageSizeDefault: number;
	pageSizeLimit: number;
	counts: ReadCache<number>;
	reads: ReadCache<CachedRead>;
}

interface CachedRead {
	body: Buffer;
	headers?: Record<string, string>;
	conditional?: boolean;
}

/**
 * Counts and serialized reads are cached per replica until the collection changes: any replica's write
 * clears them here, on the other replicas and in the gateways (eve.collectionChanged).
 */
const READ_CACHE_ENTRIES = 200;
const READ_CACHE_MAX_BYTES = 512 * 1024;
const JSON_TYPE = "application/json; charset=utf-8";

const queryParam = { type: "multi", optional: true, rules: [{ type: "array" }, { type: "object" }] } as const;
const idParam = { type: "string", min: 1, max: 512 } as const;
const lookupParams = { ids: { type: "array", items: "string", max: 10000 }, field: { type: "enum", values: ["_id", "name"], optional: true } } as const;

export function EveCollection(opts: EveCollectionOptions): Partial<ServiceSchema> {
	return eveCollectionSchema(opts) as Partial<ServiceSchema>;
}

function eveCollectionSchema(opts: EveCollectionOptions): Partial<EveServiceSchema> {
	const schemaFields = Object.keys(opts.schema).filter(k => !k.startsWith("$$"));
	const softFlag = opts.softDelete?.flag;
	const writes = new Set(opts.writes ?? ["create", "patch", "remove"]);

	return {
		mixins: [Storage(opts.resource, opts.extraCollections)],

		actions: {
			list: {
				params: { query: queryParam },
				handler(this: EveThis, ctx: RestContext) {
					const args = QueryArgs.from(ctx.params.query);
					return this.cachedRead(ctx, "", args, () => this.eveList(ctx, args));
				},
			},
			get: {
				params: { id: idParam, query: queryParam },
				handler(this: EveThis, ctx: RestContext) {
					const args = QueryArgs.from(ctx.params.query);
					const id = ctx.params.id as string;
					return this.cachedRead(ctx, id, args, () => this.eveGet(ctx, id, args));
				},
			},
			create: writes.has("create") && {
				params: { body: { type: "any", optional: true }, query: queryParam },
				handler(this: EveThis, ctx: RestContext) {
					return this.eveCreate(ctx, ctx.params.body);
				},
			},
			patch: writes.has("patch") && {
				params: { id: idParam, body: { type: "any", optional: true }, query: queryParam },
				handler(this: EveThis, ctx: RestContext) {
					return this.evePatch(ctx, ctx.params.id as string, ctx.params.body);
				},
			},
			remove: writes.has("remove") && {
				params: { id: idParam, query: queryParam },
				handler(this: EveThis, ctx: RestContext) {
					return this.eveRemove(ctx, ctx.params.id as string);
				},
			},
			/** Which of these ids (or names) exist; for reference checks by other services. */
			exist: {
				visibility: "public",
				params: lookupParams,
				async handler(this: EveThis, ctx: Context<{ ids: string[]; field?: string }>) {
					const field = ctx.params.field ?? "_id";
					const docs = await this.store.find(this.visibleFilter({ [field]: { $in: ctx.params.ids } }, false), { only: [field] });
					return docs.map(d => String(d[field]));
				},
			},
			/** The collection's record schema as JSON Schema, for the gateway's OpenAPI document (lib/http/openapi.ts). */
			eveSchema: {
				visibility: "public",
				handler(): CollectionDescription {
					return describeCollection(opts as Parameters<typeof describeCollection>[0]);
				},
			},
			/** Records as embedded in another collection's response: rendered, masked, without `_links`. */
			fetch: {
				visibility: "public",
				params: lookupParams,
				async handler(this: EveThis, ctx: Context<{ ids: string[]; field?: string }>) {
					const field = ctx.params.field ?? "_id";
					const docs = await this.store.find(this.visibleFilter({ [field]: { $in: ctx.params.ids } }, false));
					return docs.map(d => this.outputFields(d, null, false));
				},
			},
		},

		created(this: EveThis) {
			const config = loadConfig();
			const auto = ["_id", "_created", "_updated"];
			if (softFlag) auto.push(softFlag);
			// Read-only fields are known to the schema (Eve's `readonly`): sending one is "field is read-only", not "unknown field".
			const readOnly: ValidationSchema = Object.fromEntries((opts.readOnlyFields ?? []).map(f => [f, { type: "forbidden" }]));
			this.eve = {
				opts,
				title: itemTitle(opts.resource),
				fields: new Set([...schemaFields, ...(opts.readOnlyFields ?? [])]),
				autoFields: new Set(auto),
				// What clients write must be well-formed Unicode, in every string field of every collection.
				createCheck: compileSchema({ ...opts.schema, ...readOnly }, { wellFormed: true }),
				// PATCH never enforces `required` (Eve), whichever schema it checks against.
				patchCheck: compileSchema({ ...partialSchema(opts.patchSchema ?? opts.schema), ...readOnly }, { wellFormed: true }),
				pageSizeDefault: config.pageSizeDefault,
				pageSizeLimit: config.pageSizeLimit,
				counts: new ReadCache(READ_CACHE_MS, 1000),
				reads: new ReadCache(READ_CACHE_MS, READ_CACHE_ENTRIES),
			};
		},

		events: {
			// Any replica that writes tells the others, so their cached counts go.
			"eve.collectionChanged": {
				context: true,
				handler(this: EveThis, ctx: Context<{ service: string }>) {
					if (ctx.params.service === this.name) this.forgetCachedReads();
				},
			},
		},

		methods: {
			// ------------------------------------------------------------ reading

			/**
			 * Serves a read as its serialized JSON body (bytes): from the cache when the same query was
			 * answered since the last change, else computed and kept. Bytes are written to the socket as
			 * they are and cross the transporter unescaped (lib/runtime/serializer.ts). `embedded` reads depend on
			 * other collections and side-effecting reads (see readCacheable) are never cached.
			 */
			async cachedRead(this: EveThis, ctx: RestContext, id: string, args: QueryArgs, compute: () => Promise<unknown>): Promise<Buffer> {
				const cacheable = !args.has("embedded") && this.readCacheable(args);
				const key = `${this.readVariant(ctx)}\u0000${id}\u0000${JSON.stringify(args.pairs)}`;
				ctx.meta.$responseType = JSON_TYPE;
				// Tells the gateway whether it may keep the response too.
				ctx.meta.$cacheable = cacheable;
				const hit = cacheable ? this.eve.reads.get(key) : undefined;
				if (hit) {
					if (hit.headers) ctx.meta.$responseHeaders = { ...hit.headers };
					ctx.meta.$conditional = hit.conditional === true;
					return hit.body;
				}
				const generation = this.eve.reads.generation;
				const body = Buffer.from(JSON.stringify(await compute()));
				if (cacheable && body.length <= READ_CACHE_MAX_BYTES) this.eve.reads.set(key, { body, headers: ctx.meta.$responseHeaders, conditional: ctx.meta.$conditional === true }, generation);
				return body;
			},

			/** Hook: what, besides the request, a read's answer depends on (hosts: whether the caller is an admin). */
			readVariant(this: EveThis, _ctx: RestContext): string {
				return "";
			},

			/** Hook: false for reads with side effects, which must always run. */
			readCacheable(this: EveThis, _args: QueryArgs): boolean {
				return true;
			},

			forgetCachedReads(this: EveThis): void {
				this.eve.counts.clear();
				this.eve.reads.clear();
			},

			/** The filter that hides soft-deleted records unless they were asked for (the flag is always stored). */
			visibleFilter(this: EveThis, filter: Filter, show: boolean): Filter {
				if (!softFlag || show || filterMentions(filter, softFlag)) return filter;
				const hide = { [softFlag]: false };
				return Object.keys(filter).length ? { $and: [filter, hide] } : hide;
			},

			async cachedCount(this: EveThis, filter: Filter): Promise<number> {
				const key = JSON.stringify(filter);
				const hit = this.eve.counts.get(key);
				if (hit !== undefined) return hit;
				const generation = this.eve.counts.generation;
				const value = await this.store.count(filter);
				this.eve.counts.set(key, value, generation);
				return value;
			},

			/** Hook: extra conditions a collection adds to every list (none by default). */
			listFilter(this: EveThis, filter: Filter, _args: QueryArgs): Filter {
				return filter;
			},

			async eveList(this: EveThis, ctx: RestContext, args: QueryArgs) {
				const { pageSizeDefault, pageSizeLimit } = this.eve;
				const where = parseWhere(args.get("where"));
				const sort = parseSort(args.get("sort"));
				const projection = parseProjection(args.get("projection"));
				const embedded = parseEmbedded(args.get("embedded"));
				const paging = parsePaging(args, pageSizeDefault, pageSizeLimit);
				const secrets = opts.secretPaths ?? [];
				const secret = secrets.length ? (filterTouches(where, secrets) ?? sort.map(([f]) => f).find(f => secrets.some(p => pathsOverlap(f, p)))) : undefined;
				if (secret) throw badRequest(`'${secret}' holds a secret: it cannot be filtered or sorted on`);
				const show = opts.softDelete ? queryFlag(args, opts.softDelete.showParam) : false;
				const filter = this.listFilter(this.visibleFilter(where, show), args);

				const exclude = [...(opts.listHidden ?? []), ...(projection?.mode === "exclude" ? projection.fields.filter(f => !f.includes(".") && !this.eve.autoFields.has(f)) : [])];
				const [total, docs] = await Promise.all([
					this.cachedCount(filter),
					this.store.find(filter, { sort, ...pageWindow(paging), exclude }),
				]);
				await this.beforeRender(ctx, docs, args);
				const items = await this.renderMany(ctx, docs, projection, embedded, false);

				const links = pageLinks(opts.resource, args, paging, pageSizeDefault, total);
				const headers: Record<string, string> = { "X-Total-Count": String(total) };
				const newest = docs.reduce<Date | null>((acc, d) => (d._updated instanceof Date && (!acc || d._updated > acc) ? d._updated : acc), null);
				if (newest) headers["Last-Modified"] = formatHttpDate(newest);
				ctx.meta.$responseHeaders = headers;
				// A list is never answered 304 (Eve ignores If-Modified-Since on collections): a member removed
				// or changed need not move the page's Last-Modified, and a list has no ETag.
				ctx.meta.$conditional = false;
				return { _items: items, _links: links, _meta: pageMeta(paging, total) };
			},

			/** Finds one record by id (or the additional lookup field); null when absent. */
			async findItem(this: EveThis, id: string): Promise<Doc | null> {
				if (!opts.idPattern.test(id) && !opts.lookupField) return null;
				if (opts.idPattern.test(id)) {
					const doc = await this.store.findOne({ _id: id });
					if (doc || !opts.lookupField) return doc;
				}
				return opts.lookupField ? this.store.findOne({ [opts.lookupField]: id }) : null;
			},

			/** A record that item routes may see: present, and not soft-deleted unless asked for. */
			async visibleItem(this: EveThis, id: string, show = false): Promise<Doc> {
				const doc = await this.findItem(id);
				if (!doc || (softFlag && doc[softFlag] === true && !show)) throw notFound();
				return doc;
			},

			async eveGet(this: EveThis, ctx: RestContext, id: string, args: QueryArgs) {
				const show = opts.softDelete ? queryFlag(args, opts.softDelete.showParam) : false;
				const doc = await this.visibleItem(id, show);
				const projection = parseProjection(args.get("projection"));
				const embedded = parseEmbedded(args.get("embedded"));
				await this.beforeRender(ctx, [doc], args);
				// The ETag of the record as shown (after beforeRender: alerts marked read, snapshots rebuilt).
				const etag = this.etagOf(ctx, doc);
				const [item] = await this.renderMany(ctx, [doc], projection, embedded, true);
				const links = item._links as Record<string, unknown>;
				links.parent = HOME_LINK;
				links.collection = { title: opts.resource, href: opts.resource + linkQuery(args, { page: 1, maxResults: this.eve.pageSizeDefault }, this.eve.pageSizeDefault, 1) };
				const headers: Record<string, string> = { ETag: quoteEtag(etag) };
				if (doc._updated instanceof Date) headers["Last-Modified"] = formatHttpDate(doc._updated);
				ctx.meta.$responseHeaders = headers;
				// Embedded records are other records: their changes do not change this ETag, so no 304 then.
				ctx.meta.$conditional = !embedded.some(f => opts.relations?.[f]?.embeddable === true);
				return item;
			},

			/** Hook: runs on the records about to be shown (alerts mark them read). */
			async beforeRender(this: EveThis, _ctx: RestContext, _docs: Doc[], _args: QueryArgs): Promise<void> {},

			/** Hook: reshapes a stored record before it is shown (default: as stored); `ctx` is absent for embedded records. */
			transformOutput(this: EveThis, doc: Doc, _single: boolean, _ctx?: RestContext): Doc {
				return doc;
			},

			/** Projection, list-only hiding, masking and dates: a record as a client sees it, without links. */
			outputFields(this: EveThis, doc: Doc, projection: Projection | null, single: boolean, ctx?: RestContext): Doc {
				let out = project(this.transformOutput(doc, single, ctx), this.eve.fields, this.eve.autoFields, projection);
				if (!single) for (const f of opts.listHidden ?? []) delete out[f];
				for (const f of opts.masked ?? []) if (out[f] != null) out[f] = MASK;
				out = renderDates(out);
				// Eve's key order: payload, then _updated, _created, _id.
				const ordered: Doc = {};
				for (const [k, v] of Object.entries(out)) if (k !== "_updated" && k !== "_created" && k !== "_id") ordered[k] = v;
				for (const k of ["_updated", "_created", "_id"]) if (k in out) ordered[k] = out[k];
				return ordered;
			},

			selfLink(this: EveThis, id: string): Link {
				return { title: this.eve.title, href: `${opts.resource}/${id}` };
			},

			/** `_links.related` of a record: one entry per reference field it shows (a projection that hides one drops its link, as Eve). */
			relatedLinks(this: EveThis, doc: Doc, shown?: Doc): Record<string, Link | Link[]> | null {
				const related: Record<string, Link | Link[]> = {};
				for (const [field, rel] of Object.entries(opts.relations ?? {})) {
					if (shown && !Object.hasOwn(shown, field)) continue;
					const value = doc[field];
					const title = itemTitle(rel.resource);
					if (Array.isArray(value)) {
						if (value.length) related[field] = value.map(v => ({ title, href: `${rel.resource}/${v}` }));
					} else if (value != null && value !== "") {
						related[field] = { title, href: `${rel.resource}/${value}` };
					}
				}
				return Object.keys(related).length ? related : null;
			},

			async renderMany(this: EveThis, ctx: RestContext, docs: Doc[], projection: Projection | null, embedded: string[], single: boolean): Promise<Doc[]> {
				const items = docs.map(doc => {
					const out = this.outputFields(doc, projection, single, ctx);
					const links: Record<string, unknown> = { self: this.selfLink(String(doc._id)) };
					const related = this.relatedLinks(doc, out);
					if (related) links.related = related;
					out._links = links;
					return out;
				});
				for (const field of embedded) {
					const rel = opts.relations?.[field];
					if (!rel?.embeddable) continue;
					const wanted = new Set<string>();
					for (const item of items) {
						const v = item[field];
						if (Array.isArray(v)) v.forEach(x => wanted.add(String(x)));
						else if (v != null) wanted.add(String(v));
					}
					if (wanted.size === 0) continue;
					const key = rel.field ?? "_id";
					const fetched: Doc[] = await ctx.call(`${rel.service}.fetch`, { ids: [...wanted], field: key });
					const byKey = new Map(fetched.map(d => [String(d[key]), d]));
					for (const item of items) {
						const v = item[field];
						if (Array.isArray(v)) item[field] = v.map(x => byKey.get(String(x))).filter(Boolean);
						else if (v != null) item[field] = byKey.get(String(v)) ?? null;
					}
				}
				return items;
			},

			// ------------------------------------------------------------ writing

			/**
			 * Hook: coerces and completes a client document before schema validation (e.g. a date
			 * given as "YYYY-MM-DD HH:MM"). Returns the document, or issues to report.
			 */
			async prepareInput(this: EveThis, _ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<{ doc: Doc; issues?: Issues }> {
				return { doc };
			},

			/** Hook: rules beyond the schema, checked after it (cycles, cross-field rules). */
			async checkRules(this: EveThis, _ctx: RestContext, _doc: Doc, _info: WriteInfo): Promise<Issues | null> {
				return null;
			},

			/** Hook: the stored form of a valid document (defaults, server fields, encryption). */
			async beforeStore(this: EveThis, _ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Doc> {
				return doc;
			},

			/** Hook: after records were written or removed. */
			async afterWrite(this: EveThis, ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]): Promise<void> {
				await this.notifyChanged(ctx, op, ids);
			},

			/** Drops cached counts here and on every replica, and emits `<service>.<op>` for other services. */
			async notifyChanged(this: EveThis, ctx: Context, op: "created" | "updated" | "removed", ids: string[]): Promise<void> {
				this.forgetCachedReads();
				ctx.broadcast("eve.collectionChanged", { service: this.name }, { groups: [this.name, "api"] });
				ctx.emit(`${this.name}.${op}`, { ids });
			},

			async referenceIssues(this: EveThis, ctx: RestContext, doc: Doc): Promise<Issues | null> {
				const issues: Issues = {};
				for (const [field, rel] of Object.entries(opts.relations ?? {})) {
					if (rel.validate === false || doc[field] == null) continue;
					const values: string[] = (Array.isArray(doc[field]) ? doc[field] : [doc[field]]).map(String);
					if (values.length === 0) continue;
					const key = rel.field ?? "_id";
					const found = new Set<string>(await ctx.call(`${rel.service}.exist`, { ids: [...new Set(values)], field: key }));
					const message = (v: string) => `value '${v}' must exist in resource '${rel.resource}', field '${key}'.`;
					if (Array.isArray(doc[field])) {
						const bad: Record<string, string> = {};
						values.forEach((v, i) => {
							if (!found.has(v)) bad[String(i)] = message(v);
						});
						if (Object.keys(bad).length) issues[field] = bad;
					} else if (!found.has(values[0])) {
						issues[field] = message(values[0]);
					}
				}
				return Object.keys(issues).length ? issues : null;
			},

			/** Schema, reference and rule checks for one document; issues or the document to store. */
			async validateDoc(this: EveThis, ctx: RestContext, raw: unknown, info: WriteInfo): Promise<{ doc?: Doc; issues?: Issues }> {
				if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return { issues: { _root: "must be of dict type" } };
				const input = { ...(raw as Doc) };
				let clientId: string | undefined;
				if (info.op === "create" && "_id" in input) {
					clientId = input._id;
					delete input._id;
					if (!opts.clientIds) return { issues: { _id: "unknown field" } };
					if (typeof clientId !== "string" || !opts.idPattern.test(clientId)) return { issues: { _id: "must be of objectid type" } };
				}
				const prepared = await this.prepareInput(ctx, input, info);
				if (prepared.issues && Object.keys(prepared.issues).length) return { issues: prepared.issues };
				const check = info.op === "create" ? this.eve.createCheck : this.eve.patchCheck;
				const issues = check(prepared.doc) ?? (await this.referenceIssues(ctx, prepared.doc)) ?? (await this.checkRules(ctx, prepared.doc, info));
				if (issues) return { issues };
				const doc = prepared.doc;
				if (clientId) doc._id = clientId;
				return { doc };
			},

			/** POST on the collection; services may wrap it (tokens add the secret to the response). */
			eveCreate(this: EveThis, ctx: RestContext, body: unknown) {
				return this.createRecords(ctx, body);
			},

			async createRecords(this: EveThis, ctx: RestContext, body: unknown) {
				const bulk = Array.isArray(body);
				const inputs = bulk ? (body as unknown[]) : [body];
				if (body === undefined || body === null) throw badRequest("a JSON object (or an array of them) is required");
				if (inputs.length === 0) throw badRequest("Empty bulk insert");
				if (inputs.length > 1000) throw new EveError(413, "too many documents in one bulk insert (at most 1000)");

				const results = [];
				for (const raw of inputs) results.push(await this.validateDoc(ctx, raw, { op: "create" }));
				const failed = results.filter(r => r.issues).length;
				if (failed) {
					const message = `Insertion failure: ${failed} document(s) contain(s) error(s)`;
					if (!bulk) throw validationFailed(results[0].issues as Issues, message);
					throw new EveError(422, message, { items: results.map(r => (r.issues ? { _status: "ERR", _issues: r.issues } : { _status: "OK" })) });
				}

				const now = nowSeconds();
				const docs: Doc[] = [];
				for (const r of results) {
					const stored = await this.beforeStore(ctx, r.doc as Doc, { op: "create" });
					const doc: Doc = { ...stored, _id: stored._id ?? newObjectId(), _created: now, _updated: now };
					if (softFlag) doc[softFlag] = false;
					docs.push(doc);
				}
				const ids = docs.map(d => String(d._id));
				if (new Set(ids).size !== ids.length) throw conflict("duplicate _id in the request");
				const clashing = await this.store.find({ _id: { $in: ids } });
				if (clashing.length) throw conflict(`a record with _id '${clashing[0]._id}' already exists`);
				try {
					await this.store.insertMany(docs);
				} catch (err) {
					if (err instanceof DuplicateKeyError) throw conflict(`duplicate key ${err.key}`);
					throw err;
				}
				await this.afterWrite(ctx, "created", ids);

				const written = docs.map(d => this.writeResponse(d));
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/api/${opts.resource}/${ids[0]}`;
				if (!bulk || written.length === 1) return written[0];
				return { _status: "OK", _items: written };
			},

			/** Eve's BANDWIDTH_SAVER write response: only the meta fields. */
			writeResponse(this: EveThis, doc: Doc): Doc {
				const out: Doc = { _updated: doc._updated, _created: doc._created, _id: doc._id };
				if (softFlag) out[softFlag] = doc[softFlag] === true;
				const links: Record<string, unknown> = { self: this.selfLink(String(doc._id)) };
				const related = this.relatedLinks(doc);
				if (related) links.related = related;
				out._links = links;
				out._status = "OK";
				return renderDates(out);
			},

			/**
			 * PATCH of one item: 404 when GET would be (a soft-deleted host included: docs/api.md), 412 when an
			 * If-Match names another version, 400 for a body that is not JSON data, 422 for an array or what
			 * the schema refuses. Dotted keys set a field inside a dict (lib/eve/patch.ts).
			 */
			async evePatch(this: EveThis, ctx: RestContext, id: string, body: unknown) {
				const existing = await this.visibleItem(id);
				// Before the body is looked at, as Eve's get_document: a stale edit is a 412 whatever it holds.
				this.checkIfMatch(ctx, existing);
				if (body === undefined || body === null || typeof body !== "object") throw badRequest("a JSON object is required");
				if (Array.isArray(body)) throw validationFailed({ _root: "must be of dict type" }, "Update failure: the document contains errors");
				const resolved = resolveDottedKeys(body as Doc, existing);
				if (resolved.issues) throw validationFailed(resolved.issues, "Update failure: the document contains errors");
				const { doc, issues } = await this.validateDoc(ctx, resolved.doc, { op: "patch", existing });
				if (issues) throw validationFailed(issues, "Update failure: the document contains errors");
				return this.applyPatch(ctx, existing, doc as Doc, true, resolved.exact);
			},

			/**
			 * Writes a validated partial document into a record; `merge` merges nested objects, as Eve's PATCH
			 * does, except for the `exact` fields (already whole: dotted keys). With an If-Match, the write is
			 * a compare-and-write on the version compared (lost to any write in between: 412).
			 */
			async applyPatch(this: EveThis, ctx: RestContext, existing: Doc, changes: Doc, merge: boolean, exact: string[] = []) {
				const conditional = this.checkIfMatch(ctx, existing);
				const stored = await this.beforeStore(ctx, changes, { op: "patch", existing });
				const $set: Doc = { _updated: nowSeconds(), [REVISION_FIELD]: newRevision() };
				for (const [k, v] of Object.entries(stored)) $set[k] = merge && !exact.includes(k) ? mergeNested(existing[k], v) : v;
				const update: Update = { $set };
				const updated = await this.store.findOneAndUpdate(conditional ? this.versionFilter(existing) : this.liveFilter(existing), update);
				if (!updated) throw await this.writeRefused(existing, conditional);
				await this.afterWrite(ctx, "updated", [String(existing._id)]);
				ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, ETag: quoteEtag(this.etagOf(ctx, updated)) };
				return this.writeResponse(updated);
			},

			/**
			 * DELETE of one item: 404 when GET would be (a malformed id, no such record, or one already
			 * soft-deleted), unlike Eve >= 1.0 whose DELETE of what is not there is a 204 (docs/api.md); 412
			 * when an If-Match names another version (the version is claimed first, so a write made from the
			 * same ETag meanwhile loses).
			 */
			async eveRemove(this: EveThis, ctx: RestContext, id: string) {
				const doc = await this.claimForRemoval(ctx, id);
				await this.removeDocs(ctx, [doc]);
				ctx.meta.$statusCode = 204;
				return null;
			},

			/**
			 * DELETE's preconditions: the record visible (else 404) and, when the request has an If-Match, at that
			 * version (else 412), which is claimed so that a write made from the same ETag meanwhile loses. Also for
			 * services whose DELETE does more than remove the record (vpn: the organization in Pritunl first).
			 */
			async claimForRemoval(this: EveThis, ctx: RestContext, id: string): Promise<Doc> {
				const doc = await this.visibleItem(id);
				if (this.checkIfMatch(ctx, doc)) {
					const claimed = await this.store.findOneAndUpdate(this.versionFilter(doc), { $set: { [REVISION_FIELD]: newRevision() } });
					if (!claimed) throw await this.writeRefused(doc, true);
				}
				return doc;
			},

			/** Deletes records (or flags them, for soft-deleting collections). */
			async removeDocs(this: EveThis, ctx: RestContext, docs: Doc[]): Promise<void> {
				if (docs.length === 0) return;
				const ids = docs.map(d => String(d._id));
				if (softFlag) await this.store.updateMany({ _id: { $in: ids } }, { $set: { [softFlag]: true, _updated: nowSeconds(), [REVISION_FIELD]: newRevision() } });
				else await this.store.removeMany({ _id: { $in: ids } });
				await this.afterWrite(ctx, "removed", ids);
			},

			// ------------------------------------------------------------ ETags and If-Match

			/** The record's ETag as this caller sees it (lib/eve/etag.ts). */
			etagOf(this: EveThis, ctx: RestContext, doc: Doc): string {
				return documentEtag(doc, this.readVariant(ctx));
			},

			/**
			 * Compares the request's If-Match (if any) with the record: 412 when it names another version.
			 * Returns whether the request is conditional, i.e. whether its write must be a compare-and-write.
			 */
			checkIfMatch(this: EveThis, ctx: RestContext, doc: Doc): boolean {
				const condition: EtagCondition | null = parseEtagCondition(ctx.meta.ifMatch);
				if (!condition) return false;
				if (!ifMatchPasses(condition, this.etagOf(ctx, doc))) throw preconditionFailed();
				return true;
			},

			/** The record as it is still visible to item writes: present, and not soft-deleted. */
			liveFilter(this: EveThis, doc: Doc): Filter {
				return softFlag ? { _id: doc._id, [softFlag]: { $ne: true } } : { _id: doc._id };
			},

			/**
			 * The record at exactly the version read: same revision token (set by every write of this layer)
			 * and same `_updated` (moved by the services' own writes). What a compare-and-write filters on.
			 */
			versionFilter(this: EveThis, doc: Doc): Filter {
				const rev = doc[REVISION_FIELD];
				return {
					...this.liveFilter(doc),
					[REVISION_FIELD]: rev === undefined ? { $exists: false } : rev,
					_updated: doc._updated === undefined ? { $exists: false } : doc._updated,
				};
			},

			/** Why a write that found no record to change failed: gone (404), or changed since it was read (412). */
			async writeRefused(this: EveThis, doc: Doc, conditional: boolean): Promise<EveError> {
				const now = await this.store.findOne(this.liveFilter(doc));
				return now && conditional ? preconditionFailed() : notFound();
			},

			checkFilter(this: EveThis, filter: unknown): Filter {
				return checkFilter(filter);
			},
		},
	};
}


