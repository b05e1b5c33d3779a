/**
 * Access control around the API (issue 3): the per-token rate limit, the bootstrap admin token of the
 * production command on the embedded default, and NATS credentials as the cluster's trust boundary.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { Loggers, ServiceBroker, type BrokerOptions } from "moleculer";
import { ADMIN_TOKEN, ALL_SERVICES, freePort, runServices, startEmbedded, tempDir, type Harness, type Proc } from "../support/harness";
import { request, expectEveError } from "../support/http";

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const value = await probe();
		if (value !== undefined) return value;
		await sleep(100);
	}
	throw new Error(`timed out waiting for ${what}`);
}

function sigterm(proc: Proc): Promise<number | null> {
	return new Promise(resolve => {
		if (proc.child.exitCode !== null) return resolve(proc.child.exitCode);
		proc.child.once("exit", code => resolve(code));
		proc.child.kill("SIGTERM");
	});
}

/** The API of a production process answers this token (any status but a refused connection). */
async function apiStatus(api: string, token: string): Promise<number | undefined> {
	try {
		return (await fetch(`${api}/settings/0`, { headers: { authorization: `Bearer ${token}` } })).status;
	} catch {
		return undefined;
	}
}

describe("rate limit per token", () => {
	const LIMIT = 20;
	let h: Harness;
	beforeAll(async () => {
		h = await startEmbedded({ env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) } });
	});
	afterAll(() => h?.stop());

	it("answers 429 in Eve's shape with a numeric Retry-After past the limit, and leaves other tokens alone", async () => {
		const other = await request("POST", `${h.api}/tokens`, { body: { name: "other", role: "viewer" } });
		expect(other.status).toBe(201);
		const auditor = await request("POST", `${h.api}/tokens`, { body: { name: "auditor", role: "admin" } });
		expect(auditor.status).toBe(201);
		for (let i = 3; i <= LIMIT; i++) expect([i, (await request("GET", `${h.api}/hosts?n=${i}`)).status]).toEqual([i, 200]);

		const limited = await request("GET", `${h.api}/hosts`);
		const body = expectEveError(limited, 429);
		expect(body).toEqual({ _status: "ERR", _error: { code: 429, message: "Rate limit exceeded" } });
		const retryAfter = limited.headers.get("retry-after");
		expect(retryAfter).toMatch(/^\d+$/);
		expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
		expect(Number(retryAfter)).toBeLessThanOrEqual(60);
		// Every route, writes too, and it stays limited.
		expectEveError(await request("POST", `${h.api}/groups`, { body: { name: "limited" } }), 429);
		expectEveError(await request("GET", `${h.api}/`), 429);

		// Another token, and requests without one, are not affected.
		expect((await request("GET", `${h.api}/hosts`, { token: other.body.token })).status).toBe(200);
		expectEveError(await request("GET", `${h.api}/hosts`, { token: null }), 401);
		const audit = await request("GET", `${h.api}/audit?where=${encodeURIComponent('{"status": 429}')}`, { token: auditor.body.token });
		expect(audit.status).toBe(200);
		expect(audit.body._items).toEqual([expect.objectContaining({ method: "POST", path: "/api/groups", outcome: "denied", name: "bootstrap-admin" })]);
		expect((await request("GET", `${h.api}/groups?where=${encodeURIComponent('{"name":"limited"}')}`, { token: other.body.token })).body._meta.total).toBe(0);
	});
});

