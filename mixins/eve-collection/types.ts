/**
 * The Eve mixin's shapes: its options, what a collection service has on `this`, the request context the
 * gateway sends, and the read cache's limits.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { ValidationSchema } from "fastest-validator";
import type { StorageThis } from "../storage.mixin";
import type { Check } from "../../lib/eve/validation";
import type { Doc } from "../../lib/storage/store";
import type { ReadCache } from "../../lib/http/read-cache";

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
	counts: ReadCache<number>;
	reads: ReadCache<CachedRead>;
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
