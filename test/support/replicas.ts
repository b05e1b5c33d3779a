/**
 * Replicas on shared storage for the multi-replica suites (`*.distributed.spec.ts`, process.spec.ts), on two legs:
 *  - embedded: brokers in this process, each with the services it is given, over Moleculer's in-process transporter,
 *    on one NeDB data directory (a process opens each file once, shared by its brokers: mixins/storage.mixin.ts).
 *    Runs everywhere. A replica "dies" by stopping: a process's last moments cannot be cut off in-process.
 *  - mongo: the production command in processes over the real NATS server on one MongoDB database (MONGO_URI; in CI
 *    the wire-protocol emulator, not MongoDB). A replica dies by SIGKILL. Skipped, saying so, without MONGO_URI.
 * Several processes on one NeDB directory are not a leg: each would keep its own copy of the files.
 */
import fs from "node:fs";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { Errors, ServiceBroker, type BrokerOptions } from "moleculer";
import { request, eventually } from "./http";
import { FleetJSONExt } from "../../lib/runtime/serializer";
import {
	ADMIN_TOKEN,
	ALL_SERVICES,
	ROOT,
	boundPorts,
	ensureNats,
	hasExited,
	runServices,
	stopProc,
	tempDir,
	uniqueMongoUri,
	type Proc,
} from "./harness";

export interface Replica {
	/** The services it runs. */
	services: string[];
	/** Its API (a replica running the gateway), e.g. http://127.0.0.1:40123/api. */
	api(): Promise<string>;
	/** Resolves once it is up: its services started (embedded), its health listener answering ready (processes). */
	ready(): Promise<void>;
	/** Ends it mid-way: SIGKILL (processes), a stop (embedded). */
	kill(): Promise<void>;
	/** What it logged (processes: its output; embedded: nothing kept). */
	log(): string;
}

export interface ReplicaLeg {
	name: "embedded" | "mongo";
	/** The environment every replica of a suite shares: the namespace, the storage, the transporter. */
	env(name: string): Promise<Record<string, string>>;
	/** Starts a replica running `services` with `env` (and `nodeID`, else one of its own). */
	run(services: string[], env: Record<string, string>, nodeID?: string): Replica;
	/** Calls an action in the cluster (internal ones too), from a client of its own. */
	call<T = any>(action: string, params?: Record<string, unknown>): Promise<T>;
	/** How many replicas of `service` the client sees serving. */
	serving(service: string): Promise<number>;
	/** Stopped after the replicas (simulators). */
	track(thing: { stop(): Promise<void> }): void;
	/** Stops every replica, the client, then what it tracks. */
	stop(): Promise<void>;
}

/** Every service file, relative to services/ (as harness.ts finds them). */
const serviceFile = (name: string) => {
	const files = (fs.readdirSync(path.join(ROOT, "services"), { recursive: true }) as string[]).filter(
		f => path.basename(f) === `${name}.service.ts`,
	);
	if (files.length !== 1) throw new Error(`no single service file for ${name}`);
	return path.join(ROOT, "services", files[0]);
};

/** The replicas of `service` that `client` sees serving. */
const servingOn = (client: ServiceBroker, service: string) =>
	client.registry.getServiceList({ onlyAvailable: true }).filter(s => s.name === service).length;

/**
 * Stops an in-process replica. Calls it still waits for (work its services do not wait for when stopping, a task's
 * hand-over) get no answer once it left the transporter: rejected, as Moleculer rejects calls to a node that left,
 * instead of each keeping a timer until its timeout. (A process killed takes them with it.)
 */
async function stopBroker(b: ServiceBroker): Promise<void> {
	await b.stop();
	const transit = b.transit as unknown as {
		pendingRequests: Map<string, { action: { name: string }; reject(e: Error): void }>;
	};
	for (const [id, req] of transit.pendingRequests) {
		transit.pendingRequests.delete(id);
		req.reject(new Errors.RequestRejectedError({ action: req.action.name, nodeID: b.nodeID }));
	}
}

