/**
 * fleet-ctl's commands in the Moleculer REPL (`npm run repl`, docs/operator.md): daily work without reading
 * JSON. Each command is a method of FleetRepl that returns the text it prints, so tests drive the same code
 * that moleculer-repl's custom commands call.
 *
 * Every command is a request to the HTTP API of a running fleet-ctl (lib/repl/api-client.ts) as the token in
 * REPL_OPERATOR_TOKEN (or the one given to `login <token>`): the gateway checks its role, the cm-gateway and
 * the tasks service its scope on what a run resolves to, and the audit log records each write with the REPL's
 * User-Agent — exactly as for curl. A REPL process holds no data and needs no cluster credentials.
 *
 * Names: a host by its id or by its short name (`web-01` for `web-01.site-a.example`, when only one host has
 * it), a group or a task by name or id. `exec` prints each host's return as it comes; Ctrl-C stops waiting
 * (the job goes on, its returns land in `actions`).
 */
import type { ServiceBroker } from "moleculer";
import type { REPLServer } from "node:repl";
import { configOf } from "../config";
import { ApiClient, ApiError, type Query } from "./api-client";
import { parseRunArgs, splitWords } from "./words";

type Row = Record<string, unknown>;
interface List<T = Row> {
	_items: T[];
	_meta: { total: number };
}

const OBJECT_ID = /^[0-9a-f]{24}$/;
const PAGE = 50;

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
	const line = (cells: string[]) =>
		cells
			.map((c, i) => c.padEnd(widths[i]))
			.join("  ")
			.trimEnd();
	return [line(columns), line(widths.map(w => "-".repeat(w))), ...data.map(line)].join("\n");
}

