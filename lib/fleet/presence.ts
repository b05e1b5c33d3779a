/**
 * The one presence rule: which change of a host's status is a transition — a live (not soft-deleted) host
 * that was up and is now down, or was down and is up again. Every path that writes presence decides with it:
 * the hosts service's presence readings (hosts.setPresence: events, job returns) and the cm-gateway's
 * reconciliation; the cm-gateway raises the alerts of both in one place (services/cm-gateway/alerts.ts).
 */
export type PresenceTransition = "host.down" | "host.up";

export function presenceTransition(before: { status?: unknown; _soft_deleted?: unknown } | undefined, after: string | undefined): PresenceTransition | null {
	if (!before || before._soft_deleted || !after) return null;
	if (before.status === "up" && after === "down") return "host.down";
	if (before.status === "down" && after === "up") return "host.up";
	return null;
}
