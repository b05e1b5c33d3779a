/**
 * Metrics: Moleculer's own (requests, latencies, errors per action, transit, process) plus the fleet's,
 * rendered in Prometheus' text format at /metrics of the health listener (lib/runtime/health.ts). Each fleet
 * metric is emitted by the service that owns the fact (docs/operations.md lists them).
 */
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";
import { MetricReporters, type ServiceBroker } from "moleculer";

type MetricType = "counter" | "gauge" | "histogram";
interface FleetMetric {
	type: MetricType;
	description: string;
	unit?: string;
	labelNames?: string[];
	buckets?: number[];
	/** Moleculer's Prometheus reporter writes a histogram's _sum and _count only along with quantiles. */
	quantiles?: number[];
}

/** Every fleet metric, by Moleculer name (Prometheus: dots become underscores; the unit ends the name). */
export const FLEET_METRICS = {
	/** hosts service: live hosts by presence, recounted every FLEET_METRICS_INTERVAL_MS and after presence changes. */
	"fleet.hosts": { type: "gauge", description: "Hosts (not soft-deleted) by presence status", labelNames: ["status"] },
	/** cm-gateway: presence changes the master reported that moved a host up or down. */
	"fleet.hosts.presence.changes.total": {
		type: "counter",
		description: "Hosts that went up or down",
		labelNames: ["to"],
	},
	/** cm-gateway: presence readings held by the presence guard (a mass loss waiting to be confirmed; docs/salt.md). */
	"fleet.hosts.presence.held.total": { type: "counter", description: "Presence readings held until confirmed" },
	/** cm-gateway: every return of every job recorded (`finished`, `timeout`, ...). */
	"fleet.job.returns.total": { type: "counter", description: "Job returns recorded, by state", labelNames: ["state"] },
	/** tasks: how late a due run was claimed. */
	"fleet.task.lateness_seconds": {
		type: "histogram",
		description: "Delay between a task run's due time and its claim",
		unit: "seconds",
		buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300],
		quantiles: [0.5, 0.9, 0.99],
	},
	/** tasks: claimed runs by outcome (`started`, `no_minions`, `failed`, `skipped`). */
	"fleet.task.runs.total": { type: "counter", description: "Task runs by outcome", labelNames: ["outcome"] },
	/** rollouts: batch jobs asked of the cm-gateway (`kind` run or dry_run; `repeated`: the answer was a job already started). */
	"fleet.rollout.batches.total": {
		type: "counter",
		description: "Rollout batch jobs started, by kind",
		labelNames: ["kind", "repeated"],
	},
	/** cm-gateway: end of the last successful inventory reconciliation (sync lag = time() - this). */
	"fleet.inventory.sync.last_success_timestamp_seconds": {
		type: "gauge",
		description: "Unix time of the last successful inventory reconciliation",
		unit: "seconds",
	},
	"fleet.inventory.sync.duration_seconds": {
		type: "gauge",
		description: "Duration of the last inventory reconciliation",
		unit: "seconds",
	},
	"fleet.inventory.sync.failures.total": { type: "counter", description: "Inventory reconciliations that failed" },
	/** cm-gateway: is salt-api's event stream open (1) or not (0). */
	"fleet.salt.events.connected": { type: "gauge", description: "salt-api event stream open (1) or not (0)" },
	/** cm-gateway: lowstate calls sent to salt-api, by client and (runner and wheel only) function: the master's work fleet-ctl causes. */
	"fleet.salt.api.calls.total": {
		type: "counter",
		description: "Calls sent to salt-api, by client and runner or wheel function",
		labelNames: ["client", "fun"],
	},
	/** cm-gateway: events a minion forged on the master's bus, ignored (docs/salt.md, "Forged events"). */
	"fleet.salt.events.forged.total": {
		type: "counter",
		description: "Forged events ignored, by how they gave themselves away",
		labelNames: ["kind"],
	},
	/** every process with an embedded store: records whose deferred field (a host's grain) is still to be read from its file. */
	"fleet.store.deferred.pending": {
		type: "gauge",
		description: "Records whose deferred field is still to be read from its file since the start",
		labelNames: ["collection"],
	},
	/** every process: event loop delay over the last interval. */
	"process.eventloop.lag.p50_seconds": {
		type: "gauge",
		description: "Event loop delay, median over the last 10 s",
		unit: "seconds",
	},
	"process.eventloop.lag.p99_seconds": {
		type: "gauge",
		description: "Event loop delay, 99th percentile over the last 10 s",
		unit: "seconds",
	},
	"process.eventloop.lag.max_seconds": {
		type: "gauge",
		description: "Event loop delay, maximum over the last 10 s",
		unit: "seconds",
	},
} satisfies Record<string, FleetMetric>;