/** `status=up key=accepted` or a JSON object (quote it: '{"status": "up"}') as a `where`. */
export function parseFilterWords(words: string[]): Record<string, unknown> | undefined {
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

const RANGE = /^(\d+)([mhd])$/;
const UNIT_S = { m: 60, h: 3600, d: 86400 } as const;

export interface ReplOptions {
	/** The API of the running fleet-ctl (the REPL's: CTL_API_URL, else http://127.0.0.1:PORT/api). */
	url: string;
	/** The operator's API token (the REPL's: REPL_OPERATOR_TOKEN). */
	token?: string;
	/** How long `exec` waits for returns, in ms (default a minute). */
	execWaitMs?: number;
	pollMs?: number;
	/** Where `exec` prints each host's return as it arrives (the REPL: the console). */
	print?: (line: string) => void;
	/**
	 * While `exec` waits: `stop` is to be called when the operator presses Ctrl-C; the returned function is
	 * called when the wait ends. Without it a wait runs to its end.
	 */
	onWait?: (stop: () => void) => () => void;
}

interface Target {
	kind: "host" | "group";
	id: string;
	/** Shown to the operator: the host id, or the group's name. */
	label: string;
}

export class FleetRepl {
	readonly api: ApiClient;

	constructor(private readonly opts: ReplOptions) {
		this.api = new ApiClient({ url: opts.url, token: opts.token ?? "" });
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
			if (name === "login") {
				this.api.token = rest[0] ?? "";
				return await this.whoami();
			}
			if (!this.api.token && name !== undefined && COMMANDS.has(name))
				throw new ApiError(
					401,
					"no identity: start the REPL with REPL_OPERATOR_TOKEN=<token> (a viewer reads, an operator runs), or `login <token>`",
				);
			switch (name) {
				case "hosts":
					return await this.hosts(rest);
				case "host":
					return await this.host(rest[0]);
				case "exec":
					return await this.exec(rest[0], rest[1], rest.slice(2));
				case "preview":
					return await this.preview(rest.join(" ") || undefined);
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
				case "approvals":
					return await this.approvals(rest[0] === "--all" || rest[0] === "all");
				case "approve":
				case "reject":
					return await this.decide(name, rest[0], rest.slice(1).join(" "));
				case "windows":
					return await this.windows(rest[0]);
				default:
					return `unknown command '${name ?? ""}'`;
			}
		} catch (err) {
			const e = err as { code?: number; message: string };
			return `error${e.code ? ` ${e.code}` : ""}: ${e.message}`;
		}
	}

	async whoami(): Promise<string> {
		if (!this.api.token) return "no identity (set REPL_OPERATOR_TOKEN or `login <token>`)";
		const c = await this.api.get<{ name: string; role: string; scope?: unknown }>("whoami");
		return `${c.name} (${c.role})${c.scope ? ` scope ${JSON.stringify(c.scope)}` : ""} at ${this.api.url}`;
	}

	// ------------------------------------------------------------ reading

	private list(path: string, query: Query): Promise<List> {
		return this.api.get<List>(path, query);
	}

	async hosts(words: string[]): Promise<string> {
		const res = await this.list("hosts", {
			where: parseFilterWords(words),
			sort: "_id",
			max_results: PAGE,
			projection: { grain: 0 },
		});
		return `${textTable(["_id", "status", "ip", "version", "key"], res._items)}\n${res._items.length} of ${res._meta.total} host(s)`;
	}

	/** A host's id from its id or its short name (the part before the first dot, when one host has it). */
	private async hostId(name: string): Promise<string | null> {
		const exact = await this.list("hosts", { where: { _id: name }, max_results: 1, projection: { _id: 1 } });
		if (exact._meta.total > 0) return name;
		if (name.includes(".")) return null;
		// Ids that start with "<name>." ("/" is the character after ".").
		const short = await this.list("hosts", {
			where: { _id: { $gte: `${name}.`, $lt: `${name}/` } },
			sort: "_id",
			max_results: 5,
			projection: { _id: 1 },
		});
		if (short._meta.total === 0) return null;
		if (short._meta.total > 1) {
			const some = short._items.map(h => String(h._id)).join(", ");
			throw new ApiError(
				409,
				`'${name}' is the short name of ${short._meta.total} hosts (${some}${short._meta.total > short._items.length ? ", …" : ""}): give the full name`,
			);
		}
		return String(short._items[0]._id);
	}

	async host(name: string | undefined): Promise<string> {
		if (!name) return "usage: host <id or short name>";
		const id = await this.hostId(name);
		if (!id) throw new ApiError(404, `no host '${name}'`);
		const host = await this.api.get<Row>(`hosts/${encodeURIComponent(id)}`, { embedded: { groups: 1 } });
		const groups = Array.isArray(host.groups)
			? host.groups.map(g => (g && typeof g === "object" ? (g as Row).name : g))
			: host.groups;
		const shown: Row = { ...host, groups };
		const fields = [
			"_id",
			"status",
			"ip",
			"version",
			"key",
			"fingerprint",
			"heartbeat",
			"groups",
			"nodegroups",
			"last_action",
			"_updated",
		];
		const grain = (host.grain ?? {}) as Row;
		const vpn = host.vpn_representation as Row | undefined;
		const actions = await this.list("actions", { where: { host: id }, sort: "-_created", max_results: 5 });
		return [
			...fields.filter(f => f in shown).map(f => `${f.padEnd(12)} ${cell(shown[f])}`),
			`os           ${cell(grain.osfullname ?? grain.os)} ${cell(grain.osrelease)}`,
			`vpn          ${vpn && Object.keys(vpn).length ? `${cell(vpn.name)} in ${cell(vpn.organization_name)}${vpn.disabled ? " (disabled)" : ""}` : "-"}`,
			"",
			"recent actions:",
			actions._items.length ? textTable(["_created", "action", "state", "return"], actions._items) : "none",
		].join("\n");
	}

	async tasks(): Promise<string> {
		const res = await this.list("tasks", { sort: "name", max_results: PAGE });
		// Only a scheduled task has a next run: a paused or finished one shows none.
		const rows = res._items.map(t => ({ ...t, next: t.status === "scheduled" ? t.next : null }));
		return `${textTable(["_id", "name", "fun", "tgt", "status", "next", "count_of_execution"], rows)}\n${res._meta.total} task(s)`;
	}

	async alerts(all: boolean): Promise<string> {
		const res = await this.list("alerts", {
			where: all ? undefined : { read: false },
			sort: "-_created",
			max_results: PAGE,
		});
		return `${textTable(["_created", "level", "type", "payload"], res._items, 80)}\n${res._meta.total} ${all ? "" : "unread "}alert(s)`;
	}

	async jobs(): Promise<string> {
		const res = await this.list("jobs", { sort: "_id", max_results: PAGE });
		const rows = res._items.map(j => ({
			...j,
			progress: `${j.percent ?? "-"}% (${(j.progress as Row)?.done ?? 0}/${(j.progress as Row)?.total ?? 0})`,
		}));
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
		const points = await this.api.get<Array<{ timestamp: string; hostnames?: { up?: number; down?: number } }>>(
			"hosts/statistics/online",
			{ "range[]": [begin.toUTCString(), end.toUTCString()], interval: String(interval) },
		);
		if (!points.length) return `no snapshots in the last ${range}`;
		const most = Math.max(1, ...points.map(p => (p.hostnames?.up ?? 0) + (p.hostnames?.down ?? 0)));
		return points
			.map(
				p =>
					`${p.timestamp}  up ${String(p.hostnames?.up ?? 0).padStart(5)}  down ${String(p.hostnames?.down ?? 0).padStart(5)}  ${"#".repeat(Math.round(((p.hostnames?.up ?? 0) / most) * 40))}`,
			)
			.join("\n");
	}

	// ------------------------------------------------------------ doing

	/** Runs `fun` on a host (id or short name) or a group (name or id) and prints the returns as they arrive. */
	async exec(name: string | undefined, fun: string | undefined, words: string[]): Promise<string> {
		if (!name || !fun) return "usage: exec <host|group|'compound target'> <fun> [arg…] [k=v…] [--break-glass='reason']";
		// An admin's reason to run outside the maintenance windows (docs/security.md): not a Salt argument.
		const glass = words.find(w => w.startsWith("--break-glass="));
		const { arg, kwarg } = parseRunArgs(words.filter(w => w !== glass));
		const run = {
			cm_client: "local_async",
			fun,
			arg,
			kwarg,
			...(glass ? { break_glass: glass.slice("--break-glass=".length) } : {}),
		};
		type Answer = {
			task_id: string | null;
			status: string;
			approval?: { _id: string; policies: Array<{ name: string }>; expires: string };
		};
		let res: Answer;
		let label: string;
		if (isCompound(name)) {
			// POST /run: resolved, authorized on the resolved hosts and audited where it runs, as from the API.
			res = await this.api.send<Answer>("POST", "run", { target: name, ...run });
			label = name;
		} else {
			const target = await this.resolveTarget(name);
			const path = target.kind === "host" ? `hosts/${encodeURIComponent(target.id)}` : `groups/${target.id}`;
			// Authorized (role by the gateway, scope on the hosts it resolves to where it runs) and audited as any API run.
			res = await this.api.send<Answer>("POST", path, run);
			label = target.label;
		}
		if (res.status === "pending_approval" && res.approval) {
			const a = res.approval;
			return `held for approval ${a._id} (${a.policies.map(p => p.name).join(", ")}), until ${a.expires}: nothing ran; another approver: approve ${a._id} [comment]`;
		}
		if (!res.task_id) return `no minion matched ${label}: nothing ran`;
		return this.watch(res.task_id);
	}

	// ------------------------------------------------------------ governance

	/** Approval requests: pending ones (newest first), or all of them with `--all`. */
	async approvals(all: boolean): Promise<string> {
		const res = await this.list("approvals", {
			...(all ? {} : { where: { status: "pending" } }),
			sort: "-_id",
			max_results: PAGE,
		});
		if (!res._items.length) return all ? "no approval requests" : "no pending approval requests";
		const rows = res._items.map(a => {
			const call = a.call as { fun: string };
			const requester = a.requester as { name: string };
			const votes = a.votes as Array<{ decision: string }>;
			return {
				id: a._id,
				status: a.status,
				fun: call.fun,
				hosts: a.hosts_count,
				target: a.target,
				by: requester.name,
				votes: votes.map(v => v.decision).join(","),
				expires: a.expires,
			};
		});
		return textTable(["id", "status", "fun", "hosts", "target", "by", "votes", "expires"], rows, 40);
	}

	/** approve|reject <id> [comment…]: a vote; the one that completes the approvals runs the request. */
	async decide(verb: "approve" | "reject", id: string | undefined, comment: string): Promise<string> {
		if (!id) return `usage: ${verb} <approval id> [comment…]`;
		const a = await this.api.send<{ status: string; run?: { jid?: string | null; status: string; message?: string } }>(
			"POST",
			`approvals/${encodeURIComponent(id)}/${verb}`,
			comment ? { comment } : {},
		);
		if (a.status === "done" && a.run?.jid) return `approved: it ran as job ${a.run.jid}`;
		if (a.status === "failed") return `approved, but the run failed: ${a.run?.message ?? a.run?.status ?? "unknown"}`;
		return `${id}: ${a.status}`;
	}

	/** The maintenance windows, or those of a host (id or short name) with whether each is open and when it opens next. */
	async windows(host: string | undefined): Promise<string> {
		if (!host) {
			const res = await this.list("maintenance_windows", { sort: "name", max_results: PAGE });
			if (!res._items.length) return "no maintenance windows: every function runs at any time";
			return textTable(
				["name", "functions", "rrule", "start", "timezone", "duration", "enabled"],
				res._items.map(w => ({ ...w, enabled: w.enabled !== false })),
				40,
			);
		}
		const id = (await this.hostId(host)) ?? host;
		const res = await this.api.get<{
			_items: Array<{
				name: string;
				functions: string[];
				open: { end: string } | null;
				next: Array<{ start: string; end: string }>;
			}>;
		}>(`hosts/${encodeURIComponent(id)}/maintenance_windows?count=1`);
		if (!res._items.length) return `no maintenance window governs ${id}: every function runs at any time`;
		return textTable(
			["window", "functions", "now", "next"],
			res._items.map(w => ({
				window: w.name,
				functions: w.functions,
				now: w.open ? `open until ${w.open.end}` : "closed",
				next: w.next[0] ? `${w.next[0].start} – ${w.next[0].end}` : "none within 400 days",
			})),
			60,
		);
	}

	/** The hosts a compound target selects now (POST /targets/preview), and those it names that do not exist. */
	async preview(expression: string | undefined): Promise<string> {
		if (!expression) return "usage: preview '<compound target>'  (docs/targeting.md: G@os:Debian and web-*)";
		const res = await this.api.send<{ count: number; hosts: string[]; missing: string[] }>("POST", "targets/preview", {
			target: expression,
		});
		const lines = [...res.hosts, `${res.count} host(s)`];
		if (res.missing.length) lines.push(`named but not in the fleet: ${res.missing.join(", ")}`);
		return lines.join("\n");
	}

	/** A group by name or id first (`exec web …`), then a host by id or short name. */
	private async resolveTarget(name: string): Promise<Target> {
		const groups = await this.list("groups", {
			where: OBJECT_ID.test(name) ? { _id: name } : { name },
			max_results: 2,
			projection: { name: 1 },
		});
		if (groups._meta.total > 1) throw new ApiError(409, `several groups are named '${name}': give its id`);
		if (groups._meta.total === 1) return { kind: "group", id: String(groups._items[0]._id), label: name };
		const host = await this.hostId(name);
		if (host) return { kind: "host", id: host, label: host };
		throw new ApiError(404, `no host or group '${name}'`);
	}

	/** Every actions record of the job (they are made when it starts, `running` until the host answers). */
	private async jobRecords(jid: string): Promise<Row[]> {
		const out: Row[] = [];
		for (let page = 1; ; page++) {
			const res = await this.list("actions", { where: { jid }, sort: "host", max_results: PAGE, page });
			out.push(...res._items);
			if (res._items.length < PAGE || out.length >= res._meta.total) return out;
		}
	}

	/**
	 * The job's answered records not printed yet: those written in or after the second of the newest one printed
	 * (`since`, an HTTP-date; a record does not change once answered), so a poll reads what is new, not the job.
	 */
	private async newReturns(jid: string, since: string | undefined, shown: Set<string>): Promise<Row[]> {
		const where = { jid, state: { $ne: "running" }, ...(since ? { _updated: { $gte: since } } : {}) };
		const out: Row[] = [];
		for (let page = 1; ; page++) {
			const res = await this.list("actions", { where, sort: "_updated", max_results: PAGE, page });
			out.push(...res._items.filter(a => !shown.has(String(a.host))));
			if (res._items.length < PAGE) return out;
		}
	}

	/** Prints each host's return as it comes, until every host answered, the wait ends, or Ctrl-C. */
	private async watch(jid: string): Promise<string> {
		const print = this.opts.print ?? (() => undefined);
		const waitMs = this.opts.execWaitMs ?? 60_000;
		const deadline = Date.now() + waitMs;
		let stopped = false;
		let wake: () => void = () => undefined;
		const release = this.opts.onWait?.(() => {
			stopped = true;
			wake();
		});
		const shown = new Set<string>();
		let since: string | undefined;
		let told = false;
		try {
			print(
				`job ${jid} started; returns as they come${this.opts.onWait ? " (Ctrl-C stops waiting, the job goes on)" : ""}:`,
			);
			for (;;) {
				// The hosts still awaited (a page of them), and how many records the job has (none yet: not written);
				// read before the returns, so that every return of a job found done has been printed.
				const [waiting, all] = await Promise.all([
					this.list("actions", {
						where: { jid, state: "running" },
						sort: "host",
						max_results: PAGE,
						projection: { host: 1 },
					}),
					this.list("actions", { where: { jid }, max_results: 1, projection: { host: 1 } }),
				]);
				for (const a of await this.newReturns(jid, since, shown)) {
					shown.add(String(a.host));
					since = String(a._updated);
					print(`  ${cell(a.host)}  ${cell(a.state)}  ${cell(a.return).slice(0, 200)}`);
				}
				if ((all._meta.total && !waiting._meta.total) || stopped || Date.now() >= deadline) break;
				// Once, after the quick ones: which hosts are still awaited, and which of them are down.
				if (!told && waiting._meta.total && Date.now() > deadline - waitMs + 2000) {
					told = true;
					const down = await this.list("hosts", {
						where: { _id: { $in: waiting._items.map(a => String(a.host)) }, status: { $ne: "up" } },
						max_results: PAGE,
						projection: { status: 1 },
					});
					const note = down._items.length
						? `; not up: ${down._items.map(h => `${h._id} (${h.status})`).join(", ")}`
						: "";
					print(`  … waiting for ${waiting._meta.total} host(s)${note}`);
				}
				await new Promise<void>(resolve => {
					const timer = setTimeout(resolve, this.opts.pollMs ?? 500);
					wake = () => (clearTimeout(timer), resolve());
				});
			}
		} finally {
			release?.();
		}
		// The whole job once, for its table.
		const records = await this.jobRecords(jid);
		const running = records.filter(a => a.state === "running").length;
		const why = stopped ? "stopped waiting" : running ? "waited " + Math.round(waitMs / 1000) + " s" : "";
		const rest = running ? ` (${why}; the job goes on: \`actions\` with jid ${jid}, or \`host <id>\`)` : "";
		return `job ${jid}: ${records.length - running} of ${records.length} host(s) answered${rest}\n${textTable(["host", "state", "return"], records, 100)}`;
	}

	/** A task's id from its id or its name. */
	private async taskId(name: string): Promise<string> {
		if (OBJECT_ID.test(name)) return name;
		const res = await this.list("tasks", { where: { name }, max_results: 2, projection: { name: 1 } });
		if (res._meta.total === 0) throw new ApiError(404, `no task '${name}'`);
		if (res._meta.total > 1) throw new ApiError(409, `several tasks are named '${name}': give its id`);
		return String(res._items[0]._id);
	}

	async task(verb: string | undefined, name: string | undefined): Promise<string> {
		if ((verb !== "pause" && verb !== "resume") || !name) return "usage: task pause|resume <id or name>";
		const id = await this.taskId(name);
		await this.api.send("PATCH", `tasks/${id}/${verb === "pause" ? "paused" : "scheduled"}`);
		const task = await this.api.get<Row>(`tasks/${id}`);
		return `task ${id} (${cell(task.name)}): ${cell(task.status)}, next ${task.status === "scheduled" ? cell(task.next) : "-"}`;
	}

	async sync(): Promise<string> {
		const res = await this.api.send<Row>("POST", "inventory/sync");
		return `inventory reconciled: ${Object.entries(res)
			.filter(([k]) => !k.startsWith("_"))
			.map(([k, v]) => `${k} ${v}`)
			.join(", ")}`;
	}
}

