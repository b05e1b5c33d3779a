/**
 * The fleet metrics, each emitted by the service that owns the fact, read as Prometheus scrapes them
 * (lib/runtime/metrics.ts): every service in one broker with metrics on, the cm-gateway against the salt-api
 * simulator over real HTTP.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, eventually } from "../support/http";
import { parsePrometheus, total, type Sample } from "../support/prometheus";
import { ScrapedPrometheusReporter } from "../../lib/runtime/metrics";
import { formatHttpDate } from "../../lib/eve/dates";

describe("fleet metrics", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const reporter = new ScrapedPrometheusReporter();
	const scrape = (): Sample[] => parsePrometheus(reporter.text());
	const url = (path: string) => `${h.api}/${path}`;
	const until = <T>(what: string, read: (s: Sample[]) => T | undefined, ms = 10_000) =>
		eventually(async () => read(scrape()), ms, what);

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 6,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceIntervalMs: 300,
		});
		await sim.start();
		h = await startEmbedded({
			env: { ...sim.cmApiEnv, CM_SYNC_INTERVAL_MS: "3600000", CM_JOB_POLL_MS: "500", FLEET_METRICS_INTERVAL_MS: "200" },
			broker: { metrics: { enabled: true, reporter: [reporter as never] } },
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("reports the inventory: hosts by presence, the last reconciliation, the event stream, presence changes", async () => {
		const up = sim.upMinions().length;
		const hosts = await until("the hosts gauge", s =>
			total(s, "fleet_hosts", { status: "up" }) === up ? s : undefined,
		);
		expect(total(hosts, "fleet_hosts")).toBe(sim.minionIds().length);
		const synced = total(hosts, "fleet_inventory_sync_last_success_timestamp_seconds");
		expect(synced).toBeGreaterThan(Date.now() / 1000 - 60);
		expect(synced).toBeLessThanOrEqual(Date.now() / 1000);
		expect(total(hosts, "fleet_inventory_sync_duration_seconds")).toBeGreaterThan(0);
		expect(
			await until("the event stream", s => (total(s, "fleet_salt_events_connected") === 1 ? true : undefined)),
		).toBe(true);

		const victim = sim.upMinions()[0];
		sim.setDown(victim);
		const after = await until("the presence change", s =>
			total(s, "fleet_hosts_presence_changes_total", { to: "down" }) >= 1 &&
			total(s, "fleet_hosts", { status: "up" }) === up - 1
				? s
				: undefined,
		);
		expect(total(after, "fleet_hosts", { status: "down" })).toBeGreaterThanOrEqual(1);
		sim.setUp(victim);
	});

	it("counts job returns by state and observes how late scheduled runs were claimed", async () => {
		const host = sim.upMinions()[1];
		const before = total(scrape(), "fleet_job_returns_total", { state: "finished" });
		const run = await request("POST", url(`hosts/${host}`), { body: { cm_client: "local_async", fun: "test.ping" } });
		expect(run.status).toBe(200);
		await until("the job's return", s =>
			total(s, "fleet_job_returns_total", { state: "finished" }) === before + 1 ? true : undefined,
		);

		const start = formatHttpDate(new Date(Math.ceil(Date.now() / 1000) * 1000 + 1000));
		expect(
			(await request("POST", url("tasks"), { body: { name: "metered", fun: "test.ping", tgt: [host], start } })).status,
		).toBe(201);
		const s = await until("the task run", s =>
			total(s, "fleet_task_runs_total", { outcome: "started" }) >= 1 ? s : undefined,
		);
		expect(total(s, "fleet_task_lateness_seconds_count")).toBeGreaterThanOrEqual(1);
		// claimed within the misfire grace, on a machine that may be busy
		expect(total(s, "fleet_task_lateness_seconds_sum") / total(s, "fleet_task_lateness_seconds_count")).toBeLessThan(5);
		const buckets = s.filter(x => x.name === "fleet_task_lateness_seconds_bucket").map(x => x.value);
		expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
	});
});
