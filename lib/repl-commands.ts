/**
 * fleet-ctl's commands in the Moleculer REPL (`npm run repl`, docs/operator.md): daily work without
 * reading JSON. Each command is a method of FleetRepl that returns the text it prints, so tests drive
 * the same code (test/repl.spec.ts) that moleculer-repl's custom commands call.
 *
 * Identity: the REPL acts as the token in REPL_OPERATOR_TOKEN (or the one given to `login <token>`):
 * its role and scope decide what `exec`, `task`, `sync` may do (the token travels in the calls' meta and is
 * checked where the run starts, as for the API), and every such command is written to the audit log like an API request, with `source`
 * "repl@<host>". A REPL process is a node of the cluster and could call any action directly: the
 * identity is accountability and a guard against mistakes, not a security boundary (NATS is; see
 * docs/security.md).
 */
import os from "node:os";
import type { CallingOptions, ServiceBroker } from "moleculer";
import { hashToken, roleAllows, redact, type Caller, type Role } from "./auth";
import { loadConfig } from "./config";
import { readJson } from "./eve/render";
import { newObjectId } from "./eve/ids";

type Row = Record<string, unknown>;

function cell(v: unknown): string {
	if (v === undefined || v === null || v === "") return "-";
	if (Array.isArray(v)) return v.map(x => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(",");
	if (typeof v === "object") return JSON.stringify(v);
	return String(v).replace(/\s+/g, " ");
}

/** A plain text table (no colours, so that it reads the same in a log or a pipe). */
export function textTable(columns: string[], rows: Row[], max = 60): string {
	const data = rows.map(r => columns.map(c => cell(r[c]).slice(0, max)));
	const widths = columns.map((c, i) => Math.max(c.length, ...data.map(r => r[i].length)));
	const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd();
	return [line(columns), line(widths.map(w => "-".repeat(w))), ...data.map(line)].join("\n");
}

/** `status=up key=accepted` or a JSON object (quote it: '{"status": "up"}') as a `where`. */
export function parseWhere(words: string[]): Record<string, unknown> | undefined {
	const text = words.join(" ").trim();
	if (!text) return undefined;
	if (text.startsWith("{")) return JSON.parse(text);
	const where: Record<string, unknown> = {};
	for (const w of words) {
		const eq = w.indexOf("=");
		if (eq <= 0) throw new Error(`'${w}' is not field=value`);
		const raw = w.slice(eq + 1);
		where[w.slice(0, eq)] = /^(true|false|null|-?\d+(\.\d+)?)$/.test(raw) ? JSON.parse(raw) : raw;
	}
	return where;
}

/** Salt arguments: plain words are `arg`, `k=v` are `kwarg`; values parse as JSON when they do. */
/**
 * A command line into words as a shell splits it: whitespace separates, '…' and "…" quote (the quotes go),
 * so `exec web cmd.run 'uptime -p'` passes one argument and `hosts '{"status": "up"}'` one filter.
 */
export function splitWords(line: string): string[] {
	const words: string[] = [];
	let word: string | null = null;
	let quote: string | null = null;
	for (const ch of line) {
		if (quote) {
			if (ch === quote) quote = null;
			else word += ch;
		} else if (ch === "'" || ch === '"') {
			quote = ch;
			word ??= "";
		} else if (/\s/.test(ch)) {
			if (word !== null) words.push(word);
			word = null;
		} else word = (word ?? "") + ch;
	}
	if (quote) throw new Error(`unterminated ${quote} quote`);
	if (word !== null) words.push(word);
	return words;
}

export function parseRunArgs(words: string[]): { arg: unknown[]; kwarg: Record<string, unknown> } {
	const value = (v: string) => {
		try {
			return JSON.parse(v);
		} catch {
			return v;
		}
	};
	const arg: unknown[] = [];
	const kwarg: Record<string, unknown> = {};
	for (const w of words) {
		const eq = w.indexOf("=");
		if (eq > 0) kwarg[w.slice(0, eq)] = value(w.slice(eq + 1));
		else arg.push(value(w));
	}
	return { arg, kwarg };
}

const RANGE = /^(\d+)([mhd])$/;
const UNIT_S = { m: 60, h: 3600, d: 86400 } as const;

function query(pairs: Record<string, unknown>): Array<[string, string]> {
	return Object.entries(pairs)
		.filter(([, v]) => v !== undefined)
		.map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]);
}

