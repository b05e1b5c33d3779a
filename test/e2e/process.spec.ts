/**
 * The production command (moleculer-runner on the build): it serves the API with no configuration but a
 * data directory, exits cleanly on SIGTERM without losing acknowledged writes, and names its node after
 * the host and the process.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import {
	ALL_SERVICES,
	apiOf,
	ensureNats,
	freePort,
	runServices,
	tempDir,
	waitForApi,
	type Nats,
	type Proc,
} from "../support/harness";
import { eventually, request } from "../support/http";
import { describeReplicated } from "../support/replicas";

function sigterm(proc: Proc): Promise<{ code: number | null; ms: number }> {
	const started = Date.now();
	return new Promise(resolve => {
		proc.child.once("exit", code => resolve({ code, ms: Date.now() - started }));
		proc.child.kill("SIGTERM");
	});
}

describe("the production command", () => {
	it("serves the API on the embedded default, exits 0 on SIGTERM and keeps what it acknowledged", async () => {
		// PORT 0: each start binds a port of its own choosing, read back (apiOf).
		const env = { DATA_DIR: tempDir("proc"), PORT: "0", HOST: "127.0.0.1", TRANSPORTER: "" };
		// SERVICES empty: the runner loads everything in SERVICEDIR.
		let proc = runServices([], env);
		let api = await apiOf(proc);
		await waitForApi(api, proc);
		const created = await request("POST", `${api}/groups`, { body: { name: "kept-across-sigterm" } });
		expect(created.status).toBe(201);
		// In the files of its DATA_DIR (the embedded default), whatever MONGO_URI the test run itself was given.
		expect(fs.readFileSync(path.join(env.DATA_DIR, "groups.db"), "utf8")).toContain("kept-across-sigterm");

		const stopped = await sigterm(proc);
		expect(stopped.code).toBe(0);
		expect(stopped.ms).toBeLessThan(15_000);

		proc = runServices([], env);
		api = await apiOf(proc);
		await waitForApi(api, proc);
		const again = await request("GET", `${api}/groups/${created.body._id}`);
		expect(again.body.name).toBe("kept-across-sigterm");
		expect((await sigterm(proc)).code).toBe(0);
	});

	describe("split over NATS", () => {
		let nats: Nats;
		let client: ServiceBroker;
		const namespace = `proc-${process.pid}`;
		beforeAll(async () => {
			nats = await ensureNats();
			client = new ServiceBroker({
				logger: false,
				namespace,
				nodeID: `proc-client-${process.pid}`,
				transporter: nats.url as BrokerOptions["transporter"],
				serializer: "JSONExt",
			});
			await client.start();
		});
		afterAll(async () => {
			await client?.stop();
			await nats?.stop();
		});

		it("names nodes <hostname>-<pid> and every process exits 0 on SIGTERM", async () => {
			const env = {
				DATA_DIR: tempDir("proc-nats"),
				PORT: "0",
				HOST: "127.0.0.1",
				TRANSPORTER: nats.url,
				NAMESPACE: namespace,
			};
			const data = runServices(
				ALL_SERVICES().filter(s => s !== "api"),
				env,
			);
			const gateway = runServices(["api"], env);
			await client.waitForServices(ALL_SERVICES(), 30_000);
			await waitForApi(await apiOf(gateway), gateway);

			const nodes: Array<{ id: string; local: boolean }> = await client.call("$node.list");
			const remote = nodes
				.filter(n => !n.local)
				.map(n => n.id)
				.sort();
			expect(remote).toEqual([`${os.hostname()}-${data.child.pid}`, `${os.hostname()}-${gateway.child.pid}`].sort());

			const [g, d] = await Promise.all([sigterm(gateway), sigterm(data)]);
			expect(g.code).toBe(0);
			expect(d.code).toBe(0);
		});

		it("keeps host memberships current with groups, hosts and nodegroups in separate processes", async () => {
			const ns = `${namespace}-m`;
			const env = {
				DATA_DIR: tempDir("proc-members"),
				MONGO_URI: "",
				PORT: "0",
				HOST: "127.0.0.1",
				TRANSPORTER: nats.url,
				NAMESPACE: ns,
				NODEGROUPS: JSON.stringify({ "pm-web": { regex: "^pm-web-" } }),
			};
			const rest = ALL_SERVICES().filter(s => !["api", "groups", "hosts", "nodegroups"].includes(s));
			const procs = [
				runServices(["groups"], env),
				runServices(["hosts"], env),
				runServices(["nodegroups"], env),
				runServices(rest, env),
				runServices(["api"], env),
			];
			let api = "";
			const seeder = new ServiceBroker({
				logger: false,
				namespace: ns,
				nodeID: `proc-seeder-${process.pid}`,
				transporter: nats.url as BrokerOptions["transporter"],
				serializer: "JSONExt",
			});
			const hostGroups = async (id: string, want: number) => {
				for (let i = 0; i < 100; i++) {
					const body = (await request("GET", `${api}/hosts/${id}`)).body;
					if (body?.groups?.length === want) return body;
					await new Promise(r => setTimeout(r, 50));
				}
				return (await request("GET", `${api}/hosts/${id}`)).body;
			};
			try {
				await seeder.start();
				await seeder.waitForServices(ALL_SERVICES(), 30_000);
				api = await apiOf(procs[4]);
				await waitForApi(api, procs[4]);
				const explicit = (
					await request("POST", `${api}/groups`, { body: { name: "pm-explicit", hosts: ["pm-web-1"] } })
				).body._id;
				await seeder.call("hosts.upsertMany", {
					hosts: [{ _id: "pm-web-1", status: "up", key: "accepted", grain: { os: "ALT" } }],
				});
				const first = await hostGroups("pm-web-1", 1);
				expect(first.groups).toEqual([explicit]);
				expect(first.nodegroups).toEqual(["pm-web"]);

				const auto = (
					await request("POST", `${api}/groups`, { body: { name: "pm-auto", type: 1, info: { grain: { os: "ALT" } } } })
				).body._id;
				const parent = (await request("POST", `${api}/groups`, { body: { name: "pm-parent", subgroups: [auto] } })).body
					._id;
				expect((await hostGroups("pm-web-1", 3)).groups).toEqual([explicit, auto, parent].sort());
				expect((await request("DELETE", `${api}/groups/${explicit}`)).status).toBe(204);
				expect((await hostGroups("pm-web-1", 2)).groups).toEqual([auto, parent].sort());
			} finally {
				await seeder.stop();
				await Promise.all(procs.map(sigterm));
			}
		});
	});
});

describeReplicated("two data replicas on shared storage", legOf => {
	it("serve no stale read from any replica after a write", async () => {
		const leg = legOf();
		const env = await leg.env("proc-r");
		const services = ALL_SERVICES().filter(s => s !== "api");
		const replicas = [leg.run(services, env), leg.run(services, env)];
		const api = await leg.run(["api"], env).api();
		await Promise.all(replicas.map(r => r.ready()));
		// both replicas of groups must be serving before the round-robin means anything
		await eventually(
			async () => ((await leg.serving("groups")) === 2 ? true : undefined),
			30_000,
			"both replicas of groups serving",
		);
		await eventually(
			async () => ((await request("GET", `${api}/settings/0`).catch(() => null))?.status === 200 ? true : undefined),
			30_000,
			"the gateway",
		);

		const id = (await request("POST", `${api}/groups`, { body: { name: "replicated", hosts: [] } })).body._id;
		const where = encodeURIComponent('{"name":"replicated"}');
		for (let i = 1; i <= 20; i++) {
			// warm both replicas' caches, then write on one of them and read through both
			await request("GET", `${api}/groups/${id}`);
			await request("GET", `${api}/groups/${id}`);
			await request("GET", `${api}/groups?where=${where}`);
			await request("GET", `${api}/groups?where=${where}`);
			expect((await request("PATCH", `${api}/groups/${id}`, { body: { hosts: [`h${i}`] } })).status).toBe(200);
			for (let j = 0; j < 2; j++) {
				expect((await request("GET", `${api}/groups/${id}`)).body.hosts).toEqual([`h${i}`]);
				expect((await request("GET", `${api}/groups?where=${where}`)).body._items[0].hosts).toEqual([`h${i}`]);
			}
		}
	}, 120_000);
});

describe("the NATS server the tests use", () => {
	it("is started from PATH on a free port when nothing answers at NATS_URL", async () => {
		// A port nothing listens on (freePort: it must stay closed, so nothing can bind it and read it back).
		const closed = await freePort();
		const saved = process.env.NATS_URL;
		process.env.NATS_URL = `nats://127.0.0.1:${closed}`;
		try {
			const nats = await ensureNats();
			expect(nats.url).not.toBe(`nats://127.0.0.1:${closed}`);
			const probe = new ServiceBroker({
				logger: false,
				nodeID: `probe-${process.pid}`,
				transporter: nats.url as BrokerOptions["transporter"],
			});
			await probe.start();
			expect(probe.transit?.connected).toBe(true);
			await probe.stop();
			await nats.stop();
		} finally {
			process.env.NATS_URL = saved;
		}
	});
});