/** A target word that is a compound expression rather than a host or group name: it has spaces, an engine or a glob. */
function isCompound(word: string): boolean {
	return /\s|^[A-Z]\S?@|[*?[]/.test(word);
}

const COMMANDS = new Set([
	"hosts",
	"host",
	"exec",
	"preview",
	"tasks",
	"task",
	"sync",
	"stats",
	"alerts",
	"jobs",
	"approvals",
	"approve",
	"reject",
	"windows",
]);

/**
 * Ctrl-C while `exec` waits stops that wait (and only that): the REPL's own Ctrl-C handling (clear the line,
 * a second one exits) is set aside for the wait and put back after it.
 */
export function ctrlCStopsWaits(server: REPLServer): NonNullable<ReplOptions["onWait"]> {
	return stop => {
		const own = server.listeners("SIGINT") as Array<(...args: unknown[]) => void>;
		server.removeAllListeners("SIGINT");
		server.on("SIGINT", stop);
		return () => {
			server.removeAllListeners("SIGINT");
			for (const l of own) server.on("SIGINT", l);
		};
	};
}

/**
 * The custom commands given to moleculer-repl (moleculer.config.ts `replOptions`, lib/repl/main.ts). `server`
 * is the REPL once it runs (for Ctrl-C during a wait).
 */
export function replCommands(server: () => REPLServer | undefined = () => undefined): Array<Record<string, unknown>> {
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
			const s = server();
			const { replApiUrl, replOperatorToken } = configOf(broker);
			repl ??= new FleetRepl({
				url: replApiUrl,
				token: replOperatorToken,
				print: line => console.log(line),
				onWait: s ? ctrlCStopsWaits(s) : undefined,
			});
			console.log(await repl.runWords(args.words?.length ? args.words : [spec.split(" ")[0]]));
		},
	});
	return [
		command("hosts [filter...]", 'List hosts: hosts status=up, or hosts \'{"key": "pending"}\''),
		command("host <id>", "One host (id or short name): identity, keys, OS, groups, VPN identity, recent actions"),
		command(
			"exec <target> <fun> [args...]",
			"Run a Salt function on a group (name), a host (id or short name) or a quoted compound target, returns as they come: exec web test.ping; exec web-01 cmd.run 'uptime'; exec 'G@os:Debian and web-*' test.ping",
		),
		command(
			"preview <compound target>",
			"The hosts a compound target selects now (docs/targeting.md): preview G@os:Debian and not web-*",
		),
		command("tasks", "List scheduled tasks"),
		command("approvals [--all]", "Approval requests: the pending ones, or all with --all"),
		command("approve <id> [comment...]", "Approve a request (the approval that completes it runs it, once)"),
		command("reject <id> [comment...]", "Reject a request: it runs nothing"),
		command("windows [host]", "The maintenance windows, or those of a host: open now, and when they open next"),
		command("task <verb> <id>", "task pause <id or name> | task resume <id or name>"),
		command("sync", "Reconcile the inventory with the master now"),
		command("stats <what> [range]", "stats online [30m|24h|7d]: hosts up and down over time"),
		command("alerts [all]", "Unread alerts (alerts --all: every alert)"),
		command("jobs", "Progress of long work: graph build, IP resolution, patch load, inventory sync"),
		command("whoami", "The token this REPL acts as, and the fleet-ctl it talks to"),
		command("login <token>", "Act as another API token from now on"),
	];
}