function unavailable(err: unknown): boolean {
	const name = (err as { name?: string }).name ?? "";
	return name === "ServiceNotFoundError" || name === "ServiceNotAvailableError";
}

export interface ReplOptions {
	/** The operator's API token (default REPL_OPERATOR_TOKEN). */
	token?: string;
	/** How long `exec` waits for returns, in ms. */
	execWaitMs?: number;
	pollMs?: number;
	/** Where `exec` prints each host's return as it arrives (the REPL: the console). */
	print?: (line: string) => void;
}

export class FleetRepl {
	private token: string;
	private caller: Caller | null | undefined;
	private readonly source = `repl@${os.hostname()}`;

	constructor(
		private readonly broker: ServiceBroker,
		private readonly opts: ReplOptions = {},
	) {
		this.token = opts.token ?? loadConfig().replOperatorToken;
	}

	/** Runs one command line; the text to print. Errors are printed, never thrown. */
	async run(line: string): Promise<string> {
		let words: string[];
		try {
			words = splitWords(line);
		} catch (err) {
			return `error: ${(err as Error).message}`;
		}
		return this.runWords(words);
	}

	/** Runs one command given as words (the REPL's own tokenizer has already removed the quotes). */
	async runWords(words: string[]): Promise<string> {
		const [name, ...rest] = words;
		try {
			switch (name) {
				case "hosts":
					return await this.hosts(rest);
				case "host":
					return await this.host(rest[0]);
				case "exec":
					return await this.exec(rest[0], rest[1], rest.slice(2));
				case "tasks":
					return await this.tasks();
				case "task":
					return await this.task(rest[0], rest[1]);
				case "sync":
					return await this.sync();
				case "stats":
					return await this.stats(rest[0], rest[1]);
				case "alerts":
					return await this.alerts(rest[0] === "--all" || rest[0] === "all");
				case "jobs":
					return await this.jobs();
				case "whoami":
					return await this.whoami();
				case "login":
					this.token = rest[0] ?? "";
					this.caller = undefined;
					return await this.whoami();
				default:
					return `unknown command '${name ?? ""}'`;
			}
		} catch (err) {
			const e = err as { code?: number; message: string };
			return `error${e.code ? ` ${e.code}` : ""}: ${e.message}`;
		}
	}

	// ------------------------------------------------------------ identity and audit

	async identity(): Promise<Caller | null> {
		if (this.caller !== undefined) return this.caller;
		if (!this.token) return (this.caller = null);
		const found = await this.broker.call<(Caller & { expires?: Date }) | null, { hash: string }>("tokens.verify", { hash: hashToken(this.token) });
		this.caller = found ? { id: found.id, name: found.name, role: found.role, scope: found.scope } : null;
		return this.caller;
	}

	private async need(role: Role): Promise<Caller> {
		const caller = await this.identity();
		if (!caller) throw Object.assign(new Error("no operator identity: start the REPL with REPL_OPERATOR_TOKEN=<token>, or `login <token>`"), { code: 401 });
		// Verified again on every command: a revoked token stops working at once.
		this.caller = undefined;
		const now = await this.identity();
		if (!now) throw Object.assign(new Error("the token is invalid, expired or revoked"), { code: 401 });
		if (!roleAllows(now.role, role)) throw Object.assign(new Error(`the ${now.role} role may not do this (needs ${role})`), { code: 403 });
		return now;
	}

	private async audit(caller: Caller | null, command: string, status: number, extra: Row = {}, id?: string): Promise<void> {
		const entry: Row = {
			token: caller?.id ?? null,
			name: caller?.name ?? null,
			role: caller?.role ?? null,
			source: this.source,
			method: "REPL",
			path: command.slice(0, 4096),
			status,
			outcome: status < 400 ? "ok" : status === 401 || status === 403 ? "denied" : "failed",
			...extra,
		};
		try {
			await this.broker.call("audit.record", { id, entry: { ...entry, args: redact(entry.args) } });
		} catch (err) {
			this.broker.logger.error("Could not write an audit record:", (err as Error).message);
		}
	}

