/**
 * The inventory as the master sees it, written to `hosts`: a host's key, fingerprint and cached grains read
 * from the master (refresh), the master's view of many hosts applied at once (new minions become hosts, a
 * key that left soft-deletes its host, one that came back restores it, fingerprint and key-conflict alerts),
 * and presence readings (host.down / host.up). Owns the order of these writes (one at a time: `turn`), when an
 * event last changed each host (a write from older reads leaves it alone), the presence guard and the memo of
 * hosts a job return proved alive.
 */
import { batchesBySize } from "../../lib/fleet/batches";
import { presenceTransition, type PresenceTransition } from "../../lib/fleet/presence";
import { hostUpdate, keyViews, type KnownHost, type MasterView } from "./salt-inventory";
import { SaltApiError } from "./salt-client";
import { PresenceGuard } from "./presence-guard";
import type { GatewayAlerts } from "./alerts";
import { UPSERT_BATCH, eachLimited, isObject, type Alert, type GatewayContext } from "./context";
import { call } from "../../lib/contracts/call";

/** A refresh of this many hosts or more reads every fingerprint at once instead of one call per host. */
const FINGER_ALL_FROM = 20;
/** Hosts per answer when the cm-gateway reads the fleet's inventory state over NATS (~150 B each). */
const INVENTORY_PAGE = 2000;
/** A minion a return proved alive is not written up again for its returns within this long (ms). */
const ALIVE_MEMO_MS = 60_000;

export interface ViewCounts {
	created: number;
	updated: number;
	removed: number;
	restored: number;
	fingerprints_changed: number;
}

export class Inventory {
	/** Whether a presence reading is believed at once (presence-guard.ts). */
	readonly presenceGuard: PresenceGuard;
	/** When an event last rewrote a host from the master (key, fingerprint, grains): a write whose reads are older leaves it alone. */
	readonly touched = new Map<string, number>();
	/** When a presence reading last set a host's status: an older read leaves the status alone, and writes the rest. */
	readonly presenceTouched = new Map<string, number>();
	/**
	 * When a return last proved a minion alive and the host was written up: its next returns within
	 * ALIVE_MEMO_MS cost nothing (a job on 5,000 hosts, run again and again, is not 5,000 reads each time).
	 * Forgotten when this gateway writes the host down.
	 */
	private readonly aliveSeen = new Map<string, number>();
	private writes: Promise<unknown> = Promise.resolve();

	constructor(
		private readonly gw: GatewayContext,
		private readonly alerts: GatewayAlerts,
	) {
		const { config } = gw;
		this.presenceGuard = new PresenceGuard({
			maxLoss: config.cmPresenceMaxLossPercent / 100,
			minHosts: 2,
			confirmMs: config.cmPresenceConfirmMs,
		});
	}

	/**
	 * Runs `write` when no other inventory write is running. The event lane and the reconciliation both check
	 * "did an event change this host after my reads?" (`touched`) and then write; without turns, a reconciliation
	 * could check before a refresh wrote a newer key state and write its older view after it.
	 */
	turn<T>(write: () => Promise<T>): Promise<T> {
		const turn = this.writes.then(write);
		this.writes = turn.then(
			() => undefined,
			() => undefined,
		);
		return turn;
	}

	/** Whether a return from this minion should mark it up (not when one did so within ALIVE_MEMO_MS). */
	aliveNews(id: string): boolean {
		return !(Date.now() - (this.aliveSeen.get(id) ?? -Infinity) < ALIVE_MEMO_MS);
	}

	/** A wheel function's `data.return` (an object), or a 502. */
	async wheel(fun: string, extra: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
		const event = await this.gw.salt.lowstate({ client: "wheel", fun, ...extra }, { safe: true });
		const data = isObject(event) ? event.data : undefined;
		if (!isObject(data) || data.success === false || !isObject(data.return))
			throw new SaltApiError(502, "malformed", `salt-api sent a malformed answer to ${fun}`);
		return data.return;
	}

	/** Writes a presence reading, raising host.down / host.up into `alerts`. */
	async applyPresence(
		up: string[],
		down: string[],
		complete: boolean,
		alerts: Alert[],
		changesOnly = false,
	): Promise<void> {
		const res = await call(this.gw.broker, "hosts.setPresence", { up, down, complete, changesOnly });
		const now = Date.now();
		if (!changesOnly) for (const id of [...up, ...down]) this.presenceTouched.set(id, now);
		else for (const id of res.wentUp) this.presenceTouched.set(id, now);
		for (const id of down) this.aliveSeen.delete(id);
		for (const id of res.wentDown) this.aliveSeen.delete(id);
		alerts.push(
			...this.alerts.presenceAlerts([
				...res.wentDown.map(id => ({ id, to: "host.down" as const })),
				...res.wentUp.map(id => ({ id, to: "host.up" as const })),
			]),
		);
	}

	/** Marks up the minions job returns proved alive (only those not up already: a job's returns rewrite nothing). */
	async markAlive(ids: string[]): Promise<void> {
		if (!ids.length) return;
		const alerts: Alert[] = [];
		await this.applyPresence(ids, [], false, alerts, true);
		const now = Date.now();
		if (this.aliveSeen.size > 200_000) this.aliveSeen.clear();
		for (const id of ids) this.aliveSeen.set(id, now);
		await this.alerts.raise(alerts);
	}

