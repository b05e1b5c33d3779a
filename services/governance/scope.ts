/**
 * What maintenance windows and approval policies govern (docs/security.md): their `targets` (groups, a compound
 * expression, or both: the hosts of either), their function globs (matched against a relay's inner function too),
 * and the runs they never govern — dry runs (isDryRun: the effective `test` of a catalogued dry-run function), which
 * change nothing and are what an approval shows as predicted changes.
 */
import type { Context } from "moleculer";
import { OBJECT_ID } from "../../lib/eve/ids";
import { FUNCTION_GLOB, globMatches } from "../../lib/http/auth";
import type { Issues } from "../../lib/eve/errors";
import { ErrorType, isError } from "../../lib/errors";
import { effectiveCall, kwargIsTrue } from "../../lib/security/effective-call";
import { entryOf } from "../../lib/security/catalogue";
import { innerFunction } from "../../lib/security/scopes";
import { call } from "../../lib/contracts/call";

export const ORIGINS = ["api", "task", "rollout", "repl"] as const;
export type Origin = (typeof ORIGINS)[number];

/**
 * Whether a policy's `origins` cover a run's origin. The REPL is an HTTP client like any other (the server cannot
 * tell it apart), so runs are never `repl`: a policy naming `repl` covers interactive runs (`api`), as it meant to.
 */
export function originCovered(origins: readonly Origin[], origin: Origin): boolean {
	return origins.some(o => o === origin || (o === "repl" && origin === "api"));
}

/** A matched policy as an approval request keeps it: what it takes to approve. */
export interface MatchedPolicy {
	policy: string;
	name: string;
	count: number;
	roles: string[];
	expires_after: number;
}

/** A request expires this long after it is made, unless the policy says otherwise (seconds). */
export const DEFAULT_EXPIRY_S = 86_400;

/** `targets` in a window's or a policy's schema. */
export const TARGETS_SCHEMA = {
	type: "object",
	strict: true,
	props: {
		groups: { type: "array", items: { type: "string", pattern: OBJECT_ID }, max: 1000, optional: true },
		target: { type: "string", min: 1, max: 10_000, optional: true },
	},
} as const;

/** `functions` in a window's or a policy's schema: Salt function globs (`*` only). */
export const FUNCTIONS_SCHEMA = {
	type: "array",
	items: { type: "string", pattern: FUNCTION_GLOB },
	min: 1,
	max: 200,
} as const;

export interface Targets {
	groups?: string[];
	target?: string;
}

/**
 * The functions a call runs, as governance sees them: its own, and a relay's inner function (a window on `cmd.*`
 * governs `test.try module=cmd.run`). `null` when a relay does not name what it runs plainly (or names another
 * relay): it may run anything, so every window and policy governs it.
 */
export function governedNames(
	fun: string,
	arg: unknown[] | undefined,
	kwarg: Record<string, unknown> | undefined,
): string[] | null {
	const inner = innerFunction(effectiveCall(fun, arg, kwarg));
	if (inner === null) return [fun];
	if (inner === undefined || entryOf(inner)?.inner) return null;
	return [fun, inner];
}

/** Whether one of the globs matches one of the functions (`null`: a call that may run anything, governed by all). */
export function governs(functions: string[], names: string[] | null): boolean {
	if (names === null) return functions.length > 0;
	return functions.some(glob => names.some(fun => globMatches(glob, fun)));
}

/**
 * A dry run (docs/security.md, "The effective call"): a catalogued function whose test mode is known to change
 * nothing (`dryRun`: state.apply, state.sls, state.highstate) and whose EFFECTIVE `test` is exactly true — the
 * minion's reading of arg and kwarg, where the kwarg dict wins. Nothing else is exempt from windows or approvals.
 */
export function isDryRun(fun: string, arg: unknown[] | undefined, kwarg: Record<string, unknown> | undefined): boolean {
	return entryOf(fun)?.dryRun === true && kwargIsTrue(effectiveCall(fun, arg, kwarg), "test");
}

/** What is wrong with `targets` (under `field`): neither given, a group that does not exist, an expression that cannot be evaluated. */
export async function targetsIssues(
	ctx: Context,
	targets: Targets | undefined,
	field: string,
	required: boolean,
): Promise<Issues | null> {
	if (!targets) return required ? { [field]: "required field" } : null;
	if (!targets.groups?.length && targets.target === undefined)
		return { [field]: "give groups, a compound target, or both" };
	const groups = targets.groups ?? [];
	if (groups.length) {
		const found = new Set(await ctx.call<string[], { ids: string[] }>("groups.exist", { ids: groups }));
		const missing = groups.filter(g => !found.has(g));
		if (missing.length) return { [field]: { groups: `unknown groups: ${missing.join(", ")}` } };
	}
	if (targets.target !== undefined) {
		try {
			await call(ctx, "hosts.resolveTarget", { target: targets.target, field: `${field}.target` });
		} catch (err) {
			if (isError(err, ErrorType.TargetUnevaluable)) return { [field]: { target: err.data?.reason } };
			throw err;
		}
	}
	return null;
}

/** Hosts already resolved while one run is judged, by group (`g:<id>`) and expression (`t:<expr>`): rules often share targets. */
export type HostsMemo = Map<string, Promise<string[]>>;

/**
 * The live hosts `targets` name now: the hosts of its groups (a deleted group names none, as in a token's scope) and
 * of its expression, each group and expression resolved once per `memo`.
 */
export async function hostsOf(ctx: Context, targets: Targets, memo: HostsMemo = new Map()): Promise<Set<string>> {
	const once = (key: string, resolve: () => Promise<string[]>): Promise<string[]> => {
		let hit = memo.get(key);
		if (!hit) memo.set(key, (hit = resolve()));
		return hit;
	};
	const hosts = new Set<string>();
	for (const group of targets.groups ?? []) {
		const names = await once(`g:${group}`, () =>
			call(ctx, "groups.hostnames", { id: group }).catch((err: unknown) => {
				if (isError(err, ErrorType.NotFound)) return [];
				throw err;
			}),
		);
		for (const h of names) hosts.add(h);
	}
	// An expression that no longer evaluates (a group it names was deleted) throws: the caller refuses the run
	// rather than guess which hosts it governs.
	if (targets.target !== undefined) {
		const expr = targets.target;
		for (const h of await once(
			`t:${expr}`,
			async () => (await call(ctx, "hosts.resolveTarget", { target: expr })).hosts,
		))
			hosts.add(h);
	}
	return hosts;
}
