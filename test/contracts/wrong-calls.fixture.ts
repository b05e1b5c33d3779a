/**
 * Calls that must NOT compile: each line below is a mistake `tsc` has to reject (test/contracts/contracts.spec.ts
 * compiles this file; an `@ts-expect-error` on a line that compiles is itself an error, so a contract that stops
 * checking fails the spec).
 */
import type { Context } from "moleculer";
import { action, call } from "../../lib/contracts/call";

export async function wrongCalls(ctx: Context): Promise<void> {
	// @ts-expect-error a param missing (target)
	await call(ctx, "hosts.resolveTarget", {});
	// @ts-expect-error a param of the wrong type
	await call(ctx, "hosts.resolveTarget", { target: 5 });
	// @ts-expect-error a param the action does not take
	await call(ctx, "hosts.resolveTarget", { target: "web-*", limit: 3 });
	// @ts-expect-error an action no contract names
	await call(ctx, "hosts.resolveTargets", { target: "web-*" });
	// @ts-expect-error the result misread: hosts is a list of names
	const n: number = (await call(ctx, "hosts.resolveTarget", { target: "web-*" })).hosts;
	// @ts-expect-error a list where a list of strings is due
	await call(ctx, "tokens.authorizeRun", { token: "t", client: "local", fun: "test.ping", targets: [1] });
	// @ts-expect-error the caller's role is a Role, not any string
	const role: "nobody" = (
		await call(ctx, "tokens.authorizeRun", { token: "t", client: "local", fun: "test.ping", targets: [] })
	).role;
	void n;
	void role;
}

export const wrongHandlers = {
	// @ts-expect-error a handler answering the wrong result
	resolveTarget: action("hosts.resolveTarget", { handler: () => ["web-01"] }),
	// @ts-expect-error a handler reading a param the action does not take
	expandTargets: action("groups.expandTargets", { handler: ctx => ctx.params.target }),
};

/** What compiles: the contract's own shapes (so the fixture proves the lines above fail for their reason). */
export async function rightCalls(ctx: Context): Promise<string[]> {
	const { hosts, missing } = await call(ctx, "hosts.resolveTarget", { target: "web-*", field: "target" });
	const caller = await call(ctx, "tokens.authorizeRun", {
		token: "t",
		client: "local",
		fun: "test.ping",
		targets: hosts,
	});
	return [...hosts, ...missing, caller.principal, ...(await call(ctx, "groups.expandTargets", { tgt: ["a"] }))];
}
