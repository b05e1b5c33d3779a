/**
 * Access control around the API (issue 3): the per-token rate limit, the bootstrap admin token of the
 * production command on the embedded default, and NATS credentials as the cluster's trust boundary.
 */
import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Loggers, ServiceBroker, type BrokerOptions } from "moleculer";
import {
	ADMIN_TOKEN,
	ALL_SERVICES,
	apiOf,
	runServices,
	startEmbedded,
	tempDir,
	type Harness,
	type Proc,
} from "../support/harness";
import { natsServerBinary, spawnNats } from "../support/net";
import { request, expectEveError } from "../support/http";

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

async function until<T>(
	what: string,
	probe: () => Promise<T | undefined> | T | undefined,
	timeoutMs = 30_000,
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const value = await probe();
		if (value !== undefined) return value;
		await sleep(100);
	}
	throw new Error(`timed out waiting for ${what}`);
}

/** Stops the process and waits until it exited and everything it printed has been read ("close", not "exit"). */
function sigterm(proc: Proc): Promise<number | null> {
	return new Promise(resolve => {
		if (proc.child.exitCode !== null || proc.child.signalCode !== null) return resolve(proc.child.exitCode);
		proc.child.once("close", code => resolve(code));
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
		const limitedToken = await request("POST", `${h.api}/tokens`, { body: { name: "limited-admin", role: "admin" } });
		expect(limitedToken.status).toBe(201);
		const token = limitedToken.body.token as string;
		const other = await request("POST", `${h.api}/tokens`, { body: { name: "other", role: "viewer" } });
		expect(other.status).toBe(201);
		const auditor = await request("POST", `${h.api}/tokens`, { body: { name: "auditor", role: "admin" } });
		expect(auditor.status).toBe(201);

		// The limit counts in a fixed one-minute window per gateway (the api service's rateWindowStart; the first
		// request a minute or more after it starts the next). The burst below must fall in one window, or its
		// counts restart half-way: with less than half a minute of the current window left, the window's end is
		// waited for, and the burst's first request starts a fresh one. Checked at the end: still that window.
		const gateway = h.broker!.getLocalService("api") as unknown as { rateWindowStart: number };
		const windowEnd = gateway.rateWindowStart + 60_000;
		// Not an oracle: time has to pass for the window to end (the service has no timer for it, requests move it).
		if (windowEnd - Date.now() < 30_000) await sleep(windowEnd - Date.now() + 10);
		expect((await request("GET", `${h.api}/hosts?n=1`, { token })).status).toBe(200);
		const window = gateway.rateWindowStart;
		expect(window + 60_000 - Date.now()).toBeGreaterThanOrEqual(29_000);
		for (let i = 2; i <= LIMIT; i++)
			expect([i, (await request("GET", `${h.api}/hosts?n=${i}`, { token })).status]).toEqual([i, 200]);

		const limited = await request("GET", `${h.api}/hosts`, { token });
		const body = expectEveError(limited, 429);
		expect(body).toEqual({ _status: "ERR", _error: { code: 429, message: "Rate limit exceeded" } });
		const retryAfter = limited.headers.get("retry-after");
		expect(retryAfter).toMatch(/^\d+$/);
		expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
		expect(Number(retryAfter)).toBeLessThanOrEqual(60);
		// Every route, writes too, and it stays limited.
		expectEveError(await request("POST", `${h.api}/groups`, { token, body: { name: "limited" } }), 429);
		expectEveError(await request("GET", `${h.api}/`, { token }), 429);

		// Another token, and requests without one, are not affected.
		expect((await request("GET", `${h.api}/hosts`, { token: other.body.token })).status).toBe(200);
		expectEveError(await request("GET", `${h.api}/hosts`, { token: null }), 401);
		// All in the one window: the counts above were never restarted.
		expect(gateway.rateWindowStart).toBe(window);
		const audit = await request("GET", `${h.api}/audit?where=${encodeURIComponent('{"status": 429}')}`, {
			token: auditor.body.token,
		});
		expect(audit.status).toBe(200);
		expect(audit.body._items).toEqual([
			expect.objectContaining({ method: "POST", path: "/api/groups", outcome: "denied", name: "limited-admin" }),
		]);
		expect(
			(
				await request("GET", `${h.api}/groups?where=${encodeURIComponent('{"name":"limited"}')}`, {
					token: other.body.token,
				})
			).body._meta.total,
		).toBe(0);
	});
});

