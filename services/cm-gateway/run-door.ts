/**
 * The one door to salt-api for runs (docs/security.md, "Every run is authorized where it starts"): the order in
 * which a run is decided, whatever started it (the API, a task, the REPL, a live status poll). Its targets
 * already resolved, a run
 *
 *  1. is authorized — the complete call on those hosts, against the token in force now; a refusal (403) is
 *     written to the audit log as `denied` (best effort: a refusal stays a refusal) and thrown as it is;
 *  2. has its audit record written (`started`, 202); when it cannot be stored, nothing runs: a 503 saying so;
 *  3. only then is executed (the job handed to salt-api);
 *  4. completes the same record: `ok` (200, with the jid when there is one), or `failed` with the error's
 *     HTTP code (500 for anything else) and message. The job was handed over by then: a failure to complete
 *     the record is logged, never thrown.
 *
 * The effects — the token check, the audit writes, the execution, new ids, the log — are the caller's
 * (services/cm-gateway/cm-gateway.service.ts): here is only their order and what is written.
 */
import { EveError } from "../../lib/eve/errors";

/** The body of a run: what salt-api is asked to run. */
export interface RunBody {
	cm_client: "local" | "local_async";
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
}

/**
 * Who asks for a run, and the request part of its audit record. The gateway and the REPL put it in
 * ctx.meta (`user`: the token in force; `auditId`: the id of the request's audit record; `request`: where
 * from and what); a task's run names its owner.
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
}

/** A run at the door: who asks, on which hosts (resolved), what. */
export interface RunRequest {
	by: Requester;
	targets: string[];
	body: RunBody;
}

/** The token that authorizes a run, as tokens.authorizeRun answers it. */
export interface TokenHolder {
	id: string;
	name: string;
	role: string;
}

/** Who, from where, what: the part of a run's audit record written before it runs. */
export interface AuditEntry {
	token: string | null;
	name: string | null;
	role: string | null;
	source: string;
	agent?: string;
	method: string;
	path: string;
	targets: string[];
	fun: string;
	args: { cm_client: string; arg?: unknown[]; kwarg?: Record<string, unknown> };
}

/** What became of the run (or of its request). */
export interface AuditOutcome {
	status: number;
	outcome: "started" | "ok" | "denied" | "failed";
	jid?: string | null;
	message?: string;
}

/** The door's effects. */
export interface DoorEffects<R> {
	/** Authorizes the complete call on the targets against the token now (tokens.authorizeRun); throws a 403 when refused. */
	authorize(): Promise<TokenHolder>;
	/** Writes (`entry` with `method`) or completes (an outcome only) the audit record `id`; resolves to what was stored, falsy when nothing was. */
	writeAudit(id: string, entry: (AuditEntry & AuditOutcome) | AuditOutcome): Promise<unknown>;
	/** Hands the job to salt-api, on behalf of the token that authorized it. */
	execute(holder: TokenHolder): Promise<R>;
	/** The jid of what `execute` started, for the record; without it the record gets no jid. */
	jidOf?(result: R): string | null;
	/** A new audit record id. */
	newId(): string;
	/** Logs an error the door does not throw: what failed, and why. */
	log(what: string, why: string): void;
}

/** The 503 of a run whose audit record could not be stored. */
export const AUDIT_UNAVAILABLE = "the audit log could not be written, so nothing was run (every run is recorded before it starts); try again once the audit service answers";

/** At most this much of an error's message goes into a record. */
const MESSAGE_MAX = 2000;

/** The run's audit record before it runs: the token (the one that authorized it, else the one asked for), the request, the complete call. */
export function auditEntry(req: RunRequest, holder: TokenHolder | null): AuditEntry {
	const { by, targets, body } = req;
	return {
		token: holder?.id ?? (by.token || null),
		name: holder?.name ?? by.name ?? null,
		role: holder?.role ?? by.role ?? null,
		source: by.source,
		...(by.agent ? { agent: by.agent } : {}),
		method: by.method,
		path: by.path,
		targets,
		fun: body.fun,
		args: { cm_client: body.cm_client, ...(body.arg ? { arg: body.arg } : {}), ...(body.kwarg ? { kwarg: body.kwarg } : {}) },
	};
}

/** A failed run's outcome: the error's HTTP code (a 4xx or 5xx, else 500) and its message. */
export function failedOutcome(err: unknown): AuditOutcome {
	const e = (err ?? {}) as { code?: unknown; message?: unknown };
	const status = typeof e.code === "number" && e.code >= 400 && e.code < 600 ? e.code : 500;
	return { status, outcome: "failed", message: String(e.message ?? "").slice(0, MESSAGE_MAX) };
}

/** Step 1: the token holder, or the refusal, audited as denied (best effort) and thrown as it is. */
export async function authorizeRun<R>(req: RunRequest, fx: DoorEffects<R>): Promise<TokenHolder> {
	try {
		return await fx.authorize();
	} catch (err) {
		const e = err as { code?: unknown; message?: unknown };
		if (e.code === 403) {
			const entry = { ...auditEntry(req, null), status: 403, outcome: "denied" as const, message: String(e.message).slice(0, MESSAGE_MAX) };
			await fx.writeAudit(req.by.auditId ?? fx.newId(), entry).catch((auditErr: unknown) => fx.log("Could not write the audit record of a refused run:", errorMessage(auditErr)));
		}
		throw err;
	}
}

/** Step 2: the run's record, before it runs; when it is not stored, a 503 and nothing runs. */
export async function beginAudit<R>(id: string, req: RunRequest, holder: TokenHolder, fx: DoorEffects<R>): Promise<void> {
	let stored: unknown = null;
	try {
		stored = await fx.writeAudit(id, { ...auditEntry(req, holder), status: 202, outcome: "started" });
	} catch (err) {
		fx.log(`Could not write the audit record of a run of ${req.body.fun} (nothing was run):`, errorMessage(err));
	}
	if (!stored) throw new EveError(503, AUDIT_UNAVAILABLE);
}

/** Step 4: the outcome on the run's record; a failure is logged, not thrown (the job was handed over). */
export async function endAudit<R>(id: string, outcome: AuditOutcome, fx: DoorEffects<R>): Promise<void> {
	try {
		await fx.writeAudit(id, outcome);
	} catch (err) {
		fx.log(`Could not complete audit record ${id}:`, errorMessage(err));
	}
}

/** The whole door: authorized, audited, executed, completed — in that order; answers what `execute` answered. */
export async function startRun<R>(req: RunRequest, fx: DoorEffects<R>): Promise<R> {
	const holder = await authorizeRun(req, fx);
	const auditId = req.by.auditId ?? fx.newId();
	await beginAudit(auditId, req, holder, fx);
	try {
		const result = await fx.execute(holder);
		await endAudit(auditId, { status: 200, outcome: "ok", ...(fx.jidOf ? { jid: fx.jidOf(result) } : {}) }, fx);
		return result;
	} catch (err) {
		await endAudit(auditId, failedOutcome(err), fx);
		throw err;
	}
}

function errorMessage(err: unknown): string {
	return String((err as { message?: unknown } | null)?.message ?? err);
}
