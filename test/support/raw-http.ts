/**
 * Requests as a gateway test needs to see them: over node:http (which, unlike fetch, sends a GET with a body
 * and shows the headers in the order they were sent), and a count of the requests moleculer-web routes.
 */
import http from "node:http";
import type { Harness } from "./harness";

export interface Raw {
	status: number;
	/** Every header as sent, in order, but Date. */
	headers: Array<[string, string]>;
	body: string;
}

/** One request over node:http, which (unlike fetch) sends a GET with a body and shows the headers in their order. */
export function raw(method: string, url: string, headers: Record<string, string>, body?: string): Promise<Raw> {
	return new Promise((resolve, reject) => {
		const req = http.request(
			url,
			{
				method,
				headers: { ...headers, ...(body !== undefined ? { "content-length": String(Buffer.byteLength(body)) } : {}) },
			},
			res => {
				const chunks: Buffer[] = [];
				res.on("data", (c: Buffer) => chunks.push(c));
				res.on("end", () => {
					const pairs: Array<[string, string]> = [];
					for (let i = 0; i < res.rawHeaders.length; i += 2)
						if (res.rawHeaders[i].toLowerCase() !== "date") pairs.push([res.rawHeaders[i], res.rawHeaders[i + 1]]);
					resolve({ status: res.statusCode ?? 0, headers: pairs, body: Buffer.concat(chunks).toString("utf8") });
				});
			},
		);
		req.on("error", reject);
		req.end(body);
	});
}

/** Counts the requests moleculer-web routes (its alias handler is where every routed request goes). */
export function routedCounter(h: Harness): { count(): number } {
	const gateway = h.broker!.getLocalService("api") as unknown as { aliasHandler: (...args: unknown[]) => unknown };
	const spy = jest.spyOn(gateway, "aliasHandler");
	return { count: () => spy.mock.calls.length };
}
