/**
 * Leases and pass loops: the one way replicas share work through the database, and the one way a service runs
 * its passes (docs/architecture.md, "Leases and passes").
 *
 * A lease is held on a record as `lease: {owner, until}` — the same field on tasks, rollouts, conformity checks,
 * jobs and statistics snapshots. A record is **claimable** when it holds no lease or its lease passed; every
 * claim, takeover, renewal and release is one atomic update conditional on that (through the Store seam), so
 * however many replicas race on one record (NeDB in one process, MongoDB across processes) one wins. The
 * owner is whoever renews it: a replica's node id, or a job's run id.
 *
 * A pass loop runs one pass at a time: asked while a pass runs, it runs exactly once more after it.
 */
import type { Doc, Filter, FindOptions, Store, Update } from "../storage/store";

/** The field every leased record holds its lease in. */
export const LEASE = "lease";
const OWNER = `${LEASE}.owner`;
const UNTIL = `${LEASE}.until`;

export interface Lease {
	/** The holder: a replica's node id, or a job's run id. */
	owner: string;
	/** Until when the holder is taken to be alive; after it, another may take the work over. */
	until: Date;
}

/** Who takes or renews a lease, for how long, and when (a clock given, never read, by the pure parts). */
export interface Holder {
	owner: string;
	ms: number;
	now?: Date;
}

/** The lease `holder` takes (or renews to) now. */
export function leaseFor(holder: Holder): Lease {
	return { owner: holder.owner, until: new Date((holder.now ?? new Date()).getTime() + holder.ms) };
}

/** Whether the record's lease passed (or it holds none) at `now`. */
export function leaseLapsed(doc: Doc, now = new Date()): boolean {
	const until = doc[LEASE]?.until;
	return !until || new Date(until).getTime() < now.getTime();
}

/** Records holding no lease, or one that passed before `now`. */
export function claimable(now: Date): Filter {
	return { $or: [{ [LEASE]: null }, { [UNTIL]: { $lt: now } }] };
}

/** Records whose lease passed before `now` (a record holding none is not one: there is nothing to take over). */
export function lapsed(now: Date): Filter {
	return { [UNTIL]: { $lt: now } };
}

/** Records whose lease `owner` holds (passed or not: until another takes it over, the work is still its). */
export function heldBy(owner: string): Filter {
	return { [OWNER]: owner };
}

/** Both filters (a conjunction the stores' planners read through). */
export function both(a: Filter, b: Filter): Filter {
	return Object.keys(a).some(k => k in b) ? { $and: [a, b] } : { ...a, ...b };
}

/** `update` with `set` added to its `$set`. */
function withSet(update: Update | undefined, set: Doc): Update {
	return { ...update, $set: { ...update?.$set, ...set } };
}

/** The records of `where` whose lease passed (their holders died), to take over. */
export function findLapsed(store: Store, where: Filter, now: Date, opts?: FindOptions): Promise<Doc[]> {
	return store.find(both(where, lapsed(now)), opts);
}

/**
 * Claims a record of `where` that is claimable, applying `update` with it: the record as it is after, or null
 * when another holds it (or it no longer matches `where`).
 */
export function claim(store: Store, where: Filter, holder: Holder, update?: Update): Promise<Doc | null> {
	const now = holder.now ?? new Date();
	return store.findOneAndUpdate(
		both(where, claimable(now)),
		withSet(update, { [LEASE]: leaseFor({ ...holder, now }) }),
	);
}

/**
 * Takes over a record of `where` whose lease passed: the record as it is after, or null when another took it
 * first (its lease is live again) or it no longer matches.
 */
export function takeOver(store: Store, where: Filter, holder: Holder, update?: Update): Promise<Doc | null> {
	const now = holder.now ?? new Date();
	return store.findOneAndUpdate(both(where, lapsed(now)), withSet(update, { [LEASE]: leaseFor({ ...holder, now }) }));
}

/** Renews the holder's lease on the records of `where` (with `update`); false when it holds none there. */
export async function renew(store: Store, where: Filter, holder: Holder, update?: Update): Promise<boolean> {
	return (
		(await store.updateMany(both(where, heldBy(holder.owner)), withSet(update, { [UNTIL]: leaseFor(holder).until }))) >
		0
	);
}

/**
 * Lets the records of `where` go (with `update`): only the owner's when `owner` is given, else whoever holds
 * them (`where` then names the work precisely, e.g. a task's run). False when none matched.
 */