	/**
	 * Reads these minions' keys, fingerprints and cached grains from the master and writes them:
	 * new minions become hosts, a key that left soft-deletes its host, one that came back restores it.
	 * Presence is not read here (events bring it); a new host starts "unknown".
	 */
	async refreshHosts(ids: string[]): Promise<void> {
		const startedAt = Date.now();
		const views = new Map<string, MasterView>();
		const record = (fingers: Record<string, unknown>, wanted: Set<string>) => {
			for (const [id, view] of keyViews(null, fingers, id => wanted.has(id))) views.set(id, view);
		};
		const wanted = new Set(ids);
		if (ids.length >= FINGER_ALL_FROM) record(await this.wheel("key.finger", { match: "*" }), wanted);
		else
			await eachLimited(ids, this.gw.config.cmApiConcurrency, async id =>
				record(await this.wheel("key.finger", { match: id }), new Set([id])),
			);
		const present = [...views.keys()];
		if (present.length) {
			const grains = await this.gw.salt.lowstate(
				{ client: "runner", fun: "cache.grains", tgt: present, tgt_type: "list" },
				{ safe: true },
			);
			if (!isObject(grains))
				throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to cache.grains");
			for (const id of present) if (isObject(grains[id])) views.get(id)!.grains = grains[id] as Record<string, unknown>;
		}
		await this.applyMasterView(
			views,
			ids.filter(id => !views.has(id)),
			startedAt,
		);
		for (const id of ids) this.touched.set(id, Math.max(this.touched.get(id) ?? 0, startedAt));
	}

	/**
	 * What the inventory knows of every host. Over a transporter in pages (a fleet of 100,000 in one
	 * answer would be ~15 MB, beyond a NATS message); in one process in one pass.
	 */
	async fleetState(): Promise<Map<string, KnownHost>> {
		const { broker } = this.gw;
		const known = new Map<string, KnownHost>();
		if (!broker.transit) {
			for (const h of await call(broker, "hosts.inventoryState")) known.set(h._id, h);
			return known;
		}
		for (let after: string | undefined; ; ) {
			const page = await call(broker, "hosts.inventoryState", { after, limit: INVENTORY_PAGE });
			for (const h of page) known.set(h._id, h);
			if (page.length < INVENTORY_PAGE) return known;
			after = page[page.length - 1]._id;
		}
	}

	/**
	 * Writes the master's view: creates and updates hosts, restores hosts whose key came back,
	 * soft-deletes the `gone` ones, raises fingerprint and presence alerts. Hosts an event changed after
	 * `readAt` are left alone: the event is newer than these reads.
	 */
	async applyMasterView(
		views: Map<string, MasterView>,
		gone: string[],
		readAt: number,
		knownHosts?: Map<string, KnownHost>,
	): Promise<ViewCounts> {
		const { broker, logger } = this.gw;
		const fresher = (id: string) => (this.touched.get(id) ?? 0) >= readAt;
		// A presence reading since the reads knows the status better, not the key or grains: a host it could not
		// write because it did not exist yet is still created (a first reconciliation outlasts a presence loop).
		const presenceFresher = (id: string) => (this.presenceTouched.get(id) ?? 0) >= readAt;
		const ids = [...views.keys(), ...gone];
		const known =
			knownHosts ??
			new Map((ids.length ? await call(broker, "hosts.inventoryState", { ids }) : []).map(h => [h._id, h]));
		const now = new Date();
		const changes: Array<{ _id: string } & Record<string, unknown>> = [];
		const alerts: Alert[] = [];
		const transitions: Array<{ id: string; to: PresenceTransition }> = [];
		const restore: string[] = [];
		for (const [id, view] of views) {
			if (fresher(id)) continue;
			const host = known.get(id);
			const { status, ...rest } = view;
			const { doc, fingerprintChange, keyConflict } = hostUpdate(id, presenceFresher(id) ? rest : view, host, now);
			changes.push(doc);
			if (fingerprintChange)
				alerts.push({ type: "fingerprint.changed", level: "warning", payload: { ...fingerprintChange } });
			if (keyConflict) alerts.push({ type: "key.conflict", level: "warning", payload: { ...keyConflict } });
			if (doc.status === "down") this.aliveSeen.delete(id);
			const moved = presenceTransition(host, doc.status as string | undefined);
			if (moved) transitions.push({ id, to: moved });
			// Soft-deleted by an earlier reconciliation (its `key` was forgotten), and the key is back.
			if (host?._soft_deleted && !host.key) restore.push(id);
		}
		const removeIds = gone.filter(id => known.has(id) && !known.get(id)!._soft_deleted && !fresher(id));

		let created = 0;
		let updated = 0;
		for (const batch of batchesBySize(changes, UPSERT_BATCH)) {
			const res = await call(broker, "hosts.upsertMany", { hosts: batch });
			created += res.created;
			updated += res.updated;
		}
		const restored = restore.length ? await call(broker, "hosts.setPresent", { ids: restore, present: true }) : [];
		const removed = removeIds.length ? await call(broker, "hosts.setPresent", { ids: removeIds, present: false }) : [];
		alerts.push(...this.alerts.presenceAlerts(transitions));
		await this.alerts.raise(alerts);
		const fingerprints = alerts.filter(a => a.type === "fingerprint.changed").length;
		if (removed.length || restored.length || fingerprints)
			logger.info(
				`Inventory: ${removed.length} host(s) soft-deleted, ${restored.length} restored, ${fingerprints} fingerprint(s) changed`,
			);
		return { created, updated, removed: removed.length, restored: restored.length, fingerprints_changed: fingerprints };
	}
}
