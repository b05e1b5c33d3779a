/**
 * Fault handling as moleculer.config.ts configures it (issue 9, item 6; docs/operations.md "Faults"): calls
 * sent again only when nothing ran or the call is idempotent, the circuit breaker, the bulkheads in front of
 * salt-api and Pritunl, and readiness while MongoDB is away. Every broker here is built from the real
 * configuration, imported (small bulkheads through its own environment variables); several nodes talk over
 * Moleculer's in-process Fake transporter, with stand-in services on the far side where a test must count
 * or hold what reaches them; the bulkheads are met through the whole application against the simulators.
 */
import net from "node:net";
import path from "node:path";
import { ServiceBroker, type BrokerOptions, type Context, type ServiceSchema } from "moleculer";
import { ADMIN_TOKEN, ROOT, freePort, startEmbedded, tempDir, uniqueMongoUri, type Harness } from "../support/harness";
import { eventually, expectEveError, request, type Reply } from "../support/http";
import { SUITE_ENV } from "../support/suite-env";
import { SaltApiSimulator } from "../simulators/salt-api";
import { PritunlSimulator } from "../simulators/pritunl";
import { EveError } from "../../lib/eve/errors";
import { HealthMiddleware } from "../../lib/runtime/health";
import { loadConfig, useConfig } from "../../lib/config";

// Read by moleculer.config.ts when it is loaded: a bulkhead of 2 running + 2 waiting per action.
const CONCURRENCY = 2;
const QUEUE = 2;
Object.assign(process.env, {
	BULKHEAD_CONCURRENCY: String(CONCURRENCY),
	BULKHEAD_QUEUE: String(QUEUE),
	SHUTDOWN_TIMEOUT_MS: "2000",
	HEALTH_PORT: "0",
});
const loaded: BrokerOptions = require("../../moleculer.config").default;
/**
 * moleculer.config.ts's options, but each broker gets the configuration of the environment as it is when the broker
 * is made (moleculer.config.ts attaches the one it loaded on import; these suites set theirs after).
 */
const config: BrokerOptions = {
	...loaded,
	created(broker) {
		loaded.created?.call(this, broker);
		useConfig(broker, loadConfig());
	},
};

const LOGGER = process.env.TEST_LOG ? { type: "Console" } : false;
/** The configuration's middlewares but its health listener (one per process; the Mongo test makes its own). */
const MIDDLEWARES = (config.middlewares as Array<{ name?: string }>).filter(m => m.name !== "Health");
const MONGO_URI = process.env.MONGO_URI;

/** A node of a cluster on the Fake transporter, with the production options. */
function node(namespace: string, nodeID: string, services: ServiceSchema[] = []): ServiceBroker {
	const broker = new ServiceBroker({
		...config,
		namespace,
		nodeID,
		transporter: "Fake",
		logger: LOGGER as never,
		metrics: { enabled: false },
		middlewares: MIDDLEWARES as never,
		replOptions: undefined,
	});
	for (const s of services) broker.createService(s);
	return broker;
}

/** The gateway and what it needs of its own (tokens, audit) on one node; every other service is elsewhere. */
async function startGateway(namespace: string): Promise<{ broker: ServiceBroker; api: string }> {
	Object.assign(process.env, {
		CTL_ADMIN_TOKEN: ADMIN_TOKEN,
		RATE_LIMIT_PER_MINUTE: "1000000",
		PORT: "0",
		HOST: "127.0.0.1",
		DATA_DIR: tempDir("resilience"),
		MONGO_URI: "",
	});
	const broker = node(namespace, "gateway");
	for (const s of ["api/api", "tokens/tokens", "audit/audit"])
		broker.loadService(path.join(ROOT, "services", `${s}.service.ts`));
	await broker.start();
	const { port } = (
		broker.getLocalService("api") as unknown as { server: net.Server }
	).server.address() as net.AddressInfo;
	return { broker, api: `http://127.0.0.1:${port}/api` };
}

