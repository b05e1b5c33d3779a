/**
 * The one presence rule: which change of a host's status is a transition — a live (not soft-deleted) host
 * that was up and is now down, or was down and is up again. Every path that writes presence decides with it:
 * the hosts service's presence readings (hosts.setPresence: events, job returns) and the cm-gateway's
 * reconciliation; the cm-gateway raises the alerts of both in one place (services/cm-gateway/alerts.ts).
 */
export type PresenceTransition = "host.down" | "host.up";

export function presenceTransition(
	before: { status?: unknown; _soft_deleted?: unknown } | undefined,
	after: string | undefined,
): PresenceTransition | null {
	if (!before || before._soft_deleted || !after) return null;
	if (before.status === "up" && after === "down") return "host.down";
	if (before.status === "down" && after === "up") return "host.up";
	return null;
}

/**
 * Whether a host seen alive at `now` needs its stored `heartbeat` moved: only when it is older than the
 * resolution (HEARTBEAT_RESOLUTION_MS). A fleet's presence arrives every few seconds and its inventory
 * every few minutes; moving every up host's heartbeat each time rewrote the whole fleet for a date
 * nobody reads to the second (docs/storage.md, "What a write costs").
 */
export function heartbeatDue(stored: unknown, now: Date, resolutionMs: number): boolean {
	return (
		!(stored instanceof Date) || now.getTime() - stored.getTime() >= resolutionMs || stored.getTime() > now.getTime()
	);
}
