/**
 * A list's page, `_meta` and `_links` (lib/eve/paging.ts, with lib/eve/query.ts reading `page` and
 * `max_results`) at its boundaries. Every expectation is a literal written from docs/api.md ("Lists and
 * items": PAGINATION_DEFAULT 25, PAGINATION_LIMIT 50, clamped, a page past the end is empty) and Eve's rules
 * (../shared/reference/eve-conventions.md §1.1: `next` and `last` only while `page * max_results < total`,
 * last = ceil(total / max_results), `prev` whenever page > 1, `self` without a query string when nothing
 * matched, links in the order parent, self, next, last, prev; `max_results` in links only when not 25, `page`
 * only when > 1).
 */
import { QueryArgs, parsePaging } from "../../lib/eve/query";
import { hasNext, lastPage, pageLinks, pageMeta, pageWindow } from "../../lib/eve/paging";

const DEFAULT = 25;
const LIMIT = 50;

/** The `_links` and `_meta` of GET /groups?<query> when `total` records match. */
function list(query: Record<string, string>, total: number) {
	const args = QueryArgs.from(query);
	const paging = parsePaging(args, DEFAULT, LIMIT);
	return {
		links: pageLinks("groups", args, paging, DEFAULT, total),
		meta: pageMeta(paging, total),
		window: pageWindow(paging),
	};
}

const PARENT = { title: "home", href: "/" };
const self = (href: string) => ({ title: "groups", href });
const next = (href: string) => ({ title: "next page", href });
const last = (href: string) => ({ title: "last page", href });
const prev = (href: string) => ({ title: "previous page", href });