/** Until `broker` sees `action` on every one of `nodeIDs`. */
function discovered(broker: ServiceBroker, action: string, nodeIDs: string[]): Promise<true> {
	const endpoints = () =>
		(
			broker.registry.getActionEndpoints(action) as unknown as
				| { endpoints?: Array<{ id: string; isAvailable: boolean }> }
				| undefined
		)?.endpoints ?? [];
	return eventually(
		async () => (nodeIDs.every(id => endpoints().some(ep => ep.id === id && ep.isAvailable)) ? true : undefined),
		10_000,
		`${action} on ${nodeIDs.join(", ")}`,
	);
}

/** A node dies without a word (no DISCONNECT): its link is gone, and `seenBy` drops it as its heartbeat check does. */
async function crash(victim: ServiceBroker, seenBy: ServiceBroker): Promise<void> {
	await victim.transit!.tx.disconnect();
	(seenBy.registry as unknown as { nodes: { disconnected(id: string, unexpected: boolean): void } }).nodes.disconnected(
		victim.nodeID,
		true,
	);
}

type Mode = "answer" | "hold" | "crash" | "eve";

/** Stand-in services on one node: count the calls that reach each action, and answer as `mode` says. */
class Callee {
	mode: Mode = "answer";
	private readonly calls = new Map<string, number>();
	private held: Array<() => void> = [];
	constructor(readonly nodeID: string) {}

	count(action: string): number {
		return this.calls.get(action) ?? 0;
	}

	/** The calls being held answer now. */
	release(): void {
		for (const done of this.held.splice(0)) done();
	}

	service(name: string, actions: string[]): ServiceSchema {
		const handler = async (action: string, ctx: Context) => {
			this.calls.set(action, this.count(action) + 1);
			if (this.mode === "hold") await new Promise<void>(done => this.held.push(done));
			if (this.mode === "crash") throw new TypeError("Cannot read properties of undefined (reading 'grains')");
			if (this.mode === "eve") throw new EveError(502, "salt-api is not reachable");
			return { _id: (ctx.params as { id?: string }).id ?? action, served_by: this.nodeID };
		};
		return { name, actions: Object.fromEntries(actions.map(a => [a, (ctx: Context) => handler(`${name}.${a}`, ctx)])) };
	}
}

/** The production options for one process running every service (startEmbedded). */
const embedded = (name: string, extra: Partial<BrokerOptions> = {}): Partial<BrokerOptions> => ({
	...config,
	nodeID: `${name}-${process.pid}`,
	transporter: null,
	logger: LOGGER as never,
	replOptions: undefined,
	...extra,
});

