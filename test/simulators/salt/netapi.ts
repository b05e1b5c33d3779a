/**
 * `salt.netapi.NetapiClient.run`: one lowstate chunk through the client it names, with the master's
 * checks in Salt's order (master running, valid client, enabled client, credentials, ACL).
 */
import { type Auth, authCheck, type Perm, specCheck } from "./auth";
import {
	type Master,
	MasterUnanswering,
	SaltAuthError,
	SaltInvocationError,
	SaltMasterDown,
	conditionInput,
} from "./master";
import { prepareCall, runRunner, runWheel } from "./runners";
import { isPlainObject, pyRepr } from "./util";

/** `salt.netapi.CLIENTS`: every client salt-api knows, in Salt's (alphabetical) order. */
export const CLIENTS = [
	"local",
	"local_async",
	"local_batch",
	"local_subset",
	"runner",
	"runner_async",
	"ssh",
	"wheel",
	"wheel_async",
];

interface Identity {
	name: string;
	perms: Perm[];
	/** How the chunk authenticated: the master's error messages name it. */
	authType: "token" | "eauth";
}

/** A chunk whose required arguments are missing fails inside the client call: HTTP 500. */
export class ClientCallError extends Error {}

const num = (v: unknown): number | undefined => {
	if (v === undefined || v === null || v === "") return undefined;
	const n = Number(v);
	return Number.isFinite(n) ? n : undefined;
};

export class Netapi {
	constructor(
		private readonly master: Master,
		private readonly auth: Auth,
	) {}

	/** Run one chunk. Returns the values it yields: one, except for `local_batch` (one per minion). */
	async run(chunk: Record<string, unknown>): Promise<unknown[]> {
		const client = chunk.client;
		if (typeof client !== "string" || !CLIENTS.includes(client))
			throw new SaltInvocationError(
				`Invalid client specified: ${client === undefined || client === null ? "'None'" : pyRepr(client)}`,
			);
		if (!this.master.config.netapiEnableClients.includes(client)) {
			throw new SaltInvocationError(
				`Client disabled: '${client}'. Add to 'netapi_enable_clients' master config option to enable.`,
			);
		}
		if (!("token" in chunk || "eauth" in chunk)) throw new SaltAuthError("No authentication credentials given");
		// Everything below goes through the master. While it is down (its socket files still there, as after a
		// crash or during a restart) the client waits for it (more-2026-11-29/master_down_timings.md): `local`'s
		// connect_pub times out after ~5 s, `local_async`'s after ~15 s, and salt-api answers its generic 500;
		// runner and wheel calls are held until the master is back (up to its request timeout). A master back in
		// time is simply answered.
		const cfg = this.master.config;
		const held = client === "runner" || client === "wheel";
		const waitMs = held
			? cfg.masterReqTimeoutMs
			: client === "local_async"
				? 3 * cfg.masterDownAnswerMs
				: cfg.masterDownAnswerMs;
		if (!this.master.running && !(await this.master.whenRunning(waitMs))) {
			if (held) throw new SaltMasterDown("Message timed out");
			throw new MasterUnanswering("Salt request timed out. The master is not responding.");
		}
		const who = this.identify(chunk);
		switch (client) {
			case "local":
				return [await this.local(chunk, who)];
			case "local_async":
				return [this.localAsync(chunk, who)];
			case "local_batch":
				return this.localBatch(chunk, who);
			case "local_subset":
				return [await this.localSubset(chunk, who)];
			case "runner":
				return [await this.runner(chunk, who)];
			case "runner_async":
				return [this.runnerAsync(chunk, who)];
			case "wheel":
				return [await this.wheel(chunk, who)];
			case "wheel_async":
				return [this.wheelAsync(chunk, who)];
			default:
				// ssh: no roster configured, nothing matches.
				return [{}];
		}
	}

	private identify(chunk: Record<string, unknown>): Identity {
		if ("token" in chunk) {
			const tok = this.auth.getToken(chunk.token);
			if (!tok) throw new SaltAuthError('Authentication failure of type "token" occurred.');
			return { name: tok.name, perms: tok.perms, authType: "token" };
		}
		const user = this.auth.check(chunk);
		if (!user) throw new SaltAuthError('Authentication failure of type "eauth" occurred.');
		return { name: user.username, perms: user.perms ?? [".*", "@runner", "@wheel", "@jobs"], authType: "eauth" };
	}

	private publishLoad(chunk: Record<string, unknown>, who: Identity) {
		if (chunk.tgt === undefined || chunk.fun === undefined) {
			throw new ClientCallError(
				`cmd() missing 1 required positional argument: '${chunk.tgt === undefined ? "tgt" : "fun"}'`,
			);
		}
		const tgtType = typeof chunk.tgt_type === "string" && chunk.tgt_type ? chunk.tgt_type : "glob";
		const fun = String(chunk.fun);
		const { minions } = this.master.targeting.check(chunk.tgt, tgtType);
		const arg = conditionInput(chunk.arg, chunk.kwarg);
		// CkMinions.validate_tgt: every targeted minion must be in the ACL entry's (compound) target.
		const inTarget = (valid: string) => {
			let allowed: Set<string>;
			try {
				allowed = new Set(this.master.targeting.check(valid, "compound").minions);
			} catch {
				return false;
			}
			return minions.every(id => allowed.has(id));
		};
		if (!authCheck(who.perms, fun, arg, inTarget)) throw new SaltAuthError("Authorization error occurred.");
		const metadata =
			chunk.metadata && typeof chunk.metadata === "object" && !Array.isArray(chunk.metadata)
				? (chunk.metadata as Record<string, unknown>)
				: undefined;
		return { tgt: chunk.tgt, tgtType, fun, arg, user: who.name, ...(metadata ? { metadata } : {}) };
	}

