/**
 * Alerts the cm-gateway raises (through the alerts service) and the presence-change counters: more host.down
 * (or host.up) alerts than CM_ALERT_BURST at once become one summary alert.
 */
import { countMetric } from "../../lib/runtime/metrics";
import type { Alert, GatewayContext } from "./context";

export class GatewayAlerts {
	constructor(private readonly gw: GatewayContext) {}

	async raise(alerts: Alert[]): Promise<void> {
		if (!alerts.length) return;
		const out: Alert[] = [];
		const byType = new Map<string, Alert[]>();
		for (const a of alerts) {
			if (a.type === "host.down" || a.type === "host.up") byType.set(a.type, [...(byType.get(a.type) ?? []), a]);
			else out.push(a);
		}
		for (const [type, list] of byType) {
			if (list.length <= this.gw.config.cmAlertBurst) out.push(...list);
			else out.push({ type, level: list[0].level, payload: { count: list.length, hostnames: list.slice(0, 100).map(a => a.payload.hostname) } });
		}
		try {
			await this.gw.broker.call("alerts.raiseMany", { alerts: out });
		} catch (err) {
			this.gw.logger.warn(`Could not raise ${out.length} alert(s):`, (err as Error).message);
		}
	}

	countPresenceChanges(wentUp: number, wentDown: number): void {
		if (wentUp) countMetric(this.gw.broker, "fleet.hosts.presence.changes.total", { to: "up" }, wentUp);
		if (wentDown) countMetric(this.gw.broker, "fleet.hosts.presence.changes.total", { to: "down" }, wentDown);
	}
}
