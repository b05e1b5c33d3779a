/**
 * moleculer-web's aliases from the route table (lib/http/routes.ts): each path's methods to their actions
 * (with the least role, body kind, cache and audit flags), HEAD with every GET, OPTIONS answering Allow, and
 * 405 for whatever a path does not list — Eve's behaviour.
 */
import type { ServerResponse } from "node:http";
import { ROUTES, type RouteMethod } from "../../lib/http/routes";
import { EveError } from "../../lib/eve/errors";
import type { Req } from "./requests";

export function aliasesFor(): Record<string, unknown> {
	const aliases: Record<string, unknown> = {
		"GET /": { action: "api.root", role: "viewer" },
		"HEAD /": { action: "api.root", role: "viewer" },
	};
	for (const route of ROUTES) {
		const allowed = Object.keys(route.methods);
		for (const [method, def] of Object.entries(route.methods) as Array<[string, RouteMethod]>) {
			// An object alias takes its type from `type`; a "stream:" prefix would stay in the action name.
			const common = {
				action: def.action,
				role: def.role,
				cachedBy: def.cachedBy,
				unavailable: def.unavailable,
				audited: def.audited,
				computes: def.computes,
				writesWith: def.writesWith,
			};
			aliases[`${method} /${route.path}`] = {
				...common,
				type: def.body === "stream" ? "stream" : "call",
				bodyKind: def.body ?? "none",
			};
			if (method === "GET") aliases[`HEAD /${route.path}`] = { ...common, bodyKind: "none" };
		}
		const allow = [...new Set([...allowed, ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"])].join(", ");
		// Whatever a path does not list: OPTIONS answers with Allow, the rest is 405 (Eve's behaviour).
		aliases[`* /${route.path}`] = (req: Req, res: ServerResponse, next: (err?: unknown) => void) => {
			res.setHeader("Allow", allow);
			if (req.method === "OPTIONS") {
				res.writeHead(200, { "Content-Length": "0" });
				res.end();
				return;
			}
			next(new EveError(405));
		};
	}
	aliases["* /"] = (req: Req, res: ServerResponse, next: (err?: unknown) => void) => {
		res.setHeader("Allow", "GET, HEAD, OPTIONS");
		if (req.method === "OPTIONS") {
			res.writeHead(200, { "Content-Length": "0" });
			res.end();
			return;
		}
		next(new EveError(405));
	};
	return aliases;
}