	private local(chunk: Record<string, unknown>, who: Identity): Promise<Record<string, unknown>> {
		return this.master.localCmd(this.publishLoad(chunk, who), {
			timeout: num(chunk.timeout),
			gatherJobTimeout: num(chunk.gather_job_timeout),
			fullReturn: chunk.full_return === true || chunk.full_return === "true" || chunk.full_return === "True",
		});
	}

	private localAsync(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const pub = this.master.publish(this.publishLoad(chunk, who));
		return pub ? { jid: pub.jid, minions: pub.minions } : {};
	}

	private async localBatch(chunk: Record<string, unknown>, who: Identity): Promise<unknown[]> {
		const all = await this.local(chunk, who);
		return Object.entries(all).map(([id, ret]) => ({ [id]: ret }));
	}

	private async localSubset(chunk: Record<string, unknown>, who: Identity): Promise<Record<string, unknown>> {
		const load = this.publishLoad(chunk, who);
		const n = num(chunk.subset) ?? 3;
		const { minions } = this.master.targeting.check(load.tgt, load.tgtType);
		const chosen = minions.filter(id => this.master.fleet.get(id)!.up).slice(0, Math.max(0, n));
		if (!chosen.length) return {};
		return this.master.localCmd({ ...load, tgt: chosen, tgtType: "list" }, { timeout: num(chunk.timeout) });
	}

	private masterFun(chunk: Record<string, unknown>, kind: "runner" | "wheel"): string {
		if (chunk.fun === undefined || chunk.fun === null || chunk.fun === "")
			throw new SaltInvocationError(`${kind} takes at least 1 argument (0 given)`);
		return String(chunk.fun);
	}

	/**
	 * The master's `runner_check` / `wheel_check` (CkMinions.spec_check): a refusal is the master's
	 * Token/EauthAuthenticationError, which salt-api answers 401.
	 */
	private checkSpec(
		who: Identity,
		kind: "runner" | "wheel",
		fun: string,
		acl: { args: unknown[] | undefined; kwargs: Record<string, unknown> | undefined },
	): void {
		const ok = specCheck(who.perms, fun, acl.args, acl.kwargs, kind);
		if (ok === "syntax") throw new SaltInvocationError("A command invocation error occurred: Check syntax.");
		if (!ok) throw new SaltAuthError(`Authentication failure of type "${who.authType}" occurred for user ${who.name}.`);
	}

	/** RunnerClient: the function is looked up in salt-api first (an unknown one: 500), then the master checks the ACL. */
	private async runner(chunk: Record<string, unknown>, who: Identity): Promise<unknown> {
		const fun = this.masterFun(chunk, "runner");
		const call = prepareCall("runner", fun, chunk);
		this.checkSpec(who, "runner", fun, call.acl);
		const data = await runRunner(this.master, call, who.name);
		return chunk.full_return === true ? data : data.return;
	}

	private runnerAsync(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const fun = this.masterFun(chunk, "runner");
		const call = prepareCall("runner", fun, chunk);
		this.checkSpec(who, "runner", fun, call.acl);
		const jid = this.master.newJid();
		setImmediate(() => void runRunner(this.master, call, who.name, jid).catch(() => undefined));
		return { tag: `salt/run/${jid}`, jid };
	}

	/** WheelClient: the master checks the ACL (against the chunk's `kwarg`), then runs the function. */
	private wheelCall(chunk: Record<string, unknown>, who: Identity): string {
		const fun = this.masterFun(chunk, "wheel");
		const acl = {
			args: isPlainObject(chunk.kwarg) && Array.isArray(chunk.kwarg.arg) ? chunk.kwarg.arg : undefined,
			kwargs: isPlainObject(chunk.kwarg) && isPlainObject(chunk.kwarg.kwarg) ? chunk.kwarg.kwarg : undefined,
		};
		this.checkSpec(who, "wheel", fun, acl);
		return fun;
	}

	private async wheel(chunk: Record<string, unknown>, who: Identity): Promise<Record<string, unknown>> {
		const fun = this.wheelCall(chunk, who);
		return runWheel(this.master, fun, chunk, who.name);
	}

	private wheelAsync(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const fun = this.wheelCall(chunk, who);
		const jid = this.master.newJid();
		setImmediate(() => void runWheel(this.master, fun, chunk, who.name, jid));
		return { tag: `salt/wheel/${jid}`, jid };
	}
}
