/**
 * The cm-gateway's side of the job history (`salt_jobs`, services/salt-jobs.service.ts). A job started here is
 * opened by Returns before any of its returns is written (`HistoryEntry` on its origin) and recounted after each
 * batch of them. A job seen on the master's bus (`salt/job/<jid>/new`) that this process did not start — the
 * `salt` command on the master, another salt-api client — is opened as `external` and followed like one started
 * here: its hosts' returns become `actions` records, its silent hosts time out.
 *
 * Telling the two apart: salt-api's answer naming a job started here can come after the bus's event (and a
 * `local` run answers only once its hosts returned). So a job seen on the bus waits `CM_EXTERNAL_JOB_GRACE_MS`,
 * and longer while a run of the same function on the same hosts is still waiting for salt-api's answer here.
 */
import type { Requester, TokenHolder } from "./run-door";
import { JID, strings, type GatewayContext } from "./context";
import { compileTarget, UnbalancedTargetError } from "../../lib/fleet/compound";
import type { JobPoll } from "./job-poll";
import type { Returns } from "./returns";

/**
 * Where a job came from, as the server knows it: `api` (an interactive request, the REPL's included), `task`,
 * `rollout`, `approval` (an approved request carried out), `external` (seen on the master's bus). `repl` is no
 * longer written (it was the client's User-Agent); records that have it keep it.
 */
export type JobOriginKind = "api" | "task" | "rollout" | "approval" | "repl" | "external";

/** What the job history says of a job besides what Salt ran: the target as given, who, from where. */
export interface HistoryEntry {
	target: string;
	user: string | null;
	origin: JobOriginKind;
	rollout?: string;
	batch?: number;
}

/** Salt's target types as compound engines (docs/targeting.md): an external job's target reads as one expression. */
const ENGINES: Record<string, string> = {
	grain: "G@",
	grain_pcre: "P@",
	pcre: "E@",
	list: "L@",
	ipcidr: "S@",
	nodegroup: "N@",
	pillar: "I@",
	pillar_pcre: "J@",
	pillar_exact: "I@",
	range: "R@",
	data: "",
};
/** How long a job's own jids are remembered (a bus event later than this is not expected). */
const OWN_KEEP_MS = 600_000;
/** Bounds on what is held: remembered jids, jobs seen on the bus waiting for their grace. */
const OWN_MAX = 100_000;
const WAITING_MAX = 10_000;

/**
 * Where a run came from, from what started it on the server's side (the run door's requester, which the task,
 * rollout and approval paths build themselves). The client's User-Agent (`by.agent`) is recorded, never trusted:
 * any client can send the REPL's.
 */
export function originOf(by: Requester): Exclude<JobOriginKind, "repl" | "external"> {
	switch (by.method) {
		case "TASK":
			return "task";
		case "ROLLOUT":
			return "rollout";
		case "APPROVAL":
			return "approval";
		default:
			return "api";
	}
}

/** A run's history entry: the target as given, the name of the token that authorized it. */
export function historyEntry(
	by: Requester,
	holder: TokenHolder,
	target: string,
	rollout?: { id: string; batch?: number },
): HistoryEntry {
	return {
		target,
		user: holder.name ?? by.name ?? null,
		origin: originOf(by),
		...(rollout ? { rollout: rollout.id, ...(rollout.batch !== undefined ? { batch: rollout.batch } : {}) } : {}),
	};
}

/** Why minions cannot evaluate a compound target (unbalanced parentheses), or null. */
function unbalanced(tgt: string): string | null {
	try {
		compileTarget(tgt, { group: () => new Set<string>() });
	} catch (err) {
		if (err instanceof UnbalancedTargetError) return err.message;
	}
	return null;
}

/** An external job's target as a compound expression: `*`, `G@os:Debian`, `L@web-01,db-01`, … */
export function targetExpression(tgt: unknown, tgtType: unknown): string {
	const type = typeof tgtType === "string" ? tgtType : "glob";
	const text = Array.isArray(tgt) ? strings(tgt).join(",") : typeof tgt === "string" ? tgt : JSON.stringify(tgt ?? "");
	if (type === "glob" || type === "compound") return text.slice(0, 20_000);
	return `${ENGINES[type] ?? `${type}:`}${text}`.slice(0, 20_000);
}

/** The key of a run waiting for salt-api's answer: its function and its hosts. */
/** Jobs of one run's shape remembered while it waits (identical runs at once are few). */
const ASKED_SEEN_MAX = 64;
const runKey = (fun: string, hosts: string[]) => `${fun}\0${[...hosts].sort().join(",")}`;

