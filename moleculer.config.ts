/**
 * Broker options for moleculer-runner, from the configuration loaded once here (lib/config.ts), which every
 * service then reads from its broker (configOf). moleculer-runner also lets every option be overridden by an
 * environment variable named after its path (TRANSPORTER, NAMESPACE, NODEID, LOGLEVEL, ...).
 *
 *   TRANSPORTER unset          -> one process, no broker traffic (the embedded default)
 *   TRANSPORTER=nats://h:4222  -> services split over NATS (credentials in the URL: nats://user:pass@h:4222)
 *   SERVICES=api,hosts         -> which services this process runs (default: all of them)
 */
import "./lib/runtime/compile-cache";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { BrokerOptions } from "moleculer";
import { QuietConsoleLogger, printStartBlock, refuseBadStart } from "./lib/runtime/first-screen";
import { FleetJSONExt } from "./lib/runtime/serializer";
import { replCommands } from "./lib/repl/commands";
import type { REPLServer } from "node:repl";
import { tellRunner, useConfig } from "./lib/config";
import { HealthMiddleware } from "./lib/runtime/health";
import { ScrapedPrometheusReporter } from "./lib/runtime/metrics";
import { RequestLogMiddleware, jsonFormatter, routeProcessWarnings } from "./lib/runtime/logging";
import { installCrashGuard } from "./lib/runtime/crash-guard";
import {
	NatsConnectionMiddleware,
	ResendUndeliveredMiddleware,
	RestartedNodeMiddleware,
	SlowBackendBulkheads,
	endpointFailure,
} from "./lib/runtime/resilience";

// The configuration, loaded once for this process. Node.js too old, a setting refused: one line on stderr and
// exit 1, before the broker prints anything.
const config = refuseBadStart();
const settings = config.broker;
let replServer: REPLServer | undefined;

// The runner loads services from SERVICEDIR; default to the compiled services next to this file.
// SERVICES names services (`api,hosts,webhook-deliveries`); a service with parts lives in a folder
// (services/webhooks/webhook-deliveries.service.js): each name becomes its file, which moleculer-runner takes as is.
const serviceDir = settings.serviceDir || path.join(__dirname, "services");
tellRunner(serviceDir, settings.services && serviceFiles(serviceDir, settings.services));

/** `names` (comma list) with each service name replaced by its file under `dir`; paths, globs and unknown names stay. */
function serviceFiles(dir: string, names: string): string {
	let files: string[] = [];
	try {
		files = (fs.readdirSync(dir, { recursive: true }) as string[]).filter(f => f.endsWith(".service.js"));
	} catch {
		return names; // not a directory: as moleculer-runner takes it
	}
	const byName = new Map(files.map(f => [path.basename(f, ".service.js"), path.join(dir, f)]));
	return names
		.split(",")
		.map(n => n.trim())
		.map(n => byName.get(n) ?? n)
		.join(",");
}

