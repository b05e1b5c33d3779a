/**
 * The Eve mixin's reads (mixins/eve-collection.mixin.ts): lists and items with `where`, `sort`, `projection`,
 * `embedded`, paging and soft delete; serialized answers cached until the collection changes; rendering
 * (dates, masks, `_links`, embedded records). Services override `listFilter`, `beforeRender`, `transformOutput`.
 */
import { badRequest, notFound } from "../../lib/eve/errors";
import { quoteEtag } from "../../lib/eve/etag";
import { renderDates, formatHttpDate } from "../../lib/eve/dates";
import {
	type QueryArgs,
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
	type Filter,
	type Projection,
} from "../../lib/eve/query";
import { HOME_LINK, itemTitle, project, MASK, type Link } from "../../lib/eve/render";
import { RawJson, renderedChunks, toRendered, type RenderCache } from "../../lib/eve/render-cache";
import { pageLinks, pageMeta, pageWindow } from "../../lib/eve/paging";
import type { Doc } from "../../lib/storage/store";
import type { EveThis, RestContext } from "./types";
import { JSON_TYPE, READ_CACHE_MAX_BYTES } from "./types";

/** A list's body from kept renderings: its opening, and what separates two items. */
const ITEMS_OPEN = Buffer.from('{"_items":[');
const ITEM_SEPARATOR = Buffer.from(",");

