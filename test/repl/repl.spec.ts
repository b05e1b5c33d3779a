/**
 * The REPL (lib/repl/): its commands through the command API (FleetRepl.run) against fleet-ctl's HTTP API,
 * all services in this process and the cm-gateway on the salt-api simulator; then the real `npm run repl`
 * program (dist/lib/repl/main.js) in a pseudo-terminal (script(1)), as an operator types it, attached to
 * fleet-ctl started with the production command on NeDB files — next to it, not instead of it: no port, no
 * data file of its own.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { SaltApiSimulator } from "../simulators/salt-api";
import {
	ADMIN_TOKEN,
	ALL_SERVICES,
	DIST,
	apiOf,
	freePort,
	listeningPorts,
	runServices,
	startEmbedded,
	stopProc,
	tempDir,
	waitForApi,
	type Harness,
	type Proc,
} from "../support/harness";
import { eventually, request, withQuery } from "../support/http";
import { FleetRepl } from "../../lib/repl/commands";
import { REPL_AGENT } from "../../lib/repl/api-client";

describe("REPL commands", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let hosts: string[] = [];
	let group = "";
	let task = "";
	const tokens: Record<string, { id: string; secret: string }> = {};
	const repl = (token?: string) => new FleetRepl({ url: h.api, token: token ?? "", pollMs: 100, execWaitMs: 15_000 });
	const url = (p: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${p}`, query);
	const post = async (p: string, body: unknown) => (await request("POST", url(p), { body })).body;
	// Newest first: ids the gateway made in the order the requests came (_created has whole seconds).
	const audit = async (where: Record<string, unknown>) =>
		(await request("GET", url("audit", { where, sort: "-_id" }))).body._items as any[];

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 8,
			timeout: 2,
			gatherJobTimeout: 0,
			latencyMs: [5, 50],
			presenceEvents: false,
			downFraction: 0,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "30000",
				CM_SYNC_INTERVAL_MS: "0",
				REPL_OPERATOR_TOKEN: "",
				STATS_SNAPSHOTS: "false",
			},
		});
		await h.call("cm-gateway.sync");
		hosts = (
			(await request("GET", url("hosts", { where: { status: "up" }, sort: "_id" }))).body._items as Array<{
				_id: string;
			}>
		).map(x => x._id);
		const sub = await post("groups", { name: "repl-sub", hosts: [hosts[2]] });
		group = (await post("groups", { name: "repl-web", hosts: hosts.slice(0, 2), subgroups: [sub._id] }))._id;
		const outside = (await post("groups", { name: "repl-outside", hosts: [hosts[3]] }))._id;
		// Memberships follow a group change within one pass over the hosts (docs/graph.md), not before POST /groups answers.
		await eventually(
			async () =>
				((await request("GET", url(`hosts/${hosts[0]}`))).body.groups ?? []).includes(group) ? true : undefined,
			10_000,
			"the new group in its hosts' memberships",
		);
		task = (
			await post("tasks", {
				name: "repl-task",
				fun: "test.ping",
				tgt: [hosts[0]],
				start: "2030-01-01 00:00",
				interval: 60,
			})
		)._id;
		for (const [name, body] of Object.entries({
			operator: { role: "operator" },
			viewer: { role: "viewer" },
			scoped: { role: "operator", scope: { groups: [outside], functions: ["test.*"] } },
		})) {
			const res = await post("tokens", { name: `repl-${name}`, ...body });
			tokens[name] = { id: res._id, secret: res.token };
		}
	}, 60_000);

	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("lists and filters hosts, and shows one host by its id or its short name, with its groups by name", async () => {
		const r = repl(tokens.viewer.secret);
		const all = await r.run("hosts");
		for (const x of hosts) expect(all).toContain(x);
		expect(all).toMatch(/8 of 8 host\(s\)/);
		expect(await r.run("hosts status=up")).toMatch(new RegExp(`${hosts.length} of ${hosts.length} host\\(s\\)`));
		const one = await r.run(`hosts _id=${hosts[1]}`);
		expect(one).toContain(hosts[1]);
		expect(one).not.toContain(hosts[0]);
		expect(await r.run(`hosts '{"status": "down"}'`)).toMatch(/0 of 0 host/);
		expect(await r.run(`hosts '{"status": "up"`)).toMatch(/^error: unterminated ' quote/);
		const host = await r.run(`host ${hosts[0]}`);
		expect(host).toMatch(/key\s+accepted/);
		expect(host).toMatch(/recent actions:/);
		// Memberships by name, not by id.
		expect(host).toMatch(/^groups\s+repl-web$/m);
		expect(host).not.toContain(group);
		// The simulator's ids are FQDNs (web-01.site-a.example): the part before the first dot finds the host.
		const short = hosts[0].split(".")[0];
		expect(hosts.filter(x => x.split(".")[0] === short)).toHaveLength(1);
		expect((await r.run(`host ${short}`)).split("\n")[0]).toBe(`_id          ${hosts[0]}`);
		await h.call("hosts.upsertMany", {
			hosts: [
				{ _id: "twin-01.a.example", status: "down" },
				{ _id: "twin-01.b.example", status: "down" },
			],
		});
		expect(await r.run("host twin-01")).toBe(
			"error 409: 'twin-01' is the short name of 2 hosts (twin-01.a.example, twin-01.b.example): give the full name",
		);
		expect(await r.run("host no-such-host")).toBe("error 404: no host 'no-such-host'");
		expect(await r.run("hosts bogus")).toMatch(/not field=value/);
	});

	it("runs a function on a group by name as the operator, prints every return as it comes, and the API audits it", async () => {
		const printed: string[] = [];
		const out = await new FleetRepl({
			url: h.api,
			token: tokens.operator.secret,
			pollMs: 20,
			print: line => printed.push(line),
		}).run("exec repl-web test.ping");
		const returns = printed.filter(l => /^ {2}\S+ {2}\S+ {2}/.test(l));
		// Each host's return was printed as it arrived, once.
		expect(returns.map(l => l.trim().split(/\s+/)[0]).sort()).toEqual(hosts.slice(0, 3).sort());
		expect(returns.every(l => /finished\s+true$/.test(l))).toBe(true);
		expect(printed[0]).toMatch(/^job \d{20} started; returns as they come:$/);
		expect(out).toMatch(/3 of 3 host\(s\) answered/);
		for (const x of hosts.slice(0, 3))
			expect(out).toMatch(new RegExp(`${x.replace(/\./g, "\\.")}\\s+finished\\s+true`));
		const [rec] = await audit({ path: `/api/groups/${group}`, fun: "test.ping", outcome: "ok" });
		expect(rec).toMatchObject({
			name: "repl-operator",
			role: "operator",
			method: "POST",
			agent: REPL_AGENT,
			status: 200,
		});
		expect(rec.jid).toMatch(/^\d{20}$/);
		expect([...rec.targets].sort()).toEqual(hosts.slice(0, 3).sort());
	});

	it("runs on a host by its short name, passes arguments (kwargs masked in the audit log) and keeps quoted words whole", async () => {
		const short = hosts[1].split(".")[0];
		expect(await repl(tokens.operator.secret).run(`exec ${short} test.arg one password=hunter2`)).toMatch(
			/1 of 1 host\(s\) answered/,
		);
		const [rec] = await audit({ fun: "test.arg", targets: hosts[1] });
		expect(rec.args).toEqual({ cm_client: "local_async", arg: ["one"], kwarg: { password: "********" } });
		expect(
			await repl(tokens.operator.secret).run(`exec ${hosts[1]} test.arg 'one two' "three" note='a b' n=2`),
		).toMatch(/1 of 1 host\(s\) answered/);
		const [quoted] = await audit({ fun: "test.arg", targets: hosts[1] });
		expect(quoted.args).toEqual({ cm_client: "local_async", arg: ["one two", "three"], kwarg: { note: "a b", n: 2 } });
	});

	it("previews and runs on a quoted compound target, authorized on what it resolves to as from the API", async () => {
		const r = repl(tokens.viewer.secret);
		const shown = await r.run(`preview L@${hosts[0]},${hosts[1]},nope.example or F@repl-sub`);
		expect(shown.split("\n")).toEqual([
			...hosts.slice(0, 3).sort(),
			"3 host(s)",
			"named but not in the fleet: nope.example",
		]);
		expect(await r.run("preview web-* web-*")).toMatch(/^error 400: target: .*without 'and' or 'or'/);
		const target = `L@${hosts[0]},${hosts[1]}`;
		expect(await repl(tokens.operator.secret).run(`exec '${target} or F@repl-sub' test.ping`)).toMatch(
			/3 of 3 host\(s\) answered/,
		);
		const [rec] = await audit({ path: "/api/run", fun: "test.ping", outcome: "ok" });
		expect(rec).toMatchObject({ name: "repl-operator", agent: REPL_AGENT, status: 200 });
		expect([...rec.targets].sort()).toEqual(hosts.slice(0, 3).sort());
		// The scoped token's group holds hosts[3] only: an expression reaching further is refused, naming what is outside.
		expect(await repl(tokens.scoped.secret).run(`exec '${target}' test.ping`)).toMatch(
			/^error 403: the run is refused: targets outside the token's scope/,
		);
		expect(await repl(tokens.viewer.secret).run(`exec '${target}' test.ping`)).toBe(
			"error 403: the viewer role may not POST /api/run",
		);
	});

	it("says when no minion matched instead of waiting for returns that cannot come", async () => {
		// A host fleet-ctl knows whose key the master does not have.
		await h.call("hosts.upsertMany", { hosts: [{ _id: "ghost.repl.example", status: "down" }] });
		const started = Date.now();
		expect(await repl(tokens.operator.secret).run("exec ghost.repl.example test.ping")).toBe(
			"no minion matched ghost.repl.example: nothing ran",
		);
		expect(Date.now() - started).toBeLessThan(5000);
	});

	it("stops waiting when told (Ctrl-C), saying the job goes on, and which hosts were not up", async () => {
		const silent = hosts[hosts.length - 1];
		expect(silent).toBeDefined();
		sim.setNeverReturns(silent);
		// fleet-ctl has it down (its last presence reading), which the wait says.
		await h.call("hosts.upsertMany", { hosts: [{ _id: silent, status: "down" }] });
		try {
			let stop: () => void = () => undefined;
			let released = false;
			const printed: string[] = [];
			const r = new FleetRepl({
				url: h.api,
				token: tokens.operator.secret,
				pollMs: 50,
				execWaitMs: 60_000,
				print: l => printed.push(l),
				onWait: s => ((stop = s), () => void (released = true)),
			});
			const pending = r.run(`exec ${silent} test.ping`);
			let early: string | undefined;
			void pending.then(text => (early = text));
			await eventually(
				async () => (printed.some(l => l.includes("waiting for 1 host(s)")) ? true : undefined),
				10_000,
				`the waiting notice, printed so far: ${JSON.stringify(printed)}; the command: ${early}`,
			);
			const started = Date.now();
			stop();
			const out = await pending;
			expect(Date.now() - started).toBeLessThan(2000);
			expect(released).toBe(true);
			expect(out).toMatch(
				/^job (\d{20}): 0 of 1 host\(s\) answered \(stopped waiting; the job goes on: `actions` with jid \1/,
			);
			expect(printed[0]).toMatch(/\(Ctrl-C stops waiting, the job goes on\):$/);
			expect(printed).toContain(`  … waiting for 1 host(s); not up: ${silent} (down)`);
		} finally {
			sim.setNeverReturns(silent, false);
			await h.call("hosts.upsertMany", { hosts: [{ _id: silent, status: "up" }] });
		}
	});

	it("refuses without identity, for a viewer and outside the token's scope, with the API's reasons", async () => {
		expect(await repl().run("exec repl-web test.ping")).toMatch(
			/^error 401: no identity: start the REPL with REPL_OPERATOR_TOKEN/,
		);
		expect(await repl("fct_not-a-token-at-all-0000").run("hosts")).toMatch(/^error 401: /);
		expect(await repl(tokens.viewer.secret).run("exec repl-web test.ping")).toBe(
			`error 403: the viewer role may not POST /api/groups/${group}`,
		);
		expect(await repl(tokens.scoped.secret).run("exec repl-web test.ping")).toMatch(
			/^error 403: the run is refused: targets outside the token's scope/,
		);
		expect(await repl(tokens.scoped.secret).run("exec repl-outside cmd.run ls")).toMatch(
			/^error 403: the run is refused: function 'cmd.run' is outside/,
		);
		expect(await repl(tokens.operator.secret).run("exec nothing-called-so test.ping")).toBe(
			"error 404: no host or group 'nothing-called-so'",
		);
		const denied = await audit({ agent: REPL_AGENT, outcome: "denied" });
		expect(denied.map(d => d.name)).toEqual(expect.arrayContaining(["repl-viewer", "repl-scoped"]));
	});

	it("pauses and resumes a task by name (a paused task has no next run), lists tasks, and reconciles the inventory (progress in jobs)", async () => {
		const op = repl(tokens.operator.secret);
		expect(await op.run("task pause repl-task")).toBe(`task ${task} (repl-task): paused, next -`);
		expect((await request("GET", url(`tasks/${task}`))).body.status).toBe("paused");
		expect((await op.run("tasks")).split("\n").find(l => l.includes("repl-task"))).toMatch(
			/repl-task\s+test\.ping\s+\S+\s+paused\s+-\s+0$/,
		);
		expect(await op.run(`task resume ${task}`)).toMatch(/: scheduled, next \w{3}, /);
		expect((await op.run("tasks")).split("\n").find(l => l.includes("repl-task"))).toMatch(
			/scheduled\s+\w{3}, \d{2} \w{3} \d{4}/,
		);
		expect(await repl(tokens.viewer.secret).run(`task pause ${task}`)).toMatch(/^error 403/);
		expect(await op.run("task pause no-such-task")).toBe("error 404: no task 'no-such-task'");
		expect(await op.run("sync")).toMatch(/^inventory reconciled: hosts 8\b/);
		expect(await op.run("jobs")).toMatch(/inventory_sync\s+finished\s+100%/);
		expect((await audit({ path: "/api/inventory/sync" }))[0]).toMatchObject({
			outcome: "ok",
			name: "repl-operator",
			agent: REPL_AGENT,
		});
	});

	it("shows alerts", async () => {
		await h.call("alerts.raise", { type: "repl.check", level: "warning", payload: { hostname: hosts[0] } });
		const out = await eventually(
			async () => {
				const text = await repl(tokens.viewer.secret).run("alerts");
				return text.includes("repl.check") ? text : undefined;
			},
			5000,
			"the alert",
		);
		// Its row: the level and the type, and the count of unread alerts under the table.
		expect(out.split("\n").find(l => l.includes("repl.check"))).toMatch(/\bwarning\b.*\brepl\.check\b/);
		expect(out).toMatch(/\n\d+ unread alert\(s\)$/);
	});

	it("shows hosts up and down over a range from the stats service's snapshots", async () => {
		// Snapshots at chosen times (the periodic ones are off: STATS_SNAPSHOTS=false), a host going down between them.
		const minute = 60_000;
		const now = Math.floor(Date.now() / minute) * minute;
		const count = async (where: Record<string, unknown>) =>
			(await request("GET", url("hosts", { where, max_results: 1 }))).body._meta.total as number;
		const total = await count({});
		const up = await count({ status: "up" });
		expect(up).toBe(hosts.length);
		expect(total).toBeGreaterThan(up);
		const leaving = hosts[hosts.length - 1];
		expect(await h.call("stats.snapshot", { at: new Date(now - 50 * minute) })).toMatchObject({ index: 0 });
		await h.call("hosts.upsertMany", { hosts: [{ _id: leaving, status: "down" }] });
		expect(await h.call("stats.snapshot", { at: new Date(now - 20 * minute) })).toMatchObject({ index: 1 });
		const line = (u: number, d: number) => new RegExp(`  up +${u}  down +${d}  #{${Math.round((u / total) * 40)}}$`);
		const r = repl(tokens.viewer.secret);
		try {
			const lines = (await r.run("stats online 1h")).split("\n");
			expect(lines).toHaveLength(2);
			expect(lines[0]).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT {2}/);
			expect(lines[0]).toMatch(line(up, total - up));
			expect(lines[1]).toMatch(line(up - 1, total - up + 1));
			// Measured from the minute the snapshots were placed by (`now`), not from the clock: a test that started
			// late in its minute read them more than two minutes back (the points are one-minute buckets of a range
			// that ends when the REPL asks). Each line is its snapshot's bucket: within two minutes of it.
			const ago = (text: string) => (now - Date.parse(text.slice(0, 29))) / minute;
			expect(Math.abs(ago(lines[0]) - 50)).toBeLessThanOrEqual(2);
			expect(Math.abs(ago(lines[1]) - 20)).toBeLessThanOrEqual(2);
			expect((await r.run("stats online 30m")).split("\n")).toEqual([
				expect.stringMatching(line(up - 1, total - up + 1)),
			]);
			expect(await r.run("stats online 10m")).toBe("no snapshots in the last 10m");
		} finally {
			await h.call("hosts.upsertMany", { hosts: [{ _id: leaving, status: "up" }] });
		}
		expect(await r.run("stats online soon")).toMatch(/range must look like/);
		expect(await repl(tokens.operator.secret).run("whoami")).toBe(`repl-operator (operator) at ${h.api}`);
	});

	it("says so when no fleet-ctl answers, instead of failing obscurely", async () => {
		const port = await freePort();
		const closed = new FleetRepl({ url: `http://127.0.0.1:${port}/api`, token: tokens.viewer.secret });
		expect(await closed.run("hosts")).toBe(
			`error: fleet-ctl does not answer at http://127.0.0.1:${port}/api (ECONNREFUSED): start it (npm start), or point CTL_API_URL at its API`,
		);
	});
});

describe("npm run repl next to npm start", () => {
	let sim: SaltApiSimulator;
	let server: Proc;
	let api = "";
	let dataDir = "";

	beforeAll(async () => {
		if (!fs.existsSync(path.join(DIST, "lib/repl/main.js")))
			throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
		sim = new SaltApiSimulator({ minions: 4, timeout: 2, gatherJobTimeout: 0, presenceEvents: false, downFraction: 0 });
		await sim.start();
		dataDir = tempDir("repl-attach");
		// The embedded default as `npm start` runs it: every service in one process on NeDB files.
		// (The first describe's harness put its settings in process.env, which the child inherits: these undo them.)
		server = runServices(ALL_SERVICES(), {
			...sim.cmApiEnv,
			DATA_DIR: dataDir,
			PORT: "0",
			HOST: "127.0.0.1",
			HEALTH_PORT: "0",
			CM_JOB_POLL_MS: "100",
			CM_JOB_TIMEOUT_MS: "30000",
			CM_SYNC_INTERVAL_MS: "300000",
			STATS_SNAPSHOTS: "true",
		});
		api = await apiOf(server);
		await waitForApi(api, server);
		await eventually(
			async () => ((await request("GET", `${api}/hosts?max_results=1`)).body._meta?.total === 4 ? true : undefined),
			20_000,
			`the start's inventory sync; the server said:\n${server.log.join("")}`,
		);
	}, 60_000);

	afterAll(async () => {
		if (server) await stopProc(server);
		await sim?.stop();
	});

	it("attaches through the API in a terminal: no port, no data file, Ctrl-C stops a wait and the REPL goes on", async () => {
		const hosts = ((await request("GET", `${api}/hosts?sort=_id`)).body._items as Array<{ _id: string }>).map(
			x => x._id,
		);
		const silent = hosts[3];
		sim.setNeverReturns(silent);
		// script(1) gives the REPL a terminal, as when an operator runs `npm run repl`; `exec` so that the REPL is script's child.
		const cmd = `exec ${process.execPath} ${path.join(DIST, "lib/repl/main.js")}`;
		const child: ChildProcess = spawn("script", ["-qfec", cmd, "/dev/null"], {
			env: {
				...process.env,
				CTL_API_URL: api,
				REPL_OPERATOR_TOKEN: ADMIN_TOKEN,
				HOME: tempDir("repl-home"),
				TERM: "dumb",
				LOGLEVEL: "",
			},
			stdio: ["pipe", "pipe", "pipe"],
		});
		let out = "";
		child.stdout?.on("data", d => (out += String(d)));
		child.stderr?.on("data", d => (out += String(d)));
		const type = (line: string) => child.stdin?.write(`${line}\r`);
		const waitFor = (re: RegExp, what: string) =>
			eventually(async () => (re.test(out) ? true : undefined), 20_000, `${what}; output so far:\n${out}`);
		try {
			await waitFor(/fleet-ctl \$/, "the prompt");
			expect(out).toContain(`fleet-ctl REPL: talking to ${api}.`);
			type("whoami");
			await waitFor(/\(admin\) at http/, "whoami");
			type(`host ${hosts[1].split(".")[0]}`);
			await waitFor(new RegExp(`_id\\s+${hosts[1].replace(/\./g, "\\.")}`), "a host by its short name");
			type(`exec ${hosts[0]} test.arg 'typed at the prompt'`);
			await waitFor(/typed at the prompt/, "a quoted argument echoed back whole");
			type(`exec ${silent} test.ping`);
			await waitFor(/waiting for 1 host\(s\)/, "the wait on a silent host");
			const mark = out.length;
			child.stdin?.write("\u0003");
			await waitFor(/0 of 1 host\(s\) answered \(stopped waiting/, "Ctrl-C stopping the wait");
			// The REPL is still there, and its own Ctrl-C handling is back (no exit notice was printed for this one).
			expect(out.slice(mark)).not.toMatch(/To exit, press/);
			type("help");
			await waitFor(/stats <what> \[range\]/, "help listing the commands");
			// It holds no data and serves nothing: no listening socket, no file under the server's DATA_DIR.
			const pid = Number(
				fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(/\s+/)[0],
			);
			expect(fs.readlinkSync(`/proc/${pid}/exe`)).toBe(fs.realpathSync(process.execPath));
			expect(listeningPorts(pid)).toEqual([]);
			const open = fs.readdirSync(`/proc/${pid}/fd`).map(fd => {
				try {
					return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
				} catch {
					return "";
				}
			});
			expect(open.filter(f => f.startsWith(fs.realpathSync(dataDir)))).toEqual([]);
			// Nothing logged over the prompt: only the REPL's own lines.
			expect(out).not.toMatch(/\bINFO\b/);
		} finally {
			sim.setNeverReturns(silent, false);
			child.stdin?.write("\u0004");
			await new Promise<void>(resolve => {
				const timer = setTimeout(() => (child.kill("SIGKILL"), resolve()), 10_000);
				child.once("exit", () => (clearTimeout(timer), resolve()));
			});
		}
		const quoted = (await request("GET", withQuery(`${api}/audit`, { where: { fun: "test.arg", targets: hosts[0] } })))
			.body._items;
		expect(quoted).toEqual([
			expect.objectContaining({
				args: { cm_client: "local_async", arg: ["typed at the prompt"], kwarg: {} },
				agent: REPL_AGENT,
				outcome: "ok",
			}),
		]);
	}, 60_000);
});
