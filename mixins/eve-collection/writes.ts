/**
 * The Eve mixin's writes (mixins/eve-collection.mixin.ts): validation (schema, references, rules), create (one
 * record or many), PATCH (dotted keys, merge), delete (soft when the collection has it), and the change
 * notification other replicas and the gateways drop their caches on. Services override `prepareInput`,
 * `checkRules`, `beforeStore`, `afterWrite`.
 */
import type { Context } from "moleculer";
import { InvalidItems } from "../../lib/errors";
import { EveError, badRequest, conflict, validationFailed, type Issues } from "../../lib/eve/errors";
import { REVISION_FIELD, newRevision, quoteEtag } from "../../lib/eve/etag";
import { mergeNested, resolveDottedKeys } from "../../lib/eve/patch";
import { nowSeconds, renderDates } from "../../lib/eve/dates";
import { newObjectId } from "../../lib/eve/ids";
import { DuplicateKeyError, type Doc, type Update } from "../../lib/storage/store";
import type { EveThis, RestContext, WriteInfo } from "./types";

export const writeMethods = {
	/**
	 * Hook: coerces and completes a client document before schema validation (e.g. a date
	 * given as "YYYY-MM-DD HH:MM"). Returns the document, or issues to report.
	 */
	async prepareInput(
		this: EveThis,
		_ctx: RestContext,
		doc: Doc,
		_info: WriteInfo,
	): Promise<{ doc: Doc; issues?: Issues }> {
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
	async afterWrite(
		this: EveThis,
		ctx: RestContext,
		op: "created" | "updated" | "removed",
		ids: string[],
	): Promise<void> {
		await this.notifyChanged(ctx, op, ids);
	},

	/** Drops cached reads here and on every replica, and emits `<service>.<op>` for other services. */
	async notifyChanged(
		this: EveThis,
		ctx: Context,
		op: "created" | "updated" | "removed",
		ids: string[],
	): Promise<void> {
		this.forgetCachedReads();
		ctx.broadcast("eve.collectionChanged", { service: this.name }, { groups: [this.name, "api"] });
		ctx.emit(`${this.name}.${op}`, { ids });
	},

	async referenceIssues(this: EveThis, ctx: Context, doc: Doc): Promise<Issues | null> {
		const issues: Issues = {};
		for (const [field, rel] of Object.entries(this.eve.opts.relations ?? {})) {
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
	async validateDoc(
		this: EveThis,
		ctx: RestContext,
		raw: unknown,
		info: WriteInfo,
	): Promise<{ doc?: Doc; issues?: Issues }> {
		if (raw === null || typeof raw !== "object" || Array.isArray(raw))
			return { issues: { _root: "must be of dict type" } };
		const input = { ...(raw as Doc) };
		let clientId: string | undefined;
		if (info.op === "create" && "_id" in input) {
			clientId = input._id;
			delete input._id;
			if (!this.eve.opts.clientIds) return { issues: { _id: "unknown field" } };
			if (typeof clientId !== "string" || !this.eve.opts.idPattern.test(clientId))
				return { issues: { _id: "must be of objectid type" } };
		}
		const prepared = await this.prepareInput(ctx, input, info);
		if (prepared.issues && Object.keys(prepared.issues).length) return { issues: prepared.issues };
		const check = info.op === "create" ? this.eve.createCheck : this.eve.patchCheck;
		const issues =
			check(prepared.doc) ??
			(await this.referenceIssues(ctx, prepared.doc)) ??
			(await this.checkRules(ctx, prepared.doc, info));
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
			throw new InvalidItems(
				results.map(r => (r.issues ? { _status: "ERR", _issues: r.issues } : { _status: "OK" })),
				message,
			);
		}

		const now = nowSeconds();
		const docs: Doc[] = [];
		for (const r of results) {
			const stored = await this.beforeStore(ctx, r.doc as Doc, { op: "create" });
			const doc: Doc = { ...stored, _id: stored._id ?? newObjectId(), _created: now, _updated: now };
			if (this.eve.softFlag) doc[this.eve.softFlag] = false;
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
		ctx.meta.$location = `/api/${this.eve.opts.resource}/${ids[0]}`;
		if (!bulk || written.length === 1) return written[0];
		return { _status: "OK", _items: written };
	},

	/** Eve's BANDWIDTH_SAVER write response: only the meta fields. */
	writeResponse(this: EveThis, doc: Doc): Doc {
		const out: Doc = { _updated: doc._updated, _created: doc._created, _id: doc._id };
		if (this.eve.softFlag) out[this.eve.softFlag] = doc[this.eve.softFlag] === true;
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
		if (Array.isArray(body))
			throw validationFailed({ _root: "must be of dict type" }, "Update failure: the document contains errors");
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
		for (const [k, v] of Object.entries(stored))
			$set[k] = merge && !exact.includes(k) ? mergeNested(existing[k], v) : v;
		const update: Update = { $set };
		const updated = await this.store.findOneAndUpdate(
			conditional ? this.versionFilter(existing) : this.liveFilter(existing),
			update,
		);
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
			const claimed = await this.store.findOneAndUpdate(this.versionFilter(doc), {
				$set: { [REVISION_FIELD]: newRevision() },
			});
			if (!claimed) throw await this.writeRefused(doc, true);
		}
		return doc;
	},

	/** Deletes records (or flags them, for soft-deleting collections). */
	async removeDocs(this: EveThis, ctx: RestContext, docs: Doc[]): Promise<void> {
		if (docs.length === 0) return;
		const ids = docs.map(d => String(d._id));
		if (this.eve.softFlag)
			await this.store.updateMany(
				{ _id: { $in: ids } },
				{ $set: { [this.eve.softFlag]: true, _updated: nowSeconds(), [REVISION_FIELD]: newRevision() } },
			);
		else await this.store.removeMany({ _id: { $in: ids } });
		await this.afterWrite(ctx, "removed", ids);
	},
};
