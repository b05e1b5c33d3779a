/**
 * Broker options for moleculer-runner. moleculer-runner also lets every option be overridden by an
 * environment variable named after its path (TRANSPORTER, NAMESPACE, NODEID, LOGLEVEL, ...).
 *
 *   TRANSPORTER unset          -> one process, no broker traffic (the embedded default)
 *   TRANSPORTER=nats://h:4222  -> services split over NATS (credentials in the URL: nats://user:pass@h:4222)
 *   SERVICES=api,hosts         -> which services this process runs (default: all of them)
 */
import os from "node:os";
import path from "node:path";
import type { BrokerOptions } from "moleculer";
import { FleetJSONExt } from "./lib/serializer";

// The runner loads services from SERVICEDIR; default to the compiled services next to this file.
process.env.SERVICEDIR ??= path.join(__dirname, "services");

const brokerConfig: BrokerOptions = {
	namespace: process.env.NAMESPACE ?? "fleet-ctl",
	// hostname-pid: unique per process and per pod, never shared by replicas.
	nodeID: process.env.NODEID || `${os.hostname()}-${process.pid}`,

	logger: {
		type: "Console",
		options: { formatter: process.env.LOG_FORMAT === "json" ? "json" : "short", colors: process.stdout.isTTY, moduleColors: false },
	},
	logLevel: (process.env.LOGLEVEL as BrokerOptions["logLevel"]) ?? "info",

	transporter: (process.env.TRANSPORTER || null) as BrokerOptions["transporter"],
	// JSONExt on the wire (dates survive), with a faster decoder; see lib/serializer.ts.
	serializer: new FleetJSONExt(),

	requestTimeout: 30_000,
	retryPolicy: { enabled: false },
	maxCallLevel: 100,
	heartbeatInterval: 5,
	heartbeatTimeout: 15,
	contextParamsCloning: false,

	// Finish in-flight requests before a node stops (graceful rollouts).
	tracking: { enabled: true, shutdownTimeout: 10_000 },
	registry: { strategy: "RoundRobin", preferLocal: true, stopDelay: 200 },
	circuitBreaker: { enabled: false },
	bulkhead: { enabled: false },

	validator: true,

	// A NATS URL with a user name and no password carries a token (nats://<token>@nats:4222), which
	// Moleculer would send as a user name. Done on the broker: moleculer-runner puts TRANSPORTER in as is.
	created(broker) {
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

	metrics: { enabled: false },
	tracing: { enabled: false },
};

export default brokerConfig;
