/**
 * No request can kill a process: an exception nothing caught (thrown in a callback, a promise rejection
 * nobody awaited) is logged and, when it happened while an HTTP request was being handled, that request
 * is answered 500 in Eve's shape. The HTTP server runs each request inside `requestScope`, so the
 * process-wide handlers know which request an escaped error belongs to (AsyncLocalStorage follows timers
 * and promises started by the request); an exception a request listener throws itself is caught there.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { IncomingMessage, Server, ServerResponse } from "node:http";

interface RequestScope {
	req: IncomingMessage;
	res: ServerResponse;
}

interface Logger {
	error(...args: unknown[]): void;
}

export const requestScope = new AsyncLocalStorage<RequestScope>();

const BODY = JSON.stringify({
	_status: "ERR",
	_error: { code: 500, message: "An unexpected error occurred while handling the request" },
});

/** Answers 500 on the response of the request the error escaped from, unless it was answered already. */
function failRequest(scope: RequestScope | undefined): void {
	const res = scope?.res;
	if (!res || res.writableEnded) return;
	if (res.headersSent) {
		res.destroy();
		return;
	}
	res.writeHead(500, {
		"Content-Type": "application/json",
		"Content-Length": Buffer.byteLength(BODY),
		Connection: "close",
	});
	res.end(scope?.req.method === "HEAD" ? undefined : BODY);
}

let installed: Logger | null = null;

/** Once per process: keeps it alive through errors nothing caught, logging each (the latest logger wins). */
export function installCrashGuard(logger: Logger): void {
	const first = installed === null;
	installed = logger;
	if (!first) return;
	process.on("uncaughtException", (err: Error) => {
		installed?.error("An exception nothing caught (the process goes on):", err);
		failRequest(requestScope.getStore());
	});
	process.on("unhandledRejection", (reason: unknown) => {
		installed?.error("A promise rejection nothing handled (the process goes on):", reason);
		failRequest(requestScope.getStore());
	});
}

/** Runs every request `server` receives inside requestScope (its 'request' listeners, as they are now). */
export function scopeRequests(server: Server): void {
	const listeners = server.listeners("request") as Array<(req: IncomingMessage, res: ServerResponse) => void>;
	server.removeAllListeners("request");
	server.on("request", (req: IncomingMessage, res: ServerResponse) => {
		requestScope.run({ req, res }, () => {
			try {
				for (const listener of listeners) listener.call(server, req, res);
			} catch (err) {
				// Thrown by a listener itself: by the time "uncaughtException" fired, the scope would be gone and the
				// request left unanswered, so it is answered here.
				(installed ?? console).error("An exception nothing caught (the process goes on):", err);
				failRequest({ req, res });
			}
		});
	});
}
