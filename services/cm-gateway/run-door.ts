/**
 * The one door to salt-api for runs (docs/security.md, "Every run is authorized where it starts"): the order in
 * which a run is decided, whatever started it (the API, a task, the REPL, a live status poll). Its targets
 * already resolved, a run
 *
 *  1. is authorized — the complete call on those hosts, against the token in force now; a refusal (403) is
 *     written to the audit log as `denied` (best effort: a refusal stays a refusal) and thrown as it is;
 *  1b. is governed (docs/security.md): a governed function on hosts outside their maintenance windows is refused
 *     (409, audited as `denied`, unless an admin breaks the glass with a reason); a run an approval policy matches
 *     is held (its record `held`, 202) until approvers decide, and nothing runs now;
 *  2. has its audit record begun (`audit.begin`: `started`, 202); when it cannot be stored, nothing runs: a 503
 *     saying so;
 *  3. only then is executed (the job handed to salt-api);
 *  4. completes the same record (`audit.complete`): `ok` (200, with the jid when there is one), or `failed` with
 *     the error's HTTP code (500 for anything else) and message. The job was handed over by then: a failure to
 *     complete the record is logged, never thrown.
 *
 * The effects — the token check, the governance, the audit calls, the execution, new ids, the log — are the caller's
 * (services/cm-gateway/runs.ts): here is only their order and which facts the audit service is told (it builds the
 * record: services/audit/record.ts).
 */
import { ErrorType, type ErrorTypeName, HeldForApproval, isError, NothingRan } from "../../lib/errors";
import type { RunBody } from "../../lib/http/bodies";
import type { AuditBegin, AuditResult } from "../../lib/contracts/audit";

/** The body of a run: what salt-api is asked to run (lib/http/bodies.ts). */
export type { RunBody };

/**
 * Who asks for a run, and the request part of its audit record. The gateway puts it in ctx.meta (`user`: the token
 * in force; `audit`: the request's audit record, which is the run's when the run is what the request asked for;
 * `request`: where from and what); a task's run names its owner.
 */
export interface Requester {
	/** The id of the token the run is authorized against ("" when none: nothing runs). */
	token: string;
	name?: string | null;
	role?: string | null;
	auditId?: string;
	source: string;
	/** The client's User-Agent, when it sent one. */
	agent?: string;
	method: string;
	path: string;
	/** An admin's reason to run outside the maintenance windows (break-glass): audited and alerted. */
	breakGlass?: string;
	/** The approval this run carries out (an approved request runs once, as its requester). */
	approval?: string;
	/** What a task or rollout runs, for approvals granted once per definition. */
	definition?: { kind: "task" | "rollout"; id: string; digest: string; hosts?: number };
}

/** A run at the door: who asks, on which hosts (resolved), what. */
export interface RunRequest {
	by: Requester;
	targets: string[];
	body: RunBody;
	/** The target as the requester gave it (a host, a group's term, a compound expression), for an approval request. */
	target?: string;
}

/** The token that authorizes a run, as tokens.authorizeRun answers it. */
export interface TokenHolder {
	id: string;
	name: string;
	role: string;
	/** The signed-in person the token was made for, when one was (docs/security.md, single sign-on). */
	subject?: string;
	/** Who acts: the person or service account the token belongs to, whichever token it is (docs/security.md, "Principals"). */
	principal: string;
}

/** What the audit service is told of a run before it runs: who, from where, on which hosts, the complete call. */
export type AuditFacts = Omit<AuditBegin, "id" | "result">;

/** The door's effects. */
export interface DoorEffects<R> {
	/** Authorizes the complete call on the targets against the token now (tokens.authorizeRun); throws a 403 when refused. */
	authorize(): Promise<TokenHolder>;
	/** Begins the audit record `id` (audit.begin; whole at once with a result); resolves to what was stored, falsy when nothing was. */
	beginAudit(id: string, facts: AuditFacts, result?: AuditResult): Promise<unknown>;
	/** Completes the audit record `id` with the run's outcome (audit.complete). */
	completeAudit(id: string, result: AuditResult): Promise<unknown>;
	/**
	 * The governance of the authorized run (maintenance windows, approval policies): throws a 409 when a window
	 * refuses it, answers the approval request that holds it, or null when it may run now. Without it, no run
	 * is governed (the door's own tests).
	 */
	govern?(holder: TokenHolder): Promise<Hold | null>;
	/** What the caller answers for a run held for approval. */
	held?(hold: Hold): R;
	/** Hands the job to salt-api, on behalf of the token that authorized it. */
	execute(holder: TokenHolder): Promise<R>;
	/** The jid of what `execute` started, for the record; without it the record gets no jid. */
	jidOf?(result: R): string | null;
	/** A new audit record id. */
	newId(): string;
	/** Logs an error the door does not throw: what failed, and why. */
	log(what: string, why: string): void;
}

/** A run held for approval: the request that holds it. */
export interface Hold {
	approval: { _id: string } & Record<string, unknown>;
}

/** The 503 of a run whose audit record could not be stored. */
export const AUDIT_UNAVAILABLE =
	"the audit log could not be written, so nothing was run (every run is recorded before it starts); try again once the audit service answers";

