/**
 * The domain errors every service throws: what went wrong in the system's own terms, named by a Moleculer `type`.
 * They cross the transporter as plain objects (Moleculer keeps `name`, `message`, `code`, `type`, `data`, never the
 * class), so a caller tests `err.type` against `ErrorType` — never `instanceof` after a call, never the message.
 * Their `code` is Moleculer's field (its circuit breaker and logger read it); only the gateway (services/api/errors.ts)
 * and the Eve layer (lib/eve/) turn them into Eve's body and an HTTP status.
 */
import { Errors } from "moleculer";

/** The `type` of each domain error: the contract between services. */
export const ErrorType = {
	/** A document or parameter breaks a rule; `data.issues` by field (or `data.items` per document). */
	Invalid: "INVALID",
	/** The request cannot be read as asked (a filter it does not support, a count out of range). */
	Malformed: "MALFORMED",
	/** No usable credentials. */
	Unauthenticated: "UNAUTHENTICATED",
	/** The caller may not do this (not a run: a vote, a token, a CSRF check). */
	Forbidden: "FORBIDDEN",
	/** A run (or work that runs: a task, a rollout, a check, a fix) is refused to its token; `data.reason` says why. */
	RunRefused: "RUN_REFUSED",
	/** A governed run outside its hosts' maintenance windows; `data.window` (the next opening), `data.refused` (hosts). */
	OutsideWindow: "OUTSIDE_WINDOW",
	/** What the request names does not exist. */
	NotFound: "NOT_FOUND",
	/** The state does not allow it now (already decided, changed meanwhile, already running, a duplicate). */
	Conflict: "CONFLICT",
	/** The request selects nothing to run on (no live host, nothing drifted). */
	NothingToRun: "NOTHING_TO_RUN",
	/** A run held for approval where the caller cannot answer a hold (nothing ran); `data.approval` names the request. */
	HeldForApproval: "HELD_FOR_APPROVAL",
	/** Refused before anything ran because a step it needs is not available (its audit record could not be stored). */
	NothingRan: "NOTHING_RAN",
	/** What was sent exceeds a limit. */
	TooLarge: "TOO_LARGE",
	/** An outside system (the Salt master, Pritunl) answered with an error or nonsense; `data` may say more. */
	UpstreamFailed: "UPSTREAM_FAILED",
	/** A target expression cannot be evaluated; `data.reason`, and `data.issues` when it is a document's field. */
	TargetUnevaluable: "TARGET_UNEVALUABLE",
} as const;
export type ErrorTypeName = (typeof ErrorType)[keyof typeof ErrorType];

/** The types of Moleculer's own errors a caller may branch on (its parameter validation, its routing). */
export type BrokerErrorType =
	| "VALIDATION_ERROR"
	| "SERVICE_NOT_FOUND"
	| "SERVICE_NOT_AVAILABLE"
	| "QUEUE_FULL"
	| "REQUEST_REJECTED";

export const DOMAIN_TYPES: ReadonlySet<string> = new Set(Object.values(ErrorType));

/** What a domain error may carry; the gateway renders issues, items, window and refused (docs/api.md). */
export interface DomainData {
	issues?: Record<string, unknown>;
	items?: unknown[];
	window?: unknown;
	refused?: string[];
	reason?: string;
	[key: string]: unknown;
}

/** Whether `err` (local, or restored from the transporter) is a domain error of `type`. */
export function isError(
	err: unknown,
	type: ErrorTypeName | BrokerErrorType,
): err is Error & { type: string; code: number; data?: DomainData } {
	return (err as { type?: unknown } | null)?.type === type;
}

export class DomainError extends Errors.MoleculerError {
	declare data: DomainData | undefined;
	constructor(name: string, type: ErrorTypeName, code: number, message: string, data?: DomainData) {
		super(message, code, type, data);
		this.name = name;
	}
}

/** A domain error that carries only its message. */
function messageOnly(name: string, type: ErrorTypeName, code: number) {
	return class extends DomainError {
		constructor(message: string) {
			super(name, type, code, message);
		}
	};
}

export class Invalid extends DomainError {
	constructor(issues: Record<string, unknown>, message = "Insertion failure: 1 document(s) contain(s) error(s)") {
		super("Invalid", ErrorType.Invalid, 422, message, { issues });
	}
}

/** A bulk write whose documents break rules: `items` gives each document's verdict, in order. */
export class InvalidItems extends DomainError {
	constructor(items: unknown[], message: string) {
		super("Invalid", ErrorType.Invalid, 422, message, { items });
	}
}

export class Malformed extends messageOnly("Malformed", ErrorType.Malformed, 400) {}

export class Unauthenticated extends DomainError {
	constructor(
		message = "The server could not verify that you are authorized to access the URL requested. You either supplied the wrong credentials (e.g. a bad password), or your browser doesn't understand how to supply the credentials required.",
	) {
		super("Unauthenticated", ErrorType.Unauthenticated, 401, message);
	}
}

export class Forbidden extends messageOnly("Forbidden", ErrorType.Forbidden, 403) {}

/** `message` is what the caller reads; `reason` the bare why, for a caller that words its own refusal. */
export class RunRefused extends DomainError {
	constructor(message: string, reason = message) {
		super("RunRefused", ErrorType.RunRefused, 403, message, { reason });
	}
}

/** A run refused to its token: "the run is refused: <reason>". */
export const runRefused = (reason: string) => new RunRefused(`the run is refused: ${reason}`, reason);

export class OutsideWindow extends DomainError {
	constructor(message: string, data?: { window: unknown; refused: string[] }) {
		super("OutsideWindow", ErrorType.OutsideWindow, 409, message, data);
	}
}

export class NotFound extends DomainError {
	constructor(
		message = "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.",
	) {
		super("NotFound", ErrorType.NotFound, 404, message);
	}
}

export class Conflict extends messageOnly("Conflict", ErrorType.Conflict, 409) {}

/** A hold where the caller has no way to answer one: a fault of the caller (500), nothing ran. */
export class HeldForApproval extends DomainError {
	constructor(message: string, approval: string) {
		super("HeldForApproval", ErrorType.HeldForApproval, 500, message, { approval });
	}
}

export class NothingToRun extends messageOnly("NothingToRun", ErrorType.NothingToRun, 422) {}

export class NothingRan extends messageOnly("NothingRan", ErrorType.NothingRan, 503) {}

export class TooLarge extends messageOnly("TooLarge", ErrorType.TooLarge, 413) {}

export class UpstreamFailed extends DomainError {
	constructor(message: string, data?: DomainData, code = 502) {
		super("UpstreamFailed", ErrorType.UpstreamFailed, code, message, data);
	}
}

/**
 * A target expression that cannot be evaluated. As a document's `field` it is that document's fault (422 on the
 * field, Eve's validation message); as a bare expression, a 400 `target: <reason>`.
 */
export class TargetUnevaluable extends DomainError {
	constructor(reason: string, field?: string) {
		if (field)
			super(
				"TargetUnevaluable",
				ErrorType.TargetUnevaluable,
				422,
				"Insertion failure: 1 document(s) contain(s) error(s)",
				{ reason, issues: { [field]: reason } },
			);
		else super("TargetUnevaluable", ErrorType.TargetUnevaluable, 400, `target: ${reason}`, { reason });
	}
}
