/**
 * The kept reads' request metrics (services/api/kept-metrics.ts): reads added up and handed to Moleculer's
 * registry in one go read, once scraped, exactly as the same reads recorded one by one through Moleculer's
 * own API (the brute force, in a second broker), with the lean settings the processes run with and with
 * Moleculer's defaults (quantiles and rates, which take every read as it comes).
 */
import { ServiceBroker } from "moleculer";
import { KeptReadMetrics } from "../../services/api/kept-metrics";
import { leanMetrics, ScrapedPrometheusReporter } from "../../lib/runtime/metrics";
import { parsePrometheus, type Sample } from "../support/prometheus";

async function brokerWithMetrics(
	lean: boolean,
): Promise<{ broker: ServiceBroker; reporter: ScrapedPrometheusReporter }> {
	const reporter = new ScrapedPrometheusReporter();
	const broker = new ServiceBroker({
		nodeID: "kept-metrics",
		logger: false,
		transporter: null,
		metrics: { enabled: true, reporter: [reporter as never] },
	});
	broker.createService({ name: "api", actions: { rest: () => null } });
	await broker.start();
	if (lean) leanMetrics(broker);
	return { broker, reporter };
}

/** The request series of api.rest, as Prometheus reads them. */
function restSeries(reporter: ScrapedPrometheusReporter): Sample[] {
	return parsePrometheus(reporter.text())
		.filter(s => s.name.startsWith("moleculer_request_") && s.labels.action === "api.rest")
		.map(s => ({ ...s, value: Number(s.value.toFixed(6)) }));
}

describe("kept reads in the request metrics", () => {
	// Durations across the buckets: under the first bound, on bounds, between them, beyond the last.
	const durations = [0.04, 0.3, 1, 1.2, 4.99, 5, 7, 60, 250, 251, 999, 2500, 9000, 12_000, 0.02, 0.5];

	for (const lean of [true, false]) {
		it(`reads as the same reads recorded one by one (${lean ? "lean settings" : "Moleculer's defaults"})`, async () => {
			const batched = await brokerWithMetrics(lean);
			const oneByOne = await brokerWithMetrics(lean);
			const kept = new KeptReadMetrics(batched.broker, "api");
			try {
				const labels = { service: "api", action: "api.rest", caller: null, type: "local" };
				for (const ms of durations) {
					kept.record(ms);
					oneByOne.broker.metrics.increment("moleculer.request.total", labels);
					oneByOne.broker.metrics.increment("moleculer.request.levels", {
						service: "api",
						action: "api.rest",
						caller: null,
						level: 1,
					});
					oneByOne.broker.metrics.observe("moleculer.request.time", ms, labels);
				}
				const want = restSeries(oneByOne.reporter).filter(
					s => !/rate|quantile/.test(s.name) && s.labels.quantile === undefined,
				);
				expect(want.find(s => s.name === "moleculer_request_total")?.value).toBe(durations.length);
				const got = restSeries(batched.reporter).filter(
					s => !/rate|quantile/.test(s.name) && s.labels.quantile === undefined,
				);
				expect(got).toEqual(want);
				// A second round adds to the first.
				for (const ms of durations.slice(0, 5)) kept.record(ms);
				kept.stop();
				expect(restSeries(batched.reporter).find(s => s.name === "moleculer_request_total")?.value).toBe(
					durations.length + 5,
				);
			} finally {
				kept.stop();
				await batched.broker.stop();
				await oneByOne.broker.stop();
			}
		});
	}

	it("hands the reads to the registry within a second, without a scrape", async () => {
		const { broker } = await brokerWithMetrics(true);
		const kept = new KeptReadMetrics(broker, "api");
		try {
			const count = () =>
				(
					broker.metrics.getMetric("moleculer.request.total")!.snapshot() as unknown as Array<{
						labels: { action: string };
						value: number;
					}>
				).find(v => v.labels.action === "api.rest")?.value ?? 0;
			kept.record(0.1);
			kept.record(0.2);
			expect(count()).toBe(0);
			await new Promise(r => setTimeout(r, 1200));
			expect(count()).toBe(2);
		} finally {
			kept.stop();
			await broker.stop();
		}
	});
});