export type FleetMetricName = keyof typeof FLEET_METRICS;

function ensure(broker: ServiceBroker, name: FleetMetricName): boolean {
	const metrics = broker.metrics;
	if (!metrics?.isEnabled()) return false;
	if (!metrics.getMetric(name)) metrics.register({ name, ...(FLEET_METRICS[name] as FleetMetric) } as never);
	return true;
}

/** Adds to a fleet counter (nothing when metrics are off). */
export function countMetric(
	broker: ServiceBroker,
	name: FleetMetricName,
	labels?: Record<string, string>,
	by = 1,
): void {
	if (ensure(broker, name)) broker.metrics.increment(name, labels, by);
}

/** Sets a fleet gauge. */
export function setMetric(
	broker: ServiceBroker,
	name: FleetMetricName,
	value: number,
	labels?: Record<string, string>,
): void {
	if (ensure(broker, name)) broker.metrics.set(name, value, labels);
}

/** Observes a value of a fleet histogram. */
export function observeMetric(
	broker: ServiceBroker,
	name: FleetMetricName,
	value: number,
	labels?: Record<string, string>,
): void {
	if (ensure(broker, name)) broker.metrics.observe(name, value, labels);
}

/** What must reach a registry before it is read (figures added up elsewhere: services/api/kept-metrics.ts). */
const beforeReads = new WeakMap<object, Set<() => void>>();

/** Runs `flush` before every scrape of `broker`'s metrics; the function returned stops it. */
export function beforeScrape(broker: ServiceBroker, flush: () => void): () => void {
	const registry = broker.metrics as unknown as object;
	let hooks = beforeReads.get(registry);
	if (!hooks) beforeReads.set(registry, (hooks = new Set()));
	hooks.add(flush);
	return () => void hooks.delete(flush);
}

/**
 * Moleculer's Prometheus reporter without its own HTTP listener: the health listener serves its text,
 * so that one port per pod carries the probes and the scrape.
 */
export class ScrapedPrometheusReporter extends (MetricReporters.Prometheus as unknown as new (
	opts?: object,
) => { opts: any; registry: any; defaultLabels: any; generatePrometheusResponse(): string }) {
	init(registry: { broker: ServiceBroker; logger: unknown }) {
		// The base reporter's init (registry, logger, filters), not the Prometheus one (which listens).
		(MetricReporters.Base as any).prototype.init.call(this, registry);
		const labels = this.opts.defaultLabels;
		this.defaultLabels = typeof labels === "function" ? labels.call(this, registry) : labels;
	}

	stop() {
		return Promise.resolve();
	}

	/** The registry's metrics in Prometheus' text format. */
	text(): string {
		for (const flush of beforeReads.get(this.registry as object) ?? []) flush();
		return this.generatePrometheusResponse();
	}
}

/**
 * Moleculer's own metrics without the parts Prometheus does not read and every request pays for: per-series
 * rates (Prometheus computes rate() itself) and the request and event time quantiles, which keep every
 * sample of the last minute (the histogram buckets remain: histogram_quantile() gives the same).
 */
export function leanMetrics(broker: ServiceBroker): void {
	const registry = broker.metrics as unknown as {
		isEnabled(): boolean;
		list?(): Array<{ name: string }>;
		store?: Map<string, { rate?: unknown; quantiles?: unknown; type: string; name: string }>;
	};
	if (!registry?.isEnabled() || !registry.store) return;
	for (const metric of registry.store.values()) {
		if (metric.name.startsWith("fleet.") || metric.name.startsWith("process.eventloop")) continue;
		metric.rate = false;
		if (metric.type === "histogram") metric.quantiles = null;
	}
}

/** Samples the event loop delay into the process.eventloop.lag.* gauges every `intervalMs` (Moleculer 0.15 dropped its own). */
export function trackEventLoopLag(broker: ServiceBroker, intervalMs = 10_000): () => void {
	if (!broker.metrics?.isEnabled()) return () => {};
	const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 20 });
	histogram.enable();
	const sample = () => {
		// nanoseconds -> seconds; an empty window (no samples yet) reads as 0
		const s = (ns: number) => (Number.isFinite(ns) ? ns / 1e9 : 0);
		setMetric(broker, "process.eventloop.lag.p50_seconds", s(histogram.percentile(50)));
		setMetric(broker, "process.eventloop.lag.p99_seconds", s(histogram.percentile(99)));
		setMetric(broker, "process.eventloop.lag.max_seconds", s(histogram.max));
		histogram.reset();
	};
	sample();
	const timer = setInterval(sample, intervalMs);
	timer.unref();
	return () => {
		clearInterval(timer);
		histogram.disable();
	};
}
