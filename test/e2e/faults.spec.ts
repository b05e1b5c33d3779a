/**
 * Faults, on the production command over real NATS servers: a data service killed (SIGKILL) during a
 * write load and restarted on the same storage as Kubernetes restarts a container (same pod name, so the
 * same NODEID); the NATS server (one of this test's own, on a port it picked) killed and started again on that port.
 */
import { ensureNats, startOwnNats, tempDir, uniqueMongoUri, type Nats } from "../support/harness";
import { itIf } from "../support/skip";
import {
	LOAD_SERVICES,
	Load,
	exited,
	failures,
	sleep,
	startNode,
	stopNode,
	waitReady,
	type Node,
	type Outcome,
} from "../support/cluster";
import { request } from "../support/http";

/** An answer a client can act on: a status with Eve's error body, never a reset or a hang. */
function clean(o: Outcome): boolean {
	return o.status >= 200 && o.status < 300
		? true
		: o.status >= 500 && o.body?._status === "ERR" && typeof o.body?._error?.message === "string";
}

describe("faults", () => {
	const nodes: Node[] = [];
	const start = async (services: string[], env: Record<string, string>) => {
		const node = await startNode(services, env);
		nodes.push(node);
		return node;
	};
	afterAll(async () => {
		await Promise.all(nodes.map(stopNode));
	});

	// NeDB files, and the Mongo path when the run has a MongoDB (in CI the wire-protocol emulator, not MongoDB);
	// without one, the Mongo case is reported skipped.
	const mongoUri = process.env.MONGO_URI;
	const storages: Array<[string, () => Record<string, string>, boolean, string]> = [
		["NeDB", () => ({}), true, ""],
		[
			"the Mongo path",
			() => ({ MONGO_URI: uniqueMongoUri(mongoUri as string), CTL_SECRET_KEY: "faults-secret" }),
			!!mongoUri,
			"MONGO_URI is not set",
		],
	];

	for (const [name, storage, canCheck, reason] of storages)
		itIf(canCheck, reason)(
			`SIGKILL of the data services during writes (${name}): every 201 is kept, the rest are clean errors, writes resume`,
			async () => {
				const nats: Nats = await ensureNats();
				try {
					// PORT 0: the gateway binds a port of its own choosing, read back (apiPort).
					const env = {
						TRANSPORTER: nats.url,
						NAMESPACE: `ops-kill-${process.pid}-${Date.now().toString(36)}`,
						DATA_DIR: tempDir("ops-kill"),
						PORT: "0",
						HOST: "127.0.0.1",
						...storage(),
					};
					const dataEnv = { ...env, NODEID: `ops-data-${process.pid}` };
					const gateway = await start(["api"], env);
					const data = await start(LOAD_SERVICES, dataEnv);
					await Promise.all([waitReady(gateway), waitReady(data)]);
					const api = `http://127.0.0.1:${await gateway.apiPort()}`;
					const load = new Load(
						() => api,
						(w, i) => ({ method: "POST", path: "/api/groups", body: { name: `kill-${w}-${i}` } }),
						6,
						40_000,
					);
					// Not an oracle: the load runs for a while before the kill (and after the restart, below); every outcome is checked.
					await sleep(1000);

					data.proc.child.kill("SIGKILL");
					await exited(data);
					// the container restarts in its pod: same storage, same node id
					const again = await start(LOAD_SERVICES, dataEnv);
					await waitReady(again);
					const readyAt = Date.now();
					await sleep(3500);
					const outcomes = await load.stop();

					expect(outcomes.filter(o => !clean(o)).map(o => `${o.status} ${o.error} (${o.ms} ms)`)).toEqual([]);
					// errors came quickly: the restarted node's predecessor's requests are failed when it reappears
					expect(Math.max(...outcomes.map(o => o.ms))).toBeLessThan(15_000);
					const created = outcomes.filter(o => o.status === 201);
					expect(created.length).toBeGreaterThan(20);
					// once the gateway has seen it again (a busy machine may take a moment), every write succeeds
					expect(failures(load.since(readyAt + 2000))).toEqual([]);
					expect(load.since(readyAt + 2000).length).toBeGreaterThan(5);
					for (const o of created) {
						const read = await request("GET", `${api}/api/groups/${o.body._id}`);
						expect({ id: o.body._id, status: read.status, name: read.body?.name }).toEqual({
							id: o.body._id,
							status: 200,
							name: expect.stringMatching(/^kill-/),
						});
					}
				} finally {
					await nats.stop();
				}
			},
		);

	it("NATS restarted during load: every service reconnects and requests succeed again within 10 s", async () => {
		const nats = await startOwnNats();
		try {
			const env = {
				TRANSPORTER: nats.url,
				NAMESPACE: `ops-nats-${process.pid}`,
				DATA_DIR: tempDir("ops-nats"),
				PORT: "0",
				HOST: "127.0.0.1",
			};
			const gateway = await start(["api"], env);
			const data = await start(LOAD_SERVICES, env);
			await Promise.all([waitReady(gateway), waitReady(data)]);
			const port = await gateway.apiPort();
			const load = new Load(
				() => `http://127.0.0.1:${port}`,
				(w, i) =>
					i % 2 === 0
						? { method: "POST", path: "/api/groups", body: { name: `nats-${w}-${i}` } }
						: {
								method: "GET",
								path: `/api/groups?where=${encodeURIComponent(JSON.stringify({ name: `nats-${w}-${i - 1}` }))}`,
							},
				4,
				40_000,
			);
			// Not oracles: the load runs a while, then NATS stays away a while (an outage of a second).
			await sleep(1000);

			await nats.kill();
			await sleep(1000);
			await nats.start();
			const upAt = Date.now();
			// load until requests have succeeded for 2 s in a row (or 15 s passed)
			let recoveredAt = 0;
			while (Date.now() - upAt < 15_000) {
				await sleep(250);
				const after = load.outcomes.filter(o => o.started >= upAt);
				const lastFailure = Math.max(
					upAt,
					...after.filter(o => o.status === 0 || o.status >= 400).map(o => o.started + o.ms),
				);
				const okSince = after.filter(o => o.started > lastFailure && o.status < 400);
				if (okSince.length && Date.now() - lastFailure > 2000) {
					recoveredAt = Math.min(...okSince.map(o => o.started + o.ms));
					break;
				}
			}
			const outcomes = await load.stop();
			expect(recoveredAt).toBeGreaterThan(0);
			expect(recoveredAt - upAt).toBeLessThan(10_000);
			// nothing hung or was cut off while NATS was away: the gateway answered every request
			expect(outcomes.filter(o => !clean(o)).map(o => `${o.method} ${o.status} ${o.error} (${o.ms} ms)`)).toEqual([]);
			for (const node of [gateway, data]) await waitReady(node, 1000);
		} finally {
			await Promise.all(nodes.splice(0).map(stopNode));
			await nats.stop();
		}
	});
});
