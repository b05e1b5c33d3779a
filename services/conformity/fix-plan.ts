/**
 * Conformity fixes (docs/conformity.md, "Fixing only what drifted"): what a fix applies, from the hosts' last
 * checks, and every run it will make — each drifted state's `state.sls_id`, then the check that follows — so that
 * all of them are authorized against the caller's token before the first one runs: a fix is refused whole (403
 * saying why) or made whole, never run in part. The effects (the token check, the runs, the rollouts) are the
 * conformity service's (conformity.service.ts).
 */
import { readStates } from "../../lib/fleet/state-results";

/** A state as a host's conformity record keeps it (lib/fleet/conformity.ts `DriftedState`, the fields a fix reads). */
export interface StoredState {
	state_id: string;
	sls: string;
	result: boolean | null;
}

/** A host's conformity record, the part a fix reads. */
export interface HostConformity {
	_id: string;
	states?: StoredState[];
}

/** One drifted state to apply, on every host drifted on it. */
export interface FixGroup {
	state_id: string;
	sls: string;
	hosts: string[];
}

/** A run a fix makes, as `tokens.authorizeRun` is asked about it. */
export interface FixCall {
	client: "local" | "local_async";
	fun: string;
	arg?: unknown[];
	kwarg: Record<string, unknown>;
	targets: string[];
}

/**
 * A state a fix applies: one that would change something (result None). States that would fail, and render errors
 * (no sls), are not applied: a fix does not make them pass.
 */
export const isFixable = (s: StoredState): boolean => s.result === null && !!s.sls;

/** The drifted states of these hosts, one group per state: sorted by sls then state id, each group's hosts sorted. */
export function planTargetFix(docs: HostConformity[]): { groups: FixGroup[]; hosts: string[] } {
	const groups = new Map<string, FixGroup>();
	for (const d of docs) {
		for (const st of (d.states ?? []).filter(isFixable)) {
			const key = `${st.sls}\0${st.state_id}`;
			(groups.get(key) ?? groups.set(key, { state_id: st.state_id, sls: st.sls, hosts: [] }).get(key)!).hosts.push(
				String(d._id),
			);
		}
	}
	const sorted = [...groups.values()].sort(
		(a, b) => a.sls.localeCompare(b.sls) || a.state_id.localeCompare(b.state_id),
	);
	for (const g of sorted) g.hosts.sort();
	return { groups: sorted, hosts: [...new Set(sorted.flatMap(g => g.hosts))].sort() };
}

/** The check that follows a fix (`state.apply test=True`: the highstate's dry run, judged like any check). */
export const recheckCall = (hosts: string[]): FixCall => ({
	client: "local_async",
	fun: "state.apply",
	kwarg: { test: true },
	targets: hosts,
});

/** A target's fix: one rollout per group (`state.sls_id` with `queue=True` on its hosts), then one re-check of them all. */
export function targetFixCalls(plan: { groups: FixGroup[]; hosts: string[] }): FixCall[] {
	return [
		...plan.groups.map(
			(g): FixCall => ({
				client: "local_async",
				fun: "state.sls_id",
				arg: [g.state_id, g.sls],
				kwarg: { queue: true },
				targets: g.hosts,
			}),
		),
		recheckCall(plan.hosts),
	];
}

/** One host's fix: its drifted states one `state.sls_id` each (waited for), then a check of the host. */
export function hostFixCalls(host: string, drifted: StoredState[]): FixCall[] {
	return [
		...drifted.map(
			(s): FixCall => ({ client: "local", fun: "state.sls_id", arg: [s.state_id, s.sls], kwarg: {}, targets: [host] }),
		),
		recheckCall([host]),
	];
}

/**
 * Every run of a fix authorized, in order, before any runs: the first refusal is thrown as it is (the token service's
 * 403 saying why), and nothing has run.
 */
export async function authorizeFix(calls: FixCall[], authorize: (call: FixCall) => Promise<unknown>): Promise<void> {
	for (const call of calls) await authorize(call);
}

/** What applying one state on a host did, from the host's return: `applied` when every state it ran succeeded. */
export function appliedOrFailed(ret: unknown): "applied" | "failed" {
	const reading = readStates(ret);
	return "states" in reading && reading.states.every(r => r.result === true) ? "applied" : "failed";
}
