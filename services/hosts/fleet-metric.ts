/**
 * The `fleet_hosts` gauge (live hosts by presence), recounted every FLEET_METRICS_INTERVAL_MS and shortly
 * after presence changes.
 */
import type { HostsThis } from "./types";
import { setMetric } from "../../lib/runtime/metrics";

export const metricMethods = {
	/** The fleet_hosts gauge: live hosts by presence, in one pass over the status fields. */
	async countHosts(this: HostsThis) {
		const counts: Record<string, number> = { up: 0, down: 0, unknown: 0 };
		try {
			await this.store.scan({}, ["status", "_soft_deleted"], d => {
				if (d._soft_deleted === true) return;
				const status = typeof d.status === "string" && d.status in counts ? d.status : "unknown";
				counts[status]++;
			});
		} catch (err) {
			this.logger.warn("Could not count the hosts for the metrics:", (err as Error).message);
			return;
		}
		for (const [status, n] of Object.entries(counts)) setMetric(this.broker, "fleet.hosts", n, { status });
	},

	/** Recounts shortly after presence changed (a burst of changes costs one count). */
	countHostsSoon(this: HostsThis) {
		if (this.countSoonTimer || !this.broker.isMetricsEnabled()) return;
		this.countSoonTimer = setTimeout(() => {
			this.countSoonTimer = null;
			void this.countHosts();
		}, 1000);
		this.countSoonTimer.unref?.();
	},
};
