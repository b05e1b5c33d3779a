/**
 * The full inventory reconciliation with the master (`POST /api/inventory/sync`, at start, after every
 * reconnection of the event stream, and every CM_SYNC_INTERVAL_MS as the safety net): keys, fingerprints,
 * presence (through the presence guard), the master's nodegroups and cached grains of every minion, a batch at a time; progress in the
 * `inventory_sync` job. Owns its timer and the reconciliation under way (a second request joins it).
 */
import { HOSTNAME } from "../../lib/eve/ids";
import { countMetric, setMetric } from "../../lib/runtime/metrics";
import { trackJob } from "./progress";
import { keyViews, type MasterView } from "./salt-inventory";
import { SaltApiError } from "./salt-client";
import { isObject, strings, type GatewayContext } from "./context";
import type { Inventory, ViewCounts } from "./inventory";
import { call } from "../../lib/contracts/call";

/** Minions whose cached grains one reconciliation call reads (and whose hosts it then writes). */
const SYNC_BATCH = 1000;

export interface SyncResult extends ViewCounts {
	_status: "OK";
	/** Minions with a key on the master. */
	hosts: number;
}

/**
 * When the next scheduled reconciliation comes after `failures` failed ones in a row: the interval after a
 * success, else `retryMs` doubled per further failure, never later than the interval.
 */
export function nextSyncDelay(failures: number, retryMs: number, intervalMs: number): number {
	if (failures <= 0) return intervalMs;
	return Math.min(intervalMs, retryMs * 2 ** Math.min(failures - 1, 30));
}

export class Reconciliation {
	private timer: NodeJS.Timeout | null = null;
	private running: Promise<SyncResult> | null = null;
	/** Scheduled reconciliations that failed in a row (0 after a success). */
	private failures = 0;
	/** Why the master's nodegroups could not be read last time (logged once until it changes). */
	private nodegroupsTrouble: string | null = null;

	constructor(
		private readonly gw: GatewayContext,
		private readonly inventory: Inventory,
	) {}

	/**
	 * The next reconciliation in `delay` ms (0: now, replacing a later one); then every CM_SYNC_INTERVAL_MS,
	 * or sooner after a failure (CM_SYNC_RETRY_MS, doubling): a start reconciliation that met the master down
	 * must not leave the inventory as it was for a whole interval.
	 */
	schedule(delay = nextSyncDelay(this.failures, this.gw.config.cmSyncRetryMs, this.gw.config.cmSyncIntervalMs)): void {
		if (this.gw.stopping()) return;
		if (this.timer) {
			if (delay !== 0) return;
			clearTimeout(this.timer);
		}
		this.timer = setTimeout(() => {
			this.timer = null;
			void this.sync()
				.then(() => {
					this.failures = 0;
				})
				.catch((err: Error) => {
					this.failures++;
					const retry = nextSyncDelay(this.failures, this.gw.config.cmSyncRetryMs, this.gw.config.cmSyncIntervalMs);
					this.gw.logger.warn(
						`Inventory reconciliation failed; the hosts are left as they were, next try in ${retry} ms:`,
						err.message,
					);
				})
				.finally(() => this.schedule());
		}, delay);
		this.timer.unref?.();
	}

	stop(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
	}

	/** One full reconciliation; joins the one under way if any. */
	sync(): Promise<SyncResult> {
		if (!this.running) {
			const { broker } = this.gw;
			const startedAt = Date.now();
			this.running = this.tracked()
				.then(result => {
					setMetric(broker, "fleet.inventory.sync.last_success_timestamp_seconds", Date.now() / 1000);
					setMetric(broker, "fleet.inventory.sync.duration_seconds", (Date.now() - startedAt) / 1000);
					return result;
				})
				.catch((err: Error) => {
					countMetric(broker, "fleet.inventory.sync.failures.total");
					throw err;
				})
				.finally(() => {
					this.running = null;
				});
		}
		return this.running;
	}

	/** A reconciliation whose progress is the `inventory_sync` record of `jobs`. */
	private async tracked(): Promise<SyncResult> {
		const job = await trackJob(this.gw.broker, "inventory_sync", { master: this.gw.config.cmApiUrl });
		try {
			const result = await this.reconcile((done, total) => job.progress(done, total));
			await job.finish({ ...result });
			return result;
		} catch (err) {
			await job.fail(err);
			throw err;
		}
	}

