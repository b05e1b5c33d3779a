/**
 * Hosts rendered once per stored version (lib/eve/render-cache.ts): with the read caches off, a list or an item
 * read again serializes no record again, answers byte for byte what rendering afresh answers (bodies, ETags,
 * Last-Modified, totals), never answers a version a write replaced, and keeps each role's view apart (the
 * otp_secret is shown to admins only).
 */
import { startEmbedded, type Harness } from "../support/harness";
import { request, withQuery } from "../support/http";
import type { RenderCache } from "../../lib/eve/render-cache";

interface HostsService {
	eve: { rendered: RenderCache | null };
}

describe("hosts rendered once per stored version", () => {
	let h: Harness;
	let viewer = "";
	let hosts: HostsService;
	const ids = Array.from({ length: 30 }, (_, i) => `rc-${String(i).padStart(2, "0")}.example.org`);
	const url = (p: string, q: Record<string, unknown> = {}) => withQuery(`${h.api}/${p}`, q);

	beforeAll(async () => {
		h = await startEmbedded({ dataDir: ":memory:", env: { READ_CACHE_MS: "0" } });
		await h.call("hosts.upsertMany", {
			hosts: ids.map((_id, i) => ({
				_id,
				key: "accepted",
				status: i % 3 === 0 ? "down" : "up",
				ip: `10.0.0.${i + 1}`,
				version: "3006.9",
				grain: { os: "Debian", osrelease: "12", id: _id, num_cpus: i },
				...(i < 4 ? { vpn_representation: { name: _id, otp_secret: `SECRET${i}`, organization: "o" } } : {}),
			})),
		});
		viewer = (await request("POST", url("tokens"), { body: { name: "rc-viewer", role: "viewer" } })).body.token;
		hosts = h.broker?.getLocalService("hosts") as unknown as HostsService;
	});
	afterAll(() => h?.stop());

	/** Reads that render hosts: lists (whole, filtered, projected, paged) and items, as an admin and as a viewer. */
	const reads = () => [
		url("hosts"),
		url("hosts", { where: { status: "down" }, max_results: 5 }),
		url("hosts", { projection: { grain: 0 }, sort: "-ip", page: 2, max_results: 7 }),
		url("hosts", { projection: { ip: 1, vpn_representation: 1 } }),
		url(`hosts/${ids[1]}`),
		url(`hosts/${ids[2]}`, { projection: { grain: 1 } }),
		url(`hosts/${ids[5]}`),
	];
	const answer = async (u: string, token?: string) => {
		const res = await request("GET", u, { token });
		expect(res.status).toBe(200);
		const headers = ["etag", "last-modified", "x-total-count"].map(k => `${k}: ${res.headers.get(k)}`);
		return `${headers.join("\n")}\n${res.text}`;
	};
	const answers = async () => {
		const out: string[] = [];
		for (const u of reads()) for (const token of [undefined, viewer]) out.push(await answer(u, token));
		return out;
	};

	it("answers what rendering afresh answers, and a second read serializes no host again", async () => {
		const rendered = hosts.eve.rendered as RenderCache;
		expect(rendered).not.toBeNull();
		const first = await answers();
		const misses = rendered.misses;
		const hits = rendered.hits;
		const again = await answers();
		expect(again).toEqual(first);
		// Every host of every read came from its rendering: 2 roles × (25 + 5 + 7 + 25 list items, pages of 25, + 3 items).
		expect(rendered.misses).toBe(misses);
		expect(rendered.hits - hits).toBe(2 * (25 + 5 + 7 + 25 + 3));
		// The same reads rendered afresh, without the renderings.
		hosts.eve.rendered = null;
		try {
			expect(await answers()).toEqual(first);
		} finally {
			hosts.eve.rendered = rendered;
		}
	});

	it("never answers a version a write replaced, in lists and items", async () => {
		const before = await request("GET", url(`hosts/${ids[3]}`));
		const listed = await request("GET", url("hosts", { where: { _id: ids[3] } }));
		expect(listed.body._items[0].identification_number).toBeUndefined();
		const patched = await request("PATCH", url(`hosts/${ids[3]}`), {
			body: { identification_number: "INV-3" },
			headers: { "If-Match": before.headers.get("etag") as string },
		});
		expect(patched.status).toBe(200);
		const after = await request("GET", url(`hosts/${ids[3]}`));
		expect(after.body.identification_number).toBe("INV-3");
		expect(after.headers.get("etag")).not.toBe(before.headers.get("etag"));
		expect((await request("GET", url("hosts", { where: { _id: ids[3] } }))).body._items[0].identification_number).toBe(
			"INV-3",
		);
		// Gone from lists and items once soft-deleted; shown again when asked for.
		expect(
			(
				await request("DELETE", url(`hosts/${ids[3]}`), {
					headers: { "If-Match": after.headers.get("etag") as string },
				})
			).status,
		).toBe(204);
		expect((await request("GET", url(`hosts/${ids[3]}`))).status).toBe(404);
		expect((await request("GET", url("hosts", { where: { _id: ids[3] } }))).body._items).toEqual([]);
		const shown = await request("GET", url(`hosts/${ids[3]}`, { show_soft_deleted: 1 }));
		expect(shown.body._soft_deleted).toBe(true);
	});

	it("keeps each role's view apart: the otp_secret in clear for admins only, whichever read came first", async () => {
		for (const [first, second] of [
			[viewer, undefined],
			[undefined, viewer],
		] as const) {
			for (const u of [url(`hosts/${ids[0]}`), url("hosts", { where: { _id: ids[0] } })]) {
				const a = await request("GET", u, { token: first });
				const b = await request("GET", u, { token: second });
				const shown = (r: typeof a) => (r.body._items ? r.body._items[0] : r.body).vpn_representation.otp_secret;
				expect(shown(first === viewer ? a : b)).toBe("********");
				expect(shown(first === viewer ? b : a)).toBe("SECRET0");
			}
		}
	});
});
