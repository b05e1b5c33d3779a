/**
 * Owns the `media` collection: the bytes of uploaded files, in chunks (like GridFS), so that any
 * storage backend holds them and no message exceeds the transporter's payload limit.
 * GET /api/media/<id> streams them back with their content type, as a download (attachment, a sandbox CSP, nosniff).
 */
import { Readable } from "node:stream";
import type { Context, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { Storage } from "../mixins/storage.mixin";
import { OBJECT_ID, newObjectId } from "../lib/eve/ids";
import { nowSeconds, formatHttpDate } from "../lib/eve/dates";
import { Malformed, NotFound, TooLarge } from "../lib/errors";
import type { HttpMeta } from "../mixins/eve-collection.mixin";
import type { Store } from "../lib/storage/store";

const CHUNK_BYTES = 255 * 1024;

/**
 * An upload is served as a download, never as a page of the dashboard's origin (docs/security.md, "Uploaded
 * files"): an uploaded HTML page would otherwise run its uploaded scripts (they pass `script-src 'self'`) with the
 * reader's cookies. `attachment` makes the browser save it; `sandbox` (no `allow-*`) gives anything that renders it
 * anyway an opaque origin with no script, no form, no cookie; nosniff keeps the uploaded type from being guessed at.
 */
const DOWNLOAD_HEADERS = {
	"Content-Security-Policy": "sandbox; default-src 'none'",
	"X-Content-Type-Options": "nosniff",
};

/**
 * `Content-Disposition: attachment` with a safe filename: an ASCII fallback with nothing but `[A-Za-z0-9._-]` (no
 * quote, no path, no control character), and the exact name percent-encoded as RFC 6266's `filename*`.
 */
function attachment(name: string): string {
	const base = name.split(/[\\/]/).pop() || "download";
	const ascii =
		base
			.replace(/[^A-Za-z0-9._-]+/g, "_")
			.replace(/^[._]+/, "")
			.slice(0, 200) || "download";
	return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(base).replace(/['()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

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
			params: {
				contentType: { type: "string", max: 255 },
				filename: { type: "string", max: 1024, optional: true },
				maxBytes: { type: "number", integer: true, positive: true },
			},
			async handler(this: MediaThis, ctx: Context<{ contentType: string; filename?: string; maxBytes: number }>) {
				const stream = ctx.stream;
				if (!stream) throw new Malformed("no file content");
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
						if (length > ctx.params.maxBytes) throw new TooLarge(`file too large (limit ${ctx.params.maxBytes} bytes)`);
						pending.push(buf);
						pendingBytes += buf.length;
						await flush(false);
					}
					await flush(true);
					await this.store.insertMany([
						{
							_id: id,
							chunks: n,
							length,
							content_type: ctx.params.contentType,
							filename: ctx.params.filename ?? "",
							_created: nowSeconds(),
						},
					]);
				} catch (err) {
					await this.store.removeMany({ media: id });
					if ((err as { name?: string }).name === "PayloadTooLarge")
						throw new TooLarge(`file too large (limit ${ctx.params.maxBytes} bytes)`);
					throw err;
				}
				return { id, length, contentType: ctx.params.contentType };
			},
		},

		/** GET /api/media/<id>: the exact bytes. */
		get: {
			params: { id: "string", query: { type: "any", optional: true } },
			async handler(this: MediaThis, ctx: Context<{ id: string }, HttpMeta>) {
				if (!OBJECT_ID.test(ctx.params.id)) throw new NotFound();
				const head = await this.store.findOne({ _id: ctx.params.id });
				if (!head) throw new NotFound();
				ctx.meta.$responseType = head.content_type || "application/octet-stream";
				ctx.meta.$responseHeaders = {
					"Content-Length": String(head.length),
					"Last-Modified": formatHttpDate(head._created),
					...DOWNLOAD_HEADERS,
					"Content-Disposition": attachment(head.filename || ctx.params.id),
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
