/**
 * The run door's governance step (run-door.ts step 1b; docs/security.md): for a run its token allows, the maintenance
 * windows (maintenance-windows.check) and the approval policies (approvals.gate) decide whether it runs now, is
 * refused (409, naming the next window), or is held for approval (202). Asked for every run the door lets through,
 * whatever started it — the API, the REPL, a task, a rollout's batch, an approved request, a live status poll.
 *
 * Break-glass: an admin may run outside the windows by giving a reason (`break_glass`); it is written in the run's
 * audit record and raises a `maintenance.break_glass` alert. It does not pass approvals. Anyone else's break-glass
 * is a 403.
 *
 * When either service cannot answer, the run fails (deny by default): nothing governed runs ungoverned.
 */
import type { Context } from "moleculer";
import { OutsideWindow, runRefused } from "../../lib/errors";
import { STATE_FUNCTIONS } from "../../lib/fleet/state-results";
import { canonicalDigest } from "../../lib/eve/etag";
import type { Hold, Requester, RunRequest, TokenHolder } from "./run-door";
import type { GatewayContext } from "./context";
import { originOf } from "./history";
import { call } from "../../lib/contracts/call";

/** What maintenance-windows.check answers. */
interface WindowVerdict {
	refused: string[];
	next: { window: string; name: string; start: string; end: string } | null;
}

/** What approvals.gate answers. */
type GateAnswer = { pass: true } | { held: { _id: string } & Record<string, unknown>; created: boolean };

/** A rollout's kwarg without the `test` its dry-run batches add: the dry run and the run are one definition. */
export function withoutTest(kwarg: Record<string, unknown> | undefined): Record<string, unknown> {
	const { test: _test, ...rest } = kwarg ?? {};
	return rest;
}

/** When a task runs, as its definition's approval covers it (dates as ISO strings: the digest is the same on every replica). */
export interface TaskSchedule {
	start: string;
	end: string | null;
	interval: number;
	cron: string | null;
	timezone: string | null;
	misfire: string | null;
	overlap: string | null;
}

/**
 * The digest a task's definition is approved under: what it runs (client, function, arguments, targets), when
 * (its whole schedule) and as whom (its owner token). A change to any of them makes the next run ask again.
 */
export function taskDefinitionDigest(d: {
	cm_client: string;
	fun: string;
	kwarg?: Record<string, unknown>;
	tgt: string[];
	target?: string;
	owner?: string | null;
	schedule?: TaskSchedule;
}): string {
	return canonicalDigest({
		cm_client: d.cm_client,
		fun: d.fun,
		kwarg: d.kwarg ?? {},
		tgt: d.tgt,
		target: d.target ?? null,
		owner: d.owner ?? null,
		schedule: d.schedule ?? null,
	});
}

/**
 * Where a run comes from, as approval policies name it: decided on the server's side (history.ts), never by the
 * client's User-Agent. An approved request passes by its grant whatever its origin; it is interactive (`api`) here.
 */
export function policyOrigin(by: Requester): "api" | "task" | "rollout" {
	const origin = originOf(by);
	return origin === "task" || origin === "rollout" ? origin : "api";
}

/** How many refused hosts a 409 names. */
const NAMED_MAX = 20;

export class Governance {
	constructor(
		private readonly gw: GatewayContext,
		/** Starts a request's dry run (test=True) through the door, as its requester; answers its jid. */
		private readonly startDryRun: (ctx: Context, req: RunRequest, approval: string) => Promise<string | null>,
	) {}

	/** The verdict on an authorized run: null (run now), a hold (202), or a thrown 409/403. */
	async govern(ctx: Context, req: RunRequest, holder: TokenHolder): Promise<Hold | null> {
		const { by, targets, body } = req;
		if (by.breakGlass !== undefined && holder.role !== "admin")
			throw runRefused(
				`only an admin may run outside the maintenance windows (break_glass); ${holder.name} is ${holder.role}`,
			);
		const verdict = await ctx.call<WindowVerdict, Record<string, unknown>>("maintenance-windows.check", {
			fun: body.fun,
			arg: body.arg,
			kwarg: body.kwarg,
			targets,
		});
		if (verdict.refused.length) {
			if (by.breakGlass === undefined) throw this.outsideWindows(body.fun, verdict);
			this.gw.logger.warn(
				`Break-glass: ${holder.name} runs ${body.fun} on ${verdict.refused.length} host(s) outside their maintenance windows: ${by.breakGlass}`,
			);
			await call(ctx, "alerts.raise", {
				type: "maintenance.break_glass",
				level: "warning",
				payload: {
					by: holder.name,
					token: holder.id,
					fun: body.fun,
					hosts: verdict.refused.slice(0, 100),
					outside: verdict.refused.length,
					reason: by.breakGlass,
					approval: by.approval ?? null,
				},
			}).catch((err: Error) => this.gw.logger.error("Could not raise the break-glass alert:", err.message));
		}
		const gate = await ctx.call<GateAnswer, Record<string, unknown>>("approvals.gate", {
			requester: { token: holder.id, name: holder.name, role: holder.role, identity: holder.principal },
			origin: policyOrigin(by),
			call: {
				cm_client: body.cm_client,
				fun: body.fun,
				...(body.arg ? { arg: body.arg } : {}),
				...(body.kwarg ? { kwarg: body.kwarg } : {}),
			},
			hosts: targets,
			...(req.target !== undefined ? { target: req.target } : {}),
			...(by.definition ? { definition: by.definition } : {}),
			...(by.approval ? { grant: by.approval } : {}),
			...(by.breakGlass !== undefined ? { break_glass: by.breakGlass } : {}),
		});
		if ("pass" in gate) return null;
		if (gate.created && STATE_FUNCTIONS.has(body.fun)) await this.dryRun(ctx, req, gate.held._id);
		return { approval: gate.held };
	}

	/** The 409 of a run outside its hosts' windows: which hosts, and when the first of their windows opens. */
	private outsideWindows(fun: string, verdict: WindowVerdict): OutsideWindow {
		const named =
			verdict.refused.slice(0, NAMED_MAX).join(", ") +
			(verdict.refused.length > NAMED_MAX ? `, … (${verdict.refused.length} in all)` : "");
		const next = verdict.next
			? `the next window, '${verdict.next.name}', opens ${verdict.next.start} (until ${verdict.next.end})`
			: "none of their windows opens again within 400 days";
		return new OutsideWindow(
			`${fun} is outside the maintenance windows of ${named}: ${next}; an admin may run it now with a stated reason (break_glass)`,
			{ window: verdict.next, refused: verdict.refused.slice(0, 1000) },
		);
	}

	/** A state run held for approval gets a dry run (test=True), so approvers see what it would change. */
	private async dryRun(ctx: Context, req: RunRequest, approval: string): Promise<void> {
		try {
			const jid = await this.startDryRun(ctx, req, approval);
			await ctx.call(
				"approvals.attachDryRun",
				jid ? { id: approval, jid } : { id: approval, error: "no minion answered the dry run" },
			);
		} catch (err) {
			const message = String((err as Error).message).slice(0, 2000);
			this.gw.logger.warn(`The dry run of approval ${approval} could not start:`, message);
			await ctx.call("approvals.attachDryRun", { id: approval, error: message }).catch(() => undefined);
		}
	}
}
