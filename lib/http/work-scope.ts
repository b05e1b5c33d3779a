/**
 * Whether a scoped token may act on work already made — a task, a rollout, a conformity check or rule, an approval
 * request (docs/security.md, "Scoped tokens act only on work inside their scope"). A caller whose token has a scope
 * may pause, change, delete, abort or decide such work only when it lies wholly inside that scope: its complete call
 * on its hosts (resolved now) is one the caller's token could make itself, as `tokens.authorizeRun` decides — the scope
 * rules are never restated here. Fleet-wide work (nothing bounds its hosts) is refused to every scoped token. Callers
 * without a scope (unscoped operators, admins) keep the rights their role gives. Reads are not asked about.
 */
import type { Context } from "moleculer";
import { ErrorType, isError, RunRefused } from "../errors";
import type { Caller } from "./auth";
import { call } from "../contracts/call";

/** The complete call a piece of work makes, and the hosts it makes it on now. */
export interface WorkCall {
	client: string;
	fun: string;
	arg?: unknown[];
	kwarg?: Record<string, unknown>;
	hosts: string[];
}

/** The request's caller when its token has a scope (any limit at all), else null. */
export function scopedCaller(ctx: Context): Caller | null {
	const user = (ctx.meta as { user?: Caller }).user;
	return user?.scope && Object.keys(user.scope).length ? user : null;
}

/**
 * Refuses (403, saying why) a scoped caller `action` on `what` unless the work's call on its hosts is one the caller's
 * token allows now. Hosts that resolve to none cannot be shown to lie inside a scope that limits hosts: refused too.
 */
export async function authorizeScopedWork(ctx: Context, action: string, what: string, work: WorkCall): Promise<void> {
	const caller = scopedCaller(ctx);
	if (!caller) return;
	const refused = (why: string) =>
		new RunRefused(`your token may not ${action} ${what}: it is not wholly inside the token's scope (${why})`, why);
	if (caller.scope?.groups && !work.hosts.length)
		throw refused("it selects no host now, so nothing shows it stays within your groups");
	try {
		await call(ctx, "tokens.authorizeRun", {
			token: caller.id,
			client: work.client,
			fun: work.fun,
			...(work.arg ? { arg: work.arg } : {}),
			kwarg: work.kwarg ?? {},
			targets: work.hosts,
		});
	} catch (err) {
		if (isError(err, ErrorType.RunRefused)) throw refused(String(err.message));
		throw err;
	}
}

/** Refuses (403) a scoped caller any write of fleet-wide work: what nothing bounds to the scope's hosts. */
export function refuseFleetWideToScoped(ctx: Context, action: string, what: string): void {
	if (scopedCaller(ctx))
		throw new RunRefused(
			`your token may not ${action} ${what}: it applies to the whole fleet, and a scoped token acts only on work wholly inside its scope (ask an unscoped operator or an admin)`,
		);
}
