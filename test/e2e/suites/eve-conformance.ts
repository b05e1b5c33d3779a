/**
 * What a differential run against real Eve 2.3 found, as a client sees it over HTTP (docs/api.md): lists
 * never answered 304, ETags with If-None-Match on items and If-Match on every item write (412, one winner
 * among writes made from the same ETag), dotted PATCH keys, related links that follow the projection,
 * empty `where`/`sort` left out of links, Eve's status for empty and array bodies, PATCH of a soft-deleted
 * host (a 404, by decision), and Eve's type names in validation messages.
 */
import type { Harness } from "../../support/harness";
import { request, withQuery, expectEveError, type Reply } from "../../support/http";
import { itIf } from "../../support/skip";
import type { Leg } from "./index";

const ETAG = /^"[0-9a-f]{40}"$/;
const MISMATCH = "Client and server etags don't match";
const JSON_TYPE = { "content-type": "application/json" };
/** An HTTP-date far after anything stored: every record is "not modified since" then. */
const FUTURE = "Fri, 01 Jan 2100 00:00:00 GMT";

/**
 * Conditional headers as a browser revalidating its copy sends them. fetch() adds `Cache-Control: no-cache`
 * to any request with a conditional header unless one is given, and some servers (moleculer-web's own check)
 * then never answer 304: that would hide what these tests are about.
 */
const conditional = (headers: Record<string, string>): Record<string, string> => ({
	"Cache-Control": "max-age=0",
	...headers,
});

type StoreHook = (this: unknown, ...args: unknown[]) => Promise<unknown>;

interface HeldWrites {
	/** Resolves once `count` writes have compared their If-Match and wait to write. */
	arrived(count: number): Promise<void>;
	/** Lets every held write (and any later one) go on. */
	release(): void;
	/** Puts the service's method back: later writes are not held (those held still wait for release). */
	restore(): void;
}

/**
 * Holds every write of the groups service where it has compared the If-Match and not yet written (its
 * `beforeStore`, called by applyPatch between the two), so a test can make writes interleave as they
 * could in production: all compare the same version before any of them writes. In-process legs only.
 */
function holdGroupWrites(h: Harness): HeldWrites {
	const service = h.broker?.getLocalService("groups") as unknown as { beforeStore: StoreHook } | undefined;
	if (!service) throw new Error("the groups service is not in this process");
	const original = service.beforeStore;
	let count = 0;
	const waiters: Array<{ count: number; resolve: () => void }> = [];
	let release: () => void = () => undefined;
	const gate = new Promise<void>(resolve => (release = resolve));
	// Never held for long, should fewer writes come than expected (the test then fails on what it checks).
	const timer = setTimeout(release, 5000);
	service.beforeStore = async function (this: unknown, ...args: unknown[]) {
		count++;
		for (const w of waiters) if (count >= w.count) w.resolve();
		await gate;
		return original.apply(this, args);
	};
	return {
		arrived: n => (count >= n ? Promise.resolve() : new Promise<void>(resolve => waiters.push({ count: n, resolve }))),
		release() {
			clearTimeout(timer);
			release();
		},
		restore() {
			service.beforeStore = original;
		},
	};
}

