/**
 * hosts.inventoryState in pages: what the cm-gateway reads of a whole fleet over NATS, a page at a time
 * in _id order, so that no answer outgrows a NATS message (docs/operations.md, capacity model).
 */
import { startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";

describe("hosts.inventoryState", () => {
	let h: Harness;
	const ids = Array.from({ length: 25 }, (_, i) => `inv-${String(i).padStart(2, "0")}.example.org`);
	beforeAll(async () => {
		// on MongoDB too when MONGO_URI is set (CI: the emulator)
		h = await startEmbedded(
			process.env.MONGO_URI
				? { mongoUri: uniqueMongoUri(process.env.MONGO_URI), env: { CTL_SECRET_KEY: "k" } }
				: { dataDir: ":memory:" },
		);
		await h.call("hosts.upsertMany", {
			hosts: [...ids].reverse().map(_id => ({ _id, key: "accepted", status: "up", fingerprint: `fp-${_id}` })),
		});
	});
	afterAll(() => h?.stop());

	it("pages through the whole fleet in _id order, each host once, with the same fields as one pass", async () => {
		const pages: Array<Array<Record<string, unknown>>> = [];
		for (let after: string | undefined; ; ) {
			const page: Array<Record<string, unknown>> = await h.call("hosts.inventoryState", { after, limit: 10 });
			pages.push(page);
			if (page.length < 10) break;
			after = page[page.length - 1]._id as string;
		}
		expect(pages.map(p => p.length)).toEqual([10, 10, 5]);
		const paged = pages.flat();
		expect(paged.map(d => d._id)).toEqual(ids);
		const whole: Array<Record<string, unknown>> = await h.call("hosts.inventoryState");
		expect([...whole].sort((a, b) => String(a._id).localeCompare(String(b._id)))).toEqual(paged);
		expect(paged[0]).toEqual({
			_id: ids[0],
			key: "accepted",
			status: "up",
			fingerprint: `fp-${ids[0]}`,
			fingerprint_history: [],
			_soft_deleted: false,
		});
	});

	it("pages within a list of ids", async () => {
		const some = [ids[3], ids[7], ids[20], "inv-missing.example.org"];
		const first: Array<{ _id: string }> = await h.call("hosts.inventoryState", { ids: some, limit: 2 });
		const second: Array<{ _id: string }> = await h.call("hosts.inventoryState", {
			ids: some,
			limit: 2,
			after: first[1]._id,
		});
		expect([...first, ...second].map(d => d._id)).toEqual([ids[3], ids[7], ids[20]]);
	});
});
