/**
 * The health listener every process runs on HEALTH_PORT (apart from the API, never under /api):
 *
 *   GET /live     200 while the process runs (503 once it has stopped); the liveness probe
 *   GET /ready    200 when this process can do its work: every local service started (storage connected:
 *                 moleculer-db connects in `started`), the transporter connected, the services its own
 *                 depend on discovered, the gateway listening; 503 with the reasons otherwise, and from
 *                 the moment a shutdown begins (SIGTERM). The readiness probe and the startup probe.
 *   GET /metrics  Prometheus text (lib/runtime/metrics.ts)
 *
 * A broker middleware, so it lives exactly as long as the broker: it listens before the services start
 * (a slow MongoDB shows as not ready, not as dead) and closes after they stopped.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Service, ServiceBroker } from "moleculer";
import { ScrapedPrometheusReporter, leanMetrics, trackEventLoopLag } from "./metrics";

/**
 * What each service cannot do its work without, beyond its own storage: the gateway authenticates every
 * request (tokens) and audits every write (audit); the cm-gateway and the scheduler write what they do
 * through these. Services not listed need nothing but themselves.
 */
export const READY_NEEDS: Record<string, string[]> = {
	api: ["tokens", "audit"],
	// every run is governed by the windows and the approval gate (docs/security.md)
	"cm-gateway": ["hosts", "actions", "salt-jobs", "failed-patches", "alerts", "maintenance-windows", "approvals"],
	approvals: ["approval-policies", "alerts"],
	tasks: ["actions", "alerts"],
	// a rollout follows its batches' jobs in the history and raises its alert
	rollouts: ["salt-jobs", "actions", "alerts"],
	// checks are judged from the history's jobs and their hosts' returns; hosts show the summary
	conformity: ["salt-jobs", "actions", "hosts", "alerts"],
	// the host sync and organizations' records go through these
	vpn: ["hosts", "vpn-managers", "vpn-organizations"],
	// snapshots read the hosts
	stats: ["hosts"],
};

export interface Readiness {
	ready: boolean;
	/** Why not, in words an operator reads in `kubectl describe pod`. */
	reasons: string[];
}

interface LocalService {
	name: string;
	/** The MongoDB adapter (lib/storage/mongo-adapter.ts) says whether it can serve; the NeDB adapter has no such method. */
	adapter?: { connected?(): boolean };
	server?: { listening?: boolean };
}

/** Brokers that have been started: one that is no longer started is stopping (broker.stopping is set late). */
const everStarted = new WeakSet<ServiceBroker>();

export function readiness(broker: ServiceBroker): Readiness {
	const reasons: string[] = [];
	if (!broker.started) reasons.push(everStarted.has(broker) ? "stopping" : "starting");
	const transit = broker.transit as
		| { connected?: boolean; disconnecting?: boolean; tx?: { connected?: boolean } }
		| undefined;
	if (transit && (!transit.connected || transit.disconnecting || transit.tx?.connected === false))
		reasons.push("transporter not connected");
	const local = (broker.services ?? []) as unknown as LocalService[];
	const available = new Set(
		broker.registry.getServiceList({ onlyAvailable: true, skipInternal: true }).map((s: { name: string }) => s.name),
	);
	const missing = new Set<string>();
	for (const svc of local) {
		for (const need of READY_NEEDS[svc.name] ?? []) if (!available.has(need)) missing.add(need);
		// The Mongo driver reconnects by itself; while it reaches no server this process cannot serve.
		if (svc.adapter?.connected && !svc.adapter.connected()) reasons.push(`${svc.name}: storage not connected`);
		if (svc.server && svc.server.listening === false && broker.started) reasons.push(`${svc.name}: not listening`);
	}
	if (missing.size) reasons.push(`waiting for ${[...missing].sort().join(", ")}`);
	return { ready: reasons.length === 0, reasons };
}

/** The services of `broker` not yet started: a local service is registered on its node once its `started` has run. */
export function unstartedServices(broker: ServiceBroker, except?: Service): string[] {
	const catalog = (broker.registry as unknown as { services: { has(fullName: string, nodeID: string): boolean } })
		.services;
	return broker.services
		.filter(svc => svc !== except && !catalog.has(svc.fullName, broker.nodeID))
		.map(svc => svc.fullName);
}

