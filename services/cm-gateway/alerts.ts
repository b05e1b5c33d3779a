/**
 * Alerts the cm-gateway raises (through the alerts service) and the presence-change counters: more host.down
 * (or host.up) alerts than CM_ALERT_BURST at once become one summary alert.
 */
import { countMetric } from "../../lib/runtime/metrics";
import type { PresenceTransition } from "../../lib/fleet/presence";
import type { Alert, GatewayContext } from "./context";
import { summarizeBursts } from "../../lib/fleet/alert-bursts";
import { call } from "../../lib/contracts/call";

const PRESENCE_ALERTS = new Set(["host.down", "host.up"]);

export class GatewayAlerts {
	constructor(private readonly gw: GatewayContext) {}

	async raise(alerts: Alert[]): Promise<void> {
		if (!alerts.length) return;
		const out = summarizeBursts(alerts, PRESENCE_ALERTS, this.gw.config.cmAlertBurst);
		try {
			await call(this.gw.broker, "alerts.raiseMany", { alerts: out });
		} catch (err) {
			this.gw.logger.warn(`Could not raise ${out.length} alert(s):`, (err as Error).message);
		}
	}

	/**
	 * The one place presence alerts are made (and counted in `fleet.hosts.presence.changes.total`), whatever
	 * wrote the presence: a host.down warning or a host.up notice per transition (lib/fleet/presence.ts).
	 */
	presenceAlerts(transitions: Array<{ id: string; to: PresenceTransition }>): Alert[] {
		const down = transitions.filter(t => t.to === "host.down").length;
		const up = transitions.length - down;
		if (up) countMetric(this.gw.broker, "fleet.hosts.presence.changes.total", { to: "up" }, up);
		if (down) countMetric(this.gw.broker, "fleet.hosts.presence.changes.total", { to: "down" }, down);
		return transitions.map(({ id, to }) =>
			to === "host.down"
				? { type: to, level: "warning", payload: { hostname: id, status: "down" } }
				: { type: to, level: "info", payload: { hostname: id, status: "up" } },
		);
	}
}
