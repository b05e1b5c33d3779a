/**
 * A list's page as Eve shows it (docs/api.md "Lists and items"; Eve's `_pagination_links` and `_meta_links`):
 * which records a page holds, its `_meta` and its `_links` — `parent`, `self` (with the query string only when
 * something matched), `next` and `last` while records remain after this page (`page * max_results < total`;
 * last page = ceil(total / max_results)), `prev` whenever `page > 1`, even past the last page. Reading `page`
 * and `max_results` (garbage falls back, large values are clamped) and the links' query strings are
 * lib/eve/query.ts `parsePaging` and `linkQuery`.
 */
import { linkQuery, type Paging, type QueryArgs } from "./query";
import { HOME_LINK, type Link } from "./render";

export interface PageMeta {
	page: number;
	max_results: number;
	total: number;
}

/** The records of the page: how many to skip, and at most how many to read. */
export function pageWindow(paging: Paging): { skip: number; limit: number } {
	return { skip: (paging.page - 1) * paging.maxResults, limit: paging.maxResults };
}

/** The number of the last page holding records (0 when nothing matched). */
export function lastPage(total: number, maxResults: number): number {
	return Math.ceil(total / maxResults);
}

/** Whether records remain after this page: then it links to the next and the last one. */
export function hasNext(paging: Paging, total: number): boolean {
	return paging.page * paging.maxResults < total;
}

/** The list's `_meta`. */
export function pageMeta(paging: Paging, total: number): PageMeta {
	return { page: paging.page, max_results: paging.maxResults, total };
}

/** The list's `_links`, in Eve's order: parent, self, next, last, prev. */
export function pageLinks(
	resource: string,
	args: QueryArgs,
	paging: Paging,
	pageSizeDefault: number,
	total: number,
): Record<string, Link> {
	const href = (page: number) => resource + linkQuery(args, paging, pageSizeDefault, page);
	const links: Record<string, Link> = {
		parent: HOME_LINK,
		self: { title: resource, href: total > 0 ? href(paging.page) : resource },
	};
	if (hasNext(paging, total)) {
		links.next = { title: "next page", href: href(paging.page + 1) };
		links.last = { title: "last page", href: href(lastPage(total, paging.maxResults)) };
	}
	if (paging.page > 1) links.prev = { title: "previous page", href: href(paging.page - 1) };
	return links;
}
