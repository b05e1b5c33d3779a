/**
 * The one audit record builder: the facts a caller reports (lib/contracts/audit.ts) become the stored record — its
 * fields bounded, the arguments masked by the one rule (lib/security/masking.ts) and cut when large, the outcome
 * derived from the status when the caller gave none. Pure; services/audit/audit.service.ts stores what it builds.
 */
import { maskSecrets } from "../../lib/security/masking";
import type { AuditBegin, AuditOutcome, AuditResult } from "../../lib/contracts/audit";

/** At most this much of a message, a path, a source or User-Agent, a method goes into a record. */
export const MESSAGE_MAX = 2000;
const PATH_MAX = 4096;
const SOURCE_MAX = 200;
const METHOD_MAX = 10;
/** A body larger than this (as JSON) is recorded as its size and top-level keys only. */
const ARGS_MAX = 8192;

/** The outcome a status says: below 400 ok, a refusal of the caller (401, 403, 429) denied, anything else failed. */
export function outcomeOf(status: number): AuditOutcome {
	if (status < 400) return "ok";
	return status === 401 || status === 403 || status === 429 ? "denied" : "failed";
}

/** The outcome fields of a record: status, outcome (given, or the status's), the message cut, the jid. */
export function resultFields(result: AuditResult): {
	status: number;
	outcome: AuditOutcome;
	message?: string;
	jid: string | null;
} {
	return {
		status: result.status,
		outcome: result.outcome ?? outcomeOf(result.status),
		...(result.message ? { message: result.message.slice(0, MESSAGE_MAX) } : {}),
		jid: result.jid ?? null,
	};
}

/** A request's body whole unless large; then only its size and keys. Never throws. */
export function boundedArgs(args: unknown): unknown {
	let text: string;
	try {
		text = JSON.stringify(args) ?? "";
	} catch {
		text = "";
	}
	if (text && text.length <= ARGS_MAX) return args;
	return {
		truncated: true,
		bytes: text.length,
		keys: args && typeof args === "object" ? Object.keys(args).slice(0, 50) : [],
	};
}

/** A new record from what `audit.begin` was told: without a result, a run's record before it runs (started, 202). */
export function buildRecord(facts: AuditBegin): Record<string, unknown> {
	const { who, request, run, body } = facts;
	const call = run?.call;
	// A run's complete call is kept whole (what ran); a request's body only when it is not large.
	const args = call
		? {
				cm_client: call.cm_client,
				...(call.arg ? { arg: call.arg } : {}),
				...(call.kwarg ? { kwarg: call.kwarg } : {}),
			}
		: body === undefined
			? undefined
			: boundedArgs(body);
	return {
		token: who.token,
		name: who.name,
		role: who.role,
		source: request.source.slice(0, SOURCE_MAX),
		...(request.agent ? { agent: request.agent.slice(0, SOURCE_MAX) } : {}),
		method: request.method.slice(0, METHOD_MAX),
		path: request.path.slice(0, PATH_MAX),
		...(run?.targets ? { targets: run.targets } : {}),
		fun: run?.fun ?? null,
		...(args !== undefined ? { args: maskSecrets(args) } : {}),
		...(run?.break_glass ? { break_glass: run.break_glass.slice(0, MESSAGE_MAX) } : {}),
		...(run?.approval ? { approval: run.approval } : {}),
		...resultFields(facts.result ?? { status: 202, outcome: "started" }),
	};
}