	/**
	 * A mutating command: role check, the work, and one audit record whatever happened. The work gets the
	 * call options that carry this identity to the services (`meta`: who, and the audit record's id under
	 * which a run writes its record before it starts; this record then completes it).
	 */
	private async audited<T>(role: Role, command: string, work: (caller: Caller, opts: CallingOptions) => Promise<{ result: T; extra?: Row }>, extra: Row = {}): Promise<T> {
		let caller: Caller | null = null;
		const auditId = newObjectId();
		try {
			caller = await this.need(role);
			const opts = { meta: { user: caller, auditId, request: { source: this.source, method: "REPL", path: command.slice(0, 4096) } } };
			const { result, extra: more } = await work(caller, opts);
			await this.audit(caller, command, 200, { ...extra, ...more }, auditId);
			return result;
		} catch (err) {
			const e = err as { code?: number; message: string };
			caller ??= (await this.identity().catch(() => null)) ?? null;
			await this.audit(caller, command, typeof e.code === "number" && e.code >= 400 ? e.code : 500, { ...extra, message: String(e.message).slice(0, 2000) }, auditId);
			throw err;
		}
	}

	async whoami(): Promise<string> {
		const c = await this.identity();
		return c ? `${c.name} (${c.role})${c.scope ? ` scope ${JSON.stringify(c.scope)}` : ""}` : "no identity: read-only commands only (set REPL_OPERATOR_TOKEN or `login <token>`)";
	}

	// ------------------------------------------------------------ reading

	private async list(action: string, pairs: Record<string, unknown>): Promise<{ _items: Row[]; _meta: { total: number } }> {
		return readJson(await this.broker.call(action, { query: query(pairs) }));
	}

	async hosts(words: string[]): Promise<string> {
		const res = await this.list("hosts.list", { where: parseWhere(words), sort: "_id", max_results: 50, projection: { grain: 0 } });
		return `${textTable(["_id", "status", "ip", "version", "key"], res._items)}\n${res._items.length} of ${res._meta.total} host(s)`;
	}

	async host(id: string | undefined): Promise<string> {
		if (!id) return "usage: host <id>";
		const host = readJson<Row>(await this.broker.call("hosts.get", { id, query: [] }));
		const fields = ["_id", "status", "ip", "version", "key", "fingerprint", "heartbeat", "groups", "nodegroups", "last_action", "_updated"];
		const grain = (host.grain ?? {}) as Row;
		const vpn = host.vpn_representation as Row | undefined;
		const actions = await this.list("actions.list", { where: { host: id }, sort: "-_created", max_results: 5 });
		return [
			...fields.filter(f => f in host).map(f => `${f.padEnd(12)} ${cell(host[f])}`),
			`os           ${cell(grain.osfullname ?? grain.os)} ${cell(grain.osrelease)}`,
			`vpn          ${vpn && Object.keys(vpn).length ? `${cell(vpn.name)} in ${cell(vpn.organization_name)}${vpn.disabled ? " (disabled)" : ""}` : "-"}`,
			"",
			"recent actions:",
			actions._items.length ? textTable(["_created", "action", "state", "return"], actions._items) : "none",
		].join("\n");
	}

	async tasks(): Promise<string> {
		const res = await this.list("tasks.list", { sort: "name", max_results: 50 });
		return `${textTable(["_id", "name", "fun", "tgt", "status", "next", "count_of_execution"], res._items)}\n${res._meta.total} task(s)`;
	}

	async alerts(all: boolean): Promise<string> {
		const res = await this.list("alerts.list", { where: all ? undefined : { read: false }, sort: "-_created", max_results: 50 });
		return `${textTable(["_created", "level", "type", "payload"], res._items, 80)}\n${res._meta.total} ${all ? "" : "unread "}alert(s)`;
	}

	async jobs(): Promise<string> {
		const res = await this.list("jobs.list", { sort: "_id", max_results: 50 });
		const rows = res._items.map(j => ({ ...j, progress: `${j.percent ?? "-"}% (${(j.progress as Row)?.done ?? 0}/${(j.progress as Row)?.total ?? 0})` }));
		return textTable(["_id", "status", "progress", "started", "finished", "error"], rows);
	}