export async function release(store: Store, where: Filter, update?: Update, owner?: string): Promise<boolean> {
	const filter = owner === undefined ? where : both(where, heldBy(owner));
	return (await store.updateMany(filter, { ...update, $unset: { ...update?.$unset, [LEASE]: true } })) > 0;
}

/** A lease as an older version stored it, and how to read it (see migrateLeases). */
export interface OldLeases {
	/** The records in the old shape. */
	filter: Filter;
	/** The lease such a record holds (null: none). */
	lease(doc: Doc): Lease | null;
	/** The old fields, dropped. */
	unset: string[];
}

/**
 * Moves leases stored by an older version to `lease` (at a service's start, before it claims anything): one
 * conditional update per record still in the old shape, so replicas starting together do it once. Answers how
 * many records moved.
 */
export async function migrateLeases(store: Store, old: OldLeases): Promise<number> {
	let moved = 0;
	for (const doc of await store.find(old.filter)) {
		const lease = old.lease(doc);
		const update: Update = {
			...(lease ? { $set: { [LEASE]: lease } } : {}),
			...(old.unset.length ? { $unset: Object.fromEntries(old.unset.map(f => [f, true as const])) } : {}),
		};
		moved += await store.updateMany(both({ _id: doc._id }, old.filter), update);
	}
	return moved;
}

// ---------------------------------------------------------------- the pass loop

/** A pass; may answer in how many ms the next one is due (none: when asked). */
// biome-ignore lint/suspicious/noConfusingVoidType: a pass that says nothing of its next is any async function
export type Pass = () => Promise<number | void>;

/**
 * Runs one pass at a time. `ask()` runs a pass now, or — while one runs — exactly once more right after it (any
 * number of asks meanwhile make one more pass). `ask(ms)` runs one in `ms` (the earliest asked wins); so does a
 * pass answering `ms` when nothing asked meanwhile. A failed pass is reported to `onError` and the loop goes on;
 * after `stop()` nothing runs.
 */
export class PassLoop {
	private running: Promise<void> | null = null;
	private again = false;
	private timer: NodeJS.Timeout | null = null;
	private timerAt = 0;
	private stopped = false;

	constructor(
		private readonly pass: Pass,
		/** Reports a failed pass; may answer in how many ms the next is due. */
		// biome-ignore lint/suspicious/noConfusingVoidType: a handler that logs and answers nothing is a plain callback
		private readonly onError: (err: Error) => number | void,
	) {}

	/** A pass now (or once more after the one under way), or in `delayMs`. */
	ask(delayMs = 0): void {
		if (this.stopped) return;
		if (delayMs > 0) {
			const at = Date.now() + delayMs;
			if (this.timer && this.timerAt <= at) return;
			if (this.timer) clearTimeout(this.timer);
			this.timerAt = at;
			this.timer = setTimeout(() => {
				this.timer = null;
				this.ask();
			}, delayMs);
			this.timer.unref?.();
			return;
		}
		if (this.running) {
			this.again = true;
			return;
		}
		this.running = this.loop();
	}

	private async loop(): Promise<void> {
		// Started on the next tick, so that `running` is set before the pass's code runs (a pass asking for another).
		await Promise.resolve();
		// biome-ignore lint/suspicious/noConfusingVoidType: what a Pass answers
		let next: number | void;
		do {
			this.again = false;
			next = undefined;
			try {
				next = await this.pass();
			} catch (err) {
				next = this.onError(err as Error);
			}
		} while (this.again && !this.stopped);
		this.running = null;
		if (typeof next === "number") this.ask(Math.max(1, next));
	}

	/** Whether a pass runs now. */
	get busy(): boolean {
		return this.running !== null;
	}

	/** Whether the loop was stopped (a pass checks it to end early). */
	get stopping(): boolean {
		return this.stopped;
	}

	/** Resolves once no pass runs and none is asked for (a timer left for later counts as asked). */
	async settled(): Promise<void> {
		while (this.running || this.timer) {
			if (this.running) await this.running;
			else await new Promise(r => setTimeout(r, Math.max(1, this.timerAt - Date.now())));
		}
	}

	/** No pass from now on; resolves once the one under way ended. */
	async stop(): Promise<void> {
		this.stopped = true;
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		await this.running;
	}
}
