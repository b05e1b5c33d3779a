/**
 * Moleculer's request metrics for the gateway's kept reads (kept-reads.ts), recorded as its metrics middleware
 * records a local call of the `rest` action (`moleculer.request.total`, `.levels` and the `.time` histogram),
 * but added up here and handed to the registry in one go: once a second, before every scrape
 * (lib/runtime/metrics.ts, beforeScrape) and when the gateway stops. Recording each read in the registry
 * hashed its labels three times, made a closure and walked the buckets in a megamorphic object: some 6 µs of a
 * kept read's 45 (perf, docs/operations.md). Here a read costs a bucket lookup and three additions.
 */
import type { ServiceBroker } from "moleculer";
import { beforeScrape } from "../../lib/runtime/metrics";

/** What this module relies on of Moleculer 0.15's histogram (types/histogram.js): `observe` answers the item it counted in, with these fields. */
interface HistogramItem {
	count: number;
	sum: number;
	lastValue: number;
	timestamp: number;
	bucketValues: Record<number, number> | null;
}
interface Histogram {
	buckets?: number[];
	quantiles?: unknown;
	rate?: unknown;
	observe(value: number, labels: object, timestamp?: number): HistogramItem | undefined;
}

const FLUSH_MS = 1000;

export class KeptReadMetrics {
	private readonly labels: { service: string; action: string; caller: null; type: string };
	private readonly levelLabels: { service: string; action: string; caller: null; level: number };
	private readonly histogram: Histogram | null;
	private readonly bounds: number[];
	/** Reads counted since the last flush; the first one's duration is observed as Moleculer would, the rest added up. */
	private count = 0;
	private first = 0;
	private sum = 0;
	private last = 0;
	/** Of the reads after the first: how many took at most bounds[i] ms and more than bounds[i - 1] (the last slot: more than all). */
	private readonly perBucket: Float64Array;
	private readonly batched: boolean;
	private timer: NodeJS.Timeout | null = null;
	private readonly unhook: () => void;

	constructor(
		private readonly broker: ServiceBroker,
		service: string,
	) {
		this.labels = { service, action: `${service}.rest`, caller: null, type: "local" };
		this.levelLabels = { service, action: this.labels.action, caller: null, level: 1 };
		const histogram = broker.metrics.getMetric("moleculer.request.time") as unknown as Histogram | null;
		this.histogram = histogram && typeof histogram.observe === "function" ? histogram : null;
		this.bounds = Array.isArray(histogram?.buckets) ? [...histogram.buckets] : [];
		// Quantiles and rates (Moleculer's defaults, which lib/runtime/metrics.ts's leanMetrics turns off) need
		// every value as it comes: with them, each read is recorded at once.
		this.batched = !histogram || (!histogram.quantiles && !histogram.rate);
		this.perBucket = new Float64Array(this.bounds.length + 1);
		this.unhook = beforeScrape(broker, () => this.flush());
	}

	/** One kept read that took `ms`. */
	record(ms: number): void {
		if (!this.batched) {
			this.count = 1;
			this.first = ms;
			this.flush();
			return;
		}
		if (this.count++ === 0) {
			this.first = ms;
			this.timer ??= setTimeout(() => {
				this.timer = null;
				this.flush();
			}, FLUSH_MS).unref();
			return;
		}
		this.sum += ms;
		this.last = ms;
		const bounds = this.bounds;
		let i = 0;
		while (i < bounds.length && ms > bounds[i]) i++;
		this.perBucket[i]++;
	}

	/** Hands what was counted to the registry. */
	flush(): void {
		const n = this.count;
		if (n === 0) return;
		this.count = 0;
		const metrics = this.broker.metrics;
		metrics.increment("moleculer.request.total", this.labels, n);
		metrics.increment("moleculer.request.levels", this.levelLabels, n);
		const item = this.histogram?.observe(this.first, this.labels);
		if (item && n > 1) {
			const now = Date.now();
			item.count += n - 1;
			item.sum += this.sum;
			item.lastValue = this.last;
			item.timestamp = now;
			// As observe does: every bucket whose bound is at least the value counts it.
			if (item.bucketValues) {
				let upTo = 0;
				for (let i = 0; i < this.bounds.length; i++) {
					upTo += this.perBucket[i];
					item.bucketValues[this.bounds[i]] += upTo;
				}
			}
		}
		this.sum = 0;
		this.perBucket.fill(0);
	}

	/** Flushes, and counts nothing more. */
	stop(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		this.flush();
		this.unhook();
	}
}
