/**
 * The master's event bus (`GET /events`), followed while the service runs: job returns (to Returns; any
 * return also proves its minion alive), new jobs (to the job history, which records those started elsewhere), presence (`salt/presence/change`, `salt/presence/present`, through
 * the presence guard), minion starts, key and auth events (the host is read again from the master), and the
 * hosts' `ctl/vnc/connect` event (an alert). Inventory events and host refreshes are applied in one lane, in
 * order, a batch at a time. A reconnection catches up: the job cache is read and a reconciliation runs.
 * Events a minion forged (forged-events.ts) are dropped before any of that: counted, and logged once per sender.
 */
import { HOSTNAME } from "../../lib/eve/ids";
import { countMetric, setMetric } from "../../lib/runtime/metrics";
import { PassLoop } from "../../lib/runtime/lease";
import type { EventStream, SaltEvent } from "./salt-events";
import { describeForgery, forgeryOf, RETURN_TAG, type Forgery } from "./forged-events";
import { verdictOf } from "./job-tracker";
import { pemFinger } from "./salt-inventory";
import type { GatewayAlerts } from "./alerts";
import { isObject, strings, type Alert, type GatewayContext } from "./context";
import type { Inventory } from "./inventory";
import type { JobPoll } from "./job-poll";
import type { Reconciliation } from "./reconcile";
import type { Returns } from "./returns";
import type { JobHistory } from "./history";
import { call } from "../../lib/contracts/call";

/** The tag of the event hosts send when a VNC session opens or closes (docs/salt.md). */
export const VNC_EVENT_TAG = "ctl/vnc/connect";

