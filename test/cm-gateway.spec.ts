/**
 * Remote execution through the cm-gateway against the salt-api simulator, over real HTTP on both
 * sides: POST /api/hosts/{id} and /api/groups/{id}, the actions records and `last_action`, and
 * salt-api's failures (down, hanging, 401 mid-session, malformed answers).
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, type Harness } from "./support/harness";
import { request, expectEveError } from "./support/http";

const JID = /^\d{20}$/;

async function eventually<T>(fn: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await fn();
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error("timed out waiting");
		await new Promise(r => setTimeout(r, 100));
	}
}

describe("cm-gateway: remote execution against salt-api", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A: string, B: string, C: string, GONE: string;
	let group = "";
	let emptyGroup = "";
	const url = (path: string) => `${h.api}/${path}`;
	const run = (path: string, body: unknown) => request("POST", url(path), { body });
	const action = async (id: string) => {
		const res = await request("GET", url(`actions/${id}`));
		return res.status === 200 ? res.body : undefined;
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({ minions: 20, timeout: 1, gatherJobTimeout: 0, latencyMs: [2, 20], presenceEvents: false });
		const { url: salt } = await sim.start();
		const { username, password, eauth } = sim.credentials;
		h = await startEmbedded({
			env: {
				CM_API_URL: salt,
				CM_API_USER: username,
				CM_API_PASSWORD: password,
				CM_API_EAUTH: eauth,
				CM_API_TIMEOUT_MS: "2000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "2000",
			},
		});
		[A, B, C, GONE] = sim.upMinions();
		await h.call("hosts.upsertMany", { hosts: [A, B, C, GONE].map(_id => ({ _id, status: "up", key: "accepted" })) });
		expect((await request("DELETE", url(`hosts/${GONE}`))).status).toBe(204);
		const g = await request("POST", url("groups"), { body: { name: "cm-web", type: 0, hosts: [A, B] } });
		expect(g.status).toBe(201);
		group = g.body._id;
		const e = await request("POST", url("groups"), { body: { name: "cm-empty", type: 0 } });
		expect(e.status).toBe(201);
		emptyGroup = e.body._id;
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});
	afterEach(() => sim.clearFaults());

	it("runs `local` test.ping on a host: {task_id, status, return}, an actions record and the host's last_action", async () => {
		const res = await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(Object.keys(res.body)).toEqual(["task_id", "status", "return"]);
		expect(res.body.task_id).toMatch(JID);
		expect(res.body.status).toBe("finished");
		expect(res.body.return).toEqual({ return: [{ [A]: true }] });
		const jid = res.body.task_id;
		expect(sim.job(jid)).toMatchObject({ fun: "test.ping", tgt: [A], tgtType: "list" });
		const rec = await action(`${jid}${A}`);
		expect(rec).toMatchObject({ _id: `${jid}${A}`, jid, action: "test.ping", host: A, state: "finished", args: [], return: "true" });
		const host = await request("GET", url(`hosts/${A}`));
		expect(host.body.last_action).toBe(`${jid}${A}`);
	});

	it("records arg and kwarg as salt's fun_args (with __kwarg__) and a structured return as text", async () => {
		const res = await run(`hosts/${B}`, { cm_client: "local", fun: "test.arg", arg: ["x"], kwarg: { a: 1 } });
		expect(res.status).toBe(200);
		const rec = await action(`${res.body.task_id}${B}`);
		expect(rec.args).toEqual(["x", { __kwarg__: true, a: 1 }]);
		expect(typeof rec.return).toBe("string");
		expect(JSON.parse(rec.return)).toEqual(res.body.return.return[0][B]);
	});

	it("runs `local_async` (the default client): a 20-digit jid, status scheduled, and the returns recorded within seconds", async () => {
		const res = await run(`hosts/${C}`, { fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(res.body.task_id).toMatch(JID);
		expect(res.body.status).toBe("scheduled");
		expect(res.body.return).toEqual({ return: [{ jid: res.body.task_id, minions: [C] }] });
		const rec = await eventually(() => action(`${res.body.task_id}${C}`));
		expect(rec).toMatchObject({ jid: res.body.task_id, action: "test.ping", host: C, state: "finished", return: "true" });
		const host = await eventually(async () => {
			const r = await request("GET", url(`hosts/${C}`));
			return r.body.last_action === `${res.body.task_id}${C}` ? r.body : undefined;
		});
		expect(host._id).toBe(C);
	});

	it("marks the hosts of a local_async job that never answer as timed out", async () => {
		sim.setNeverReturns(B, true);
		try {
			const res = await run(`hosts/${B}`, { cm_client: "local_async", fun: "test.ping" });
			expect(res.status).toBe(200);
			const rec = await eventually(() => action(`${res.body.task_id}${B}`), 6000);
			expect(rec).toMatchObject({ host: B, state: "timeout" });
		} finally {
			sim.setNeverReturns(B, false);
		}
	});

	it("targets exactly the group's hostnames on POST /groups/{id}", async () => {
		sim.resetExecutions();
		const res = await run(`groups/${group}`, { cm_client: "local", fun: "test.ping", kwarg: {} });
		expect(res.status).toBe(200);
		expect(res.body.return).toEqual({ return: [{ [A]: true, [B]: true }] });
		expect(sim.job(res.body.task_id)).toMatchObject({ tgt: [A, B], tgtType: "list" });
		expect(sim.executionCount(A, "test.ping")).toBe(1);
		expect(sim.executionCount(B, "test.ping")).toBe(1);
		expect(sim.executionCount(C)).toBe(0);
		for (const host of [A, B]) expect(await action(`${res.body.task_id}${host}`)).toMatchObject({ state: "finished", host });

		const async = await run(`groups/${group}`, { cm_client: "local_async", fun: "test.ping" });
		expect(async.status).toBe(200);
		expect([...async.body.return.return[0].minions].sort()).toEqual([A, B].sort());
		for (const host of [A, B]) await eventually(() => action(`${async.body.task_id}${host}`));
	});

	it("answers 404 for an unknown or soft-deleted host and an unknown group, 422 for a group without hosts", async () => {
		sim.resetExecutions();
		expectEveError(await run("hosts/no-such-host.example", { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run(`hosts/${GONE}`, { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run("groups/000000000000000000000000", { cm_client: "local", fun: "test.ping" }), 404);
		expectEveError(await run(`groups/${emptyGroup}`, { cm_client: "local", fun: "test.ping" }), 422);
		expect(sim.executions()).toHaveLength(0);
	});

	it("answers 422 in Eve's shape for a bad body (unknown field, missing fun, bad cm_client, bad fun, bad kwarg)", async () => {
		sim.resetExecutions();
		const unknown = expectEveError(await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping", bogus: 1 }), 422);
		expect(unknown._issues).toEqual({ bogus: "unknown field" });
		expectEveError(await run(`hosts/${A}`, { cm_client: "local", kwarg: {} }), 422);
		const client = expectEveError(await run(`hosts/${A}`, { cm_client: "ssh", fun: "test.ping" }), 422);
		expect(Object.keys(client._issues)).toEqual(["cm_client"]);
		const fun = expectEveError(await run(`groups/${group}`, { fun: "rm -rf /" }), 422);
		expect(Object.keys(fun._issues)).toEqual(["fun"]);
		expectEveError(await run(`hosts/${A}`, { fun: "test.ping", kwarg: [1] }), 422);
		expect(sim.executions()).toHaveLength(0);
	});

	it("answers 502 when salt-api is down (never 500), and the rest of the API still answers", async () => {
		await sim.goDown("refuse");
		try {
			const res = expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 502);
			expect(res._error.message).toMatch(/unreachable/);
			expect(res._error.message).not.toContain(sim.credentials.password);
			const hosts = await request("GET", url("hosts"));
			expect(hosts.status).toBe(200);
		} finally {
			await sim.comeBack();
		}
		expect((await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
	});

	it("answers 504 when salt-api hangs, and 502 when the master is down", async () => {
		await sim.goDown("hang");
		try {
			expectEveError(await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" }), 504);
		} finally {
			await sim.comeBack();
		}
		await sim.goDown("master-down");
		try {
			expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 502);
		} finally {
			await sim.comeBack();
		}
	});

	it("logs in again after a 401 in the middle of a session and runs the job exactly once", async () => {
		expect((await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" })).status).toBe(200);
		sim.resetExecutions();
		const before = sim.requests().length;
		sim.expireSessions();
		const res = await run(`hosts/${A}`, { cm_client: "local", fun: "test.ping" });
		expect(res.status).toBe(200);
		expect(res.body.return.return[0][A]).toBe(true);
		expect(sim.executionCount(A, "test.ping")).toBe(1);
		const seen = sim.requests().slice(before).map(r => `${r.method} ${r.path} ${r.status}`);
		expect(seen).toEqual(["POST / 401", "POST /login 200", "POST / 200"]);
	});

	it("does not re-send a local_async whose answer was malformed or cut off: 502, executed once", async () => {
		for (const kind of ["garbage", "reset", "wrong-shape"] as const) {
			sim.resetExecutions();
			sim.malformNext(1, kind, { method: "POST", path: "/" });
			expectEveError(await run(`hosts/${A}`, { cm_client: "local_async", fun: "test.ping" }), 502);
			await new Promise(r => setTimeout(r, 300));
			expect([kind, sim.executions().length, sim.executionCount(A, "test.ping")]).toEqual([kind, 1, 1]);
		}
	});

	describe("POST /updates: loading the patches from the master", () => {
		const FIX1 = "apply_fix:\n  cmd.run:\n    - name: /opt/fix.sh\n";
		const WEB = "restart_web:\n  cmd.run:\n    - name: systemctl restart nginx\n";
		const load = (opts: { token?: string } = {}) => request("POST", url("updates"), opts);
		const patches = async (): Promise<Record<string, any>> => {
			const res = await request("GET", `${url("updates")}?max_results=50&sort=name`);
			expect(res.status).toBe(200);
			return Object.fromEntries(res.body._items.map((u: any) => [u.name, u]));
		};

		beforeAll(() => {
			sim.setPatch("fix1", FIX1);
			sim.setFile("patches/web/init.sls", WEB);
			// Not patches: outside the prefix, not a state file, or not nameable for state.apply.
			sim.setFile("other/fix9.sls", "x:\n  cmd.run:\n    - name: /bin/true\n");
			sim.setFile("patches/notes.txt", "not a state file\n");
			sim.setFile("patches/fix.v2.sls", "x:\n  cmd.run:\n    - name: /bin/true\n");
		});

		it("loads every .sls under patches/ with its sls name and text, and answers {_status, loaded, created}", async () => {
			const res = await load();
			expect(res.status).toBe(200);
			expect(res.body).toEqual({ _status: "OK", loaded: 4, created: 4 });
			const all = await patches();
			expect(Object.keys(all).sort()).toEqual(["patches.fix-ntp", "patches.fix1", "patches.openssl-cve-2024-5535", "patches.web"]);
			expect(all["patches.fix1"]).toMatchObject({ text: FIX1, description: "" });
			expect(all["patches.web"].text).toBe(WEB);
			expect(all["patches.fix-ntp"].text).toMatch(/cmd\.run/);
			// Loading again creates nothing.
			expect((await load()).body).toEqual({ _status: "OK", loaded: 4, created: 0 });
			expect(Object.keys(await patches())).toHaveLength(4);
		});

		it("ignores the files that are not patches (other directories, non-.sls files, unnameable sls)", async () => {
			expect(sim.files()).toEqual(expect.arrayContaining(["top.sls", "common.sls", "other/fix9.sls", "patches/notes.txt", "patches/files/timesyncd.conf", "patches/fix.v2.sls"]));
			await load();
			const names = Object.keys(await patches());
			for (const name of ["top", "common", "other.fix9", "patches.notes", "patches.files.timesyncd", "patches.fix.v2"]) expect(names).not.toContain(name);
			expect(names.every(n => n.startsWith("patches."))).toBe(true);
		});

		it("keeps a local description when the text changed on the master, and keeps patches removed from the master", async () => {
			await load();
			const id = (await patches())["patches.fix1"]._id;
			expect((await request("PATCH", url(`updates/${id}`), { body: { description: "Fixes the foo service" } })).status).toBe(200);
			const changed = "apply_fix:\n  cmd.run:\n    - name: /opt/fix.sh --v2\n";
			sim.setPatch("fix1", changed);
			expect(sim.removeFile("patches/web/init.sls")).toBe(true);
			try {
				const res = await load();
				expect(res.body).toEqual({ _status: "OK", loaded: 3, created: 0 });
				const item = await request("GET", url(`updates/${id}`));
				expect(item.body).toMatchObject({ _id: id, name: "patches.fix1", text: changed, description: "Fixes the foo service" });
				expect((await patches())["patches.web"]).toMatchObject({ text: WEB });
			} finally {
				sim.setFile("patches/web/init.sls", WEB);
			}
		});

		it("answers 502 when salt-api is down or the master is, 504 when it hangs, in Eve's shape (never 500)", async () => {
			const before = await patches();
			sim.setPatch("fix-late", FIX1);
			try {
				for (const mode of ["refuse", "master-down"] as const) {
					await sim.goDown(mode);
					try {
						const err = expectEveError(await load(), 502);
						expect(err._error.message).not.toContain(sim.credentials.password);
					} finally {
						await sim.comeBack();
					}
				}
				await sim.goDown("hang");
				try {
					expectEveError(await load(), 504);
				} finally {
					await sim.comeBack();
				}
				sim.failNext(10, 500, { filter: { method: "POST", path: "/" } });
				expectEveError(await load(), 502);
				sim.clearFaults();
				expect(Object.keys(await patches()).sort()).toEqual(Object.keys(before).sort());
			} finally {
				sim.removeFile("patches/fix-late.sls");
			}
		});

		it("refuses a viewer token with 403", async () => {
			const tok = await request("POST", url("tokens"), { body: { name: "cm-viewer", role: "viewer" } });
			expect(tok.status).toBe(201);
			sim.resetExecutions();
			const before = sim.requests().length;
			expectEveError(await load({ token: tok.body.token }), 403);
			expect(sim.requests().length).toBe(before);
		});
	});
});

describe("cm-gateway without a configured master", () => {
	let h: Harness;
	beforeAll(async () => {
		h = await startEmbedded({ env: { CM_API_URL: "" } });
		await h.call("hosts.upsertMany", { hosts: [{ _id: "nomaster-1.example", status: "up" }] });
	});
	afterAll(() => h?.stop());

	it("answers 503 in Eve's shape for remote execution and serves the rest of the API", async () => {
		const res = expectEveError(await request("POST", `${h.api}/hosts/nomaster-1.example`, { body: { cm_client: "local", fun: "test.ping" } }), 503);
		expect(res._error.message).toMatch(/no configuration-management master is configured/);
		const g = await request("POST", `${h.api}/groups`, { body: { name: "nm", hosts: ["nomaster-1.example"] } });
		expectEveError(await request("POST", `${h.api}/groups/${g.body._id}`, { body: { fun: "test.ping" } }), 503);
		expect((await request("GET", `${h.api}/hosts/nomaster-1.example`)).status).toBe(200);
	});

	it("answers 503 in Eve's shape for POST /updates (no master to load the patches from)", async () => {
		const res = expectEveError(await request("POST", `${h.api}/updates`), 503);
		expect(res._error.message).toMatch(/no configuration-management master is configured/);
	});
});
