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
import type { Context, ServiceSchema } from "moleculer";
import type { ValidationSchema } from "fastest-validator";
import { Storage } from "./storage.mixin";
import { configOf } from "../lib/config";
import { QueryArgs } from "../lib/eve/query";
import { compileSchema, partialSchema } from "../lib/eve/validation";
import { itemTitle } from "../lib/eve/render";
import { ReadCache } from "../lib/http/read-cache";
import { RenderCache } from "../lib/eve/render-cache";
import { describeCollection, type CollectionDescription } from "../lib/http/openapi";
import type { EveCollectionOptions, EveServiceSchema, EveThis, RestContext } from "./eve-collection/types";
import { READ_CACHE_ENTRIES } from "./eve-collection/types";
import { readMethods } from "./eve-collection/reads";
import { writeMethods } from "./eve-collection/writes";
import { etagMethods } from "./eve-collection/etags";

export type {
	EveCollectionOptions,
	EveServiceSchema,
	EveThis,
	EveVars,
	HttpMeta,
	Relation,
	RestContext,
	RestParams,
	SoftDelete,
	WriteInfo,
} from "./eve-collection/types";

const queryParam = { type: "multi", optional: true, rules: [{ type: "array" }, { type: "object" }] } as const;
const idParam = { type: "string", min: 1, max: 512 } as const;
const lookupParams = {
	ids: { type: "array", items: "string", max: 10000 },
	field: { type: "enum", values: ["_id", "name"], optional: true },
} as const;

export function EveCollection(opts: EveCollectionOptions): Partial<ServiceSchema> {
	return eveCollectionSchema(opts) as Partial<ServiceSchema>;
}

function eveCollectionSchema(opts: EveCollectionOptions): Partial<EveServiceSchema> {
	const schemaFields = Object.keys(opts.schema).filter(k => !k.startsWith("$$"));
	const softFlag = opts.softDelete?.flag;
	const writes = new Set(opts.writes ?? ["create", "patch", "remove"]);

	return {
		mixins: [Storage(opts.resource, opts.extraCollections, opts.deferred)],

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
					const docs = await this.store.find(this.visibleFilter({ [field]: { $in: ctx.params.ids } }, false), {
						only: [field],
					});
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
			const config = configOf(this.broker);
			const auto = ["_id", "_created", "_updated"];
			if (softFlag) auto.push(softFlag);
			// Read-only fields are known to the schema (Eve's `readonly`): sending one is "field is read-only", not "unknown field".
			const readOnly: ValidationSchema = Object.fromEntries(
				(opts.readOnlyFields ?? []).map(f => [f, { type: "forbidden" }]),
			);
			this.eve = {
				opts,
				softFlag,
				title: itemTitle(opts.resource),
				fields: new Set([...schemaFields, ...(opts.readOnlyFields ?? [])]),
				autoFields: new Set(auto),
				// What clients write must be well-formed Unicode, in every string field of every collection.
				createCheck: compileSchema({ ...opts.schema, ...readOnly }, { wellFormed: true }),
				// PATCH never enforces `required` (Eve), whichever schema it checks against.
				patchCheck: compileSchema(
					{ ...partialSchema(opts.patchSchema ?? opts.schema), ...readOnly },
					{ wellFormed: true },
				),
				pageSizeDefault: config.pageSizeDefault,
				pageSizeLimit: config.pageSizeLimit,
				reads: new ReadCache(config.readCacheMs, READ_CACHE_ENTRIES),
				rendered: opts.renderCache && config.renderCacheRecords > 0 ? new RenderCache(config.renderCacheRecords) : null,
			};
		},

		events: {
			// Any replica that writes tells the others, so their cached reads go.
			"eve.collectionChanged": {
				context: true,
				handler(this: EveThis, ctx: Context<{ service: string }>) {
					if (ctx.params.service === this.name) this.forgetCachedReads();
				},
			},
		},
		async started(this: EveThis) {
			await this.store.ensureIndex("_updated", { ordered: true });
			if (softFlag) await this.store.ensureIndex(softFlag);
			for (const [field, options] of Object.entries(opts.indexes ?? {})) await this.store.ensureIndex(field, options);
		},
		methods: {
			...readMethods,
			...writeMethods,
			...etagMethods,
		},
	};
}
