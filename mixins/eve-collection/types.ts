/**
 * The Eve mixin's shapes: its options, what a collection service has on `this`, the request context the
 * gateway sends, and the read cache's limits.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { ValidationSchema } from "fastest-validator";
import type { StorageThis } from "../storage.mixin";
import type { Check } from "../../lib/eve/validation";
import type { Doc, IndexOptions, SortSpec } from "../../lib/storage/store";
import type { Filter, Projection, QueryArgs } from "../../lib/eve/query";
import type { Issues } from "../../lib/eve/errors";
import type { Link } from "../../lib/eve/render";
import type { ReadCache } from "../../lib/http/read-cache";
import type { RawJson, RenderCache } from "../../lib/eve/render-cache";

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
	/**
	 * A large field lists never show (one of `listHidden`): on the embedded store it is left in its file at
	 * a load and parsed when first read (lib/storage/nedb-deferred.ts), so a start parses records without it.
	 */
	deferred?: string;
	/**
	 * Fields operators filter and sort on, indexed on both stores (every collection also indexes `_updated`
	 * and its soft-delete flag): lists filtered on them read only the matching records (docs/storage.md).
	 */
	indexes?: Record<string, IndexOptions>;
	/** The order of a list whose client gave no `sort` (default: the store's, by `_id`). */
	defaultSort?: SortSpec;
	/**
	 * Each record's rendering is a function of the stored record and `readVariant` alone (no `beforeRender`, a
	 * `transformOutput` that reads nothing else, the default `findItem`): on the embedded store, reads without
	 * `embedded` then serialize each record version once (lib/eve/render-cache.ts).
	 */
	renderCache?: boolean;
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
}

/**
 * The mixin's methods (mixins/eve-collection/reads.ts, writes.ts, etags.ts), as a collection service calls them
 * on `this`; a service overrides the hooks (`listFilter`, `beforeRender`, `transformOutput`, `readVariant`,
 * `prepareInput`, `checkRules`, `beforeStore`, `afterWrite`, `findItem`) with its own rules.
 */
export interface EveMethods {
	cachedRead(ctx: RestContext, id: string, args: QueryArgs, compute: () => Promise<unknown>): Promise<Buffer>;
	readVariant(ctx: Context<unknown, object>): string;
	readCacheable(args: QueryArgs): boolean;
	forgetCachedReads(): void;
	visibleFilter(filter: Filter, show: boolean): Filter;
	listFilter(filter: Filter, args: QueryArgs): Filter;
	eveList(ctx: RestContext, args: QueryArgs): Promise<unknown>;
	findItem(id: string, shared?: boolean): Promise<Doc | null>;
	visibleItem(id: string, show?: boolean, shared?: boolean): Promise<Doc>;
	eveGet(ctx: RestContext, id: string, args: QueryArgs): Promise<unknown>;
	beforeRender(ctx: RestContext, docs: Doc[], args: QueryArgs): Promise<void>;
	transformOutput(doc: Doc, single: boolean, ctx?: Context<unknown, object>): Doc;
	outputFields(doc: Doc, projection: Projection | null, single: boolean, ctx?: RestContext): Doc;
	selfLink(id: string): Link;
	relatedLinks(doc: Doc, shown?: Doc): Record<string, Link | Link[]> | null;
	renderOne(ctx: RestContext, doc: Doc, projection: Projection | null, single: boolean): Doc;
	renderMany(
		ctx: RestContext,
		docs: Doc[],
		projection: Projection | null,
		embedded: string[],
		single: boolean,
	): Promise<Doc[]>;
	renderedRecords(args: QueryArgs, embedded: string[]): RenderCache | null;
	renderedItem(
		ctx: RestContext,
		rendered: RenderCache,
		doc: Doc,
		projection: Projection | null,
		args: QueryArgs,
	): RawJson;
	collectionLink(args: QueryArgs): Link;
	itemHeaders(ctx: RestContext, doc: Doc, etag: string): void;
	prepareInput(ctx: RestContext, doc: Doc, info: WriteInfo): Promise<{ doc: Doc; issues?: Issues }>;
	checkRules(ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null>;
	beforeStore(ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc>;
	afterWrite(ctx: RestContext, op: "created" | "updated" | "removed", ids: string[]): Promise<void>;
	notifyChanged(ctx: Context, op: "created" | "updated" | "removed", ids: string[]): Promise<void>;
	referenceIssues(ctx: Context, doc: Doc): Promise<Issues | null>;
	validateDoc(ctx: RestContext, raw: unknown, info: WriteInfo): Promise<{ doc?: Doc; issues?: Issues }>;
	eveCreate(ctx: RestContext, body: unknown): Promise<unknown>;
	createRecords(ctx: RestContext, body: unknown): Promise<unknown>;
	writeResponse(doc: Doc): Doc;
	evePatch(ctx: RestContext, id: string, body: unknown): Promise<unknown>;
	applyPatch(ctx: RestContext, existing: Doc, changes: Doc, merge: boolean, exact?: string[]): Promise<unknown>;
	eveRemove(ctx: RestContext, id: string): Promise<unknown>;
	claimForRemoval(ctx: RestContext, id: string): Promise<Doc>;
	removeDocs(ctx: RestContext, docs: Doc[]): Promise<void>;
	etagOf(ctx: RestContext, doc: Doc): string;
	checkIfMatch(ctx: RestContext, doc: Doc): boolean;
	liveFilter(doc: Doc): Filter;
	versionFilter(doc: Doc): Filter;
	writeRefused(doc: Doc, conditional: boolean): Promise<Error>;
	checkFilter(filter: unknown): Filter;
}

export type EveThis = Service & EveVars & EveMethods;

/** The schema type of a service that composes EveCollection. */
export type EveServiceSchema<T extends EveThis = EveThis> = ServiceSchema<
	ServiceSettingSchema & Record<string, any>,
	Record<string, any>,
	EveVars,
	T
>;

export interface EveState {
	opts: EveCollectionOptions;
	/** The soft-deletion flag, when the collection has one. */
	softFlag?: string;
	title: string;
	fields: Set<string>;
	autoFields: Set<string>;
	createCheck: Check;
	patchCheck: Check;
	pageSizeDefault: number;
	pageSizeLimit: number;
	reads: ReadCache<CachedRead>;
	/** Records rendered, by stored version: when the collection's `renderCache` is set and RENDER_CACHE_RECORDS > 0. */
	rendered: RenderCache | null;
}

export interface CachedRead {
	body: Buffer;
	headers?: Record<string, string>;
	conditional?: boolean;
}

/**
 * Counts and serialized reads are cached per replica until the collection changes: any replica's write
 * clears them here, on the other replicas and in the gateways (eve.collectionChanged).
 */
export const READ_CACHE_ENTRIES = 200;
export const READ_CACHE_MAX_BYTES = 512 * 1024;
export const JSON_TYPE = "application/json; charset=utf-8";
