/**
 * lib/eve/render-cache.ts: a rendered record's text is JSON.stringify's; the cache keeps at most the record
 * versions it was given, the least recently read going first, and a bounded number of views of each.
 */
import fc from "fast-check";
import { RenderCache, renderedText, toRendered } from "../../lib/eve/render-cache";

describe("RenderCache", () => {
	it("renders a record with its links, and item links appended, as JSON.stringify does", () => {
		fc.assert(
			fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.dictionary(fc.string(), fc.jsonValue()), (fields, links) => {
				const item = { ...fields, _links: links };
				delete (item as Record<string, unknown>)["__proto__"];
				const parsed = JSON.parse(JSON.stringify(item)) as Record<string, unknown>;
				expect(renderedText(toRendered(parsed))).toBe(JSON.stringify(parsed));
				const more = { parent: { title: "home", href: "/" } };
				expect(renderedText(toRendered(parsed), `"parent":${JSON.stringify(more.parent)}`)).toBe(JSON.stringify({ ...parsed, _links: { ...(parsed._links as object), ...more } }));
			}),
		);
	});

	it("keeps the most recently read record versions, each in a bounded number of views", () => {
		const cache = new RenderCache(2);
		const [a, b, c] = [{}, {}, {}];
		const r = (s: string) => ({ fields: `{"v":"${s}"`, links: "{" });
		cache.set(a, "x", r("a"));
		cache.set(b, "x", r("b"));
		expect(cache.get(a, "x")).toEqual(r("a")); // a read last: b goes first
		cache.set(c, "x", r("c"));
		expect(cache.size).toBe(2);
		expect(cache.get(b, "x")).toBeUndefined();
		expect(cache.get(a, "x")).toEqual(r("a"));
		expect(cache.get(a, "y")).toBeUndefined();
		for (let i = 0; i < 40; i++) cache.set(c, `view${i}`, r(`c${i}`));
		expect(cache.get(c, "view0")).toBeUndefined();
		expect(cache.get(c, "view39")).toEqual(r("c39"));
		expect([cache.hits, cache.misses]).toEqual([3, 3]);
	});
});
