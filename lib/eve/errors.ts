/**
 * The errors of Eve's HTTP dialect (a malformed `where`, an ETag that does not match, a method not allowed), and
 * Werkzeug's default messages; the gateway (services/api/errors.ts toEveError) is the one place that renders them.
 * Services throw the domain errors of lib/errors.ts; the helpers below that have a domain meaning build those.
 */
import { Errors } from "moleculer";
import { Conflict, Invalid, NotFound } from "../errors";

/** Werkzeug's default descriptions, which Eve puts in `_error.message` when nothing more specific is known. */
export const DEFAULT_MESSAGES: Record<number, string> = {
	400: "The browser (or proxy) sent a request that this server could not understand.",
	401: "The server could not verify that you are authorized to access the URL requested. You either supplied the wrong credentials (e.g. a bad password), or your browser doesn't understand how to supply the credentials required.",
	403: "You don't have the permission to access the requested resource. It is either read-protected or not readable by the server.",
	404: "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.",
	405: "The method is not allowed for the requested URL.",
	409: "A conflict happened while processing the request. The resource might have been modified while the request was being processed.",
	412: "The precondition on the request for the URL failed positive evaluation.",
	413: "The data value transmitted exceeds the capacity limit.",
	415: "The server does not support the media type transmitted in the request.",
	422: "The request was well-formed but was unable to be followed due to semantic errors.",
	429: "Rate limit exceeded",
	500: "The server encountered an internal error and was unable to complete your request.",
	502: "The proxy server received an invalid response from an upstream server.",
	503: "The server is temporarily unable to service your request due to maintenance downtime or capacity problems. Please try again later.",
	504: "The gateway did not receive a timely response from the upstream server or application.",
};

export type Issues = Record<string, unknown>;

export interface EveErrorData {
	issues?: Issues;
	items?: unknown[];
	/** A run refused outside the maintenance windows: the next opening among the refused hosts' windows (`_next_window`). */
	window?: unknown;
	/** …and the hosts refused (`_refused`). */
	refused?: string[];
}

/**
 * An error that the gateway renders as {"_status":"ERR","_error":{code,message}} (plus `_issues` or
 * `_items` for validation failures). It travels over the transporter like any MoleculerError.
 */
export class EveError extends Errors.MoleculerError {
	constructor(code: number, message?: string, data?: EveErrorData) {
		super(message || DEFAULT_MESSAGES[code] || "Error", code, "EVE", data);
		this.name = "EveError";
	}
}

export const badRequest = (message?: string) => new EveError(400, message);
export const notFound = (message?: string) => new NotFound(message || DEFAULT_MESSAGES[404]);
export const conflict = (message?: string) => new Conflict(message || DEFAULT_MESSAGES[409]);

export function validationFailed(issues: Issues, message = "Insertion failure: 1 document(s) contain(s) error(s)") {
	return new Invalid(issues, message);
}
