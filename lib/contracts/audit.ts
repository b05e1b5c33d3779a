/**
 * The audit service's contract (services/audit/audit.service.ts builds every record): the facts its callers — the
 * gateway, the run door, sign-in — report with `audit.begin` and `audit.complete`, and the meta an audited request
 * carries. Callers say who, from where, what and how it went; the service alone shapes, bounds and masks the record.
 */

export const AUDIT_OUTCOMES = ["ok", "denied", "failed", "started", "held"] as const;
/**
 * "started": a run's record written before its job was handed to salt-api, not completed (yet); "held": a run an
 * approval policy matched, waiting for its approvers (docs/security.md).
 */
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/** Who acted: the token in force (its id, never its secret), its name and role; null when no valid token was given. */
export interface AuditWho {
	token: string | null;
	name: string | null;
	role: string | null;
}

/** Where from and what: the request, or a run no HTTP request started (method TASK, ROLLOUT, APPROVAL, CALL). */
export interface AuditRequest {
	source: string;
	/** The client's User-Agent, when it sent one: recorded, never trusted. */
	agent?: string;
	method: string;
	path: string;
}

/** The complete call of a run, as salt-api is asked to run it. */
export interface AuditCall {
	cm_client: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
}

/** A run (or what a task, rollout or check write leaves to run): its hosts, its function, its call. */
export interface AuditRun {
	targets?: string[];
	fun?: string | null;
	/** The complete call: the record's arguments (a write's record has the request's body instead). */
	call?: AuditCall;
	/** An admin's reason for a run outside the maintenance windows (break-glass). */
	break_glass?: string;
	/** The approval request that holds the run, or that it carries out. */
	approval?: string;
}

/** How it went. Without `outcome`, the status says it: below 400 ok, 401/403/429 denied, else failed. */
export interface AuditResult {
	status: number;
	outcome?: AuditOutcome;
	message?: string;
	jid?: string | null;
}

/**
 * `audit.begin`: a new record, written once (a second begin under the same id is refused, never merged). Without
 * `result` it is a run's record before it runs (`started`, 202), completed later; with one, it is whole at once.
 */
export interface AuditBegin {
	/** The request's record id (the gateway makes it as the request arrives, so records sort by arrival); else a new one. */
	id?: string;
	who: AuditWho;
	request: AuditRequest;
	run?: AuditRun;
	/** The request's body: the record's arguments when no run's call is given. */
	body?: unknown;
	result?: AuditResult;
}

/** `audit.complete`: the outcome set on a begun record; a `denied` or `held` record keeps that outcome. */
export interface AuditComplete {
	id: string;
	result: AuditResult;
}

/** What `audit.begin` and `audit.complete` answer. */
export interface AuditAnswer {
	_id: string;
}

/**
 * The meta of an audited API request. The gateway sets `audit`; a run door that writes the request's own record (a
 * run is the request's record only when the run's action is the one the request was routed to: a fix's runs are
 * not) sets `auditBegun` to its id, so that the gateway completes that record instead of beginning another.
 * `auditRun` is what a task, rollout or check write leaves to run, for the write's record.
 */
export interface AuditMeta {
	audit?: { id: string; action: string };
	auditBegun?: string;
	auditRun?: { fun: string; targets: string[] };
}