	/**
	 * The master's nodegroups (runner `config.get nodegroups`, docs/salt.md), handed to the nodegroups service. A
	 * refusal (the eauth grant lacks it) or a failure leaves the ones read before and is logged once per reason:
	 * the reconciliation goes on.
	 */
	private async masterNodegroups(): Promise<void> {
		const { salt, logger, broker } = this.gw;
		try {
			const option = await salt.lowstate({ client: "runner", fun: "config.get", arg: ["nodegroups"] }, { safe: true });
			// Not set on the master: config.get answers its default, "". A list of one-key dicts is Salt's other spelling.
			const nodegroups = Array.isArray(option)
				? Object.assign({}, ...option.filter(isObject))
				: isObject(option)
					? option
					: option === ""
						? {}
						: null;
			if (!nodegroups)
				throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to config.get nodegroups");
			await call(broker, "nodegroups.fromMaster", { nodegroups });
			this.nodegroupsTrouble = null;
		} catch (err) {
			const why = (err as Error).message;
			if (why !== this.nodegroupsTrouble)
				logger.warn(`Could not read the master's nodegroups (N@ keeps the ones read before; docs/salt.md): ${why}`);
			this.nodegroupsTrouble = why;
		}
	}

	/**
	 * Three reads of the whole fleet that publish nothing to minions (key.list_all, key.finger "*", and
	 * manage.present: who the master sees connected), the master's nodegroups, then the cached grains (cache.grains) SYNC_BATCH
	 * minions at a time, each batch written as it is read, so that memory stays bounded by a batch, not the
	 * fleet. A read that fails ends the sync: the batches already written stay (they hold what the master
	 * said), and no host is soft-deleted unless every read succeeded. Presence goes through the presence
	 * guard like the events' (a master that just restarted sees no one connected).
	 */
	private async reconcile(progress: (done: number, total: number) => Promise<void>): Promise<SyncResult> {
		const { salt, logger, broker } = this.gw;
		const inventory = this.inventory;
		const startedAt = Date.now();
		const keys = await inventory.wheel("key.list_all");
		const fingers = await inventory.wheel("key.finger", { match: "*" });
		const present = await salt.lowstate({ client: "runner", fun: "manage.present" }, { safe: true });
		if (!Array.isArray(present))
			throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to manage.present");
		for (const dir of ["minions", "minions_pre", "minions_rejected", "minions_denied"]) {
			if (keys[dir] !== undefined && !Array.isArray(keys[dir]))
				throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to key.list_all");
		}

		await this.masterNodegroups();

		const up = new Set(strings(present));
		const views = keyViews(keys, fingers, id => HOSTNAME.test(id));
		for (const [id, view] of views) if (view.key === "accepted") view.status = up.has(id) ? "up" : "down";

		const known = await inventory.fleetState();
		const live = [...known.values()].filter(h => h.status === "up" && h.key === "accepted" && !h._soft_deleted);
		const losing = live.filter(h => views.get(h._id)?.status === "down");
		if (inventory.presenceGuard.judge(live.length, losing.length) === "hold") {
			logger.warn(
				`Presence: the master sees ${losing.length} of ${live.length} hosts up as gone; holding their status until a later reading confirms it (docs/salt.md, "Presence")`,
			);
			countMetric(broker, "fleet.hosts.presence.held.total");
			for (const h of losing) delete views.get(h._id)!.status;
		}
		const total: ViewCounts = { created: 0, updated: 0, removed: 0, restored: 0, fingerprints_changed: 0 };
		const add = (r: ViewCounts) => {
			for (const k of Object.keys(total) as Array<keyof ViewCounts>) total[k] += r[k];
		};
		const ids = [...views.keys()];
		for (let i = 0; i < ids.length; i += SYNC_BATCH) {
			const batch = ids.slice(i, i + SYNC_BATCH);
			const grains = await salt.lowstate(
				{ client: "runner", fun: "cache.grains", tgt: batch, tgt_type: "list" },
				{ safe: true },
			);
			if (!isObject(grains))
				throw new SaltApiError(502, "malformed", "salt-api sent a malformed answer to cache.grains");
			const batchViews = new Map<string, MasterView>();
			for (const id of batch)
				batchViews.set(
					id,
					isObject(grains[id]) ? { ...views.get(id)!, grains: grains[id] as Record<string, unknown> } : views.get(id)!,
				);
			add(await inventory.turn(() => inventory.applyMasterView(batchViews, [], startedAt, known)));
			await progress(Math.min(ids.length, i + SYNC_BATCH), ids.length);
		}
		const gone = [...known.values()].filter(h => !h._soft_deleted && !views.has(h._id)).map(h => h._id);
		if (gone.length) add(await inventory.turn(() => inventory.applyMasterView(new Map(), gone, startedAt, known)));
		for (const touched of [inventory.touched, inventory.presenceTouched])
			for (const [id, at] of touched) if (at < startedAt) touched.delete(id);
		return { _status: "OK", hosts: views.size, ...total };
	}
}