function embeddedLeg(): ReplicaLeg {
	const brokers: ServiceBroker[] = [];
	let namespace = "";
	let n = 0;
	const broker = (nodeID: string, transporter: BrokerOptions["transporter"]) =>
		new ServiceBroker({
			logger: (process.env.TEST_LOG ? { type: "Console" } : false) as BrokerOptions["logger"],
			nodeID,
			namespace,
			transporter,
			serializer: new FleetJSONExt(),
			requestTimeout: 30_000,
			registry: { strategy: "RoundRobin", preferLocal: true },
			retryPolicy: { enabled: false },
			contextParamsCloning: false,
			tracking: { enabled: true, shutdownTimeout: 5000 },
		});
	let client: ServiceBroker | null = null;
	const clientOf = async () => {
		if (!client) {
			client = broker(`${namespace}-client`, "Fake");
			brokers.push(client);
			await client.start();
		}
		return client;
	};
	const others: Array<{ stop(): Promise<void> }> = [];
	const saved = new Map<string, string | undefined>();
	return {
		name: "embedded",
		track: thing => others.push(thing),
		async env(name) {
			namespace = `${name}-${process.pid}-${Date.now().toString(36)}`;
			return {
				NAMESPACE: namespace,
				DATA_DIR: tempDir(name),
				MONGO_URI: "",
				CTL_SECRET_KEY: `${name}-secret`,
				PORT: "0",
				HOST: "127.0.0.1",
			};
		},
		run(services, env, nodeID) {
			// The services read their settings from the environment when they are created (the same for every replica);
			// what it was is put back when the leg stops.
			for (const [key, value] of Object.entries({
				CTL_ADMIN_TOKEN: ADMIN_TOKEN,
				RATE_LIMIT_PER_MINUTE: "1000000",
				OUTBOUND_ALLOW: "127.0.0.1/32",
				...env,
			})) {
				if (!saved.has(key)) saved.set(key, process.env[key]);
				process.env[key] = value;
			}
			const b = broker(nodeID ?? `${namespace}-${++n}`, "Fake");
			brokers.push(b);
			for (const s of services) b.loadService(serviceFile(s));
			const started = b.start();
			return {
				services,
				async api() {
					await started;
					const gateway = b.getLocalService("api") as unknown as { server: { address(): AddressInfo } };
					return `http://127.0.0.1:${gateway.server.address().port}/api`;
				},
				ready: () => started,
				kill: async () => {
					await started;
					await stopBroker(b);
				},
				log: () => "",
			};
		},
		async call(action, params) {
			const c = await clientOf();
			await c.waitForServices([action.slice(0, action.lastIndexOf("."))], 30_000);
			return c.call(action, params ?? {});
		},
		serving: async service => servingOn(await clientOf(), service),
		async stop() {
			for (const b of brokers.reverse()) if (b.started) await stopBroker(b);
			for (const o of others) await o.stop();
			for (const [key, value] of saved) {
				if (value === undefined) delete process.env[key];
				else process.env[key] = value;
			}
		},
	};
}

function mongoLeg(mongoUri: string): ReplicaLeg {
	const procs: Proc[] = [];
	const others: Array<{ stop(): Promise<void> }> = [];
	let client: ServiceBroker | null = null;
	let transporter = "";
	let namespace = "";
	const clientOf = async () => {
		if (!client) {
			client = new ServiceBroker({
				logger: false,
				namespace,
				nodeID: `${namespace}-client`,
				transporter: transporter as BrokerOptions["transporter"],
				serializer: new FleetJSONExt(),
				requestTimeout: 30_000,
			});
			await client.start();
		}
		return client;
	};
	return {
		name: "mongo",
		track: thing => others.push(thing),
		async env(name) {
			const nats = await ensureNats();
			others.push(nats);
			transporter = nats.url;
			namespace = `${name}-${process.pid}-${Date.now().toString(36)}`;
			return {
				TRANSPORTER: nats.url,
				NAMESPACE: namespace,
				MONGO_URI: uniqueMongoUri(mongoUri),
				CTL_SECRET_KEY: `${name}-secret`,
				PORT: "0",
				HOST: "127.0.0.1",
			};
		},
		run(services, env, nodeID) {
			const proc = runServices(services, { ...env, ...(nodeID ? { NODEID: nodeID } : {}) });
			procs.push(proc);
			return {
				services,
				api: async () => `http://127.0.0.1:${(await boundPorts(proc)).api}/api`,
				async ready() {
					const { health } = await boundPorts(proc, { healthOnly: true });
					const deadline = Date.now() + 30_000;
					while ((await fetch(`http://127.0.0.1:${health}/ready`).catch(() => null))?.status !== 200) {
						if (Date.now() > deadline || hasExited(proc.child))
							throw new Error(`${services.join(",")} not ready\n${proc.log.join("")}`);
						await new Promise(r => setTimeout(r, 100));
					}
				},
				async kill() {
					const exited = new Promise(resolve =>
						hasExited(proc.child) ? resolve(null) : proc.child.once("exit", resolve),
					);
					proc.child.kill("SIGKILL");
					await exited;
				},
				log: () => proc.log.join(""),
			};
		},
		async call(action, params) {
			const c = await clientOf();
			await c.waitForServices([action.slice(0, action.lastIndexOf("."))], 60_000);
			return c.call(action, params ?? {});
		},
		serving: async service => servingOn(await clientOf(), service),
		async stop() {
			await Promise.all(procs.map(p => stopProc(p)));
			await client?.stop();
			for (const o of others) await o.stop();
		},
	};
}