	async stats(what: string | undefined, range = "24h"): Promise<string> {
		if (what !== "online") return "usage: stats online [range: 30m, 24h, 7d]";
		const m = RANGE.exec(range);
		if (!m) return `range must look like 30m, 24h or 7d, not '${range}'`;
		const seconds = Number(m[1]) * UNIT_S[m[2] as keyof typeof UNIT_S];
		// HTTP-dates have whole seconds: the end is rounded up so that a snapshot taken this second is in.
		const end = new Date(Math.ceil(Date.now() / 1000) * 1000);
		const begin = new Date(end.getTime() - seconds * 1000);
		// About 40 lines whatever the range (`interval` is required, in seconds): whole minutes, at least one.
		const interval = Math.max(60, Math.ceil(seconds / 40 / 60) * 60);
		let points: Array<{ timestamp: string; hostnames?: { up?: number; down?: number } }>;
		try {
			points = readJson(await this.broker.call("stats.online", { query: [["range[]", begin.toUTCString()], ["range[]", end.toUTCString()], ["interval", String(interval)]] }));
		} catch (err) {
			if (unavailable(err)) return "statistics are not available (the stats service does not answer stats.online)";
			throw err;
		}
		if (!points.length) return `no snapshots in the last ${range}`;
		const most = Math.max(1, ...points.map(p => (p.hostnames?.up ?? 0) + (p.hostnames?.down ?? 0)));
		return points.map(p => `${p.timestamp}  up ${String(p.hostnames?.up ?? 0).padStart(5)}  down ${String(p.hostnames?.down ?? 0).padStart(5)}  ${"#".repeat(Math.round(((p.hostnames?.up ?? 0) / most) * 40))}`).join("\n");
	}

	// ------------------------------------------------------------ doing

	/** Runs `fun` on a host or a group (by id or name) and prints the returns as they arrive. */
	async exec(target: string | undefined, fun: string | undefined, words: string[]): Promise<string> {
		if (!target || !fun) return "usage: exec <host|group> <fun> [arg…] [k=v…]";
		const { arg, kwarg } = parseRunArgs(words);
		const command = `exec ${target} ${fun}`;
		// The target is looked up inside the audited part: a run asked of an unknown host is audited too (as the API's 404).
		const jid = await this.audited("operator", command, async (_caller, opts) => {
			const resolved = await this.resolveTarget(target);
			// Authorized (scope, on the hosts it resolves to) and audited where it runs: the cm-gateway.
			const action = resolved.kind === "host" ? "cm-gateway.runOnHost" : "cm-gateway.runOnGroup";
			let res: { task_id: string | null };
			try {
				res = await this.broker.call(action, { id: resolved.id, body: { cm_client: "local_async", fun, arg, kwarg }, query: [] }, opts);
			} catch (err) {
				if (unavailable(err)) throw Object.assign(new Error("no configuration-management master is configured (CM_API_URL), or the cm-gateway is not running"), { code: 503 });
				throw err;
			}
			return { result: res.task_id, extra: { targets: resolved.hosts, jid: res.task_id } };
		}, { targets: [target], fun, args: { arg, kwarg } });
		if (!jid) return `no minion matched ${target}: nothing ran`;
		return this.watch(jid);
	}

	private async resolveTarget(target: string): Promise<{ kind: "host" | "group"; id: string; hosts: string[] }> {
		const host = await this.list("hosts.list", { where: { _id: target }, max_results: 1, projection: { _id: 1 } });
		if (host._meta.total > 0) return { kind: "host", id: target, hosts: [target] };
		const groups = await this.list("groups.list", { where: /^[0-9a-f]{24}$/.test(target) ? { _id: target } : { name: target }, max_results: 2 });
		if (groups._meta.total === 0) throw Object.assign(new Error(`no host or group '${target}'`), { code: 404 });
		if (groups._meta.total > 1) throw Object.assign(new Error(`several groups are named '${target}': give its id`), { code: 409 });
		const id = String(groups._items[0]._id);
		return { kind: "group", id, hosts: await this.broker.call<string[], { id: string }>("groups.hostnames", { id }) };
	}