describe("the bootstrap admin token of the production command", () => {
	const BANNER = /fleet-ctl: admin token \(shown once, keep it safe\): (fct_[A-Za-z0-9_-]{43})\n/;

	it("is generated on a fresh DATA_DIR without CTL_ADMIN_TOKEN, printed once, kept only as a hash, and replaced by a CTL_ADMIN_TOKEN", async () => {
		const port = await freePort();
		const dataDir = tempDir("bootstrap");
		// CTL_ADMIN_TOKEN="" counts as unset (the harness sets it for every other process).
		const env = { DATA_DIR: dataDir, PORT: String(port), HOST: "127.0.0.1", TRANSPORTER: "", CTL_ADMIN_TOKEN: "", LOGLEVEL: "info" };
		const api = `http://127.0.0.1:${port}/api`;

		let proc = runServices([], env);
		try {
			const token = await until("the printed admin token", () => {
				if (proc.child.exitCode !== null) throw new Error(`exited early:\n${proc.log.join("")}`);
				return BANNER.exec(proc.log.join(""))?.[1];
			});
			await until("the API", async () => ((await apiStatus(api, token)) === 200 ? true : undefined));
			expect(proc.log.join("").split("admin token (shown once").length).toBe(2);
			expectEveError(await request("GET", `${api}/settings/0`, { token: ADMIN_TOKEN }), 401);
			const list = await request("GET", `${api}/tokens`, { token });
			expect(list.body._items).toEqual([expect.objectContaining({ name: "bootstrap-admin", role: "admin", bootstrap: true, revoked: false, prefix: token.slice(0, 8) })]);
			expect((await request("POST", `${api}/groups`, { token, body: { name: "made-by-bootstrap" } })).status).toBe(201);

			// Only the hash is kept.
			const file = fs.readFileSync(path.join(dataDir, "tokens.db"), "utf8");
			expect(file).toContain(createHash("sha256").update(token).digest("hex"));
			expect(file).not.toContain(token);
			expect(file).not.toContain(token.slice(8));

			// A restart prints nothing and the token still works.
			expect(await sigterm(proc)).toBe(0);
			proc = runServices([], env);
			await until("the API after a restart", async () => ((await apiStatus(api, token)) === 200 ? true : undefined));
			await sleep(300);
			expect(proc.log.join("")).not.toContain("admin token");
			expect(proc.log.join("")).not.toContain(token);
			expect((await request("GET", `${api}/tokens`, { token })).body._items).toHaveLength(1);

			// CTL_ADMIN_TOKEN, once set, replaces the generated token.
			expect(await sigterm(proc)).toBe(0);
			const chosen = `fct_chosen-${randomBytes(12).toString("hex")}`;
			proc = runServices([], { ...env, CTL_ADMIN_TOKEN: chosen });
			await until("the API with CTL_ADMIN_TOKEN", async () => ((await apiStatus(api, chosen)) === 200 ? true : undefined));
			expectEveError(await request("GET", `${api}/settings/0`, { token }), 401);
			expect(proc.log.join("")).not.toContain("admin token");
			expect(proc.log.join("")).not.toContain(chosen);
			expect(fs.readFileSync(path.join(dataDir, "tokens.db"), "utf8")).not.toContain(chosen);
		} finally {
			await sigterm(proc);
		}
	});
});

