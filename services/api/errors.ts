/**
 * The one boundary where every error, from any layer, becomes Eve's error body: the domain errors (lib/errors.ts),
 * Eve's own (lib/eve/errors.ts), the answers of the
 * outside systems' clients (salt-api, Pritunl) and of secrets at rest (lib/runtime/resilience.ts ANSWER_TYPES),
 * validation, body parsing, the broker's failures (services gone, timeouts, bulkheads) — and anything else as a
 * 500 that reveals nothing.
 */
import { Errors } from "moleculer";
import { DEFAULT_MESSAGES, EveError } from "../../lib/eve/errors";
import { toIssues } from "../../lib/eve/validation";
import { isAnswer } from "../../lib/runtime/resilience";

export interface EveErrorBody {
	_status: "ERR";
	_error: { code: number; message: string };
	_issues?: unknown;
	_items?: unknown;
	_next_window?: unknown;
	_refused?: unknown;
}

/** Any error, from any layer, as Eve's error body. Unknown errors are 500s that reveal nothing. */
export function toEveError(err: any, unavailable?: string): { code: number; body: EveErrorBody; internal: boolean } {
	let code = 500;
	let message: string | undefined;
	const extra: Partial<EveErrorBody> = {};
	let internal = false;

	// The domain errors (lib/errors.ts) and Eve's own, local or restored from the transporter (by `type`: the class
	// does not cross it), and the outside systems' clients: their code is the status, their data Eve's extra fields.
	if (err instanceof EveError || isAnswer(err)) {
		code = err.code;
		message = err.message;
		if (err.data?.issues) extra._issues = err.data.issues;
		if (err.data?.items) extra._items = err.data.items;
		if (err.data?.window !== undefined) extra._next_window = err.data.window;
		if (err.data?.refused) extra._refused = err.data.refused;
	} else if (err?.name === "ValidationError" && err.code === 422) {
		code = 422;
		message = "invalid request parameters";
		if (Array.isArray(err.data)) extra._issues = toIssues(err.data, {});
	} else if (typeof err?.type === "string" && err.type.startsWith("entity.")) {
		// body-parser (moleculer-web passes its errors on as MoleculerErrors with the same type)
		const status = err.status ?? err.code;
		code = status === 413 ? 413 : 400;
		message =
			status === 413
				? `request body too large${typeof err.limit === "number" ? ` (limit ${err.limit} bytes)` : ""}`
				: err.type === "entity.parse.failed"
					? "malformed JSON in the request body"
					: "unreadable request body";
	} else if (err?.name === "QueueIsFullError") {
		// a bulkhead (lib/runtime/resilience.ts): too much of this kind of work waits already
		code = 503;
		message = "too many requests of this kind are in progress; try again later";
	} else if (err?.name === "RequestRejectedError" || err?.name === "BrokerDisconnectedError") {
		// the node handling it left (killed, or NATS lost): the request may or may not have been carried out
		code = 503;
		message = "the service handling this request went away before answering; it may or may not have been carried out";
	} else if (err?.name === "ServiceNotAvailableError") {
		// the action exists, but no endpoint takes calls now (its circuit breaker is open, or its nodes are going)
		code = 503;
		message =
			"the service that handles this request is not answering at the moment (it failed repeatedly, or is restarting); try again shortly";
	} else if (
		err?.name === "ServiceUnavailableError" ||
		(err?.name === "ServiceNotFoundError" && err?.data?.action && !String(err.data.action).startsWith("$"))
	) {
		code = 503;
		message = unavailable ?? "the service that handles this request is not available";
	} else if (err?.name === "RequestTimeoutError") {
		code = 504;
		message = "the request took too long to complete";
	} else if (err?.name === "NotFoundError" || err?.name === "ServiceNotFoundError") {
		code = 404;
	} else if (err?.name === "PayloadTooLarge") {
		code = 413;
	} else if (err?.name === "RateLimitExceeded") {
		code = 429;
	} else if (err?.type === "ERR_UNABLE_DECODE_PARAM") {
		code = 400;
		message = "malformed percent-encoding in the URL";
	} else if (err instanceof Errors.MoleculerError && err.code >= 400 && err.code < 500) {
		code = err.code;
		message = err.message;
	} else {
		internal = true;
	}
	if (!DEFAULT_MESSAGES[code] && (code < 400 || code > 599)) code = 500;
	if (internal) message = DEFAULT_MESSAGES[500];
	return {
		code,
		body: { _status: "ERR", _error: { code, message: message || DEFAULT_MESSAGES[code] || "Error" }, ...extra },
		internal,
	};
}
