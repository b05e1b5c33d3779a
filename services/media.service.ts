/**
 * Owns the `media` collection: the bytes of uploaded files, in chunks (like GridFS), so that any
 * storage backend holds them and no message exceeds the transporter's payload limit.
 * GET /api/media/<id> streams them back with their content type.
 */
import { Readable } from "node:stream";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { Storage } from "../mixins/storage.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds, formatHttpDate } from "../lib/eve/dates";
import { EveError, notFound } from "../lib/eve/errors";
import type { HttpMeta } from "../mixins/eve-collection.mixin";
import type { Store } from "../lib/storage/store";

const CHUNK_BYTES = 255 * 1024;

interface MediaThis {
	store: Store;
}

const MediaService: ServiceSchema<ServiceSettingSchema, Record<string, any>, MediaThis> = {
	name: "media",
	mixins: [Storage("media")],

	actions: {
		/** Stores the bytes of ctx.stream; answers 413 (and keeps nothing) past `maxBytes`. */
		save: {
			visibility: "public",
			params: { contentType: { type: "string", max: 255 }, filename: { type: "string", max: 1024, optional: true }, maxBytes: { type: "number", integer: true, positive: true } },
			async handler(this: MediaThis, ctx: Context<{ contentType: string; filename?: string; maxBytes: number }>) {
				const stream = ctx.stream;
				if (!stream) throw new EveError(400, "no file content");
				const id = newObjectId();
				let n = 0;
				let length = 0;
				let pending: Buffer[] = [];
				let pendingBytes = 0;
				const flush = async (final: boolean) => {
					while (pendingBytes >= CHUNK_BYTES || (final && pendingBytes > 0)) {
						const all = Buffer.concat(pending);
						const chunk = all.subarray(0, CHUNK_BYTES);
						const rest = all.subarray(chunk.length);
						pending = rest.length ? [rest] : [];
						pendingBytes = rest.length;
						await this.store.insertMany([{ _id: `${id}.${n}`, media: id, n, data: chunk.toString("base64") }]);
						n++;
					}
				};
				try {
					for await (const part of stream as unknown as AsyncIterable<Buffer>) {
						const buf = Buffer.isBuffer(part) ? part : Buffer.from(part);
						length += buf.length;
						if (length > ctx.params.maxBytes) throw new EveError(413, `file too large (limit ${ctx.params.maxBytes} bytes)`);
						pending.push(buf);
						pendingBytes += buf.length;
						await flush(false);
					}
					await flush(true);
					await this.store.insertMany([{ _id: id, chunks: n, length, content_type: ctx.params.contentType, filename: ctx.params.filename ?? "", _created: nowSeconds() }]);
				} catch (err) {
					await this.store.removeMany({ media: id });
					if ((err as { name?: string }).name === "PayloadTooLarge") throw new EveError(413, `file too large (limit ${ctx.params.maxBytes} bytes)`);
					throw err;
				}
				return { id, length, contentType: ctx.params.contentType };
			},
		},

		/** GET /api/media/<id>: the exact bytes. */
		get: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: MediaThis, ctx: Context<{ id: string }, HttpMeta>) {
				if (!OBJECT_ID.test(ctx.params.id)) throw notFound();
				const head = await this.store.findOne({ _id: ctx.params.id });
				if (!head) throw notFound();
				ctx.meta.$responseType = head.content_type || "application/octet-stream";
				ctx.meta.$responseHeaders = {
					"Content-Length": String(head.length),
					"Last-Modified": formatHttpDate(head._created),
					"Content-Disposition": `inline; filename*=UTF-8''${encodeURIComponent(head.filename || ctx.params.id)}`,
					"X-Content-Type-Options": "nosniff",
				};
				const store = this.store;
				const mediaId = head._id;
				const total = head.chunks as number;
				async function* chunks() {
					for (let i = 0; i < total; i++) {
						const doc = await store.findOne({ _id: `${mediaId}.${i}` });
						if (!doc) throw new Error(`media ${mediaId} is missing chunk ${i}`);
						yield Buffer.from(doc.data, "base64");
					}
				}
				return Readable.from(chunks());
			},
		},

		remove: {
			visibility: "public",
			params: { id: "string" },
			async handler(this: MediaThis, ctx: Context<{ id: string }>) {
				await this.store.removeMany({ _id: ctx.params.id });
				await this.store.removeMany({ media: ctx.params.id });
				return true;
			},
		},
	},

	async started(this: MediaThis) {
		await this.store.ensureIndex("media");
	},
};

export default MediaService;
