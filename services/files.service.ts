/**
 * Owns the `files` collection: uploaded files (for example the address sheet that settings refer to).
 * POST /files is multipart/form-data with a `name` field and a `data` file part; the bytes go to the
 * media service and `data` is shown as /api/media/<media_id>.
 */
import type { Readable } from "node:stream";
import type { Context } from "moleculer";
import Busboy from "@fastify/busboy";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext } from "../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../lib/eve/ids";
import type { Issues } from "../lib/eve/errors";
import { Invalid, Malformed, TooLarge } from "../lib/errors";
import { configOf } from "../lib/config";
import type { Doc } from "../lib/storage/store";

interface Upload {
	name?: string;
	mediaId?: string;
	issues: Issues;
}

/** What this service has on `this` besides the Eve mixin's. */
interface FilesMembers {
	receive(ctx: Context, stream: Readable): Promise<Upload>;
}

type FilesThis = EveThis & FilesMembers;

const FilesService: EveServiceSchema<FilesThis> = {
	name: "files",
	mixins: [
		EveCollection({
			resource: "files",
			writes: ["remove"],
			idPattern: OBJECT_ID,
			schema: {
				name: { type: "string", min: 1, max: 1024, optional: true },
				data: { type: "string", pattern: OBJECT_ID, optional: true },
			},
		}),
	],

	actions: {
		/** POST /files (multipart/form-data: `name`, then the `data` file). */
		upload: {
			params: { contentType: { type: "string", max: 1024 }, query: { type: "any", optional: true } },
			async handler(this: FilesThis, ctx: Context<{ contentType: string }, RestContext["meta"]>) {
				const stream = ctx.stream as Readable | null;
				const type = ctx.params.contentType.split(";")[0].trim().toLowerCase();
				if (!stream || type !== "multipart/form-data") {
					stream?.resume();
					throw new Malformed("files are uploaded as multipart/form-data with a `name` field and a `data` file");
				}
				const upload = await this.receive(ctx, stream);
				try {
					if (Object.keys(upload.issues).length) throw new Invalid(upload.issues);
					const body: Doc = {};
					if (upload.name !== undefined) body.name = upload.name;
					if (upload.mediaId) body.data = upload.mediaId;
					return await this.eveCreate(ctx as unknown as RestContext, body);
				} catch (err) {
					if (upload.mediaId) await ctx.call("media.remove", { id: upload.mediaId });
					throw err;
				}
			},
		},
	},

	methods: {
		/** Reads the form: fields in any order, one file part named `data`, the size limit enforced. */
		receive(this: FilesThis, ctx: Context, stream: Readable): Promise<Upload> {
			const { maxUploadBytes } = configOf(this.broker);
			return new Promise((resolve, reject) => {
				let busboy: InstanceType<typeof Busboy>;
				try {
					busboy = new Busboy({
						headers: { "content-type": (ctx.params as { contentType: string }).contentType },
						limits: { files: 1, fields: 20, fieldSize: 64 * 1024, parts: 30, fileSize: maxUploadBytes },
					});
				} catch (err) {
					stream.resume();
					reject(new Malformed(`malformed multipart body: ${(err as Error).message}`));
					return;
				}
				const upload: Upload = { issues: {} };
				let saving: Promise<void> = Promise.resolve();
				let failed: unknown = null;
				busboy.on("field", (name: string, value: string, nameTruncated: boolean, valueTruncated: boolean) => {
					if (name === "name" && !valueTruncated) upload.name = value;
					else if (name === "name") upload.issues.name = "max length is 65536";
					else if (!nameTruncated) upload.issues[name] = "unknown field";
				});
				busboy.on("file", (field: string, file: Readable, filename: string, _encoding: string, mimetype: string) => {
					if (field !== "data") {
						upload.issues[field] = "unknown field";
						file.resume();
						return;
					}
					file.on("limit", () => {
						// A destroyed file part never ends, so busboy would never finish: stop reading the form here.
						const tooLarge = new TooLarge(`file too large (limit ${maxUploadBytes} bytes)`);
						failed ??= tooLarge;
						file.destroy(tooLarge);
						busboy.emit("error", tooLarge);
					});
					saving = ctx
						.call(
							"media.save",
							{ contentType: mimetype || "application/octet-stream", filename, maxBytes: maxUploadBytes },
							{ stream: file },
						)
						.then((res: any) => {
							upload.mediaId = res.id;
						})
						.catch((err: unknown) => {
							failed ??= err;
							file.resume();
						});
				});
				busboy.on("filesLimit", () => (upload.issues.data = "only one file may be uploaded"));
				busboy.on("error", (err: Error) => {
					failed ??= new Malformed(`malformed multipart body: ${err.message}`);
					stream.unpipe(busboy);
					stream.resume();
					saving.finally(() => reject(failed));
				});
				busboy.on("finish", () => {
					saving.then(() => (failed ? reject(failed) : resolve(upload)));
				});
				stream.on("error", err => busboy.emit("error", err));
				stream.pipe(busboy);
			});
		},

		transformOutput(this: FilesThis, doc: Doc): Doc {
			return doc.data ? { ...doc, data: `/api/media/${doc.data}` } : doc;
		},

		async removeDocs(this: FilesThis, ctx: RestContext, docs: Doc[]) {
			const ids = docs.map(d => String(d._id));
			await this.store.removeMany({ _id: { $in: ids } });
			for (const d of docs) if (d.data) await ctx.call("media.remove", { id: d.data });
			await this.notifyChanged(ctx, "removed", ids);
		},
	},
};

export default FilesService;
