/**
 * What failed creates may have left in Pritunl (an organization made there whose record was never stored),
 * and the creates a vpn process left half-way when it died: looked for and removed, by every sync and on a
 * timer of their own, until gone or given up on (with an error in the log for a person).
 */
import type { Context, Logger, ServiceBroker } from "moleculer";
import type { Config } from "../../lib/config";
import type { PritunlClient } from "./pritunl-client";
import { NoManager, deleteInPritunl, orgList, type ManagerClients } from "./clients";
import { call } from "../../lib/contracts/call";

/**
 * An organization a failed create may have left in Pritunl. Known by its id, or, when Pritunl never
 * said (a create that timed out may still complete), as any organization of this name that was not there
 * in `before` and that no record names. Looked for again by the syncs after `recheckAfter` (ms epoch).
 */
export interface Orphan {
	manager: string;
	id?: string;
	name: string;
	before?: string[];
	recheckAfter: number;
	/**
	 * A create whose outcome is unknown: until then, finding nothing yet is no proof (Pritunl may still be
	 * carrying it out), so it is looked for again.
	 */
	lookUntil?: number;
	/** Its create's entry in `vpn-organizations` (createStarted), ended once nothing is left to look for. */
	pending?: string;
	/** The client that made it: the manager's record may be gone by now. */
	client: PritunlClient;
	attempts: number;
}

/** How many syncs look for an orphan before it is left to a person (with an error in the log). */
const ORPHAN_ATTEMPTS = 20;
/**
 * How long (in PRITUNL_TIMEOUT_MS) a create that was not answered is looked for: a create Pritunl finishes
 * after fleet-ctl stopped waiting appears within a few timeouts, and looking longer would risk taking an
 * organization someone made by hand under the same name for it.
 */
const ORPHAN_LOOK_TIMEOUTS = 10;
/**
 * A create not ended after this many PRITUNL_TIMEOUT_MS is one whose vpn process died: a live one has asked
 * Pritunl (two calls, each bounded by the timeout) and stored the record or taken over its undo long before.
 */
export const UNFINISHED_AFTER_TIMEOUTS = 5;

export interface OrphanDeps {
	broker: ServiceBroker;
	logger: Logger;
	config: Config;
	clients: ManagerClients;
	stopping(): boolean;
	/** A look for the orphans now, in line with the syncs. */
	lookSoon(): void;
}

export class Orphans {
	private orphans: Orphan[] = [];
	private timer: NodeJS.Timeout | null = null;

	constructor(private readonly deps: OrphanDeps) {}

	stop(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
	}

	/**
	 * Removes what a failed create made in Pritunl. When that fails, or when the create's outcome is
	 * unknown (`lookAgain`: Pritunl may still be carrying it out), the syncs look for it again.
	 */
	async undoCreate(
		ctx: Context,
		client: PritunlClient,
		found: Pick<Orphan, "manager" | "id" | "name" | "before" | "pending">,
		lookAgain: boolean,
	): Promise<void> {
		const timeout = this.deps.config.pritunlTimeoutMs;
		const orphan: Orphan = {
			...found,
			client,
			attempts: 0,
			recheckAfter: Date.now() + 2 * timeout,
			...(lookAgain ? { lookUntil: Date.now() + ORPHAN_LOOK_TIMEOUTS * timeout } : {}),
		};
		try {
			const removed = await this.remove(ctx, orphan);
			if (lookAgain && !removed) this.keep(orphan);
			else await this.endCreate(orphan.pending);
		} catch (err) {
			this.keep({ ...orphan, recheckAfter: Date.now() + timeout });
			this.deps.logger.error(
				`Could not remove the Pritunl organization '${orphan.name}'${orphan.id ? ` (${orphan.id})` : ""} made by a failed create; the syncs try again:`,
				(err as Error).message,
			);
		}
	}

	/** The create's database entry goes: nothing of it is left to look for. */
	async endCreate(pending: string | undefined): Promise<void> {
		if (!pending) return;
		await call(this.deps.broker, "vpn-organizations.createEnded", { id: pending }).catch((err: Error) =>
			this.deps.logger.warn(`Could not end the create entry ${pending}:`, err.message),
		);
	}