/**
 * Resolves once every other service of `service`'s broker has started. The gateway opens its port then, so that
 * no request reaches it while a service it routes to (or the tokens service it authenticates with) is still
 * starting: such a request would be answered 503. Only this node's services count (a replica's elsewhere does not
 * stand for one starting here); a start that fails ends the broker's start anyway.
 */
export function othersStarted(service: Service): Promise<void> {
	const broker = service.broker;
	return new Promise(resolve => {
		const check = () => {
			if (unstartedServices(broker, service).length) return;
			broker.localBus.off("$services.changed", check);
			resolve();
		};
		broker.localBus.on("$services.changed", check);
		check();
	});
}

export interface HealthOptions {
	port: number;
	host: string;
	/** The port was asked for (HEALTH_PORT): if it is taken the process stops; else another one is taken. */
	fixed: boolean;
}

/** The broker middleware. */
export function HealthMiddleware(opts: HealthOptions) {
	let server: http.Server | null = null;
	let stopped = false;
	let stopLag: () => void = () => {};

	const send = (res: http.ServerResponse, code: number, body: unknown, type = "application/json") => {
		const payload = typeof body === "string" ? body : JSON.stringify(body);
		res.writeHead(code, {
			"Content-Type": type,
			"Content-Length": Buffer.byteLength(payload),
			"Cache-Control": "no-store",
		});
		res.end(payload);
	};

	return {
		name: "Health",

		starting(broker: ServiceBroker) {
			leanMetrics(broker);
			stopLag = trackEventLoopLag(broker);
			server = http.createServer((req, res) => {
				const path = (req.url ?? "/").split("?")[0];
				if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, { error: "GET only" });
				if (path === "/live") return send(res, stopped ? 503 : 200, { live: !stopped, nodeID: broker.nodeID });
				if (path === "/ready") {
					const state = readiness(broker);
					return send(res, state.ready ? 200 : 503, { ...state, nodeID: broker.nodeID });
				}
				if (path === "/metrics") {
					const reporter = ((broker.metrics as unknown as { reporter?: unknown[] }).reporter ?? []).find(
						r => r instanceof ScrapedPrometheusReporter,
					) as ScrapedPrometheusReporter | undefined;
					if (!reporter) return send(res, 404, { error: "metrics are off (METRICS_ENABLED=false)" });
					return send(res, 200, reporter.text(), "text/plain; version=0.0.4; charset=utf-8");
				}
				send(res, 404, { error: "not found: /live, /ready, /metrics" });
			});
			// Probes must not hold the process open, nor keep connections across a shutdown.
			server.keepAliveTimeout = 1000;
			const listening = server;
			const listen = (port: number) =>
				new Promise<void>((resolve, reject) => {
					listening.once("error", reject);
					listening.listen(port, opts.host, () => {
						listening.off("error", reject);
						resolve();
					});
				});
			return listen(opts.port)
				.catch((err: NodeJS.ErrnoException) => {
					// A second process on one machine (`npm run repl` next to `npm start`) takes another port.
					if (err.code !== "EADDRINUSE" || opts.fixed)
						throw new Error(
							`The health listener cannot listen on ${opts.host}:${opts.port} (${err.code}): set HEALTH_PORT to a free port, or 0 for any`,
						);
					broker.logger.warn(
						`Port ${opts.port} is taken: the health listener takes a free one (set HEALTH_PORT to choose)`,
					);
					return listen(0);
				})
				.then(() => {
					const { port } = listening.address() as AddressInfo;
					broker.logger.info(`Health and metrics on http://${opts.host}:${port} (/live, /ready, /metrics)`);
				});
		},

		started(broker: ServiceBroker) {
			everStarted.add(broker);
		},

		stopped() {
			stopped = true;
			stopLag();
			const s = server;
			server = null;
			if (!s) return;
			return new Promise<void>(resolve => {
				s.close(() => resolve());
				s.closeAllConnections();
			});
		},
	};
}
