/**
 * `salt.netapi.NetapiClient.run`: one lowstate chunk through the client it names, with the master's
 * checks in Salt's order (master running, valid client, enabled client, credentials, ACL).
 */
import { type Auth, authorized, type Perm } from "./auth";
import { type Master, SaltAuthError, SaltInvocationError, SaltMasterDown, conditionInput } from "./master";
import { runRunner, runWheel } from "./runners";
import { pyRepr } from "./util";

/** `salt.netapi.CLIENTS`: every client salt-api knows, in Salt's (alphabetical) order. */
export const CLIENTS = ["local", "local_async", "local_batch", "local_subset", "runner", "runner_async", "ssh", "wheel", "wheel_async"];

interface Identity {
	name: string;
	perms: Perm[];
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
		if (!this.master.running) throw new SaltMasterDown("Salt Master is not available.");
		const client = chunk.client;
		if (typeof client !== "string" || !CLIENTS.includes(client)) throw new SaltInvocationError(`Invalid client specified: ${client === undefined || client === null ? "'None'" : pyRepr(client)}`);
		if (!this.master.config.netapiEnableClients.includes(client)) {
			throw new SaltInvocationError(`Client disabled: '${client}'. Add to 'netapi_enable_clients' master config option to enable.`);
		}
		if (!("token" in chunk || "eauth" in chunk)) throw new SaltAuthError("No authentication credentials given");
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
				return [this.runner(chunk, who)];
			case "runner_async":
				return [this.runnerAsync(chunk, who)];
			case "wheel":
				return [this.wheel(chunk, who)];
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
			return { name: tok.name, perms: tok.perms };
		}
		const user = this.auth.check(chunk);
		if (!user) throw new SaltAuthError('Authentication failure of type "eauth" occurred.');
		return { name: user.username, perms: user.perms ?? [".*", "@runner", "@wheel", "@jobs"] };
	}

	private publishLoad(chunk: Record<string, unknown>, who: Identity) {
		if (chunk.tgt === undefined || chunk.fun === undefined) {
			throw new ClientCallError(`cmd() missing 1 required positional argument: '${chunk.tgt === undefined ? "tgt" : "fun"}'`);
		}
		const tgtType = typeof chunk.tgt_type === "string" && chunk.tgt_type ? chunk.tgt_type : "glob";
		const fun = String(chunk.fun);
		const { minions } = this.master.targeting.check(chunk.tgt, tgtType);
		if (!authorized(who.perms, "local", fun, minions)) throw new SaltAuthError("Authorization error occurred.");
		const metadata = chunk.metadata && typeof chunk.metadata === "object" && !Array.isArray(chunk.metadata) ? (chunk.metadata as Record<string, unknown>) : undefined;
		return { tgt: chunk.tgt, tgtType, fun, arg: conditionInput(chunk.arg, chunk.kwarg), user: who.name, ...(metadata ? { metadata } : {}) };
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

	private masterFun(chunk: Record<string, unknown>, kind: "runner" | "wheel", who: Identity): string {
		if (chunk.fun === undefined || chunk.fun === null || chunk.fun === "") throw new SaltInvocationError(`${kind} takes at least 1 argument (0 given)`);
		const fun = String(chunk.fun);
		if (!authorized(who.perms, kind, fun)) throw new SaltAuthError("Authorization error occurred.");
		return fun;
	}

	private runner(chunk: Record<string, unknown>, who: Identity): unknown {
		const fun = this.masterFun(chunk, "runner", who);
		const data = runRunner(this.master, fun, chunk, who.name);
		return chunk.full_return === true ? data : data.return;
	}

	private runnerAsync(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const fun = this.masterFun(chunk, "runner", who);
		const jid = this.master.newJid();
		setImmediate(() => {
			try {
				runRunner(this.master, fun, chunk, who.name, jid);
			} catch {
				// An unknown runner fails in the background, as with the real runner_async.
			}
		});
		return { tag: `salt/run/${jid}`, jid };
	}

	private wheel(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const fun = this.masterFun(chunk, "wheel", who);
		return runWheel(this.master, fun, chunk, who.name);
	}

	private wheelAsync(chunk: Record<string, unknown>, who: Identity): Record<string, unknown> {
		const fun = this.masterFun(chunk, "wheel", who);
		const jid = this.master.newJid();
		setImmediate(() => runWheel(this.master, fun, chunk, who.name, jid));
		return { tag: `salt/wheel/${jid}`, jid };
	}
}