export class JobHistory {
	/** jids started here, with when. */
	private readonly own = new Map<string, number>();
	/** Runs sent to salt-api whose answer has not come yet, by function and hosts (how many). */
	/** Runs waiting for salt-api, by function and hosts: how many, and the jobs of that shape the bus showed meanwhile. */
	private readonly unanswered = new Map<string, { count: number; seen: string[] }>();
	/** Jobs seen on the bus, waiting for their grace. */
	private readonly waiting = new Map<string, NodeJS.Timeout>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly returns: Returns,
		private readonly poll: JobPoll,
	) {}

	/** A job this process started (monitoring polls too): never taken for an external one. */
	started(jid: string): void {
		const now = Date.now();
		if (this.own.size >= OWN_MAX)
			for (const [j, at] of this.own) if (now - at > OWN_KEEP_MS || this.own.size >= OWN_MAX) this.own.delete(j);
		this.own.set(jid, now);
		const timer = this.waiting.get(jid);
		if (timer) clearTimeout(timer);
		this.waiting.delete(jid);
	}

	/** While `send` waits for salt-api, a bus event of the same function on the same hosts is not taken for an external job. */
	async asking<T>(fun: string, hosts: string[], send: () => Promise<T>): Promise<T> {
		const key = runKey(fun, hosts);
		const entry = this.unanswered.get(key) ?? { count: 0, seen: [] };
		entry.count += 1;
		this.unanswered.set(key, entry);
		try {
			return await send();
		} finally {
			entry.count -= 1;
			if (entry.count <= 0) this.unanswered.delete(key);
		}
	}

	/**
	 * Inside `asking`'s send, once salt-api answered without naming the job (a `local` run none of whose hosts
	 * returned: salt answers `{host: false}` and no jid): the job of that shape the bus showed meanwhile, now ours.
	 */
	claimAsked(fun: string, hosts: string[]): string | null {
		const jid = this.unanswered.get(runKey(fun, hosts))?.seen.find(j => !this.own.has(j));
		if (!jid) return null;
		this.started(jid);
		return jid;
	}

	/** `salt/job/<jid>/new`: a job published by the master; recorded as external once its grace passed, unless it is ours. */
	seen(data: Record<string, unknown>): void {
		const jid = typeof data.jid === "string" ? data.jid : "";
		if (!JID.test(jid) || this.own.has(jid) || this.waiting.has(jid) || this.gw.stopping()) return;
		const fun = typeof data.fun === "string" ? data.fun : "";
		if (!fun || this.gw.config.cmJobsHidden.includes(fun)) return;
		const asked = this.unanswered.get(runKey(fun, Array.isArray(data.tgt) ? strings(data.tgt) : strings(data.minions)));
		if (asked && asked.seen.length < ASKED_SEEN_MAX) asked.seen.push(jid);
		if (this.waiting.size >= WAITING_MAX) {
			this.gw.logger.warn(
				`Job history: ${WAITING_MAX} jobs seen on the bus are waiting already; job ${jid} (${fun}) is not recorded`,
			);
			return;
		}
		const deadline = Date.now() + this.gw.config.cmApiTimeoutMs + this.gw.config.cmExternalJobGraceMs;
		const check = () => {
			this.waiting.delete(jid);
			if (this.own.has(jid) || this.gw.stopping()) return;
			// A run of this function on these hosts still waits for salt-api here: the job may be it.
			if (
				this.unanswered.has(runKey(fun, Array.isArray(data.tgt) ? strings(data.tgt) : strings(data.minions))) &&
				Date.now() < deadline
			)
				return this.wait(jid, check);
			void this.external(jid, fun, data);
		};
		this.wait(jid, check);
	}

	private wait(jid: string, check: () => void): void {
		const timer = setTimeout(check, this.gw.config.cmExternalJobGraceMs);
		timer.unref?.();
		this.waiting.set(jid, timer);
	}

	/** An external job: opened in the history, its hosts recorded as running, its returns followed. */
	private async external(jid: string, fun: string, data: Record<string, unknown>): Promise<void> {
		const unreadable = data.tgt_type === "compound" && typeof data.tgt === "string" ? unbalanced(data.tgt) : null;
		// The master published it to these minions, and none of them can read the target: nothing will answer.
		if (unreadable)
			this.gw.logger.warn(
				`Job ${jid} (${fun}) was published with a compound target its minions cannot evaluate (${unreadable}): recorded as finished with no host`,
			);
		const minions = unreadable ? [] : strings(data.minions);
		const args = Array.isArray(data.arg) ? data.arg : [];
		const user = typeof data.user === "string" ? `salt:${data.user}`.slice(0, 300) : null;
		const history: HistoryEntry = { target: targetExpression(data.tgt, data.tgt_type), user, origin: "external" };
		const started =
			typeof data._stamp === "string" && !Number.isNaN(Date.parse(`${data._stamp}Z`))
				? new Date(`${data._stamp}Z`)
				: new Date();
		this.started(jid);
		try {
			await this.returns.writeRunning(jid, fun, args, minions, { history, started });
			this.returns.track(jid, fun, args, minions, this.gw.config.cmJobTimeoutMs, {});
			this.poll.schedule();
		} catch (err) {
			this.gw.logger.warn(`Could not record external job ${jid} (${fun}):`, (err as Error).message);
		}
	}

	stop(): void {
		for (const t of this.waiting.values()) clearTimeout(t);
		this.waiting.clear();
	}
}