/** The facts of a run for its audit record: the token (the one that authorized it, else the one asked for), the request, the hosts and the complete call. */
export function auditFacts(req: RunRequest, holder: TokenHolder | null, approval = req.by.approval): AuditFacts {
	const { by, targets, body } = req;
	return {
		who: {
			token: holder?.id ?? (by.token || null),
			name: holder?.name ?? by.name ?? null,
			role: holder?.role ?? by.role ?? null,
		},
		request: { source: by.source, ...(by.agent ? { agent: by.agent } : {}), method: by.method, path: by.path },
		run: {
			targets,
			fun: body.fun,
			call: {
				cm_client: body.cm_client,
				...(body.arg ? { arg: body.arg } : {}),
				...(body.kwarg ? { kwarg: body.kwarg } : {}),
			},
			...(by.breakGlass ? { break_glass: by.breakGlass } : {}),
			...(approval ? { approval } : {}),
		},
	};
}

/** A failed run's result: the error's HTTP code (a 4xx or 5xx, else 500) and its message. */
export function failedResult(err: unknown): AuditResult {
	const e = (err ?? {}) as { code?: unknown; message?: unknown };
	const status = typeof e.code === "number" && e.code >= 400 && e.code < 600 ? e.code : 500;
	return { status, outcome: "failed", message: String(e.message ?? "") };
}

/** Step 1: the token holder, or the refusal, audited as denied (best effort) and thrown as it is. */
export async function authorizeRun<R>(req: RunRequest, fx: DoorEffects<R>): Promise<TokenHolder> {
	try {
		return await fx.authorize();
	} catch (err) {
		await auditRefusal(req, null, err, [ErrorType.RunRefused], fx);
		throw err;
	}
}

/**
 * A refusal of one of `types` (RunRefused by the token, by a break-glass only an admin may give or by an approval that
 * does not cover the run; OutsideWindow by a maintenance window) written as `denied` with its status, best effort.
 */
async function auditRefusal<R>(
	req: RunRequest,
	holder: TokenHolder | null,
	err: unknown,
	types: ErrorTypeName[],
	fx: DoorEffects<R>,
): Promise<void> {
	if (!types.some(type => isError(err, type))) return;
	const e = err as { code: number; message?: unknown };
	const result: AuditResult = { status: e.code, outcome: "denied", message: String(e.message) };
	await fx
		.beginAudit(req.by.auditId ?? fx.newId(), auditFacts(req, holder), result)
		.catch((auditErr: unknown) => fx.log("Could not write the audit record of a refused run:", errorMessage(auditErr)));
}

/**
 * Step 1b: the run's governance. A refusal (409 by a window; 403 by a break-glass of a non-admin or a grant that does
 * not cover the run) is audited as denied and thrown; a hold is written to the audit log (`held`, 202, naming the
 * approval) — when that record cannot be stored the request stays, and nothing runs either way.
 */
export async function governRun<R>(req: RunRequest, holder: TokenHolder, fx: DoorEffects<R>): Promise<Hold | null> {
	if (!fx.govern) return null;
	let hold: Hold | null;
	try {
		hold = await fx.govern(holder);
	} catch (err) {
		await auditRefusal(req, holder, err, [ErrorType.RunRefused, ErrorType.OutsideWindow], fx);
		throw err;
	}
	if (!hold) return null;
	const result: AuditResult = { status: 202, outcome: "held", message: `held for approval ${hold.approval._id}` };
	await fx
		.beginAudit(req.by.auditId ?? fx.newId(), auditFacts(req, holder, hold.approval._id), result)
		.catch((auditErr: unknown) =>
			fx.log("Could not write the audit record of a run held for approval:", errorMessage(auditErr)),
		);
	return hold;
}

/** Step 2: the run's record, before it runs; when it is not stored, a 503 and nothing runs. */
export async function beginAudit<R>(
	id: string,
	req: RunRequest,
	holder: TokenHolder,
	fx: DoorEffects<R>,
): Promise<void> {
	let stored: unknown = null;
	try {
		stored = await fx.beginAudit(id, auditFacts(req, holder));
	} catch (err) {
		fx.log(`Could not write the audit record of a run of ${req.body.fun} (nothing was run):`, errorMessage(err));
	}
	if (!stored) throw new NothingRan(AUDIT_UNAVAILABLE);
}

/** Step 4: the outcome on the run's record; a failure is logged, not thrown (the job was handed over). */
export async function endAudit<R>(id: string, result: AuditResult, fx: DoorEffects<R>): Promise<void> {
	try {
		await fx.completeAudit(id, result);
	} catch (err) {
		fx.log(`Could not complete audit record ${id}:`, errorMessage(err));
	}
}

/** The whole door: authorized, audited, executed, completed — in that order; answers what `execute` answered. */
export async function startRun<R>(req: RunRequest, fx: DoorEffects<R>): Promise<R> {
	const holder = await authorizeRun(req, fx);
	const hold = await governRun(req, holder, fx);
	if (hold) {
		if (!fx.held)
			throw new HeldForApproval("a run was held for approval where none can be answered", hold.approval._id);
		return fx.held(hold);
	}
	const auditId = req.by.auditId ?? fx.newId();
	await beginAudit(auditId, req, holder, fx);
	try {
		const result = await fx.execute(holder);
		await endAudit(auditId, { status: 200, outcome: "ok", ...(fx.jidOf ? { jid: fx.jidOf(result) } : {}) }, fx);
		return result;
	} catch (err) {
		await endAudit(auditId, failedResult(err), fx);
		throw err;
	}
}

function errorMessage(err: unknown): string {
	return String((err as { message?: unknown } | null)?.message ?? err);
}