	/** Looks again for what failed creates may have left in Pritunl (see Orphan). */
	async clean(ctx: Context): Promise<void> {
		const { config, logger } = this.deps;
		await this.adoptUnfinishedCreates(ctx).catch((err: Error) =>
			logger.warn("Could not read the unfinished creates:", err.message),
		);
		const due = this.orphans.filter(o => o.recheckAfter <= Date.now());
		for (const orphan of due) {
			try {
				const removed = await this.remove(ctx, orphan);
				this.orphans = this.orphans.filter(o => o !== orphan);
				if (!removed && orphan.lookUntil && Date.now() < orphan.lookUntil)
					this.keep({ ...orphan, recheckAfter: Date.now() + config.pritunlTimeoutMs });
				else await this.endCreate(orphan.pending);
			} catch (err) {
				if (++orphan.attempts < ORPHAN_ATTEMPTS) {
					orphan.recheckAfter = Date.now() + config.pritunlTimeoutMs;
					continue;
				}
				this.orphans = this.orphans.filter(o => o !== orphan);
				await this.endCreate(orphan.pending);
				logger.error(
					`Gave up removing the Pritunl organization '${orphan.name}'${orphan.id ? ` (${orphan.id})` : ""} left by a failed create; remove it in Pritunl:`,
					(err as Error).message,
				);
			}
		}
		this.arm();
	}

	/** Removes what the orphan names; answers whether there was something (false: not made, or not yet). */
	private async remove(ctx: Context, orphan: Orphan): Promise<boolean> {
		const client = orphan.client;
		if (orphan.id) {
			await deleteInPritunl(client, orphan.id);
			return true;
		}
		const before = new Set(orphan.before ?? []);
		const candidates = (await orgList(client)).filter(o => o.name === orphan.name && !before.has(o.id));
		if (!candidates.length) return false;
		// More than one new organization of that name: someone else made one too, and which is ours cannot be told.
		if (candidates.length > 1)
			throw new Error(
				`${candidates.length} new organizations are named '${orphan.name}': none is removed; a person must choose`,
			);
		// An organization created since under the same name through fleet-ctl has a record: it stays.
		const records = await call(ctx, "vpn-organizations.records", { managers: [orphan.manager] });
		const recorded = new Set(records.map(r => r.vpn_representation?.id));
		for (const o of candidates) if (!recorded.has(o.id)) await deleteInPritunl(client, o.id);
		return true;
	}

	/** Keeps an orphan to look for again, at its time, whether or not periodic syncs run. */
	private keep(orphan: Orphan): void {
		if (!this.orphans.includes(orphan)) this.orphans.push(orphan);
		this.arm();
	}

	/** A look for the orphans when the earliest is due. */
	private arm(): void {
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		if (this.deps.stopping() || !this.orphans.length) return;
		const at = Math.min(...this.orphans.map(o => o.recheckAfter));
		this.timer = setTimeout(
			() => {
				this.timer = null;
				this.deps.lookSoon();
			},
			Math.max(0, at - Date.now()),
		);
		this.timer.unref?.();
	}

	/** Creates whose vpn process died half-way (their entries outlived any live create): looked for as orphans. */
	private async adoptUnfinishedCreates(ctx: Context): Promise<void> {
		const { config, logger, clients } = this.deps;
		const timeout = config.pritunlTimeoutMs;
		const creates = await call(ctx, "vpn-organizations.unfinishedCreates", {
			olderThanMs: UNFINISHED_AFTER_TIMEOUTS * timeout,
		});
		for (const c of creates) {
			if (this.orphans.some(o => o.pending === c._id)) continue;
			let client: PritunlClient;
			try {
				client = (await clients.of(ctx, c.manager)).client;
			} catch (err) {
				if (!(err instanceof NoManager)) continue; // unreachable now: the next look tries again
				logger.error(
					`A create of the Pritunl organization '${c.name}' stopped half-way and its VPN manager is gone: if Pritunl has it, remove it there`,
				);
				await this.endCreate(c._id);
				continue;
			}
			logger.warn(
				`A create of the Pritunl organization '${c.name}' stopped half-way (its process ended): looking for what it left`,
			);
			this.keep({
				manager: c.manager,
				name: c.name,
				before: c.before ?? [],
				pending: c._id,
				client,
				attempts: 0,
				recheckAfter: 0,
				lookUntil: Date.now() + ORPHAN_LOOK_TIMEOUTS * timeout,
			});
		}
	}
}
