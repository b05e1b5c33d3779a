/**
 * The REPL commands (lib/repl-commands.ts) against a cluster on a real NATS server: the data services and
 * the cm-gateway (talking to the salt-api simulator) in one broker, the REPL joining as another node —
 * first through the command API (FleetRepl.run), then the real `moleculer-runner --repl` of the build in
 * a pseudo-terminal (script(1)), as an operator types it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { SaltApiSimulator } from "./simulators/salt-api";
import { ensureNats, tempDir, ROOT, DIST, type Nats } from "./support/harness";
import { eventually } from "./support/http";
import { FleetRepl } from "../lib/repl-commands";
import { readJson } from "../lib/eve/render";
import { FleetJSONExt } from "../lib/serializer";
import { hashToken } from "../lib/auth";

const ADMIN = `fct_repl-admin-${process.pid}-${Math.random().toString(36).slice(2)}`;

describe("REPL commands", () => {
	let nats: Nats;
	let sim: SaltApiSimulator;
	let cluster: ServiceBroker;
	let client: ServiceBroker;
	let namespace = "";
	let hosts: string[] = [];
	let group = "";
	let task = "";
	const tokens: Record<string, { id: string; secret: string }> = {};
	const repl = (token?: string) => new FleetRepl(client, { token: token ?? "", pollMs: 100, execWaitMs: 15_000 });
	/** As the bootstrap admin (a task is owned by, and authorized against, the token that makes it). */
	const create = async (service: string, body: unknown) => {
		const admin = await cluster.call("tokens.verify", { hash: hashToken(ADMIN) });
		return readJson(await cluster.call(`${service}.create`, { body, query: [] }, { meta: { user: admin } }));
	};
	const broker = (nodeID: string) =>
		new ServiceBroker({ logger: { type: "Console", options: { level: process.env.TEST_LOG ? "info" : "error" } }, namespace, nodeID, transporter: nats.url as BrokerOptions["transporter"], serializer: new FleetJSONExt(), requestTimeout: 30_000 });

	beforeAll(async () => {
		nats = await ensureNats();
		sim = new SaltApiSimulator({ minions: 8, timeout: 2, gatherJobTimeout: 0, latencyMs: [5, 50], presenceEvents: false, downFraction: 0 });
		await sim.start();
		namespace = `repl-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
		Object.assign(process.env, { ...sim.cmApiEnv, CTL_ADMIN_TOKEN: ADMIN, DATA_DIR: tempDir("repl"), MONGO_URI: "", CM_JOB_POLL_MS: "100", CM_JOB_TIMEOUT_MS: "5000", CM_SYNC_INTERVAL_MS: "0", REPL_OPERATOR_TOKEN: "", STATS_SNAPSHOTS: "false" });
		cluster = broker(`repl-cluster-${process.pid}`);
		for (const file of fs.readdirSync(path.join(ROOT, "services")).filter(f => f.endsWith(".service.ts") && f !== "api.service.ts")) cluster.loadService(path.join(ROOT, "services", file));
		await cluster.start();
		client = broker(`repl-client-${process.pid}`);
		await client.start();
		await client.waitForServices(["hosts", "cm-gateway", "tokens", "audit", "tasks"], 20_000);

		await cluster.call("cm-gateway.sync");
		hosts = (readJson(await cluster.call("hosts.list", { query: [["where", '{"status":"up"}'], ["sort", "_id"]] }))._items as Array<{ _id: string }>).map(h => h._id);
		const sub = await create("groups", { name: "repl-sub", hosts: [hosts[2]] });
		group = (await create("groups", { name: "repl-web", hosts: hosts.slice(0, 2), subgroups: [sub._id] }))._id;
		const outside = (await create("groups", { name: "repl-outside", hosts: [hosts[3]] }))._id;
		task = (await create("tasks", { name: "repl-task", fun: "test.ping", tgt: [hosts[0]], start: "2030-01-01 00:00", interval: 60 }))._id;
		for (const [name, body] of Object.entries({ operator: { role: "operator" }, viewer: { role: "viewer" }, scoped: { role: "operator", scope: { groups: [outside], functions: ["test.*"] } } })) {
			const res = await create("tokens", { name: `repl-${name}`, ...body });
			tokens[name] = { id: res._id, secret: res.token };
		}
	}, 60_000);

	afterAll(async () => {
		await client?.stop();
		await cluster?.stop();
		await sim?.stop();
		await nats?.stop();
	});

	const audit = async (where: Record<string, unknown>) => readJson(await cluster.call("audit.list", { query: [["where", JSON.stringify(where)], ["sort", "-_created"]] }))._items as any[];

	it("lists and filters hosts, and shows one host, without an identity", async () => {
		const r = repl();
		const all = await r.run("hosts");
		for (const h of hosts) expect(all).toContain(h);
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
		expect(await r.run("host no-such-host")).toMatch(/^error 404/);
		expect(await r.run("hosts bogus")).toMatch(/not field=value/);
	});

	it("runs a function on a group by name as the operator, shows every return, and audits it", async () => {
		const printed: string[] = [];
		const out = await new FleetRepl(client, { token: tokens.operator.secret, pollMs: 20, print: line => printed.push(line) }).run("exec repl-web test.ping");
		// Each host's return was printed as it arrived, once.
		expect(printed.map(l => l.trim().split(/\s+/)[0]).sort()).toEqual(hosts.slice(0, 3).sort());
		expect(printed.every(l => /finished\s+true$/.test(l))).toBe(true);
		expect(out).toMatch(/3 of 3 host\(s\) answered/);
		for (const h of hosts.slice(0, 3)) expect(out).toMatch(new RegExp(`${h.replace(/\./g, "\\.")}\\s+finished\\s+true`));
		const [rec] = await audit({ method: "REPL", fun: "test.ping", outcome: "ok" });
		expect(rec).toMatchObject({ name: "repl-operator", role: "operator", path: "exec repl-web test.ping", status: 200, outcome: "ok" });
		expect(rec.source).toMatch(/^repl@/);
		expect(rec.jid).toMatch(/^\d{20}$/);
		expect([...rec.targets].sort()).toEqual(hosts.slice(0, 3).sort());
	});

	it("passes arguments (kwargs masked in the audit log) on a single host", async () => {
		const out = await repl(tokens.operator.secret).run(`exec ${hosts[0]} test.arg one password=hunter2`);
		expect(out).toMatch(/1 of 1 host\(s\) answered/);
		const [rec] = await audit({ fun: "test.arg" });
		expect(rec.args).toEqual({ cm_client: "local_async", arg: ["one"], kwarg: { password: "********" } });
	});

	it("keeps quoted words whole, as a shell would", async () => {
		const out = await repl(tokens.operator.secret).run(`exec ${hosts[1]} test.arg 'one two' "three" note='a b' n=2`);
		expect(out).toMatch(/1 of 1 host\(s\) answered/);
		const [rec] = await audit({ fun: "test.arg", targets: hosts[1] });
		expect(rec.args).toEqual({ cm_client: "local_async", arg: ["one two", "three"], kwarg: { note: "a b", n: 2 } });
	});

	it("says when no minion matched instead of waiting for returns that cannot come", async () => {
		// A host fleet-ctl knows whose key the master does not have.
		await cluster.call("hosts.upsertMany", { hosts: [{ _id: "ghost.repl.example", status: "down" }] });
		const started = Date.now();
		expect(await repl(tokens.operator.secret).run("exec ghost.repl.example test.ping")).toBe("no minion matched ghost.repl.example: nothing ran");
		expect(Date.now() - started).toBeLessThan(5000);
	});

	it("refuses without identity, for a viewer and outside the token's scope — and audits the refusals", async () => {
		expect(await repl().run("exec repl-web test.ping")).toMatch(/^error 401: no operator identity/);
		expect(await repl(tokens.viewer.secret).run("exec repl-web test.ping")).toMatch(/^error 403: the viewer role may not/);
		expect(await repl(tokens.scoped.secret).run("exec repl-web test.ping")).toMatch(/^error 403: the run is refused: targets outside the token's scope/);
		expect(await repl(tokens.scoped.secret).run("exec repl-outside cmd.run ls")).toMatch(/^error 403: the run is refused: function 'cmd.run' is outside/);
		expect(await repl(tokens.operator.secret).run("exec nothing-called-so test.ping")).toMatch(/^error 404/);
		// The unknown target is audited like the API's 404 for a run on it.
		expect((await audit({ method: "REPL", path: "exec nothing-called-so test.ping" }))[0]).toMatchObject({ status: 404, outcome: "failed", name: "repl-operator", targets: ["nothing-called-so"] });
		const denied = await audit({ method: "REPL", outcome: "denied" });
		expect(denied.map(d => d.name)).toEqual(expect.arrayContaining([null, "repl-viewer", "repl-scoped"]));
	});

	it("pauses and resumes a task, lists tasks, and reconciles the inventory (progress in jobs)", async () => {
		const op = repl(tokens.operator.secret);
		expect(await op.run(`task pause ${task}`)).toMatch(/repl-task\): paused/);
		expect(readJson(await cluster.call("tasks.get", { id: task, query: [] })).status).toBe("paused");
		expect(await op.run("tasks")).toMatch(/repl-task\s+test\.ping\s+\S+\s+paused/);
		expect(await op.run(`task resume ${task}`)).toMatch(/: scheduled, next /);
		expect(await repl(tokens.viewer.secret).run(`task pause ${task}`)).toMatch(/^error 403/);
		expect(await op.run("sync")).toMatch(/inventory reconciled: hosts 8/);
		expect(await op.run("jobs")).toMatch(/inventory_sync\s+finished\s+100%/);
		expect((await audit({ path: "sync" }))[0]).toMatchObject({ outcome: "ok", name: "repl-operator" });
	});

	it("shows alerts", async () => {
		await cluster.call("alerts.raise", { type: "repl.check", level: "warning", payload: { hostname: hosts[0] } });
		const out = await eventually(async () => {
			const text = await repl().run("alerts");
			return text.includes("repl.check") ? text : undefined;
		}, 5000, "the alert");
		// Its row: the level and the type, and the count of unread alerts under the table.
		expect(out.split("\n").find(l => l.includes("repl.check"))).toMatch(/\bwarning\b.*\brepl\.check\b/);
		expect(out).toMatch(/\n\d+ unread alert\(s\)$/);
	});

	it("shows hosts up and down over a range from the stats service's snapshots", async () => {
		// Snapshots at chosen times (the periodic ones are off: STATS_SNAPSHOTS=false), a host going down between them.
		const minute = 60_000;
		const now = Math.floor(Date.now() / minute) * minute;
		const count = async (where: Record<string, unknown>) => readJson(await cluster.call("hosts.list", { query: [["where", JSON.stringify(where)], ["max_results", "1"]] }))._meta.total as number;
		// What the fleet is when the first snapshot is taken: `up`, and the others (down, unknown) as down.
		const total = await count({});
		const up = await count({ status: "up" });
		expect(up).toBe(hosts.length);
		expect(total).toBeGreaterThan(up);
		const leaving = hosts[hosts.length - 1];
		expect(await cluster.call("stats.snapshot", { at: new Date(now - 50 * minute) })).toMatchObject({ index: 0 });
		await cluster.call("hosts.upsertMany", { hosts: [{ _id: leaving, status: "down" }] });
		expect(await cluster.call("stats.snapshot", { at: new Date(now - 20 * minute) })).toMatchObject({ index: 1 });
		const line = (u: number, d: number) => new RegExp(`  up +${u}  down +${d}  #{${Math.round((u / total) * 40)}}$`);
		try {
			const lines = (await repl().run("stats online 1h")).split("\n");
			expect(lines).toHaveLength(2);
			expect(lines[0]).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT  /);
			expect(lines[0]).toMatch(line(up, total - up));
			expect(lines[1]).toMatch(line(up - 1, total - up + 1));
			// The first point's bucket holds the snapshot 50 minutes ago, the second's the one 20 minutes ago (one-minute points).
			const ago = (text: string) => (Date.now() - Date.parse(text.slice(0, 29))) / minute;
			expect(ago(lines[0])).toBeGreaterThanOrEqual(50);
			expect(ago(lines[0])).toBeLessThan(52);
			expect(ago(lines[1])).toBeGreaterThanOrEqual(20);
			expect(ago(lines[1])).toBeLessThan(22);
			// Over 30 minutes only the second; over 10 none; over a day the last point is the later snapshot.
			expect((await repl().run("stats online 30m")).split("\n")).toEqual([expect.stringMatching(line(up - 1, total - up + 1))]);
			expect(await repl().run("stats online 10m")).toBe("no snapshots in the last 10m");
			const day = (await repl().run("stats online 24h")).split("\n");
			expect(day[day.length - 1]).toMatch(line(up - 1, total - up + 1));
		} finally {
			await cluster.call("hosts.upsertMany", { hosts: [{ _id: leaving, status: "up" }] });
		}
		expect(await repl().run("stats online soon")).toMatch(/range must look like/);
		expect(await repl(tokens.operator.secret).run("whoami")).toBe("repl-operator (operator)");
	});

	it("works in the real REPL (moleculer-runner --repl of the build) joining the cluster, in a pseudo-terminal", async () => {
		if (!fs.existsSync(path.join(DIST, "moleculer.config.js"))) throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
		const runner = path.join(ROOT, "node_modules/moleculer/bin/moleculer-runner.js");
		const cmd = `${process.execPath} ${runner} --config ${path.join(DIST, "moleculer.config.js")} --repl`;
		// script(1) gives the REPL a terminal, as when an operator runs `npm run repl`.
		const child: ChildProcess = spawn("script", ["-qfec", cmd, "/dev/null"], {
			cwd: ROOT,
			env: { ...process.env, TRANSPORTER: nats.url, NAMESPACE: namespace, SERVICES: "none", NODEID: `repl-tty-${process.pid}`, LOGLEVEL: "warn", REPL_OPERATOR_TOKEN: tokens.operator.secret, HOME: tempDir("repl-home"), TERM: "dumb" },
			stdio: ["pipe", "pipe", "pipe"],
		});
		let out = "";
		child.stdout?.on("data", d => (out += String(d)));
		child.stderr?.on("data", d => (out += String(d)));
		const type = (line: string) => child.stdin?.write(`${line}\r`);
		const waitFor = (re: RegExp, what: string) => eventually(async () => (re.test(out) ? true : undefined), 20_000, `${what}; output so far:\n${out}`);
		try {
			await waitFor(/fleet-ctl \$/, "the prompt");
			await eventually(async () => (client.registry.nodes.has(`repl-tty-${process.pid}`) ? true : undefined), 20_000, "the REPL node to join");
			type("whoami");
			await waitFor(/repl-operator \(operator\)/, "whoami");
			type(`hosts _id=${hosts[1]}`);
			await waitFor(/1 of 1 host\(s\)/, "hosts");
			type("exec repl-web test.ping");
			await waitFor(/3 of 3 host\(s\) answered/, "exec");
			type(`exec ${hosts[4]} test.arg 'typed at the prompt'`);
			await waitFor(/typed at the prompt/, "a quoted argument echoed back whole");
			type("help");
			await waitFor(/stats <what> \[range\]/, "help listing the commands");
		} finally {
			child.stdin?.write("\u0004");
			await new Promise<void>(resolve => {
				const timer = setTimeout(() => (child.kill("SIGKILL"), resolve()), 10_000);
				child.once("exit", () => (clearTimeout(timer), resolve()));
			});
		}
		const [rec] = await audit({ method: "REPL", path: "exec repl-web test.ping" });
		expect(rec.source).toMatch(/^repl@/);
		const [quoted] = await audit({ method: "REPL", fun: "test.arg", targets: hosts[4] });
		expect(quoted.args).toEqual({ cm_client: "local_async", arg: ["typed at the prompt"], kwarg: {} });
	}, 60_000);
});