describe("NATS credentials", () => {
	const USER = "fleet";
	const PASSWORD = `nats-Pw-${randomBytes(8).toString("hex")}`;
	let server: ChildProcess;
	let port: number;
	const brokers: ServiceBroker[] = [];
	const procs: Proc[] = [];

	/** A broker that keeps every log line (down to debug) in `log`, and does not retry a refused connection. */
	function broker(url: string, log: string[]): ServiceBroker {
		const text = (a: unknown) => (a instanceof Error ? `${a.message} ${a.stack}` : typeof a === "string" ? a : JSON.stringify(a));
		class Capture extends Loggers.Base<{ level: "debug" }> {
			override getLogHandler() {
				return (level: string, args: unknown[]) => void log.push(`${level} ${args.map(text).join(" ")}`);
			}
		}
		const b = new ServiceBroker({
			logger: new Capture({ level: "debug" }),
			namespace: "creds",
			nodeID: `creds-${brokers.length}-${process.pid}`,
			transporter: url as BrokerOptions["transporter"],
			transit: { disableReconnect: true },
		});
		brokers.push(b);
		return b;
	}

	function natsBin(): string {
		const which = spawnSync("sh", ["-c", "command -v nats-server || ls /usr/sbin/nats-server"], { encoding: "utf8" });
		const bin = which.stdout.trim().split("\n")[0];
		if (!bin) throw new Error("this test needs a nats-server binary on PATH (or /usr/sbin/nats-server)");
		return bin;
	}
	const untilListening = (p: number) =>
		until(
			`nats-server on port ${p}`,
			() =>
				new Promise<true | undefined>(resolve => {
					const socket = net.connect({ port: p, host: "127.0.0.1" });
					socket.once("connect", () => (socket.destroy(), resolve(true)));
					socket.once("error", () => resolve(undefined));
				}),
			10_000,
		);

	beforeAll(async () => {
		port = await freePort();
		server = spawn(natsBin(), ["-a", "127.0.0.1", "-p", String(port), "--user", USER, "--pass", PASSWORD], { stdio: "ignore" });
		await untilListening(port);
	});
	afterAll(async () => {
		await Promise.all(procs.map(sigterm));
		for (const b of brokers) await b.stop().catch(() => undefined);
		server?.kill("SIGTERM");
	});

	it("lets brokers with the credentials in TRANSPORTER join and call each other", async () => {
		const log: string[] = [];
		const provider = broker(`nats://${USER}:${PASSWORD}@127.0.0.1:${port}`, log);
		provider.createService({ name: "creds-probe", actions: { hello: () => "hello over NATS" } });
		await provider.start();
		const caller = broker(`nats://${USER}:${PASSWORD}@127.0.0.1:${port}`, log);
		await caller.start();
		await caller.waitForServices("creds-probe", 10_000);
		expect(await caller.call("creds-probe.hello")).toBe("hello over NATS");
		expect(log.join("\n")).not.toContain(PASSWORD);
	});

	it("keeps a broker without credentials, or with a wrong password, out of the cluster", async () => {
		for (const url of [`nats://127.0.0.1:${port}`, `nats://${USER}:wrong-${PASSWORD}@127.0.0.1:${port}`]) {
			const log: string[] = [];
			const outsider = broker(url, log);
			let started = false;
			void outsider.start().then(() => (started = true));
			await until("the refusal", () => (/Authorization Violation/i.test(log.join("\n")) ? true : undefined), 10_000);
			await sleep(200);
			expect(started).toBe(false);
			expect(outsider.transit?.connected).toBe(false);
			expect(log.join("\n")).not.toContain(PASSWORD);
		}
	});

	it("runs the production command with credentials in TRANSPORTER and never prints the password", async () => {
		const apiPort = await freePort();
		const url = `nats://${USER}:${PASSWORD}@127.0.0.1:${port}`;
		const env = { DATA_DIR: tempDir("creds"), PORT: String(apiPort), HOST: "127.0.0.1", TRANSPORTER: url, NAMESPACE: "creds", LOGLEVEL: "debug" };
		const data = runServices(ALL_SERVICES().filter(s => s !== "api"), env);
		const gateway = runServices(["api"], env);
		procs.push(data, gateway);
		const api = `http://127.0.0.1:${apiPort}/api`;
		await until("the API over an authenticated NATS", async () => ((await apiStatus(api, ADMIN_TOKEN)) === 200 ? true : undefined));
		// A broker of this test, with the credentials, sees and calls the processes' services.
		const client = broker(url, []);
		await client.start();
		await client.waitForServices(["settings", "api"], 10_000);
		expect(await client.call("settings.exist", { ids: ["0"] })).toEqual(["0"]);
		expect((await request("POST", `${api}/groups`, { body: { name: "over-authenticated-nats" } })).status).toBe(201);

		// And one process that gives the wrong password: refused, and it says so without the password.
		const refused = runServices(["settings"], { ...env, TRANSPORTER: `nats://${USER}:not-${PASSWORD}@127.0.0.1:${port}`, NODEID: `refused-${process.pid}` });
		procs.push(refused);
		await until("the refused process to report it", () => (/Authorization Violation/i.test(refused.log.join("")) ? true : undefined), 15_000);
		expect(client.registry.nodes.toArray().map(n => n.id)).not.toContain(`refused-${process.pid}`);

		await Promise.all([sigterm(data), sigterm(gateway), sigterm(refused)]);
		const output = [data, gateway, refused].map(p => p.log.join("")).join("\n");
		expect(output.length).toBeGreaterThan(1000);
		expect(output).not.toContain(PASSWORD);
	});

	it("takes a NATS token in TRANSPORTER (nats://<token>@host:port) in the production command", async () => {
		const tokenPort = await freePort();
		const TOKEN = `natsTok${randomBytes(8).toString("hex")}`;
		const tokenServer = spawn(natsBin(), ["-a", "127.0.0.1", "-p", String(tokenPort), "--auth", TOKEN], { stdio: "ignore" });
		try {
			await untilListening(tokenPort);
			const env = { DATA_DIR: tempDir("creds-token"), PORT: "0", TRANSPORTER: `nats://${TOKEN}@127.0.0.1:${tokenPort}`, NAMESPACE: "creds", LOGLEVEL: "debug" };
			const proc = runServices(["settings"], env);
			procs.push(proc);
			const client = broker(`nats://127.0.0.1:${tokenPort}`, []);
			(client.transit?.tx as unknown as { opts: Record<string, unknown> }).opts.token = TOKEN;
			await client.start();
			await client.waitForServices(["settings"], 15_000);
			expect(await client.call("settings.exist", { ids: ["0"] })).toEqual(["0"]);
			// With a wrong token: refused.
			const log: string[] = [];
			const refused = broker(`nats://wrong${TOKEN}@127.0.0.1:${tokenPort}`, log);
			void refused.start();
			await until("the refusal", () => (/Authorization Violation/i.test(log.join("\n")) ? true : undefined), 10_000);
			expect(refused.transit?.connected).toBe(false);
			await sigterm(proc);
			expect(proc.log.join("")).toMatch(/NATS client is connected/);
			expect(proc.log.join("")).not.toContain(TOKEN);
		} finally {
			tokenServer.kill("SIGTERM");
		}
	});
});
