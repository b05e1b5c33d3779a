/**
 * Operations, on the production command over the real NATS server: readiness as a pod's probes see it,
 * the request id across processes in JSON logs, the metrics a Prometheus scrape reads, and rolling
 * updates of the gateway and of a data service under load (a second replica of each) losing no request.
 */
import net, { type AddressInfo } from "node:net";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { ADMIN_TOKEN, ensureNats, tempDir, type Nats } from "../support/harness";
import { eventually } from "../support/http";
import { parsePrometheus } from "../support/prometheus";
import {
	Balancer,
	LOAD_SERVICES,
	Load,
	exited,
	failures,
	probe,
	sleep,
	startNode,
	stopNode,
	waitReady,
	type Node,
} from "../support/cluster";

describe("operations over NATS", () => {
	let nats: Nats;
	const nodes: Node[] = [];
	beforeAll(async () => {
		nats = await ensureNats();
	});
	afterAll(async () => {
		await Promise.all(nodes.map(stopNode));
		await nats?.stop();
	});
	const start = async (services: string[], env: Record<string, string>) => {
		const node = await startNode(services, env);
		nodes.push(node);
		return node;
	};

	it("readiness: false until storage and the needed services are there, false again while stopping; request ids and metrics", async () => {
		const namespace = `ops-ready-${process.pid}`;
		const env = {
			TRANSPORTER: nats.url,
			NAMESPACE: namespace,
			DATA_DIR: tempDir("ops-ready"),
			PORT: "0",
			HOST: "127.0.0.1",
			LOG_FORMAT: "json",
			LOGLEVEL: "debug",
		};

		// MongoDB that does not answer: alive, never ready. "Does not answer" is a listener of this test's own
		// that drops every connection, so the driver's attempts can be counted.
		let attempts = 0;
		const silent = net.createServer(socket => {
			attempts++;
			socket.destroy();
		});
		await new Promise<void>(resolve => silent.listen(0, "127.0.0.1", () => resolve()));
		try {
			const noMongo = await start(["settings"], {
				...env,
				MONGO_URI: `mongodb://127.0.0.1:${(silent.address() as AddressInfo).port}/x`,
				CTL_SECRET_KEY: "k",
				LOGLEVEL: "warn",
			});
			for (let i = 0; i < 100 && (await probe(noMongo, "/live")).status !== 200; i++) await sleep(100);
			let stuck = await probe(noMongo, "/ready");
			for (let i = 0; i < 100 && !stuck.body?.reasons?.includes("settings: storage not connected"); i++) {
				await sleep(100);
				stuck = await probe(noMongo, "/ready");
			}
			expect(stuck).toEqual({
				status: 503,
				body: expect.objectContaining({
					ready: false,
					reasons: expect.arrayContaining(["starting", "settings: storage not connected"]),
				}),
			});
			// Still not ready after it tried MongoDB again (two more connections dropped), not after a fixed wait.
			const seen = attempts;
			await eventually(
				async () => (attempts >= seen + 2 ? true : undefined),
				30_000,
				"two more attempts to reach MongoDB",
			);
			expect((await probe(noMongo, "/live")).status).toBe(200);
			expect((await probe(noMongo, "/ready")).status).toBe(503);
			noMongo.proc.child.kill("SIGKILL");
		} finally {
			await new Promise(resolve => silent.close(resolve));
		}

		// the gateway alone: alive, and waiting for the services every request needs
		const gateway = await start(["api"], env);
		let ready = { status: 0, body: null as any };
		// started and connected, so only what it waits for is left
		for (let i = 0; i < 300 && JSON.stringify(ready.body?.reasons) !== '["waiting for audit, tokens"]'; i++) {
			ready = await probe(gateway, "/ready");
			await sleep(50);
		}
		expect(ready).toEqual({ status: 503, body: expect.objectContaining({ reasons: ["waiting for audit, tokens"] }) });
		expect((await probe(gateway, "/live")).status).toBe(200);

		const data = await start(LOAD_SERVICES, env);
		await waitReady(data);
		await waitReady(gateway);

		// the request id: taken from the client, answered, and in both processes' JSON logs
		const id = `ops-trace-${process.pid}`;
		const api = `http://127.0.0.1:${await gateway.apiPort()}/api`;
		const res = await fetch(`${api}/groups?where=${encodeURIComponent('{"name":"traced"}')}`, {
			headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "x-request-id": id },
		});
		expect(res.status).toBe(200);
		expect(res.headers.get("x-request-id")).toBe(id);
		const forged = await fetch(`${api}/settings/0`, {
			headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "x-request-id": "evil id\twith=spaces" },
		});
		expect(forged.headers.get("x-request-id")).toMatch(/^[\w-]{8,}$/);
		const logLines = (node: Node) =>
			node.proc.log
				.join("")
				.split("\n")
				.filter(l => l.startsWith("{"))
				.map(l => JSON.parse(l));
		let traced: { gateway: any[]; data: any[] } = { gateway: [], data: [] };
		for (let i = 0; i < 50 && !(traced.gateway.length && traced.data.length); i++) {
			await sleep(100);
			traced = {
				gateway: logLines(gateway).filter(l => l.requestID === id),
				data: logLines(data).filter(l => l.requestID === id),
			};
		}
		expect(traced.gateway.map(l => l.action)).toContain("api.rest");
		expect(traced.data.length).toBeGreaterThan(0);
		for (const line of [...traced.gateway, ...traced.data])
			expect(line).toEqual(
				expect.objectContaining({ time: expect.any(String), level: expect.any(String), nodeID: expect.any(String) }),
			);

		// metrics: the fleet's hosts by presence from the hosts service, requests and event loop lag everywhere
		const client = new ServiceBroker({
			logger: false,
			namespace,
			nodeID: `ops-client-${process.pid}`,
			transporter: nats.url as BrokerOptions["transporter"],
			serializer: "JSONExt",
		});
		await client.start();
		try {
			await client.waitForServices(["hosts"], 10_000);
			await client.call("hosts.upsertMany", { hosts: ["m-1", "m-2", "m-3"].map(_id => ({ _id, key: "accepted" })) });
			await client.call("hosts.setPresence", { up: ["m-1", "m-2"], down: ["m-3"] });
		} finally {
			await client.stop();
		}
		const scrape = async (node: Node) => parsePrometheus(await (await fetch(`${node.health}/metrics`)).text());
		let hosts: Record<string, number> = {};
		for (let i = 0; i < 50 && hosts.up !== 2; i++) {
			await sleep(100);
			hosts = Object.fromEntries(
				(await scrape(data)).filter(s => s.name === "fleet_hosts").map(s => [s.labels.status, s.value]),
			);
		}
		expect(hosts).toEqual({ up: 2, down: 1, unknown: 0 });
		const gw = await scrape(gateway);
		const rest = gw.filter(s => s.name === "moleculer_request_total" && s.labels.action === "api.rest");
		expect(rest.reduce((n, s) => n + s.value, 0)).toBeGreaterThanOrEqual(2);
		expect(gw.some(s => s.name === "moleculer_request_error_total")).toBe(false);
		const buckets = gw
			.filter(s => s.name === "moleculer_request_time_bucket" && s.labels.action === "api.rest")
			.map(s => s.value);
		expect(buckets.length).toBeGreaterThan(3);
		expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
		const lag = gw.find(s => s.name === "process_eventloop_lag_p99_seconds");
		expect(lag?.value).toBeGreaterThanOrEqual(0);
		expect(lag?.labels.nodeID).toBe(traced.gateway[0].nodeID);

		// stopping: the data services leave (the gateway waits for them again), then the gateway says so itself
		await stopNode(data);
		ready = await probe(gateway, "/ready");
		expect(ready.body.reasons).toEqual(["waiting for audit, tokens"]);
		const seen: Array<{ status: number; reasons?: string[] }> = [];
		const done = exited(gateway);
		gateway.proc.child.kill("SIGTERM");
		let finished = false;
		void done.then(() => (finished = true));
		while (!finished) {
			const r = await probe(gateway, "/ready");
			if (r.status) seen.push({ status: r.status, reasons: r.body?.reasons });
			await sleep(10);
		}
		expect((await done).code).toBe(0);
		expect(seen.length).toBeGreaterThan(0);
		expect(seen.every(s => s.status === 503)).toBe(true);
		// once the signal is handled (a probe or two may come before), the first reason is the shutdown, to the end
		const from = seen.findIndex(s => s.reasons?.[0] === "stopping");
		expect(from).toBeGreaterThanOrEqual(0);
		expect(seen.slice(from).filter(s => s.reasons?.[0] !== "stopping")).toEqual([]);
	});

	it("rolling updates of the gateway and of the data services under load lose no request", async () => {
		const namespace = `ops-roll-${process.pid}`;
		const base = { TRANSPORTER: nats.url, NAMESPACE: namespace, HOST: "127.0.0.1" };
		// PORT 0: each gateway binds a port of its own choosing, read back (apiPort) for the balancer.
		const gatewayEnv = async () => ({ ...base, PORT: "0" });
		// each data replica on its own NeDB files: every request is answered from whichever replica gets it
		const dataEnv = () => ({ ...base, DATA_DIR: tempDir("ops-roll") });
		const [gw1, gw2, d1, d2] = await Promise.all([
			start(["api"], await gatewayEnv()),
			start(["api"], await gatewayEnv()),
			start(LOAD_SERVICES, dataEnv()),
			start(LOAD_SERVICES, dataEnv()),
		]);
		await Promise.all([gw1, gw2, d1, d2].map(n => waitReady(n)));
		const balancer = new Balancer();
		const [port1, port2] = [await gw1.apiPort(), await gw2.apiPort()];
		await balancer.listen([port1, port2]);
		try {
			const load = new Load(
				() => balancer.url,
				(w, i) =>
					i % 2 === 0
						? { method: "POST", path: "/api/groups", body: { name: `roll-${w}-${i}` } }
						: {
								method: "GET",
								path: `/api/groups?where=${encodeURIComponent(JSON.stringify({ name: `roll-${w}-${i - 1}` }))}`,
							},
				6,
			);
			// Not an oracle: the load runs for a while before each step (its outcomes are checked at the end).
			await sleep(800);

			// the gateway: out of the endpoints, then (the preStop pause) SIGTERM; its keep-alive connections stay
			balancer.remove(port1);
			await sleep(300);
			const termAt = Date.now();
			gw1.proc.child.kill("SIGTERM");
			const gw3 = await start(["api"], await gatewayEnv());
			await waitReady(gw3);
			balancer.add(await gw3.apiPort());
			expect((await exited(gw1)).code).toBe(0);

			// a data replica: a new one comes up, the old one gets SIGTERM while requests keep reaching it
			const d3 = await start(LOAD_SERVICES, dataEnv());
			await waitReady(d3);
			const dataTermAt = Date.now();
			d1.proc.child.kill("SIGTERM");
			expect((await exited(d1)).code).toBe(0);
			await sleep(800); // the load goes on a while after the last step (not an oracle)

			const outcomes = await load.stop();
			expect(failures(outcomes)).toEqual([]);
			expect(load.since(termAt).length).toBeGreaterThan(50);
			expect(load.since(dataTermAt).length).toBeGreaterThan(20);
			expect(outcomes.filter(o => o.method === "POST").every(o => o.status === 201)).toBe(true);
		} finally {
			await balancer.close();
		}
	});
});