export default function eveConformance(h: () => Harness, leg: Leg): void {
	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h().api}/${path}`, query);
	const createGroup = async (body: Record<string, unknown>): Promise<string> => {
		const res = await request("POST", url("groups"), { body });
		expect(res.status).toBe(201);
		return res.body._id;
	};
	const etagOf = async (path: string): Promise<string> => {
		const res = await request("GET", url(path));
		expect(res.status).toBe(200);
		const etag = res.headers.get("etag");
		expect(etag).toMatch(ETAG);
		return etag as string;
	};
	const expect412 = (reply: Reply) => expect(expectEveError(reply, 412)._error.message).toBe(MISMATCH);

	describe("conditional reads of lists (finding 1)", () => {
		it("answers a list GET with If-Modified-Since 200 with the current list, also after a member was deleted", async () => {
			const ids = [
				await createGroup({ name: "cf-ims-1" }),
				await createGroup({ name: "cf-ims-2" }),
				await createGroup({ name: "cf-ims-3" }),
			];
			const where = { name: { $in: ["cf-ims-1", "cf-ims-2", "cf-ims-3"] } };
			const first = await request("GET", url("groups", { where }));
			expect(first.body._meta.total).toBe(3);
			const lastModified = first.headers.get("last-modified") as string;
			expect(lastModified).toBeTruthy();
			expect(first.headers.get("etag")).toBeNull();

			expect((await request("DELETE", url(`groups/${ids[1]}`))).status).toBe(204);
			for (const since of [lastModified, FUTURE]) {
				const again = await request("GET", url("groups", { where }), {
					headers: conditional({ "If-Modified-Since": since }),
				});
				expect(again.status).toBe(200);
				expect(again.body._meta.total).toBe(2);
				expect(again.body._items.map((g: { _id: string }) => g._id).sort()).toEqual([ids[0], ids[2]].sort());
				const head = await request("HEAD", url("groups", { where }), {
					headers: conditional({ "If-Modified-Since": since }),
				});
				expect(head.status).toBe(200);
				expect(head.headers.get("x-total-count")).toBe("2");
			}
		});

		it("answers If-None-Match: * with the whole response on lists, items and other reads, and never turns a write into a 304", async () => {
			const id = await createGroup({ name: "cf-star" });
			for (const path of ["groups", `groups/${id}`, `groups/${id}/subgroups`, ""]) {
				const res = await request("GET", url(path), { headers: conditional({ "If-None-Match": "*" }) });
				expect(res.status).toBe(200);
				expect(res.text).not.toBe("");
			}
			const created = await request("POST", url("groups"), {
				body: { name: "cf-star-2" },
				headers: conditional({ "If-None-Match": "*" }),
			});
			expect(created.status).toBe(201);
			expect(created.body._status).toBe("OK");
			const patched = await request("PATCH", url(`groups/${id}`), {
				body: { hosts: ["a"] },
				headers: conditional({ "If-None-Match": "*", "If-Modified-Since": FUTURE }),
			});
			expect(patched.status).toBe(200);
			expect(patched.body._status).toBe("OK");
		});
	});

	describe("conditional reads of media (unchanged: its bytes never change)", () => {
		it("answers If-Modified-Since on a media URL 304 when the upload is not newer, and the file list 200", async () => {
			const form = new FormData();
			form.append("name", "cf-media.txt");
			form.append("data", new Blob(["hello"], { type: "text/plain" }), "hello.txt");
			const created = await request("POST", url("files"), { raw: form });
			expect(created.status).toBe(201);
			const file = await request("GET", url(`files/${created.body._id}`));
			const media = `${new URL(h().api).origin}${file.body.data}`;
			const first = await request("GET", media);
			expect(first.status).toBe(200);
			expect(first.text).toBe("hello");
			const lastModified = first.headers.get("last-modified") as string;
			for (const since of [lastModified, FUTURE]) {
				const again = await request("GET", media, { headers: conditional({ "If-Modified-Since": since }) });
				expect(again.status).toBe(304);
				expect(again.text).toBe("");
			}
			const older = await request("GET", media, {
				headers: conditional({ "If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT" }),
			});
			expect(older.status).toBe(200);
			expect(older.text).toBe("hello");
			expect(
				(
					await request("GET", url("files", { where: { name: "cf-media.txt" } }), {
						headers: conditional({ "If-Modified-Since": FUTURE }),
					})
				).status,
			).toBe(200);
		});
	});

	describe("ETags and If-Match (finding 2)", () => {
		it("sends a quoted ETag on item reads (not on lists, not as _etag) and answers a matching If-None-Match 304 with no body", async () => {
			const id = await createGroup({ name: "cf-etag", type: 1, info: { regex: "^cf-" } });
			const res = await request("GET", url(`groups/${id}`));
			const etag = res.headers.get("etag") as string;
			expect(etag).toMatch(ETAG);
			expect(res.body._etag).toBeUndefined();
			expect((await request("HEAD", url(`groups/${id}`))).headers.get("etag")).toBe(etag);
			expect((await request("GET", url("groups", { where: { _id: id } }))).headers.get("etag")).toBeNull();

			const bare = etag.slice(1, -1);
			for (const header of [etag, `W/${etag}`, `"0000", ${etag}`]) {
				const hit = await request("GET", url(`groups/${id}`), { headers: conditional({ "If-None-Match": header }) });
				expect(hit.status).toBe(304);
				expect(hit.text).toBe("");
				expect(hit.headers.get("etag")).toBe(etag);
			}
			expect(
				(await request("HEAD", url(`groups/${id}`), { headers: conditional({ "If-None-Match": etag }) })).status,
			).toBe(304);
			const miss = await request("GET", url(`groups/${id}`), {
				headers: conditional({ "If-None-Match": `"${"0".repeat(40)}"` }),
			});
			expect(miss.status).toBe(200);
			expect(miss.body.name).toBe("cf-etag");
			// With If-None-Match, If-Modified-Since is not looked at; alone it never gives a 304 on items.
			expect(
				(
					await request("GET", url(`groups/${id}`), {
						headers: conditional({ "If-None-Match": '"other"', "If-Modified-Since": FUTURE }),
					})
				).status,
			).toBe(200);
			expect(
				(await request("GET", url(`groups/${id}`), { headers: conditional({ "If-Modified-Since": FUTURE }) })).status,
			).toBe(200);
			expect(bare).toMatch(/^[0-9a-f]{40}$/);
		});

		it("changes the ETag with every change, and gives the changed record to an If-None-Match that named the old one", async () => {
			const id = await createGroup({ name: "cf-change" });
			const before = await etagOf(`groups/${id}`);
			const patched = await request("PATCH", url(`groups/${id}`), { body: { hosts: ["h-1"] } });
			expect(patched.status).toBe(200);
			const after = await etagOf(`groups/${id}`);
			expect(after).not.toBe(before);
			expect(patched.headers.get("etag")).toBe(after);
			const stale = await request("GET", url(`groups/${id}`), { headers: conditional({ "If-None-Match": before }) });
			expect(stale.status).toBe(200);
			expect(stale.body.hosts).toEqual(["h-1"]);
		});

		it("never serves an item stale on If-Modified-Since: a change that leaves _updated as it was is still seen", async () => {
			const child = await createGroup({ name: "cf-child" });
			const parent = await createGroup({ name: "cf-parent", subgroups: [child] });
			const first = await request("GET", url(`groups/${parent}`));
			expect(first.body.subgroups).toEqual([child]);
			const lastModified = first.headers.get("last-modified") as string;
			// Deleting the child takes it out of the parent's subgroups without moving the parent's _updated.
			expect((await request("DELETE", url(`groups/${child}`))).status).toBe(204);
			const again = await request("GET", url(`groups/${parent}`), {
				headers: conditional({ "If-Modified-Since": lastModified }),
			});
			expect(again.status).toBe(200);
			expect(again.body.subgroups).toEqual([]);
			expect(again.headers.get("etag")).not.toBe(first.headers.get("etag"));
			const byEtag = await request("GET", url(`groups/${parent}`), {
				headers: conditional({ "If-None-Match": first.headers.get("etag") as string }),
			});
			expect(byEtag.status).toBe(200);
			expect(byEtag.body.subgroups).toEqual([]);
		});

		it("sends a read with `embedded` whole even when its If-None-Match matches: the embedded records may have changed", async () => {
			const child = await createGroup({ name: "cf-emb-child" });
			const parent = await createGroup({ name: "cf-emb-parent", subgroups: [child] });
			const path = url(`groups/${parent}`, { embedded: { subgroups: 1 } });
			const first = await request("GET", path);
			const etag = first.headers.get("etag") as string;
			expect(etag).toMatch(ETAG);
			expect(first.body.subgroups[0].name).toBe("cf-emb-child");
			expect((await request("PATCH", url(`groups/${child}`), { body: { name: "cf-emb-renamed" } })).status).toBe(200);
			const again = await request("GET", path, { headers: conditional({ "If-None-Match": etag }) });
			expect(again.status).toBe(200);
			expect(again.headers.get("etag")).toBe(etag);
			expect(again.body.subgroups[0].name).toBe("cf-emb-renamed");
		});

		it("refuses a PATCH, PUT or DELETE whose If-Match names another version with 412, and changes nothing", async () => {
			const id = await createGroup({ name: "cf-412" });
			const current = await etagOf(`groups/${id}`);
			const stale = `"${"a".repeat(40)}"`;
			expect412(
				await request("PATCH", url(`groups/${id}`), {
					body: { name: "cf-412-changed" },
					headers: { "If-Match": stale },
				}),
			);
			// 412 whatever the body holds: the version is compared first, as Eve's get_document does.
			expect412(await request("PATCH", url(`groups/${id}`), { body: { type: "x" }, headers: { "If-Match": stale } }));
			expect412(await request("DELETE", url(`groups/${id}`), { headers: { "If-Match": `W/${stale}` } }));
			const unchanged = await request("GET", url(`groups/${id}`));
			expect(unchanged.status).toBe(200);
			expect(unchanged.body.name).toBe("cf-412");
			expect(unchanged.headers.get("etag")).toBe(current);

			const task = await request("POST", url("tasks"), {
				body: { name: "cf-task", fun: "test.ping", start: "2030-01-02 03:04", tgt: ["cf-web-1"] },
			});
			expect(task.status).toBe(201);
			const taskId = task.body._id;
			const taskEtag = await etagOf(`tasks/${taskId}`);
			expect412(
				await request("PUT", url("tasks"), {
					body: { _id: taskId, tgt: ["cf-web-2"] },
					headers: { "If-Match": stale },
				}),
			);
			expect412(await request("PATCH", url(`tasks/${taskId}/paused`), { headers: { "If-Match": stale } }));
			expect412(await request("DELETE", url(`tasks/${taskId}`), { headers: { "If-Match": stale } }));
			const sameTask = await request("GET", url(`tasks/${taskId}`));
			expect(sameTask.body).toMatchObject({ tgt: ["cf-web-1"], status: "scheduled" });
			expect(sameTask.headers.get("etag")).toBe(taskEtag);
			const put = await request("PUT", url("tasks"), {
				body: { _id: taskId, tgt: ["cf-web-2"] },
				headers: { "If-Match": taskEtag },
			});
			expect(put.status).toBe(200);
			expect412(await request("PATCH", url(`tasks/${taskId}/paused`), { headers: { "If-Match": taskEtag } }));
			expect(
				(
					await request("PATCH", url(`tasks/${taskId}/paused`), {
						headers: { "If-Match": put.headers.get("etag") as string },
					})
				).status,
			).toBe(200);
			expect(
				(await request("DELETE", url(`tasks/${taskId}`), { headers: { "If-Match": await etagOf(`tasks/${taskId}`) } }))
					.status,
			).toBe(204);
		});

		it("applies writes whose If-Match is the current version: quoted, weak, bare, in a list, or *", async () => {
			const id = await createGroup({ name: "cf-match-0" });
			let etag = await etagOf(`groups/${id}`);
			const forms = [
				(e: string) => e,
				(e: string) => `W/${e}`,
				(e: string) => e.slice(1, -1),
				(e: string) => `"nope", ${e}`,
				() => "*",
			];
			for (const [i, form] of forms.entries()) {
				const res = await request("PATCH", url(`groups/${id}`), {
					body: { name: `cf-match-${i + 1}` },
					headers: { "If-Match": form(etag) },
				});
				expect(res.status).toBe(200);
				expect(res.body._status).toBe("OK");
				etag = res.headers.get("etag") as string;
				expect(etag).toBe(await etagOf(`groups/${id}`));
			}
			expect((await request("GET", url(`groups/${id}`))).body.name).toBe(`cf-match-${forms.length}`);
			expect((await request("DELETE", url(`groups/${id}`), { headers: { "If-Match": etag } })).status).toBe(204);
			expectEveError(await request("GET", url(`groups/${id}`)), 404);
		});

		const race = async (held: boolean) => {
			const id = await createGroup({ name: "cf-race" });
			const etag = await etagOf(`groups/${id}`);
			const names = Array.from({ length: 6 }, (_, i) => `cf-race-${i}`);
			const patches = () =>
				Promise.all(
					names.map(name => request("PATCH", url(`groups/${id}`), { body: { name }, headers: { "If-Match": etag } })),
				);
			let replies: Reply[];
			if (held) {
				const hold = holdGroupWrites(h());
				try {
					const sent = patches();
					await hold.arrived(names.length);
					hold.release();
					replies = await sent;
				} finally {
					hold.release();
					hold.restore();
				}
			} else replies = await patches();
			const won = replies.map((r, i) => [r.status, names[i]] as const).filter(([status]) => status === 200);
			expect(won).toHaveLength(1);
			for (const r of replies) if (r.status !== 200) expect412(r);
			expect((await request("GET", url(`groups/${id}`))).body.name).toBe(won[0][1]);
		};

		it("lets exactly one of several writes sent at once from the same ETag succeed; the others get 412", () =>
			race(false));

		itIf(!leg.processes, "the services run in other processes, where the test cannot hold their writes")(
			"lets exactly one succeed even when every write compared the same version before any of them wrote (compare-and-write)",
			async () => {
				await race(true);

				// A PATCH that compared, then a PATCH and a DELETE made from the same ETag while it waits to write.
				const id = await createGroup({ name: "cf-race-2" });
				const etag = await etagOf(`groups/${id}`);
				const hold = holdGroupWrites(h());
				try {
					const held = request("PATCH", url(`groups/${id}`), {
						body: { name: "cf-race-held" },
						headers: { "If-Match": etag },
					});
					await hold.arrived(1);
					hold.restore();
					expect(
						(
							await request("PATCH", url(`groups/${id}`), {
								body: { name: "cf-race-first" },
								headers: { "If-Match": etag },
							})
						).status,
					).toBe(200);
					expect412(await request("DELETE", url(`groups/${id}`), { headers: { "If-Match": etag } }));
					hold.release();
					expect412(await held);
				} finally {
					hold.release();
					hold.restore();
				}
				expect((await request("GET", url(`groups/${id}`))).body.name).toBe("cf-race-first");

				// A PATCH that compared, then a DELETE from the same ETag: the record is gone when the PATCH writes (404).
				const id2 = await createGroup({ name: "cf-race-3" });
				const etag2 = await etagOf(`groups/${id2}`);
				const hold2 = holdGroupWrites(h());
				try {
					const held = request("PATCH", url(`groups/${id2}`), {
						body: { name: "cf-race-late" },
						headers: { "If-Match": etag2 },
					});
					await hold2.arrived(1);
					expect((await request("DELETE", url(`groups/${id2}`), { headers: { "If-Match": etag2 } })).status).toBe(204);
					hold2.release();
					expectEveError(await held, 404);
				} finally {
					hold2.release();
					hold2.restore();
				}
				expectEveError(await request("GET", url(`groups/${id2}`)), 404);
			},
		);

		it("keeps writes without If-Match allowed and create responses as they were (no _etag); a write to a missing record is a 404, not a 412", async () => {
			const created = await request("POST", url("groups"), { body: { name: "cf-plain" } });
			expect(created.status).toBe(201);
			expect(Object.keys(created.body)).toEqual(["_updated", "_created", "_id", "_links", "_status"]);
			expect((await request("PATCH", url(`groups/${created.body._id}`), { body: { name: "cf-plain-2" } })).status).toBe(
				200,
			);
			const missing = "0123456789abcdef0123cf00";
			expectEveError(
				await request("PATCH", url(`groups/${missing}`), { body: { name: "x" }, headers: { "If-Match": '"x"' } }),
				404,
			);
			expectEveError(await request("DELETE", url(`groups/${missing}`), { headers: { "If-Match": "*" } }), 404);
			expect((await request("DELETE", url(`groups/${created.body._id}`))).status).toBe(204);
		});
	});

	describe("dotted PATCH keys (finding 3)", () => {
		it('applies {"info.regex": …} as a change of that sub-field and keeps the dict\'s other fields', async () => {
			const id = await createGroup({
				name: "cf-dot",
				type: 1,
				info: { regex: "^a", grain: { os: "ALT", role: "web" } },
			});
			const res = await request("PATCH", url(`groups/${id}`), { body: { "info.regex": "^w-" } });
			expect(res.status).toBe(200);
			expect(Object.keys(res.body)).toEqual(["_updated", "_created", "_id", "_links", "_status"]);
			expect((await request("GET", url(`groups/${id}`))).body.info).toEqual({
				regex: "^w-",
				grain: { os: "ALT", role: "web" },
			});
			expect(
				(await request("PATCH", url(`groups/${id}`), { body: { "info.grain.os": "Debian", name: "cf-dot-2" } })).status,
			).toBe(200);
			const item = await request("GET", url(`groups/${id}`));
			expect(item.body.info).toEqual({ regex: "^w-", grain: { os: "Debian", role: "web" } });
			expect(item.body.name).toBe("cf-dot-2");
			// A dotted key naming a dict sets it to what is given (MongoDB's $set of the path, under Eve).
			expect((await request("PATCH", url(`groups/${id}`), { body: { "info.grain": { os: "ALT" } } })).status).toBe(200);
			expect((await request("GET", url(`groups/${id}`))).body.info).toEqual({ regex: "^w-", grain: { os: "ALT" } });
			const bare = await createGroup({ name: "cf-dot-bare" });
			expect((await request("PATCH", url(`groups/${bare}`), { body: { "info.regex": "^x" } })).status).toBe(200);
			expect((await request("GET", url(`groups/${bare}`))).body.info).toEqual({ regex: "^x" });
		});

		it("checks the nested field against its schema (and the group rules), and changes nothing when it fails", async () => {
			const id = await createGroup({ name: "cf-dot-bad", type: 1, info: { regex: "^a" } });
			const patch = (body: Record<string, unknown>) => request("PATCH", url(`groups/${id}`), { body });
			expect(expectEveError(await patch({ "info.regex": 5 }), 422)._issues).toEqual({
				info: { regex: "must be of string type" },
			});
			expect(expectEveError(await patch({ "info.bogus": 1 }), 422)._issues).toEqual({
				info: { bogus: "unknown field" },
			});
			expect(expectEveError(await patch({ "info.grain.os": 5 }), 422)._issues).toEqual({
				info: { grain: { os: "must be of string type" } },
			});
			expect(expectEveError(await patch({ "info.regex": "([a-z" }), 422)._issues.info.regex).toMatch(
				/invalid regular expression/,
			);
			expect(expectEveError(await patch({ "name.first": "x" }), 422)._issues).toEqual({
				"name.first": "'name' is not a dict: a field inside it cannot be set",
			});
			expect(expectEveError(await patch({ "info..regex": "x" }), 422)._issues).toHaveProperty(["info..regex"]);
			expect(expectEveError(await patch({ "bogus.x": 1 }), 422)._issues).toEqual({ bogus: "unknown field" });
			expect((await request("GET", url(`groups/${id}`))).body).toMatchObject({
				name: "cf-dot-bad",
				info: { regex: "^a" },
			});
		});
	});

	describe("related links and the projection (finding 4)", () => {
		it("drops _links.related when the projection hides the reference field", async () => {
			const child = await createGroup({ name: "cf-rel-child" });
			const parent = await createGroup({ name: "cf-rel-parent", subgroups: [child] });
			const related = { subgroups: [{ title: "Group", href: `groups/${child}` }] };
			const item = (projection?: Record<string, number>) =>
				request("GET", url(`groups/${parent}`, projection ? { projection } : {}));
			expect((await item()).body._links.related).toEqual(related);
			expect((await item({ subgroups: 1 })).body._links.related).toEqual(related);
			for (const projection of [{ name: 1 }, { subgroups: 0 }] as Array<Record<string, number>>) {
				const res = await item(projection);
				expect(res.body.subgroups).toBeUndefined();
				expect(Object.keys(res.body._links)).toEqual(["self", "parent", "collection"]);
			}
			const list = await request("GET", url("groups", { where: { _id: parent }, projection: { name: 1 } }));
			expect(list.body._items[0]._links).toEqual({ self: { title: "Group", href: `groups/${parent}` } });
		});
	});

	describe("empty where and sort in links (finding 5)", () => {
		it("leaves an empty where= and sort= out of self, next, last, prev and collection", async () => {
			await createGroup({ name: "cf-links-1" });
			await createGroup({ name: "cf-links-2" });
			await createGroup({ name: "cf-links-3" });
			const res = await request("GET", `${h().api}/groups?where=&sort=&max_results=2&foo=`);
			expect(res.status).toBe(200);
			const last = Math.ceil(res.body._meta.total / 2);
			expect(res.body._links).toEqual({
				parent: { title: "home", href: "/" },
				self: { title: "groups", href: "groups?max_results=2&foo=" },
				next: { title: "next page", href: "groups?max_results=2&page=2&foo=" },
				last: { title: "last page", href: `groups?max_results=2&page=${last}&foo=` },
			});
			const second = await request("GET", `${h().api}/groups?sort=&where=&max_results=2&page=2`);
			expect(second.body._links.prev).toEqual({ title: "previous page", href: "groups?max_results=2" });
			const id = res.body._items[0]._id;
			const item = await request("GET", `${h().api}/groups/${id}?where=&sort=`);
			expect(item.body._links.collection).toEqual({ title: "groups", href: "groups" });
		});
	});

	describe("empty and array bodies (finding 6)", () => {
		it("answers an empty JSON body 400 on POST and PATCH, an array PATCH body 422, and a DELETE of a malformed id 404", async () => {
			expectEveError(await request("POST", url("groups"), { raw: "", headers: JSON_TYPE }), 400);
			const id = await createGroup({ name: "cf-bodies" });
			expectEveError(await request("PATCH", url(`groups/${id}`), { raw: "", headers: JSON_TYPE }), 400);
			for (const body of [[1], [], [{ name: "x" }]]) {
				const err = expectEveError(await request("PATCH", url(`groups/${id}`), { body }), 422);
				expect(err._issues).toEqual({ _root: "must be of dict type" });
			}
			expect((await request("GET", url(`groups/${id}`))).body.name).toBe("cf-bodies");
			for (const junk of ["not-an-id", "0123", "0123456789ABCDEF01234567"])
				expectEveError(await request("DELETE", url(`groups/${junk}`)), 404);
		});
	});

	describe("PATCH of a soft-deleted host (finding 7, decided: 404)", () => {
		it("answers 404, as GET and DELETE do, and leaves the host deleted and as it was", async () => {
			const host = "cf-gone-07";
			await h().call("hosts.upsertMany", {
				hosts: [
					{
						_id: host,
						version: "3006.8",
						ip: "10.0.7.7",
						status: "down",
						key: "accepted",
						grain: { osfullname: "Debian" },
					},
				],
			});
			expect((await request("PATCH", url(`hosts/${host}`), { body: { identification_number: "before" } })).status).toBe(
				200,
			);
			expect((await request("DELETE", url(`hosts/${host}`))).status).toBe(204);
			expectEveError(await request("PATCH", url(`hosts/${host}`), { body: { identification_number: "after" } }), 404);
			expectEveError(
				await request("PATCH", url(`hosts/${host}`), {
					body: { identification_number: "after" },
					headers: { "If-Match": "*" },
				}),
				404,
			);
			const shown = await request("GET", url(`hosts/${host}`, { show_soft_deleted: 1 }));
			expect(shown.status).toBe(200);
			expect(shown.body).toMatchObject({ _id: host, _soft_deleted: true, identification_number: "before" });
		});
	});

	describe("Eve's type names in validation messages (finding 8)", () => {
		it("says integer for integer fields and objectid for ObjectId fields", async () => {
			const err = expectEveError(
				await request("POST", url("groups"), {
					body: { name: "cf-types", type: "one", subgroups: ["nope", 5, "0123456789abcdef01234567"] },
				}),
				422,
			);
			expect(err._issues).toEqual({
				type: "must be of integer type",
				subgroups: { "0": "must be of objectid type", "1": "must be of objectid type" },
			});
			const id = await createGroup({ name: "cf-types-ok" });
			expect(expectEveError(await request("PATCH", url(`groups/${id}`), { body: { type: "x" } }), 422)._issues).toEqual(
				{ type: "must be of integer type" },
			);
			expect(expectEveError(await request("PATCH", url(`groups/${id}`), { body: { type: 1.5 } }), 422)._issues).toEqual(
				{ type: "must be of integer type" },
			);
			const task = expectEveError(
				await request("POST", url("tasks"), {
					body: { name: "cf-int", fun: "test.ping", start: "2030-01-02 03:04", tgt: ["x"], interval: "often" },
				}),
				422,
			);
			expect(task._issues).toEqual({ interval: "must be of integer type" });
		});
	});
}
