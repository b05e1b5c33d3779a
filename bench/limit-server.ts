/**
 * The work's own limit for a filter no index serves (bench/unindexed.ts): a bare node:http server holding the same
 * hosts in memory, in `_id` order, each with the JSON fleet-ctl renders for it in a list, that answers
 * `GET /api/hosts?where={"status":S,"ip":{"$ne":V}}&max_results=25&…` by the filter written by hand — every host
 * read, the matches counted, the first 25 kept — and the same envelope as fleet-ctl's answer (links, `_meta`).
 * Run as a child process with one argument, a JSON file (see LimitSpec). Prints `LISTENING <port>`.
 */
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** What bench/unindexed.ts writes for this server. */
export interface LimitSpec {
	/** The hosts in `_id` order: the fields the filter reads, and the host as fleet-ctl renders it in a list. */
	hosts: Array<{ status: unknown; ip: unknown; json: string }>;
	/** fleet-ctl's answer cut where it varies: [before the items, …] around the markers of LIMIT_MARKS. */
	template: string;
	headers: Record<string, string>;
	pageSize: number;
}

/** Where the template takes the page's items, the total, the last page and the filter's value. */
export const LIMIT_MARKS = {
	items: "\u0000ITEMS\u0000",
	total: "\u0000TOTAL\u0000",
	last: "\u0000LAST\u0000",
	value: "\u0000VALUE\u0000",
};

function main(): void {
	const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8")) as LimitSpec;
	const { hosts, pageSize } = spec;
	// The template as parts between markers, in order; each marker's position recorded once.
	const pieces = spec.template.split(/(\u0000[A-Z]+\u0000)/);
	const server = http.createServer((req, res) => {
		const url = req.url ?? "";
		const query = new URLSearchParams(url.slice(url.indexOf("?") + 1));
		let where: { status?: unknown; ip?: { $ne?: unknown } };
		try {
			where = JSON.parse(query.get("where") ?? "{}");
		} catch {
			res.writeHead(400, { "Content-Length": 0 });
			res.end();
			return;
		}
		const status = where.status;
		const ne = where.ip?.$ne;
		// The filter by hand: every host read, the matches counted, the first page kept.
		let total = 0;
		const page: string[] = [];
		for (const h of hosts) {
			if (h.status === status && h.ip !== ne) {
				if (total < pageSize) page.push(h.json);
				total++;
			}
		}
		const values: Record<string, string> = {
			[LIMIT_MARKS.items]: page.join(","),
			[LIMIT_MARKS.total]: String(total),
			[LIMIT_MARKS.last]: String(Math.ceil(total / pageSize)),
			[LIMIT_MARKS.value]: String(ne),
		};
		let body = "";
		for (const piece of pieces) body += values[piece] ?? piece;
		const bytes = Buffer.from(body);
		res.writeHead(200, { ...spec.headers, "x-total-count": String(total), "Content-Length": bytes.length });
		res.end(bytes);
	});
	server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
		process.stdout.write(`LISTENING ${(server.address() as AddressInfo).port}\n`);
	});
	const stop = () => server.close(() => process.exit(0));
	process.on("SIGTERM", stop);
	process.on("SIGINT", stop);
}

if (require.main === module) main();