/**
 * `body` declared once per leg: on the embedded store always, on MongoDB with MONGO_URI (else reported skipped,
 * with the reason). Each leg's replicas are stopped after its tests.
 */
export function describeReplicated(title: string, body: (leg: () => ReplicaLeg) => void): void {
	const uri = process.env.MONGO_URI;
	const legs: Array<[string, (() => ReplicaLeg) | null]> = [
		["embedded: brokers in one process on one NeDB directory", embeddedLeg],
		[
			`mongo: processes over NATS on one MongoDB database (MONGO_URI)${uri ? "" : " (skipped: MONGO_URI is not set)"}`,
			uri ? () => mongoLeg(uri) : null,
		],
	];
	for (const [name, make] of legs) {
		(make ? describe : describe.skip)(`${title}, ${name}`, () => {
			let leg: ReplicaLeg | null = null;
			afterAll(async () => leg?.stop());
			body(() => (leg ??= (make ?? embeddedLeg)()));
		});
	}
}

/**
 * A salt-api simulator with slow minions (by default 400–900 ms a return), stopped after the leg, and the environment
 * its replicas share: one namespace, one store, the simulator, a rollout driver that looks often and takes over soon
 * (a dead replica's claims lapse in 1.5 s).
 */
export async function slowFleet(
	leg: ReplicaLeg,
	name: string,
	minions: number,
	latencyMs: [number, number] = [400, 900],
): Promise<{ sim: import("../simulators/salt-api").SaltApiSimulator; env: Record<string, string> }> {
	const { SaltApiSimulator } = await import("../simulators/salt-api");
	const sim = new SaltApiSimulator({
		minions,
		timeout: 1,
		gatherJobTimeout: 0,
		latencyMs,
		presenceIntervalMs: 3_600_000,
		downFraction: 0,
	});
	leg.track(sim);
	await sim.start();
	const env = {
		...(await leg.env(name)),
		...sim.cmApiEnv,
		CM_SYNC_INTERVAL_MS: "3600000",
		CM_JOB_POLL_MS: "200",
		ROLLOUT_TICK_MS: "200",
		ROLLOUT_LEASE_MS: "1500",
	};
	return { sim, env };
}

/**
 * Two whole replicas (every service but the gateway: each with its own cm-gateway, which its services ask first) and
 * the gateway, on a fleet of 24 quick minions; answers once the API lists the inventory, with the simulator's
 * executions cleared and the first 20 reachable hosts (sorted), two for each of ten pieces of work.
 */
export async function twoLiveReplicas(
	leg: ReplicaLeg,
	name: string,
): Promise<{ sim: import("../simulators/salt-api").SaltApiSimulator; api: string; pairs: string[][] }> {
	const { sim, env } = await slowFleet(leg, name, 24, [2, 30]);
	const replicas = [
		leg.run(
			ALL_SERVICES().filter(s => s !== "api"),
			env,
		),
		leg.run(
			ALL_SERVICES().filter(s => s !== "api"),
			env,
		),
	];
	const api = await leg.run(["api"], env).api();
	await Promise.all(replicas.map(r => r.ready()));
	await eventually(
		async () =>
			(await request("GET", `${api}/hosts?max_results=1`).catch(() => null))?.body?._meta?.total ===
			sim.minionIds().length
				? true
				: undefined,
		60_000,
		"the API and the inventory",
	);
	sim.resetExecutions();
	const hosts = sim.upMinions().sort();
	if (hosts.length < 20) throw new Error(`only ${hosts.length} reachable minions`);
	return { sim, api, pairs: Array.from({ length: 10 }, (_, i) => [hosts[2 * i], hosts[2 * i + 1]]) };
}