	/** Polls the job's actions records until every host answered (or timed out), printing each as it does. */
	private async watch(jid: string): Promise<string> {
		const deadline = Date.now() + (this.opts.execWaitMs ?? Math.min(60_000, loadConfig().cmJobTimeoutMs + 5000));
		const shown = new Set<string>();
		const poll = async () => {
			const res = await this.list("actions.list", { where: { jid }, sort: "host", max_results: 50 });
			for (const a of res._items) {
				if (a.state === "running" || shown.has(String(a.host))) continue;
				shown.add(String(a.host));
				this.opts.print?.(`  ${cell(a.host)}  ${cell(a.state)}  ${cell(a.return).slice(0, 200)}`);
			}
			return res;
		};
		let res = await poll();
		// At most a minute at the prompt; hosts that answer later are in `actions` (and `host <id>`).
		while (Date.now() < deadline && (res._meta.total === 0 || res._items.some(a => a.state === "running"))) {
			await new Promise(r => setTimeout(r, this.opts.pollMs ?? 500));
			res = await poll();
		}
		const running = res._items.filter(a => a.state === "running").length;
		return `job ${jid}: ${res._meta.total - running} of ${res._meta.total} host(s) answered${running ? " (still waiting: see `actions` with this jid)" : ""}\n${textTable(["host", "state", "return"], res._items, 100)}`;
	}

	async task(verb: string | undefined, id: string | undefined): Promise<string> {
		if ((verb !== "pause" && verb !== "resume") || !id) return "usage: task pause|resume <id>";
		const status = verb === "pause" ? "paused" : "scheduled";
		await this.audited("operator", `task ${verb} ${id}`, async (_caller, opts) => ({ result: readJson<Row>(await this.broker.call("tasks.setStatus", { id, status, query: [] }, opts)) }));
		const task = readJson<Row>(await this.broker.call("tasks.get", { id, query: [] }));
		return `task ${id} (${cell(task.name)}): ${cell(task.status)}, next ${cell(task.next)}`;
	}

	async sync(): Promise<string> {
		const res = await this.audited("operator", "sync", async () => {
			try {
				return { result: await this.broker.call<Row>("cm-gateway.sync") };
			} catch (err) {
				if (unavailable(err)) throw Object.assign(new Error("no configuration-management master is configured (CM_API_URL), or the cm-gateway is not running"), { code: 503 });
				throw err;
			}
		});
		return `inventory reconciled: ${Object.entries(res).filter(([k]) => k !== "_status").map(([k, v]) => `${k} ${v}`).join(", ")}`;
	}
}

/** The custom commands given to moleculer-repl (moleculer.config.ts `replOptions`). */
export function replCommands(): Array<Record<string, unknown>> {
	let repl: FleetRepl | null = null;
	const command = (spec: string, description: string) => ({
		command: spec,
		description,
		allowUnknownOptions: true,
		// The words as the REPL split them (quotes honoured); its rawCommand joins them again with spaces.
		parse(this: unknown, cmd: { parent: { rawArgs: string[] }; params?: unknown }) {
			cmd.params = { words: cmd.parent.rawArgs.slice(2) };
		},
		async action(broker: ServiceBroker, args: { words?: string[] }) {
			repl ??= new FleetRepl(broker, { print: line => console.log(line) });
			console.log(await repl.runWords(args.words?.length ? args.words : [spec.split(" ")[0]]));
		},
	});
	return [
		command("hosts [filter...]", "List hosts: hosts status=up, or hosts '{\"key\": \"pending\"}'"),
		command("host <id>", "One host: identity, keys, OS, VPN identity, recent actions"),
		command("exec <target> <fun> [args...]", "Run a Salt function on a host or a group (id or name): exec web test.ping; exec web-01 cmd.run 'uptime'"),
		command("tasks", "List scheduled tasks"),
		command("task <verb> <id>", "task pause <id> | task resume <id>"),
		command("sync", "Reconcile the inventory with the master now"),
		command("stats <what> [range]", "stats online [30m|24h|7d]: hosts up and down over time"),
		command("alerts [all]", "Unread alerts (alerts --all: every alert)"),
		command("jobs", "Progress of long work: graph build, IP resolution, patch load, inventory sync"),
		command("whoami", "The operator identity this REPL acts as"),
		command("login <token>", "Act as another API token from now on"),
	];
}
