/**
 * When a reading of the master's presence is believed (issue 17, docs/salt.md "Presence").
 *
 * A real master's first event after a (re)start is `salt/presence/present` with an empty list, before any
 * minion has reconnected; the true list follows one `loop_interval` later. Taken as the truth, it marks the
 * whole fleet down and raises an alert for every host, then `host.up` for every host a loop later. So a
 * reading that would take down a mass of the hosts that are up — more than `maxLoss` of them and at least
 * `minHosts` — is held: the hosts keep their last confirmed status and no alert is raised. It is applied when
 * a reading at least `confirmMs` later still shows hosts gone (a real outage is then reported one reading
 * late); a reading in between that loses nothing clears it. The master's presence/change and present events
 * of one loop come milliseconds apart: `confirmMs` keeps the second from confirming the first.
 *
 * After the master did not answer (salt-api's 500 while it is down), the next reading that loses any host is
 * held the same way: right after a restart the master does not know who is connected.
 */

export interface PresenceGuardOptions {
	/** A reading losing more than this share of the up hosts is held (0..1; 1 holds nothing by share). */
	maxLoss: number;
	/** … and at least this many hosts (a single host going down is never held by share). */
	minHosts: number;
	/** How much later a reading must come to confirm a held one. */
	confirmMs: number;
	now?: () => number;
}

export type PresenceVerdict = "apply" | "hold";

export class PresenceGuard {
	private heldAt: number | null = null;
	private suspect = false;
	private readonly now: () => number;

	constructor(private readonly opts: PresenceGuardOptions) {
		this.now = opts.now ?? Date.now;
	}

	/** The master did not answer: until a reading confirms, losses are not believed at once. */
	masterUnanswering(): void {
		this.suspect = true;
	}

	/** Whether a reading is being held (for logs and metrics). */
	get holding(): boolean {
		return this.heldAt !== null;
	}

	/**
	 * Whether a reading that takes down at most `maxLosing` hosts could be held: when not, `judge` would apply it,
	 * and the caller can skip counting the hosts up (a single host's change is the common case).
	 */
	couldHold(maxLosing: number): boolean {
		return this.heldAt !== null || this.suspect || maxLosing >= this.opts.minHosts;
	}

	/**
	 * The verdict on a reading that would take `losing` of the `up` hosts down. "hold": apply the hosts it
	 * shows up, not those it shows gone.
	 */
	judge(up: number, losing: number): PresenceVerdict {
		const now = this.now();
		if (losing <= 0) {
			this.heldAt = null;
			this.suspect = false;
			return "apply";
		}
		if (this.heldAt !== null) {
			if (now - this.heldAt < this.opts.confirmMs) return "hold";
			this.heldAt = null;
			this.suspect = false;
			return "apply";
		}
		const mass = losing >= this.opts.minHosts && losing > this.opts.maxLoss * up;
		if (mass || this.suspect) {
			this.heldAt = now;
			return "hold";
		}
		return "apply";
	}
}
