/**
 * The suites' jest environment (jest.config.js testEnvironment): Node's, and a suite fails when it leaves a timer
 * behind once its last hook has run. A leaked timer is work still going on after the suite (a NATS client still
 * reconnecting to a server the suite stopped, an interval nobody clears): it can reach into the next suite of the
 * same worker, and at the end of the run it keeps the worker from exiting, which jest answers with
 * "a worker process has failed to exit gracefully" and a kill.
 *
 * Counted: timers the suite's code (its modules included) set through setTimeout or setInterval that are still
 * referenced (not unref'd) at teardown and are either intervals or due more than LEAK_GRACE_MS later. A timer about
 * to fire is not a leak. The failure names each timer and where it was set, and the timers are cleared.
 */
import NodeEnvironment from "jest-environment-node";

/** A one-shot timer due within this long at teardown is let run out. */
const LEAK_GRACE_MS = 1000;
/** Fired and cleared timers are forgotten once this many are tracked (so a suite's timers are not all kept alive), then at twice the live ones. */
const PRUNE_AT = 10_000;

interface Tracked {
	kind: "setTimeout" | "setInterval";
	due: number;
	stack: string;
}

/** What Node's Timeout offers that the check reads: whether it keeps the process alive, and whether it is done. */
interface NodeTimer {
	hasRef(): boolean;
	_destroyed?: boolean;
}

export default class LeakCheckingEnvironment extends NodeEnvironment {
	private readonly tracked = new Map<NodeTimer, Tracked>();
	/** The size at which fired and cleared timers are next forgotten. */
	private pruneAt = PRUNE_AT;

	constructor(...args: ConstructorParameters<typeof NodeEnvironment>) {
		super(...args);
		const global = this.global as unknown as Record<
			"setTimeout" | "setInterval",
			(fn: unknown, ms?: number, ...rest: unknown[]) => NodeTimer
		>;
		for (const kind of ["setTimeout", "setInterval"] as const) {
			const original = global[kind];
			const wrapper = (fn: unknown, ms?: number, ...rest: unknown[]): NodeTimer => {
				const timer = original(fn, ms, ...rest);
				const tracked = this.tracked;
				if (tracked.size >= this.pruneAt) {
					for (const t of tracked.keys()) if (t._destroyed) tracked.delete(t);
					// Many timers still live: the next look is further off, so a timer set is never a walk over them all.
					this.pruneAt = Math.max(PRUNE_AT, tracked.size * 2);
				}
				const site: { stack?: string } = {};
				Error.captureStackTrace(site, wrapper);
				tracked.set(timer, { kind, due: Date.now() + Math.max(1, Number(ms) || 1), stack: site.stack ?? "" });
				return timer;
			};
			global[kind] = wrapper;
		}
	}

	override async teardown(): Promise<void> {
		const now = Date.now();
		const leaks = [...this.tracked].filter(
			([t, s]) => !t._destroyed && t.hasRef() && (s.kind === "setInterval" || s.due - now > LEAK_GRACE_MS),
		);
		this.tracked.clear();
		// Stopped once counted, so that they reach neither the next suite of this worker nor the end of the run.
		for (const [t] of leaks) clearTimeout(t as unknown as NodeJS.Timeout);
		await super.teardown();
		if (leaks.length > 0) {
			const where = leaks.map(
				([, s]) =>
					`${s.kind}, ${s.kind === "setInterval" ? "repeating" : `due in ${s.due - now} ms`}, set\n${s.stack.replace(/^Error:?[^\n]*\n/, "")}`,
			);
			const error = new Error(
				`the suite left ${leaks.length} timer(s) running after its last hook (stop what started them in an afterAll):\n${where.join("\n\n")}`,
			);
			// The stacks that matter are in the message: the error's own would only point here.
			error.stack = `Error: ${error.message}`;
			throw error;
		}
	}
}