export class EventFollower {
	private stream: EventStream | null = null;
	private wasUp = false;
	private eventCount = 0;
	private readonly queue: SaltEvent[] = [];
	/** The one lane inventory events and host refreshes are applied in (the next batch gathers while one is written). */
	private readonly lane = new PassLoop(
		() => this.applyBatch(),
		err => this.gw.logger.warn("Could not apply Salt events; the next reconciliation will:", err.message),
	);
	private readonly refreshQueue = new Set<string>();
	/** Minions a job return just proved alive, for the lane to mark up (those not up already). */
	private readonly aliveQueue = new Set<string>();
	/** Senders (and kinds) of forged events already logged: each is logged once, then only counted. */
	private readonly forgersLogged = new Set<string>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly parts: {
			returns: Returns;
			poll: JobPoll;
			inventory: Inventory;
			reconciliation: Reconciliation;
			alerts: GatewayAlerts;
			history: JobHistory;
		},
	) {}

	/** Is the stream open, and how many events came (readiness, tests). */
	status(): { connected: boolean; events: number } {
		return { connected: this.stream?.connected === true, events: this.eventCount };
	}

	open(): void {
		const { broker, logger, config } = this.gw;
		this.stream = this.gw.salt.streamEvents({
			onEvent: ev => this.onEvent(ev),
			onConnect: () => {
				setMetric(broker, "fleet.salt.events.connected", 1);
				logger.info("Following the Salt master's event stream");
				this.parts.poll.setStreamUp(true);
				if (this.wasUp) {
					// Events were missed while the stream was down: catch up from the job cache and a full sync.
					void this.parts.poll.poll(true);
					if (config.cmSyncIntervalMs > 0) this.parts.reconciliation.schedule(0);
				}
				this.wasUp = true;
			},
			onDisconnect: reason => {
				this.parts.poll.setStreamUp(false);
				setMetric(broker, "fleet.salt.events.connected", 0);
				logger.warn(`Salt event stream lost (${reason}); reconnecting`);
			},
			onDropped: (tag, chars) => {
				logger.warn(`Salt event ${tag ?? "(no tag)"} skipped: ${chars} characters, longer than an event is kept`);
				// A skipped return is still in the job cache: read it at the next poll, not at the job's next scheduled read.
				if (tag === null || tag === undefined) this.parts.poll.want(null);
				else {
					const ret = RETURN_TAG.exec(tag);
					if (ret) this.parts.poll.want(ret[1]);
				}
			},
			onCut: tag => this.distrustCache(tag),
		});
	}

	close(): void {
		this.stream?.close();
	}

	/** A host whose key, fingerprint and grains are to be read again from the master (in the lane). */
	queueRefresh(id: string): void {
		if (!HOSTNAME.test(id)) return;
		this.refreshQueue.add(id);
		this.kick();
	}

	private onEvent(ev: SaltEvent): void {
		this.eventCount++;
		const forged = forgeryOf(ev.tag, ev.data);
		if (forged) {
			// A `_return` in another minion's name also went to the job cache (when that minion had not returned).
			if (forged.kind !== "minion_event") this.distrustCache(ev.tag);
			return this.ignoreForged(ev.tag, forged);
		}
		const ret = RETURN_TAG.exec(ev.tag);
		if (ret) {
			const { returns, inventory } = this.parts;
			// forgeryOf made sure the return's own id is the one its tag names.
			const host = ret[2];
			const verdict = verdictOf(ev.data);
			if (!returns.take(ret[1], host, ev.data.return, verdict) && !returns.tracker.has(ret[1]))
				returns.tracker.keepEarly(ret[1], host, ev.data.return, verdict);
			// Any return proves its minion alive now, sooner than the master's next presence loop.
			if (HOSTNAME.test(host) && inventory.aliveNews(host)) {
				this.aliveQueue.add(host);
				this.kick();
			}
			return;
		}
		if (/^salt\/job\/\d{20}(?:_\d+)?\/new$/.test(ev.tag)) {
			this.parts.history.seen(ev.data);
			return;
		}
		if (!/^salt\/(presence\/|minion\/|key$|auth$)/.test(ev.tag) && ev.tag !== VNC_EVENT_TAG) return;
		this.queue.push(ev);
		this.kick();
	}

	/**
	 * A job return the master may have stored in the job cache without it being the named minion's (a forgery, or
	 * an event salt-api cut off, which is how a forged return with fire_master's bytes `tok` arrives): that host's
	 * return is taken from the event stream only (JobTracker.distrust).
	 */
	private distrustCache(tag: string): void {
		const ret = RETURN_TAG.exec(tag);
		if (ret && this.parts.returns.tracker.distrust(ret[1], ret[2]))
			this.gw.logger.warn(
				`Job ${ret[1]}: the return of ${JSON.stringify(ret[2].slice(0, 200))} in the master's job cache may be forged; it is awaited from the event stream only (docs/salt.md, "Forged events")`,
			);
	}

	/**
	 * A forged event changes nothing: it is counted, and logged at warn once per sender and kind (without its
	 * payload, which is the sender's words; the set is bounded, past it forgeries are only counted).
	 */
	private ignoreForged(tag: string, forged: Forgery): void {
		countMetric(this.gw.broker, "fleet.salt.events.forged.total", { kind: forged.kind });
		const key = `${forged.kind}\0${forged.sender}`;
		if (this.forgersLogged.has(key) || this.forgersLogged.size >= 1000) return;
		this.forgersLogged.add(key);
		this.gw.logger.warn(
			`Ignored an event a minion forged on the Salt master's bus: ${describeForgery(tag, forged)} (docs/salt.md, "Forged events"; later ones from this sender are only counted in fleet_salt_events_forged_total)`,
		);
	}

	/** A batch applied in the lane now, or right after the one being written. */
	private kick(): void {
		if (!this.gw.stopping()) this.lane.ask();
	}

	/** One batch: the events queued, else the refreshes and hosts proved alive; more queued meanwhile asks for another. */
	private async applyBatch(): Promise<void> {
		const { inventory } = this.parts;
		const batch = this.queue.splice(0);
		try {
			if (batch.length) await inventory.turn(() => this.apply(batch));
			else
				await inventory.turn(async () => {
					await this.flushRefresh();
					await this.flushAlive();
				});
		} catch (err) {
			this.gw.logger.warn(
				`Could not apply ${batch.length} Salt event(s); the next reconciliation will:`,
				(err as Error).message,
			);
		}
		if (this.queue.length || this.refreshQueue.size || this.aliveQueue.size) this.kick();
	}

	private async apply(events: SaltEvent[]): Promise<void> {
		const { inventory, alerts: raiser } = this.parts;
		const presence = new Map<string, boolean>();
		let present: string[] | null = null;
		const alerts: Alert[] = [];
		/** Accepted authentications: the fingerprint of the key each minion presented. */
		const authed = new Map<string, string>();
		for (const { tag, data } of events) {
			if (tag === "salt/presence/change") {
				for (const id of strings(data.new)) presence.set(id, true);
				for (const id of strings(data.lost)) presence.set(id, false);
			} else if (tag === "salt/presence/present") {
				present = strings(data.present);
				presence.clear();
			} else if (tag.startsWith("salt/minion/") && tag.endsWith("/start")) {
				// forgeryOf made sure the sender is the minion the tag names.
				const id = tag.slice("salt/minion/".length, -"/start".length);
				presence.set(id, true);
				this.queueRefresh(id);
			} else if (
				tag === "salt/auth" &&
				typeof data.id === "string" &&
				data.result === true &&
				data.act === "accept" &&
				typeof data.pub === "string"
			) {
				// Every salt-call authenticates: re-read the host only if this is not the key it is known by.
				authed.set(data.id, pemFinger(data.pub));
			} else if ((tag === "salt/key" || tag === "salt/auth") && typeof data.id === "string") {
				this.queueRefresh(data.id);
			} else if (tag === VNC_EVENT_TAG) {
				// `hostname` is the sender's minion id (the host's _id, vouched for by the master), not the name the host wrote.
				const inner = isObject(data.data) ? data.data : {};
				const hostname =
					typeof data.id === "string" ? data.id : typeof inner.hostname === "string" ? inner.hostname : "";
				alerts.push({
					type: "vnc.connect",
					level: "info",
					payload: { hostname, status: typeof inner.status === "string" ? inner.status.slice(0, 100) : "" },
				});
			}
		}
		// Hosts first (a minion that just started may be new), then presence.
		await this.refreshChangedKeys(authed);
		await this.flushRefresh();
		const upSet = new Set<string>(present ?? []);
		for (const [id, isUp] of presence) isUp ? upSet.add(id) : upSet.delete(id);
		for (const id of this.aliveQueue) upSet.add(id);
		this.aliveQueue.clear();
		const up = [...upSet];
		let down = [...presence].filter(([, isUp]) => !isUp).map(([id]) => id);
		let complete = present !== null;
		if (complete || (down.length && inventory.presenceGuard.couldHold(down.length))) {
			// A reading that takes down a mass of the fleet (a master that just restarted knows no one yet) waits for confirmation.
			const loss = await call(this.gw.broker, "hosts.presenceLoss", { up, down, complete });
			if (inventory.presenceGuard.judge(loss.up, loss.losing) === "hold") {
				this.gw.logger.warn(
					`Presence: a reading would take ${loss.losing} of ${loss.up} hosts down at once; holding it until a later reading confirms it (docs/salt.md, "Presence")`,
				);
				countMetric(this.gw.broker, "fleet.hosts.presence.held.total");
				down = [];
				complete = false;
			}
		}
		if (up.length || down.length || complete) await inventory.applyPresence(up, down, complete, alerts);
		await raiser.raise(alerts);
	}

	/**
	 * Queues a refresh of the minions that authenticated with a key other than the accepted one their host is known
	 * by (or are not known as accepted hosts): an unchanged key costs the master no runner call (issue 46).
	 */
	private async refreshChangedKeys(authed: Map<string, string>): Promise<void> {
		const ids = [...authed.keys()].filter(id => !this.refreshQueue.has(id));
		if (!ids.length) return;
		let unchanged = new Set<string>();
		try {
			const known = await call(this.gw.broker, "hosts.inventoryState", { ids });
			unchanged = new Set(
				known
					.filter(
						h => h.key === "accepted" && !h._soft_deleted && !h.key_conflict && h.fingerprint === authed.get(h._id),
					)
					.map(h => h._id),
			);
		} catch (err) {
			this.gw.logger.warn(
				`Could not read ${ids.length} host(s) to compare their keys; reading them from the master:`,
				(err as Error).message,
			);
		}
		for (const id of ids) if (!unchanged.has(id)) this.queueRefresh(id);
	}

	private async flushRefresh(): Promise<void> {
		if (!this.refreshQueue.size) return;
		const ids = [...this.refreshQueue];
		this.refreshQueue.clear();
		try {
			await this.parts.inventory.refreshHosts(ids);
		} catch (err) {
			this.gw.logger.warn(
				`Could not refresh ${ids.length} host(s) from the master; the next reconciliation will:`,
				(err as Error).message,
			);
		}
	}

	private async flushAlive(): Promise<void> {
		if (!this.aliveQueue.size) return;
		const ids = [...this.aliveQueue];
		this.aliveQueue.clear();
		await this.parts.inventory.markAlive(ids);
	}
}
