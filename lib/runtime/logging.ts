/**
 * Logs: one JSON object per line with LOG_FORMAT=json, and the request id of the HTTP request that
 * caused a line, in whichever process it runs (Moleculer carries ctx.requestID across nodes; the gateway
 * takes it from X-Request-Id or makes one, and answers it): on the request-log middleware's lines, and with
 * JSON logs on every line a service writes while it handles the request (its actions and the events they
 * cause), through an AsyncLocalStorage. Never parameters, bodies or headers: they may hold secrets.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Context, ServiceBroker } from "moleculer";
import { isAnswer } from "./resilience";

/** The request id of the action or event being handled, for the lines logged meanwhile. */
const requestScope = new AsyncLocalStorage<string>();

type Bindings = Record<string, unknown>;

function errorFields(err: Error & { code?: unknown; type?: unknown }, withStack: boolean): Record<string, unknown> {
	return {
		name: err.name,
		message: err.message,
		...(err.code !== undefined ? { code: err.code } : {}),
		...(err.type ? { type: err.type } : {}),
		...(withStack && err.stack ? { stack: err.stack } : {}),
	};
}

/**
 * The JSON line formatter: {time, level, msg, nodeID, ns, mod, svc, ...fields}. A plain object as the
 * first argument gives fields (requestID, action, ...); an Error anywhere becomes `err`.
 */
export function jsonFormatter(
	this: unknown,
	type: string,
	args: unknown[],
	bindings: Bindings,
	helpers: { printArgs(a: unknown[]): unknown[] },
): string[] {
	const line: Record<string, unknown> = { time: new Date().toISOString(), level: type, msg: "", ...bindings };
	const requestID = requestScope.getStore();
	if (requestID) line.requestID = requestID;
	let rest = args;
	const first = args[0];
	if (first && typeof first === "object" && !(first instanceof Error) && !Array.isArray(first)) {
		Object.assign(line, first);
		rest = args.slice(1);
	}
	const text: unknown[] = [];
	for (const a of rest) {
		if (a instanceof Error) line.err = errorFields(a, type === "error" || type === "fatal");
		else text.push(a);
	}
	line.msg = helpers.printArgs(text).join(" ");
	return [JSON.stringify(line)];
}

let warningsRouted = false;

/**
 * Node's own warnings (a dependency's DeprecationWarning, say) as log lines: the image runs node with
 * --no-warnings, which stops Node printing them as plain text on stderr (JSON logs are one object per
 * line), and they come here instead (`silenced`: lib/config.ts nodeWarningsSilenced). Without --no-warnings
 * Node prints them itself and nothing is added.
 */
export function routeProcessWarnings(broker: ServiceBroker, silenced: boolean): void {
	if (!silenced || warningsRouted) return;
	warningsRouted = true;
	const logger = broker.getLogger("process");
	process.on("warning", (w: Error & { code?: string }) =>
		logger.warn({ warning: w.name, ...(w.code ? { code: w.code } : {}) }, w.message),
	);
}

/** A request id from a client: kept when it is short and plain, so it cannot forge or flood log lines. */
export function acceptedRequestId(raw: unknown): string | undefined {
	const value = Array.isArray(raw) ? raw[0] : raw;
	return typeof value === "string" && /^[A-Za-z0-9._:@/+=-]{1,128}$/.test(value) ? value : undefined;
}

/**
 * Set on an action whose failures its own service logs (the gateway's HTTP handler: each request's failure once,
 * with its method and path): RequestLog then logs them at debug only.
 */
export const OWN_FAILURE_LOG = "ownFailureLog";

/**
 * Logs failed actions with their request id: server-side failures (5xx, or no code) as errors, the rest —
 * 4xx, and the answers a service gives on purpose (lib/runtime/resilience.ts isAnswer: a 503 "no master
 * configured", a 502 from salt-api), which the gateway renders and logs once — only at debug, where every
 * action call is logged too (LOGLEVEL=debug follows a request across services).
 * With `carryRequestId` (JSON logs) actions and events run in the scope of their request id, so that every
 * line logged meanwhile carries it; off otherwise, since the scope costs every promise a little.
 */
export function RequestLogMiddleware(opts: { carryRequestId?: boolean } = {}) {
	const inScope = <T>(ctx: Context, run: () => T): T =>
		opts.carryRequestId && ctx.requestID ? requestScope.run(ctx.requestID, run) : run();
	return {
		name: "RequestLog",
		localEvent(next: (ctx: Context) => unknown) {
			return opts.carryRequestId ? (ctx: Context) => inScope(ctx, () => next(ctx)) : next;
		},
		localAction(
			this: ServiceBroker,
			next: (ctx: Context) => Promise<unknown>,
			action: { name: string; [OWN_FAILURE_LOG]?: boolean },
		) {
			const logger = this.getLogger("request");
			const debug = ["debug", "trace"].includes(String(this.options.logLevel));
			return function requestLog(ctx: Context) {
				const started = debug ? process.hrtime.bigint() : 0n;
				const fields = () => ({
					requestID: ctx.requestID,
					action: action.name,
					caller: ctx.caller ?? undefined,
					...(debug ? { ms: Number(process.hrtime.bigint() - started) / 1e6 } : {}),
				});
				const p = inScope(ctx, () => next(ctx));
				if (debug)
					p.then(
						() => logger.debug(fields(), "action done"),
						() => undefined,
					);
				return p.catch((err: Error & { code?: number; nodeID?: string; type?: unknown }) => {
					// A failure that came from another node was logged there, with the same request id.
					const here = !err?.nodeID || err.nodeID === ctx.nodeID;
					const server =
						here && !action[OWN_FAILURE_LOG] && !isAnswer(err) && (typeof err?.code !== "number" || err.code >= 500);
					if (server) logger.error(fields(), `action ${action.name} failed:`, err);
					else if (debug) logger.debug(fields(), `action ${action.name} answered ${err.code}:`, err.message);
					throw err;
				});
			};
		},
	};
}