const brokerConfig: BrokerOptions = {
	namespace: settings.namespace,
	// hostname-pid: unique per process and per pod, never shared by replicas.
	nodeID: settings.nodeID || `${os.hostname()}-${process.pid}`,

	// Moleculer's Console logger, with what every start repeats (services registered and started, the
	// broker's parts) at debug level (lib/runtime/first-screen.ts).
	// json: one object per line with the request id where there is one (lib/runtime/logging.ts)
	logger: new QuietConsoleLogger({
		formatter: (settings.jsonLogs ? jsonFormatter : "short") as never,
		colors: !settings.jsonLogs && process.stdout.isTTY,
		moduleColors: false,
	}),
	logLevel: (settings.logLevel || "info") as BrokerOptions["logLevel"],

	transporter: (settings.transporter || null) as BrokerOptions["transporter"],
	// JSONExt on the wire (dates survive), with a faster decoder; see lib/runtime/serializer.ts.
	serializer: new FleetJSONExt(),

	// Every call has a deadline (Moleculer's default is none); long salt-api work has its own (CM_API_TIMEOUT_MS).
	requestTimeout: settings.requestTimeoutMs,
	// Off: ResendUndelivered (lib/runtime/resilience.ts) sends again only what never left this node, and the
	// gateway's reads once more when their node went away; nothing else is ever sent twice.
	retryPolicy: { enabled: false },
	maxCallLevel: 100,
	// A node that stops answering (SIGKILL, a lost pod) is dropped after heartbeatTimeout: requests waiting
	// on it then fail with 503 instead of running into the request timeout.
	heartbeatInterval: 5,
	heartbeatTimeout: 15,
	contextParamsCloning: false,

	// SIGTERM: announce an empty node (peers stop routing here), wait stopDelay for that to spread, finish the
	// requests in flight (tracking), then stop the services and leave NATS. docs/operations.md "Shutdown".
	tracking: { enabled: true, shutdownTimeout: settings.shutdownTimeoutMs },
	registry: { strategy: "RoundRobin", preferLocal: true, stopDelay: settings.stopDelayMs },
	// Per endpoint (node × action): one that fails most calls is skipped for halfOpenTime, so a broken
	// replica does not keep taking its share. Only infrastructure failures count (timeouts, unexpected
	// errors), not the answers a healthy service gives (Eve errors, 4xx, a 502 about salt-api), nor this
	// node's own NATS link. The gateway's HTTP handler has none (it would refuse all HTTP for a while).
	circuitBreaker: {
		enabled: true,
		threshold: 0.5,
		minRequestCount: 20,
		windowTime: 60,
		halfOpenTime: 10_000,
		check: endpointFailure as never,
	},
	// Bulkheads only where an outside system can be slow (lib/runtime/resilience.ts).
	bulkhead: { enabled: false },

	validator: true,

	// A NATS URL with a user name and no password carries a token (nats://<token>@nats:4222), which
	// Moleculer would send as a user name. Done on the broker: moleculer-runner puts TRANSPORTER in as is.
	created(broker) {
		// Before the runner loads the services: each reads its settings from here in `created`.
		useConfig(broker, config);
		routeProcessWarnings(broker, settings.nodeWarningsSilenced);
		// `npm run dev` (--repl): the REPL server, so that Ctrl-C can stop an `exec` that waits (lib/repl/commands.ts).
		const startRepl = broker.repl.bind(broker);
		broker.repl = () => (replServer = startRepl() as REPLServer | undefined);
		// No request can kill the process: what nothing caught is logged (and its request answered 500).
		installCrashGuard(broker.logger);
		const opts = (broker.transit?.tx as { opts?: { url?: unknown; token?: string } } | undefined)?.opts;
		if (typeof opts?.url !== "string" || opts.token) return;
		try {
			const url = new URL(opts.url);
			if (url.protocol !== "nats:" || !url.username || url.password) return;
			opts.token = decodeURIComponent(url.username);
			url.username = "";
			opts.url = url.toString();
		} catch {
			// not a single URL (a list of servers): as Moleculer takes it
		}
	},

	// Where the gateway runs, the admin token made on a first start, and the request to try next.
	started(broker) {
		printStartBlock(broker, settings.jsonLogs);
	},

	// `npm run dev`: the services and the REPL in one process; its commands go through this process's API
	// like `npm run repl`'s (lib/repl/main.ts, docs/operator.md).
	replOptions: { delimiter: "fleet-ctl $", customCommands: replCommands(() => replServer) as never },

	// Served at /metrics of the health listener; METRICS_ENABLED=false turns them off.
	metrics: {
		enabled: true,
		reporter: [
			new ScrapedPrometheusReporter({
				defaultLabels: (registry: { broker: { namespace: string; nodeID: string } }) => ({
					namespace: registry.broker.namespace,
					nodeID: registry.broker.nodeID,
				}),
			}) as never,
		],
	},
	tracing: { enabled: false },

	middlewares: [
		HealthMiddleware({ port: config.healthPort, host: config.healthHost, fixed: config.healthPortGiven }),
		RequestLogMiddleware({ carryRequestId: settings.jsonLogs }),
		RestartedNodeMiddleware(),
		NatsConnectionMiddleware(),
		ResendUndeliveredMiddleware(),
		SlowBackendBulkheads({ concurrency: settings.bulkheadConcurrency, maxQueueSize: settings.bulkheadQueue }),
	] as never,
};

export default brokerConfig;