export const readMethods = {
	/**
	 * Serves a read as its serialized JSON body (bytes): from the cache when the same query was
	 * answered since the last change, else computed and kept. Bytes are written to the socket as
	 * they are and cross the transporter unescaped (lib/runtime/serializer.ts). `embedded` reads depend on
	 * other collections and side-effecting reads (see readCacheable) are never cached.
	 */
	async cachedRead(
		this: EveThis,
		ctx: RestContext,
		id: string,
		args: QueryArgs,
		compute: () => Promise<unknown>,
	): Promise<Buffer> {
		const cacheable = !args.has("embedded") && this.readCacheable(args);
		// The key only where something may be kept (READ_CACHE_MS=0 keeps nothing).
		const key =
			cacheable && this.eve.reads.enabled
				? `${this.readVariant(ctx)}\u0000${id}\u0000${JSON.stringify(args.pairs)}`
				: "";
		ctx.meta.$responseType = JSON_TYPE;
		// Tells the gateway whether it may keep the response too.
		ctx.meta.$cacheable = cacheable;
		const hit = key ? this.eve.reads.get(key) : undefined;
		if (hit) {
			if (hit.headers) ctx.meta.$responseHeaders = { ...hit.headers };
			ctx.meta.$conditional = hit.conditional === true;
			return hit.body;
		}
		const generation = this.eve.reads.generation;
		const value = await compute();
		const body = value instanceof RawJson ? value.body : Buffer.from(JSON.stringify(value));
		if (key && body.length <= READ_CACHE_MAX_BYTES)
			this.eve.reads.set(
				key,
				{ body, headers: ctx.meta.$responseHeaders, conditional: ctx.meta.$conditional === true },
				generation,
			);
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
		this.eve.reads.clear();
	},

	/** The filter that hides soft-deleted records unless they were asked for (the flag is always stored). */
	visibleFilter(this: EveThis, filter: Filter, show: boolean): Filter {
		if (!this.eve.softFlag || show || filterMentions(filter, this.eve.softFlag)) return filter;
		const hide = { [this.eve.softFlag]: false };
		return Object.keys(filter).length ? { $and: [filter, hide] } : hide;
	},

	/** Hook: extra conditions a collection adds to every list (none by default). */
	listFilter(this: EveThis, filter: Filter, _args: QueryArgs): Filter {
		return filter;
	},

	async eveList(this: EveThis, ctx: RestContext, args: QueryArgs) {
		const { pageSizeDefault, pageSizeLimit } = this.eve;
		const where = parseWhere(args.get("where"));
		const asked = parseSort(args.get("sort"));
		const sort = asked.length ? asked : (this.eve.opts.defaultSort ?? []);
		const projection = parseProjection(args.get("projection"));
		const embedded = parseEmbedded(args.get("embedded"));
		const paging = parsePaging(args, pageSizeDefault, pageSizeLimit);
		const secrets = this.eve.opts.secretPaths ?? [];
		const secret = secrets.length
			? (filterTouches(where, secrets) ?? sort.map(([f]) => f).find(f => secrets.some(p => pathsOverlap(f, p))))
			: undefined;
		if (secret) throw badRequest(`'${secret}' holds a secret: it cannot be filtered or sorted on`);
		const show = this.eve.opts.softDelete ? queryFlag(args, this.eve.opts.softDelete.showParam) : false;
		const filter = this.listFilter(this.visibleFilter(where, show), args);

		const exclude = [
			...(this.eve.opts.listHidden ?? []),
			...(projection?.mode === "exclude"
				? projection.fields.filter(f => !f.includes(".") && !this.eve.autoFields.has(f))
				: []),
		];
		const rendered = this.renderedRecords(args, embedded);
		const window = { sort, ...pageWindow(paging) };
		// The total and the page in one pass (the embedded store), through the indexes; with rendered records kept,
		// the store's own records (each version rendered once), else copies.
		const { total, docs } =
			rendered && this.store.findPageShared
				? await this.store.findPageShared(filter, window)
				: await this.store.findPage(filter, { ...window, exclude });
		let items: Doc[] = [];
		let chunks: Buffer[] | null = null;
		if (rendered) {
			chunks = [ITEMS_OPEN];
			// The projection as sent: the same text is the same projection (parsed and checked above).
			const variant = `${this.readVariant(ctx)}\u0000${args.get("projection") ?? ""}\u0000list`;
			for (let i = 0; i < docs.length; i++) {
				let r = rendered.get(docs[i], variant);
				if (!r) rendered.set(docs[i], variant, (r = toRendered(this.renderOne(ctx, docs[i], projection, false))));
				if (i > 0) chunks.push(ITEM_SEPARATOR);
				renderedChunks(r, "", chunks);
			}
		} else {
			await this.beforeRender(ctx, docs, args);
			items = await this.renderMany(ctx, docs, projection, embedded, false);
		}

		const links = pageLinks(this.eve.opts.resource, args, paging, pageSizeDefault, total);
		const headers: Record<string, string> = { "X-Total-Count": String(total) };
		// The newest `_updated` of the page (compared as numbers: comparing Dates converts each to a primitive).
		let newest: Date | null = null;
		for (const d of docs)
			if (d._updated instanceof Date && (newest === null || d._updated.getTime() > newest.getTime()))
				newest = d._updated;
		if (newest) headers["Last-Modified"] = formatHttpDate(newest);
		ctx.meta.$responseHeaders = headers;
		// A list is never answered 304 (Eve ignores If-Modified-Since on collections): a member removed
		// or changed need not move the page's Last-Modified, and a list has no ETag.
		ctx.meta.$conditional = false;
		const meta = pageMeta(paging, total);
		if (chunks) {
			chunks.push(Buffer.from(`],"_links":${JSON.stringify(links)},"_meta":${JSON.stringify(meta)}}`));
			return new RawJson(chunks);
		}
		return { _items: items, _links: links, _meta: meta };
	},

	/**
	 * The collection's rendered records, when this read may use them: the collection keeps them (renderCache) on a
	 * store that shares its records, and the read embeds nothing and has no side effect. Else null.
	 */
	renderedRecords(this: EveThis, args: QueryArgs, embedded: string[]): RenderCache | null {
		const rendered = this.eve.rendered;
		if (
			!rendered ||
			embedded.length > 0 ||
			!this.store.findPageShared ||
			!this.store.findOneShared ||
			!this.readCacheable(args)
		)
			return null;
		return rendered;
	},

	/** Finds one record by id (or the additional lookup field); null when absent. */
	async findItem(this: EveThis, id: string, shared = false): Promise<Doc | null> {
		if (!this.eve.opts.idPattern.test(id) && !this.eve.opts.lookupField) return null;
		// `shared`: the store's own record (read it, never change it), where the store can give it.
		const store = this.store;
		const findOne = (f: Filter) => (shared && store.findOneShared ? store.findOneShared(f) : store.findOne(f));
		if (this.eve.opts.idPattern.test(id)) {
			const doc = await findOne({ _id: id });
			if (doc || !this.eve.opts.lookupField) return doc;
		}
		return this.eve.opts.lookupField ? findOne({ [this.eve.opts.lookupField]: id }) : null;
	},

	/** A record that item routes may see: present, and not soft-deleted unless asked for. */
	async visibleItem(this: EveThis, id: string, show = false, shared = false): Promise<Doc> {
		const doc = await this.findItem(id, shared);
		if (!doc || (this.eve.softFlag && doc[this.eve.softFlag] === true && !show)) throw notFound();
		return doc;
	},

	async eveGet(this: EveThis, ctx: RestContext, id: string, args: QueryArgs) {
		const show = this.eve.opts.softDelete ? queryFlag(args, this.eve.opts.softDelete.showParam) : false;
		const projection = parseProjection(args.get("projection"));
		const embedded = parseEmbedded(args.get("embedded"));
		const rendered = this.renderedRecords(args, embedded);
		if (rendered) return this.renderedItem(ctx, rendered, await this.visibleItem(id, show, true), projection, args);
		const doc = await this.visibleItem(id, show);
		await this.beforeRender(ctx, [doc], args);
		// The ETag of the record as shown (after beforeRender: alerts marked read, snapshots rebuilt).
		const etag = this.etagOf(ctx, doc);
		const [item] = await this.renderMany(ctx, [doc], projection, embedded, true);
		const links = item._links as Record<string, unknown>;
		links.parent = HOME_LINK;
		links.collection = this.collectionLink(args);
		this.itemHeaders(ctx, doc, etag);
		// Embedded records are other records: their changes do not change this ETag, so no 304 then.
		ctx.meta.$conditional = !embedded.some(f => this.eve.opts.relations?.[f]?.embeddable === true);
		return item;
	},

	/** An item read from the record's rendering kept for its version (renderedRecords): the same bytes as eveGet's. */
	renderedItem(
		this: EveThis,
		ctx: RestContext,
		rendered: RenderCache,
		doc: Doc,
		projection: Projection | null,
		args: QueryArgs,
	): RawJson {
		const variant = `${this.readVariant(ctx)}\u0000${args.get("projection") ?? ""}\u0000item`;
		let r = rendered.get(doc, variant);
		if (!r)
			rendered.set(
				doc,
				variant,
				(r = { ...toRendered(this.renderOne(ctx, doc, projection, true)), etag: this.etagOf(ctx, doc) }),
			);
		this.itemHeaders(ctx, doc, r.etag as string);
		ctx.meta.$conditional = true;
		return new RawJson(
			renderedChunks(
				r,
				`"parent":${JSON.stringify(HOME_LINK)},"collection":${JSON.stringify(this.collectionLink(args))}`,
			),
		);
	},

	/** An item's link to its collection, repeating the item read's query as Eve does. */
	collectionLink(this: EveThis, args: QueryArgs): Link {
		return {
			title: this.eve.opts.resource,
			href:
				this.eve.opts.resource +
				linkQuery(args, { page: 1, maxResults: this.eve.pageSizeDefault }, this.eve.pageSizeDefault, 1),
		};
	},

	itemHeaders(this: EveThis, ctx: RestContext, doc: Doc, etag: string): void {
		const headers: Record<string, string> = { ETag: quoteEtag(etag) };
		if (doc._updated instanceof Date) headers["Last-Modified"] = formatHttpDate(doc._updated);
		ctx.meta.$responseHeaders = headers;
	},

	/** Hook: runs on the records about to be shown (alerts mark them read). */
	async beforeRender(this: EveThis, _ctx: RestContext, _docs: Doc[], _args: QueryArgs): Promise<void> {},

	/** Hook: reshapes a stored record before it is shown (default: as stored); `ctx` is absent for embedded records. */
	transformOutput(this: EveThis, doc: Doc, _single: boolean, _ctx?: RestContext): Doc {
		return doc;
	},

	/** Projection, list-only hiding, masking and dates: a record as a client sees it, without links. */
	outputFields(this: EveThis, doc: Doc, projection: Projection | null, single: boolean, ctx?: RestContext): Doc {
		const out = project(this.transformOutput(doc, single, ctx), this.eve.fields, this.eve.autoFields, projection);
		if (!single) for (const f of this.eve.opts.listHidden ?? []) delete out[f];
		for (const f of this.eve.opts.masked ?? []) if (out[f] != null) out[f] = MASK;
		// Eve's key order: payload, then _updated, _created, _id; dates as HTTP-dates (nested values copied
		// only where they hold one: renderDates). One new record, not a projected, a dated and an ordered one.
		const ordered: Doc = {};
		for (const k of Object.keys(out))
			if (k !== "_updated" && k !== "_created" && k !== "_id") ordered[k] = renderDates(out[k]);
		for (const k of ["_updated", "_created", "_id"]) if (k in out) ordered[k] = renderDates(out[k]);
		return ordered;
	},

	selfLink(this: EveThis, id: string): Link {
		return { title: this.eve.title, href: `${this.eve.opts.resource}/${id}` };
	},

	/** `_links.related` of a record: one entry per reference field it shows (a projection that hides one drops its link, as Eve). */
	relatedLinks(this: EveThis, doc: Doc, shown?: Doc): Record<string, Link | Link[]> | null {
		const related: Record<string, Link | Link[]> = {};
		for (const [field, rel] of Object.entries(this.eve.opts.relations ?? {})) {
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

	/** A record as shown, with its own `_links` (self, related) last; nothing embedded. */
	renderOne(this: EveThis, ctx: RestContext, doc: Doc, projection: Projection | null, single: boolean): Doc {
		const out = this.outputFields(doc, projection, single, ctx);
		const links: Record<string, unknown> = { self: this.selfLink(String(doc._id)) };
		const related = this.relatedLinks(doc, out);
		if (related) links.related = related;
		out._links = links;
		return out;
	},

	async renderMany(
		this: EveThis,
		ctx: RestContext,
		docs: Doc[],
		projection: Projection | null,
		embedded: string[],
		single: boolean,
	): Promise<Doc[]> {
		const items = docs.map(doc => this.renderOne(ctx, doc, projection, single));
		for (const field of embedded) {
			const rel = this.eve.opts.relations?.[field];
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
};