describe("the bootstrap admin token of the production command", () => {
	const BANNER = /\nadmin token \(shown once, keep it safe\): (fct_[A-Za-z0-9_-]{43})\n/;

	it("is generated on a fresh DATA_DIR without CTL_ADMIN_TOKEN, printed once, kept only as a hash, and replaced by a CTL_ADMIN_TOKEN", async () => {
		const dataDir = tempDir("bootstrap");
		// CTL_ADMIN_TOKEN="" counts as unset (the harness sets it for every other process). PORT 0: each start
		// binds a port of its own choosing, read back (apiOf).
		const env = {
			DATA_DIR: dataDir,
			PORT: "0",
			HOST: "127.0.0.1",
			TRANSPORTER: "",
			CTL_ADMIN_TOKEN: "",
			LOGLEVEL: "info",
		};

		let proc = runServices([], env);
		try {
			const token = await until("the printed admin token", () => {
				if (proc.child.exitCode !== null) throw new Error(`exited early:\n${proc.log.join("")}`);
				return BANNER.exec(proc.log.join(""))?.[1];
			});
			let api = await apiOf(proc);
			await until("the API", async () => ((await apiStatus(api, token)) === 200 ? true : undefined));
			expect(proc.log.join("").split("admin token (shown once").length).toBe(2);
			expectEveError(await request("GET", `${api}/settings/0`, { token: ADMIN_TOKEN }), 401);
			const list = await request("GET", `${api}/tokens`, { token });
			expect(list.body._items).toEqual([
				expect.objectContaining({
					name: "bootstrap-admin",
					role: "admin",
					bootstrap: true,
					revoked: false,
					prefix: token.slice(0, 8),
				}),
			]);
			expect((await request("POST", `${api}/groups`, { token, body: { name: "made-by-bootstrap" } })).status).toBe(201);

			// Only the hash is kept.
			const file = fs.readFileSync(path.join(dataDir, "tokens.db"), "utf8");
			expect(file).toContain(createHash("sha256").update(token).digest("hex"));
			expect(file).not.toContain(token);
			expect(file).not.toContain(token.slice(8));

			// A restart prints nothing and the token still works. "Prints nothing" is read once the process has
			// ended and all it printed was read (sigterm waits for its output to close), not after a fixed wait.
			expect(await sigterm(proc)).toBe(0);
			proc = runServices([], env);
			api = await apiOf(proc);
			await until("the API after a restart", async () => ((await apiStatus(api, token)) === 200 ? true : undefined));
			expect((await request("GET", `${api}/tokens`, { token })).body._items).toHaveLength(1);
			expect(await sigterm(proc)).toBe(0);
			expect(proc.log.join("")).toMatch(/API Gateway listening/);
			expect(proc.log.join("")).not.toContain("admin token");
			expect(proc.log.join("")).not.toContain(token);

			// CTL_ADMIN_TOKEN, once set, replaces the generated token.
			const chosen = `fct_chosen-${randomBytes(12).toString("hex")}`;
			proc = runServices([], { ...env, CTL_ADMIN_TOKEN: chosen });
			api = await apiOf(proc);
			await until("the API with CTL_ADMIN_TOKEN", async () =>
				(await apiStatus(api, chosen)) === 200 ? true : undefined,
			);
			expectEveError(await request("GET", `${api}/settings/0`, { token }), 401);
			expect(await sigterm(proc)).toBe(0);
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
		const text = (a: unknown) =>
			a instanceof Error ? `${a.message} ${a.stack}` : typeof a === "string" ? a : JSON.stringify(a);
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
		const bin = natsServerBinary();
		if (!bin) throw new Error("this test needs a nats-server binary on PATH (or /usr/sbin/nats-server)");
		return bin;
	}

	beforeAll(async () => {
		// On a port nats-server picks itself (-p -1) and prints.
		({ child: server, port } = await spawnNats(natsBin(), null, ["--user", USER, "--pass", PASSWORD]));
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
			// The end of its attempt: the transit's "Connection is failed." (with reconnecting disabled nothing comes
			// after it; the start could only have finished before), not a fixed wait.
			await until(
				"the failed connection",
				() => (/^warn Connection is failed\./m.test(log.join("\n")) ? true : undefined),
				10_000,
			);
			expect(started).toBe(false);
			expect(outsider.transit?.connected).toBe(false);
			expect(log.join("\n")).not.toContain(PASSWORD);
		}
	});

	it("runs the production command with credentials in TRANSPORTER and never prints the password", async () => {
		const url = `nats://${USER}:${PASSWORD}@127.0.0.1:${port}`;
		const env = {
			DATA_DIR: tempDir("creds"),
			PORT: "0",
			HOST: "127.0.0.1",
			TRANSPORTER: url,
			NAMESPACE: "creds",
			LOGLEVEL: "debug",
		};
		const data = runServices(
			ALL_SERVICES().filter(s => s !== "api"),
			env,
		);
		const gateway = runServices(["api"], env);
		procs.push(data, gateway);
		const api = await apiOf(gateway);
		await until("the API over an authenticated NATS", async () =>
			(await apiStatus(api, ADMIN_TOKEN)) === 200 ? true : undefined,
		);
		// A broker of this test, with the credentials, sees and calls the processes' services.
		const client = broker(url, []);
		await client.start();
		await client.waitForServices(["settings", "api"], 10_000);
		expect(await client.call("settings.exist", { ids: ["0"] })).toEqual(["0"]);
		expect((await request("POST", `${api}/groups`, { body: { name: "over-authenticated-nats" } })).status).toBe(201);

		// And one process that gives the wrong password: refused, and it says so without the password.
		const refused = runServices(["settings"], {
			...env,
			TRANSPORTER: `nats://${USER}:not-${PASSWORD}@127.0.0.1:${port}`,
			NODEID: `refused-${process.pid}`,
		});
		procs.push(refused);
		await until(
			"the refused process to report it",
			() => (/Authorization Violation/i.test(refused.log.join("")) ? true : undefined),
			15_000,
		);
		expect(client.registry.nodes.toArray().map(n => n.id)).not.toContain(`refused-${process.pid}`);

		await Promise.all([sigterm(data), sigterm(gateway), sigterm(refused)]);
		const output = [data, gateway, refused].map(p => p.log.join("")).join("\n");
		expect(output.length).toBeGreaterThan(1000);
		expect(output).not.toContain(PASSWORD);
	});

	it("takes a NATS token in TRANSPORTER (nats://<token>@host:port) in the production command", async () => {
		const TOKEN = `natsTok${randomBytes(8).toString("hex")}`;
		const { child: tokenServer, port: tokenPort } = await spawnNats(natsBin(), null, ["--auth", TOKEN]);
		const onTokenServer: ServiceBroker[] = [];
		try {
			const env = {
				DATA_DIR: tempDir("creds-token"),
				PORT: "0",
				TRANSPORTER: `nats://${TOKEN}@127.0.0.1:${tokenPort}`,
				NAMESPACE: "creds",
				LOGLEVEL: "debug",
			};
			const proc = runServices(["settings"], env);
			procs.push(proc);
			const client = broker(`nats://127.0.0.1:${tokenPort}`, []);
			onTokenServer.push(client);
			(client.transit!.tx as unknown as { opts: Record<string, unknown> }).opts.token = TOKEN;
			await client.start();
			await client.waitForServices(["settings"], 15_000);
			expect(await client.call("settings.exist", { ids: ["0"] })).toEqual(["0"]);
			// With a wrong token: refused.
			const log: string[] = [];
			const refused = broker(`nats://wrong${TOKEN}@127.0.0.1:${tokenPort}`, log);
			onTokenServer.push(refused);
			void refused.start();
			await until("the refusal", () => (/Authorization Violation/i.test(log.join("\n")) ? true : undefined), 10_000);
			expect(refused.transit?.connected).toBe(false);
			await sigterm(proc);
			expect(proc.log.join("")).toMatch(/NATS client is connected/);
			expect(proc.log.join("")).not.toContain(TOKEN);
		} finally {
			// Its brokers leave before the server goes: a NATS client that loses its server keeps reconnecting,
			// and its timers kept jest's worker from exiting at the end of the run.
			for (const b of onTokenServer) await b.stop().catch(() => undefined);
			tokenServer.kill("SIGTERM");
		}
	});
});
