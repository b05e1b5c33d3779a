/**
 * The Eve mixin's ETags and If-Match (mixins/eve-collection.mixin.ts): a record's ETag, the compare-and-write
 * filters that make a write land only on the version the client named (412 otherwise).
 */
import { notFound } from "../../lib/eve/errors";
import {
	REVISION_FIELD,
	documentEtag,
	ifMatchPasses,
	parseEtagCondition,
	preconditionFailed,
	type EtagCondition,
} from "../../lib/eve/etag";
import { checkFilter, type Filter } from "../../lib/eve/query";
import type { Doc } from "../../lib/storage/store";
import type { EveThis, RestContext } from "./types";

export const etagMethods = {
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
		return this.eve.softFlag ? { _id: doc._id, [this.eve.softFlag]: { $ne: true } } : { _id: doc._id };
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
	async writeRefused(this: EveThis, doc: Doc, conditional: boolean): Promise<Error> {
		const now = await this.store.findOne(this.liveFilter(doc));
		return now && conditional ? preconditionFailed() : notFound();
	},

	checkFilter(this: EveThis, filter: unknown): Filter {
		return checkFilter(filter);
	},
};
