/**
 * lib/eve/render-cache.ts: a rendered record's text is JSON.stringify's; the cache keeps at most the record
 * versions it was given, the least recently read going first, and a bounded number of views of each.
 */
import fc from "fast-check";
import { RenderCache, renderedChunks, toRendered } from "../../lib/eve/render-cache";

describe("RenderCache", () => {
	it("renders a record with its links, and item links appended, as JSON.stringify does", () => {
		fc.assert(
			fc.property(
				fc.dictionary(fc.string(), fc.jsonValue()),
				fc.dictionary(fc.string(), fc.jsonValue()),
				(fields, links) => {
					const item = { ...fields, _links: links };
					delete (item as Record<string, unknown>).__proto__;
					const parsed = JSON.parse(JSON.stringify(item)) as Record<string, unknown>;
					const text = (more?: string) => Buffer.concat(renderedChunks(toRendered(parsed), more)).toString("utf8");
					expect(text()).toBe(JSON.stringify(parsed));
					const more = { parent: { title: "home", href: "/" } };
					expect(text(`"parent":${JSON.stringify(more.parent)}`)).toBe(
						JSON.stringify({ ...parsed, _links: { ...(parsed._links as object), ...more } }),
					);
				},
			),
		);
	});

	it("keeps the most recently read record versions (at most the number given), each in a bounded number of views", () => {
		const cache = new RenderCache(4);
		const [a, b, c, d, e] = [{}, {}, {}, {}, {}];
		const r = (s: string) => ({ fields: Buffer.from(`{"v":"${s}"`), links: Buffer.from("{") });
		cache.set(a, "x", r("a"));
		cache.set(b, "x", r("b"));
		cache.set(c, "x", r("c"));
		expect(cache.get(a, "x")).toEqual(r("a")); // read again: kept longer than b
		cache.set(d, "x", r("d"));
		cache.set(e, "x", r("e"));
		expect(cache.size).toBeLessThanOrEqual(4);
		expect(cache.get(b, "x")).toBeUndefined();
		expect(cache.get(a, "x")).toEqual(r("a"));
		expect(cache.get(e, "x")).toEqual(r("e"));
		expect(cache.get(a, "y")).toBeUndefined();
		for (let i = 0; i < 40; i++) cache.set(e, `view${i}`, r(`e${i}`));
		expect(cache.get(e, "view0")).toBeUndefined();
		expect(cache.get(e, "view39")).toEqual(r("e39"));
		expect([cache.hits, cache.misses]).toEqual([4, 3]);
		// However many records pass, no more than the number given are kept.
		for (let i = 0; i < 1000; i++) cache.set({}, "x", r(String(i)));
		expect(cache.size).toBeLessThanOrEqual(4);
	});
});