describe("paging: _meta and _links", () => {
	it("page 1 of three: next and last, no prev", () => {
		const { links, meta, window } = list({}, 60);
		expect(meta).toEqual({ page: 1, max_results: 25, total: 60 });
		expect(window).toEqual({ skip: 0, limit: 25 });
		expect(links).toEqual({
			parent: PARENT,
			self: self("groups"),
			next: next("groups?page=2"),
			last: last("groups?page=3"),
		});
		expect(Object.keys(links)).toEqual(["parent", "self", "next", "last"]);
	});

	it("a last page that is exactly full (total a multiple of max_results) has no next and no last", () => {
		const { links, meta, window } = list({ page: "3" }, 75);
		expect(meta).toEqual({ page: 3, max_results: 25, total: 75 });
		expect(window).toEqual({ skip: 50, limit: 25 });
		expect(links).toEqual({ parent: PARENT, self: self("groups?page=3"), prev: prev("groups?page=2") });
		expect(Object.keys(links)).toEqual(["parent", "self", "prev"]);
	});

	it("the page before an exactly full last page links to it as next and last", () => {
		const { links } = list({ page: "2" }, 75);
		expect(links).toEqual({
			parent: PARENT,
			self: self("groups?page=2"),
			next: next("groups?page=3"),
			last: last("groups?page=3"),
			prev: prev("groups"),
		});
		expect(Object.keys(links)).toEqual(["parent", "self", "next", "last", "prev"]);
	});

	it("one record past a full page makes one more page", () => {
		expect(list({ page: "3" }, 76).links).toEqual({
			parent: PARENT,
			self: self("groups?page=3"),
			next: next("groups?page=4"),
			last: last("groups?page=4"),
			prev: prev("groups?page=2"),
		});
		expect(list({ page: "4" }, 76).links).toEqual({
			parent: PARENT,
			self: self("groups?page=4"),
			prev: prev("groups?page=3"),
		});
	});

	it("page = last, not full: no next, no last", () => {
		const { links, window } = list({ page: "3" }, 60);
		expect(window).toEqual({ skip: 50, limit: 25 });
		expect(links).toEqual({ parent: PARENT, self: self("groups?page=3"), prev: prev("groups?page=2") });
	});

	it("a page beyond the last: empty, with the total, self and a prev link, no next or last", () => {
		const { links, meta, window } = list({ page: "9" }, 60);
		expect(meta).toEqual({ page: 9, max_results: 25, total: 60 });
		expect(window).toEqual({ skip: 200, limit: 25 });
		expect(links).toEqual({ parent: PARENT, self: self("groups?page=9"), prev: prev("groups?page=8") });
	});

	it("max_results at its limit (50) is kept and repeated in every link", () => {
		const first = list({ max_results: "50" }, 100);
		expect(first.meta).toEqual({ page: 1, max_results: 50, total: 100 });
		expect(first.window).toEqual({ skip: 0, limit: 50 });
		expect(first.links).toEqual({
			parent: PARENT,
			self: self("groups?max_results=50"),
			next: next("groups?max_results=50&page=2"),
			last: last("groups?max_results=50&page=2"),
		});
		const second = list({ max_results: "50", page: "2" }, 100);
		expect(second.window).toEqual({ skip: 50, limit: 50 });
		expect(second.links).toEqual({
			parent: PARENT,
			self: self("groups?max_results=50&page=2"),
			prev: prev("groups?max_results=50"),
		});
	});

	it("max_results above its limit is clamped to 50", () => {
		for (const max of ["51", "100000"]) {
			const { links, meta, window } = list({ max_results: max }, 101);
			expect(meta).toEqual({ page: 1, max_results: 50, total: 101 });
			expect(window).toEqual({ skip: 0, limit: 50 });
			expect(links).toEqual({
				parent: PARENT,
				self: self("groups?max_results=50"),
				next: next("groups?max_results=50&page=2"),
				last: last("groups?max_results=50&page=3"),
			});
		}
	});

	it("max_results equal to the default is left out of the links; one record per page", () => {
		expect(list({ max_results: "25", page: "2" }, 26).links).toEqual({
			parent: PARENT,
			self: self("groups?page=2"),
			prev: prev("groups"),
		});
		expect(list({ max_results: "1" }, 2).links).toEqual({
			parent: PARENT,
			self: self("groups?max_results=1"),
			next: next("groups?max_results=1&page=2"),
			last: last("groups?max_results=1&page=2"),
		});
		expect(list({ max_results: "1" }, 1).links).toEqual({ parent: PARENT, self: self("groups?max_results=1") });
	});

	it("nothing matched (total 0): self without a query string, no next, last or prev on page 1", () => {
		const { links, meta } = list({ where: '{"type":99}', max_results: "10" }, 0);
		expect(meta).toEqual({ page: 1, max_results: 10, total: 0 });
		expect(links).toEqual({ parent: PARENT, self: self("groups") });
		// prev is there whenever page > 1, even when nothing matched.
		expect(list({ where: '{"type":99}', page: "2" }, 0).links).toEqual({
			parent: PARENT,
			self: self("groups"),
			prev: prev('groups?where={"type":99}'),
		});
	});

	it("repeats max_results, where and sort raw, then page, then other parameters; drops projection and embedded (Eve's lab example)", () => {
		const query = {
			max_results: "10",
			page: "2",
			where: '{"type":1}',
			sort: "-name",
			projection: '{"name":1}',
			embedded: '{"subgroups":1}',
			foo: "bar",
		};
		expect(list(query, 30).links).toEqual({
			parent: PARENT,
			self: self('groups?max_results=10&where={"type":1}&sort=-name&page=2&foo=bar'),
			next: next('groups?max_results=10&where={"type":1}&sort=-name&page=3&foo=bar'),
			last: last('groups?max_results=10&where={"type":1}&sort=-name&page=3&foo=bar'),
			prev: prev('groups?max_results=10&where={"type":1}&sort=-name&foo=bar'),
		});
		expect(list({ ...query, page: "3" }, 30).links).toEqual({
			parent: PARENT,
			self: self('groups?max_results=10&where={"type":1}&sort=-name&page=3&foo=bar'),
			prev: prev('groups?max_results=10&where={"type":1}&sort=-name&page=2&foo=bar'),
		});
	});

	it("counts pages as ceil(total / max_results), and has a next page only while records remain after this one", () => {
		expect([
			lastPage(0, 25),
			lastPage(1, 25),
			lastPage(25, 25),
			lastPage(26, 25),
			lastPage(75, 25),
			lastPage(76, 25),
		]).toEqual([0, 1, 1, 2, 3, 4]);
		expect([
			hasNext({ page: 1, maxResults: 25 }, 25),
			hasNext({ page: 1, maxResults: 25 }, 26),
			hasNext({ page: 2, maxResults: 25 }, 50),
			hasNext({ page: 2, maxResults: 25 }, 51),
			hasNext({ page: 1, maxResults: 25 }, 0),
		]).toEqual([false, true, false, true, false]);
	});
});
