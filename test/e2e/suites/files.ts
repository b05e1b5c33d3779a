/**
 * Files: multipart upload, `data` shown as /api/media/<id>, the exact bytes back from the media route,
 * the upload size limit, malformed uploads, and delete taking the bytes with it.
 */
import { randomBytes } from "node:crypto";
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError, type Reply } from "../../support/http";
import { MAX_UPLOAD_BYTES } from "../../support/suite-env";

const HTTP_DATE =
	/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const OBJECT_ID = /^[a-f0-9]{24}$/;
const MEDIA = /^\/api\/media\/[a-f0-9]{24}$/;

export default function files(h: () => Harness): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const origin = () => new URL(h().api).origin;

	interface Part {
		field?: string;
		bytes: Uint8Array | string;
		type: string;
		filename?: string;
	}
	const upload = (fields: Record<string, string>, parts: Part[] = []): Promise<Reply> => {
		const form = new FormData();
		for (const [k, v] of Object.entries(fields)) form.append(k, v);
		for (const p of parts)
			form.append(p.field ?? "data", new Blob([p.bytes], { type: p.type }), p.filename ?? "upload.bin");
		return request("POST", url("files"), { raw: form });
	};
	const media = async (path: string) => {
		const res = await fetch(`${origin()}${path}`, {
			headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}` },
		});
		return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
	};
	const countNamed = async (name: string) => (await request("GET", url("files", { where: { name } }))).body._meta.total;

	describe("upload and download", () => {
		const binary = randomBytes(600 * 1024 + 123);
		const text = "fleet-ctl says hello\n";
		let binId: string;
		let textId: string;

		beforeAll(async () => {
			const bin = await upload({ name: "fl-firmware.img" }, [
				{ bytes: binary, type: "application/x-fl-image", filename: "firmware.img" },
			]);
			expect(bin.status).toBe(201);
			binId = bin.body._id;
			const txt = await upload({ name: "fl-hello.txt" }, [{ bytes: text, type: "text/plain", filename: "hello.txt" }]);
			expect(txt.status).toBe(201);
			textId = txt.body._id;
		});

		it("answers 201 with Eve's write shape and Location", async () => {
			const res = await upload({ name: "fl-shape.txt" }, [{ bytes: "x", type: "text/plain" }]);
			expect(res.status).toBe(201);
			expect(res.body).toEqual({
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: expect.stringMatching(OBJECT_ID),
				_links: { self: { title: "File", href: `files/${res.body._id}` } },
				_status: "OK",
			});
			expect(res.headers.get("location")).toBe(`${h().api}/files/${res.body._id}`);
		});

		it("shows the name and data as the media path", async () => {
			const res = await request("GET", url(`files/${binId}`));
			expect(res.status).toBe(200);
			expect(res.body).toEqual({
				name: "fl-firmware.img",
				data: expect.stringMatching(MEDIA),
				_updated: expect.stringMatching(HTTP_DATE),
				_created: expect.stringMatching(HTTP_DATE),
				_id: binId,
				_links: {
					self: { title: "File", href: `files/${binId}` },
					parent: { title: "home", href: "/" },
					collection: { title: "files", href: "files" },
				},
			});
			const list = await request(
				"GET",
				url("files", { where: { name: { $in: ["fl-firmware.img", "fl-hello.txt"] } }, sort: "name" }),
			);
			expect(list.body._items.map((f: any) => [f._id, f.name])).toEqual([
				[binId, "fl-firmware.img"],
				[textId, "fl-hello.txt"],
			]);
			expect(list.body._items[0].data).toBe(res.body.data);
			expect(list.body._items[1].data).toMatch(MEDIA);
			expect(list.body._items[1].data).not.toBe(res.body.data);
		});

		it("serves the exact bytes of a binary file that spans several chunks, with its type and length", async () => {
			const item = await request("GET", url(`files/${binId}`));
			const res = await media(item.body.data);
			expect(res.status).toBe(200);
			expect(res.headers.get("content-type")).toBe("application/x-fl-image");
			expect(res.headers.get("content-length")).toBe(String(binary.length));
			expect(res.bytes.length).toBe(binary.length);
			expect(res.bytes.equals(binary)).toBe(true);
		});

		it("serves a tiny text file as it was uploaded", async () => {
			const item = await request("GET", url(`files/${textId}`));
			const res = await media(item.body.data);
			expect(res.status).toBe(200);
			expect(res.headers.get("content-type")).toMatch(/^text\/plain\b/);
			expect(res.headers.get("content-length")).toBe(String(Buffer.byteLength(text)));
			expect(res.bytes.toString("utf8")).toBe(text);
		});

		it("takes an upload of exactly the size limit", async () => {
			const bytes = randomBytes(MAX_UPLOAD_BYTES);
			const res = await upload({ name: "fl-at-limit.bin" }, [{ bytes, type: "application/octet-stream" }]);
			expect(res.status).toBe(201);
			const item = await request("GET", url(`files/${res.body._id}`));
			const back = await media(item.body.data);
			expect(back.bytes.equals(bytes)).toBe(true);
		});

		it("takes a name without a file", async () => {
			const res = await upload({ name: "fl-name-only" });
			expect(res.status).toBe(201);
			const item = await request("GET", url(`files/${res.body._id}`));
			expect(item.body.name).toBe("fl-name-only");
			expect(item.body).not.toHaveProperty("data");
		});
	});

	describe("refused uploads", () => {
		it("answers 413 for a file over MAX_UPLOAD_BYTES and keeps no record", async () => {
			const res = await upload({ name: "fl-too-big.bin" }, [
				{ bytes: randomBytes(MAX_UPLOAD_BYTES + 1), type: "application/octet-stream" },
			]);
			expectEveError(res, 413);
			expect(await countNamed("fl-too-big.bin")).toBe(0);
			const bigger = await upload({ name: "fl-too-big.bin" }, [
				{ bytes: randomBytes(3 * MAX_UPLOAD_BYTES), type: "application/octet-stream" },
			]);
			expectEveError(bigger, 413);
			expect(await countNamed("fl-too-big.bin")).toBe(0);
		});

		it("answers 400 for a body that is not multipart/form-data", async () => {
			expectEveError(await request("POST", url("files"), { body: { name: "fl-json", data: "aGVsbG8=" } }), 400);
			expectEveError(
				await request("POST", url("files"), { raw: "hello", headers: { "content-type": "application/octet-stream" } }),
				400,
			);
			expectEveError(
				await request("POST", url("files"), {
					raw: "--x\r\nbroken",
					headers: { "content-type": "multipart/form-data" },
				}),
				400,
			);
			expect(await countNamed("fl-json")).toBe(0);
		});

		it("answers 422 for unknown form fields and file parts, and keeps no record", async () => {
			const field = await upload({ name: "fl-unknown", bogus: "1" }, [{ bytes: "x", type: "text/plain" }]);
			expect(expectEveError(field, 422)._issues).toEqual({ bogus: "unknown field" });
			const part = await upload({ name: "fl-unknown" }, [{ field: "other", bytes: "x", type: "text/plain" }]);
			expect(expectEveError(part, 422)._issues).toEqual({ other: "unknown field" });
			expect(await countNamed("fl-unknown")).toBe(0);
		});
	});

	describe("deleting", () => {
		it("answers 204 and takes the bytes with the record", async () => {
			const res = await upload({ name: "fl-doomed.txt" }, [{ bytes: "bye", type: "text/plain" }]);
			const id = res.body._id;
			const path = (await request("GET", url(`files/${id}`))).body.data;
			expect((await media(path)).status).toBe(200);

			const del = await request("DELETE", url(`files/${id}`));
			expect(del.status).toBe(204);
			expect(del.text).toBe("");
			expectEveError(await request("GET", url(`files/${id}`)), 404);
			expectEveError(await request("GET", `${origin()}${path}`), 404);
			expectEveError(await request("DELETE", url(`files/${id}`)), 404);
			expectEveError(await request("DELETE", url("files/not-a-file-id")), 404);
		});

		it("answers 404 for media that does not exist or is not a media id", async () => {
			expectEveError(await request("GET", url("media/0123456789abcdef0123ffff")), 404);
			expectEveError(await request("GET", url("media/not-hex")), 404);
			expectEveError(await request("GET", url("media/0123456789ABCDEF0123FFFF")), 404);
		});

		it("has no PATCH or PUT", async () => {
			const id = (await upload({ name: "fl-keep" })).body._id;
			expectEveError(await request("PATCH", url(`files/${id}`), { body: { name: "x" } }), 405);
			expectEveError(await request("PUT", url(`files/${id}`), { body: { name: "x" } }), 405);
			expectEveError(await request("DELETE", url("media/0123456789abcdef0123ffff")), 405);
		});
	});
}