const uniqueNamespace = (what: string) => `resilience-${what}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const RUN = { cm_client: "local", fun: "test.ping" };

describe("retries: a call is sent again only when nothing ran, or when it is a read", () => {
	const ns = uniqueNamespace("retries");
	let gw: { broker: ServiceBroker; api: string };
	const started: ServiceBroker[] = [];
	const callees: Callee[] = [];
	const url = (p: string) => `${gw.api}/${p}`;

	/** A node with stand-ins for the services a test needs, known to the gateway. */
	const startCallee = async (nodeID: string, mode: Mode = "answer") => {
		const callee = new Callee(nodeID);
		callee.mode = mode;
		const broker = node(ns, nodeID, [
			callee.service("hosts", ["get"]),
			callee.service("cm-gateway", ["runOnHost"]),
			callee.service("probe", ["write"]),
		]);
		await broker.start();
		started.push(broker);
		callees.push(callee);
		await discovered(gw.broker, "probe.write", [nodeID]);
		return { callee, broker };
	};

	beforeAll(async () => {
		gw = await startGateway(ns);
	});
	afterEach(async () => {
		for (const c of callees.splice(0)) {
			c.mode = "answer";
			c.release();
		}
		await Promise.all(started.splice(0).map(b => b.stop().catch(() => undefined)));
	});
	afterAll(() => gw?.broker.stop());

	it("sends a call again when its request could not leave the node (NATS link down), and it runs once, even a remote execution", async () => {
		const { callee } = await startCallee("r-link");
		const tx = gw.broker.transit!.tx as unknown as { connected: boolean };
		// What NatsConnectionMiddleware does while NATS is away: requests fail before they are published.
		tx.connected = false;
		const unsent = new Promise(resolve => gw.broker.localBus.once("$transit.error", resolve));
		const pending = request("POST", url("hosts/web-01"), { body: RUN });
		try {
			await unsent;
		} finally {
			tx.connected = true;
		}
		const res = await pending;
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ served_by: "r-link" });
		expect(callee.count("cm-gateway.runOnHost")).toBe(1);
	});

	it("gives up after the resend window when the link stays down: 503 in Eve's shape, nothing ran", async () => {
		const { callee } = await startCallee("r-down");
		const tx = gw.broker.transit!.tx as unknown as { connected: boolean };
		tx.connected = false;
		let res: Reply;
		try {
			res = await request("POST", url("hosts/web-01"), { body: RUN });
		} finally {
			tx.connected = true;
		}
		expect(expectEveError(res, 503)._error.message).toMatch(/went away/);
		expect(callee.count("cm-gateway.runOnHost")).toBe(0);
	});

	it("answers a read whose node died before answering from another replica", async () => {
		const first = await startCallee("r-read-1", "hold");
		const pending = request("GET", url("hosts/web-01"));
		await eventually(
			async () => (first.callee.count("hosts.get") === 1 ? true : undefined),
			10_000,
			"the read to reach the first replica",
		);
		const second = await startCallee("r-read-2");
		await discovered(gw.broker, "hosts.get", ["r-read-1", "r-read-2"]);
		await crash(first.broker, gw.broker);

		const res = await pending;
		expect(res.status).toBe(200);
		expect(res.body).toMatchObject({ _id: "web-01", served_by: "r-read-2" });
		expect([first.callee.count("hosts.get"), second.callee.count("hosts.get")]).toEqual([1, 1]);
	});

	it("does not send a remote execution again when its node died before answering, though another replica is there: 503, it may have run", async () => {
		const first = await startCallee("r-run-1", "hold");
		const pending = request("POST", url("hosts/web-01"), { body: RUN });
		await eventually(
			async () => (first.callee.count("cm-gateway.runOnHost") === 1 ? true : undefined),
			10_000,
			"the execution to reach the first replica",
		);
		const second = await startCallee("r-run-2");
		await discovered(gw.broker, "cm-gateway.runOnHost", ["r-run-1", "r-run-2"]);
		await crash(first.broker, gw.broker);

		const res = await pending;
		expect(expectEveError(res, 503)._error.message).toMatch(/may or may not have been carried out/);
		// The other replica was there all along: a later execution reaches it. A resend of the first, had there
		// been one, would have reached it before this one (not a fixed wait).
		expect((await request("POST", url("hosts/web-01"), { body: RUN })).body).toMatchObject({ served_by: "r-run-2" });
		expect([first.callee.count("cm-gateway.runOnHost"), second.callee.count("cm-gateway.runOnHost")]).toEqual([1, 1]);
	});

	it("does not send a call that timed out again (the work may still be running)", async () => {
		const { callee } = await startCallee("r-timeout", "hold");
		await expect(gw.broker.call("probe.write", {}, { timeout: 500 })).rejects.toMatchObject({
			name: "RequestTimeoutError",
		});
		callee.mode = "answer";
		callee.release();
		// A later call to the same action, answered: a resend of the timed-out one, had there been one, would have
		// reached the callee before it (not a fixed wait).
		expect(await gw.broker.call("probe.write", {})).toMatchObject({ served_by: "r-timeout" });
		expect(callee.count("probe.write")).toBe(2);
	});
});

describe("circuit breaker", () => {
	const ns = uniqueNamespace("breaker");
	let gw: { broker: ServiceBroker; api: string };
	let far: ServiceBroker;
	const callee = new Callee("cb-hosts");
	const url = (p: string) => `${gw.api}/${p}`;
	let seq = 0;
	/** A read of a host not asked for before (the gateway keeps the reads it answered). */
	const read = (action: "get" | "list") =>
		request("GET", url(action === "get" ? `hosts/h-${++seq}` : `hosts?page=${++seq}`));

	beforeAll(async () => {
		gw = await startGateway(ns);
		far = node(ns, "cb-hosts", [callee.service("hosts", ["get", "list"])]);
		await far.start();
		await discovered(gw.broker, "hosts.get", ["cb-hosts"]);
	});
	afterAll(async () => {
		await far?.stop();
		await gw?.broker.stop();
	});

	it("is not opened by the answers of a healthy service (Eve errors such as a 502 about salt-api)", async () => {
		callee.mode = "eve";
		for (let i = 0; i < 30; i++) expectEveError(await read("list"), 502);
		expect(callee.count("hosts.list")).toBe(30);
	});

	it("opens after repeated failures (then calls fail fast with 503, reaching nothing) and closes once the service recovers, after the half-open window", async () => {
		callee.mode = "crash";
		let failures = 0;
		let lastFailureSent = 0;
		let refused: Reply | undefined;
		while (!refused && failures < 60) {
			const sent = Date.now();
			const res = await read("get");
			if (res.status === 503) refused = res;
			else {
				expectEveError(res, 500);
				failures++;
				lastFailureSent = sent;
			}
		}
		// At least minRequestCount calls before it opens; it then answers with a clear error without calling.
		expect(failures).toBeGreaterThanOrEqual(20);
		expect(refused && expectEveError(refused, 503)._error.message).toMatch(/not answering at the moment/);
		const reached = callee.count("hosts.get");
		expect(reached).toBe(failures);
		const before = Date.now();
		for (let i = 0; i < 5; i++) expectEveError(await read("get"), 503);
		expect(Date.now() - before).toBeLessThan(5000);
		expect(callee.count("hosts.get")).toBe(reached);

		callee.mode = "answer";
		const recovered = await eventually(
			async () => {
				const res = await read("get");
				if (res.status === 200) return Date.now();
				expectEveError(res, 503);
				await new Promise(r => setTimeout(r, 250));
				return undefined;
			},
			40_000,
			"the breaker to close",
		);
		// Not before the half-open window (10 s) since it opened.
		expect(recovered - lastFailureSent).toBeGreaterThanOrEqual(10_000 - 100);
		for (let i = 0; i < 5; i++) expect((await read("get")).status).toBe(200);
	}, 60_000);
});

describe("bulkheads: a slow salt-api or Pritunl holds a bounded number of requests, the rest of the API answers", () => {
	let h: Harness;
	let salt: SaltApiSimulator;
	let pritunl: PritunlSimulator;
	const HOST = "bulk-web-01.site-a.example";
	let minion = "";
	const url = (p: string) => `${h.api}/${p}`;

	/** Sends concurrency + queue + 3 calls at a hanging backend: 3 are refused at once, the others wait. */
	const overload = async (call: () => Promise<Reply>) => {
		const calls = Array.from({ length: CONCURRENCY + QUEUE + 3 }, () => {
			const c: { reply?: Reply; done: Promise<Reply> } = { done: call() };
			void c.done.then(r => (c.reply = r));
			return c;
		});
		await eventually(
			async () => (calls.filter(c => c.reply).length >= 3 ? true : undefined),
			20_000,
			"the calls beyond the bulkhead to be answered",
		);
		const refused = calls.filter(c => c.reply);
		expect(refused).toHaveLength(3);
		for (const c of refused)
			expect(expectEveError(c.reply!, 503)._error.message).toMatch(/too many requests of this kind/);
		// During the overload the other services answer, reads and writes.
		expect((await request("GET", url("hosts"))).status).toBe(200);
		expect((await request("GET", url(`hosts/${HOST}`))).status).toBe(200);
		expect((await request("POST", url("groups"), { body: { name: `bulk-${Date.now()}`, type: 0 } })).status).toBe(201);
		// and the first calls are still waiting on the backend, not failed
		expect(calls.filter(c => !c.reply)).toHaveLength(CONCURRENCY + QUEUE);
		return calls.filter(c => !c.reply).map(c => c.done);
	};

	beforeAll(async () => {
		salt = new SaltApiSimulator({
			minions: 4,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
		});
		await salt.start();
		pritunl = new PritunlSimulator({ username: "admin", password: "Bulkhead-pw-1" });
		const { url: pritunlUrl } = await pritunl.start();
		h = await startEmbedded({
			env: {
				...SUITE_ENV,
				...salt.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "0",
				CM_EVENTS: "false",
				CM_JOB_POLL_MS: "200",
				PRITUNL_TIMEOUT_MS: "20000",
				CTL_SECRET_KEY: "resilience-test-key",
			},
			// with the configuration's health listener
			broker: embedded("resilience"),
		});
		minion = salt.upMinions()[0];
		await h.call("hosts.upsertMany", {
			hosts: [
				{ _id: minion, status: "up", key: "accepted" },
				{ _id: HOST, status: "up", key: "accepted" },
			],
		});
		const manager = await request("POST", url("vpn_managers"), {
			body: {
				name: "bulk",
				server_address: pritunlUrl,
				dashboard_address: `${pritunlUrl}/`,
				username: "admin",
				password: "Bulkhead-pw-1",
			},
		});
		expect(manager.status).toBe(201);
		const org = await request("POST", url("vpn_organizations"), {
			body: {
				name: "bulk-org",
				vpn_representation: { name: "bulk-org", cipher_type: "rsa" },
				cipher_type: "rsa",
				vpn_manager: manager.body._id,
			},
		});
		expect(org.status).toBe(201);
		pritunl.addUser(pritunl.orgList().find(o => o.name === "bulk-org")!.id, { name: HOST });
		await h.call("vpn.sync", {});
	}, 30_000);
	afterAll(async () => {
		await h?.stop();
		await salt?.stop();
		await pritunl?.stop();
	});

	it("remote execution (cm-gateway) while salt-api hangs: 503 beyond the bulkhead, the waiting calls finish once it is back", async () => {
		expect((await request("POST", url(`hosts/${minion}`), { body: RUN })).status).toBe(200);
		await salt.goDown("hang");
		let waiting: Promise<Reply>[] = [];
		try {
			waiting = await overload(() => request("POST", url(`hosts/${minion}`), { body: RUN }));
		} finally {
			await salt.comeBack();
		}
		// Cut off from salt-api (a clean Eve error) or run once it was back: none is lost or left hanging.
		for (const res of await Promise.all(waiting)) if (res.status !== 200) expectEveError(res, res.status);
		expect((await request("POST", url(`hosts/${minion}`), { body: RUN })).status).toBe(200);
	});

	it("VPN profiles (vpn) while Pritunl hangs: 503 beyond the bulkhead, the waiting calls finish once it is back", async () => {
		expect((await request("GET", url(`hosts/${HOST}/vpn_profile`))).status).toBe(200);
		await pritunl.goDown("hang");
		let waiting: Promise<Reply>[] = [];
		try {
			waiting = await overload(() => request("GET", url(`hosts/${HOST}/vpn_profile`)));
		} finally {
			await pritunl.comeBack();
		}
		for (const res of await Promise.all(waiting)) if (res.status !== 200) expectEveError(res, res.status);
		expect((await request("GET", url(`hosts/${HOST}/vpn_profile`))).status).toBe(200);
	});
});

/** A TCP relay in front of MongoDB that can be cut (every connection dropped, nothing accepted) and restored on its port. */
class Relay {
	private server: net.Server | null = null;
	private readonly sockets = new Set<net.Socket>();
	port = 0;
	constructor(private readonly target: { host: string; port: number }) {}

	async open(): Promise<void> {
		if (this.server) return;
		const server = net.createServer(client => {
			const upstream = net.connect(this.target.port, this.target.host);
			for (const s of [client, upstream]) {
				this.sockets.add(s);
				s.once("close", () => this.sockets.delete(s));
				s.on("error", () => (s === client ? upstream : client).destroy());
			}
			client.pipe(upstream).pipe(client);
		});
		await new Promise<void>((resolve, reject) =>
			server.once("error", reject).listen(this.port, "127.0.0.1", () => resolve()),
		);
		this.port = (server.address() as net.AddressInfo).port;
		this.server = server;
	}

	async cut(): Promise<void> {
		for (const s of this.sockets) s.destroy();
		await new Promise<void>(resolve => (this.server ? this.server.close(() => resolve()) : resolve()));
		this.server = null;
	}
}

(MONGO_URI ? describe : describe.skip)(
	`readiness while MongoDB is away (MONGO_URI; in CI the wire-protocol emulator)${MONGO_URI ? "" : " (skipped: MONGO_URI is not set)"}`,
	() => {
		let h: Harness;
		let relay: Relay;
		let health = "";
		const ready = async () => {
			const res = await fetch(`${health}/ready`);
			return { status: res.status, body: (await res.json()) as { ready: boolean; reasons: string[] } };
		};
		const until = <T>(what: string, check: () => Promise<T | undefined>) =>
			eventually(async () => (await check()) ?? (await new Promise(r => setTimeout(r, 250)), undefined), 60_000, what);

		beforeAll(async () => {
			const target = new URL(MONGO_URI as string);
			relay = new Relay({ host: target.hostname, port: Number(target.port || 27017) });
			await relay.open();
			const port = await freePort();
			health = `http://127.0.0.1:${port}`;
			target.host = `127.0.0.1:${relay.port}`;
			h = await startEmbedded({
				mongoUri: uniqueMongoUri(target.toString()),
				env: { ...SUITE_ENV, CTL_SECRET_KEY: "resilience-mongo-key" },
				broker: embedded("resilience-mongo", {
					metrics: { enabled: false },
					middlewares: [...MIDDLEWARES, HealthMiddleware({ port, host: "127.0.0.1", fixed: true })] as never,
				}),
			});
		}, 60_000);
		afterAll(async () => {
			await relay?.open();
			await h?.stop();
			await relay?.cut();
		});

		it("is ready with MongoDB there, not while it is away, again once it is back; the probes print nothing on stderr", async () => {
			// One JSON object per line: a probe must not make the driver print a plain-text DeprecationWarning.
			const printed: string[] = [];
			const write = process.stderr.write.bind(process.stderr) as (chunk: unknown, ...rest: unknown[]) => boolean;
			const stderr = jest.spyOn(process.stderr, "write").mockImplementation(((chunk: unknown, ...rest: unknown[]) => {
				printed.push(String(chunk));
				return write(chunk, ...rest);
			}) as never);
			try {
				expect(await ready()).toMatchObject({ status: 200, body: { ready: true } });

				await relay.cut();
				const away = await until("readiness to see MongoDB gone", async () => {
					const r = await ready();
					return r.status === 503 ? r : undefined;
				});
				expect(away.body.reasons.join("; ")).toMatch(/storage not connected/);

				await relay.open();
				await until("readiness once MongoDB is back", async () => ((await ready()).status === 200 ? true : undefined));
			} finally {
				stderr.mockRestore();
			}
			expect(printed.filter(line => /DeprecationWarning/.test(line))).toEqual([]);
		}, 120_000);
	},
);
