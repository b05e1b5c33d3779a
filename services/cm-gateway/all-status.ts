/**
 * `POST /hosts/{id}/all_status`: a live poll of `status.all_status` on one host every
 * CM_ALL_STATUS_INTERVAL_MS (its returns are `actions` records that do not move `last_action`, and
 * `cm.allStatus` events), for at most CM_ALL_STATUS_MAX_MS after its last start. Starting one is a run
 * (through the run door); every poll is authorized again against the token that started it.
 */
import type { Context } from "moleculer";
import { formatHttpDate } from "../../lib/eve/dates";
import { ErrorType, Invalid, isError, NothingToRun, OutsideWindow } from "../../lib/errors";
import { compileSchema } from "../../lib/eve/validation";
import { ALL_STATUS_BODY } from "../../lib/http/bodies";
import { startRun as throughTheDoor, type Hold, type RunBody, type RunRequest } from "./run-door";
import { requester, type RunMeta, type Runs } from "./runs";
import type { GatewayContext } from "./context";
import type { Returns } from "./returns";
import { call } from "../../lib/contracts/call";

interface Monitor {
	timer: NodeJS.Timeout;
	until: number;
	/** The token that started the poll: every poll is authorized against it again. */
	token: string;
}

/** The call a live status poll makes on its host. */
const ALL_STATUS_CALL: RunBody = { cm_client: "local_async", fun: "status.all_status" };
const checkAllStatus = compileSchema(ALL_STATUS_BODY, { wellFormed: true });

export class AllStatusPolls {
	private readonly monitors = new Map<string, Monitor>();

	constructor(
		private readonly gw: GatewayContext,
		private readonly runs: Runs,
		private readonly returns: Returns,
	) {}

	/** `start` (or extend), `stop` one host, or `stop_all` (every replica stops its polls: cm-gateway.allStatusStop). */
	async control(ctx: Context<unknown, RunMeta>, id: string, raw: unknown) {
		const body = raw ?? {};
		const issues = checkAllStatus(body);
		if (issues) throw new Invalid(issues);
		const action = (body as { action?: string }).action ?? "start";
		if (action === "stop_all") {
			const polled = [...this.monitors.keys()];
			ctx.broadcast("cm-gateway.allStatusStop", {});
			return { _status: "OK", action, stopped: polled.length };
		}
		await this.runs.hostTarget(ctx, id);
		if (action === "stop") {
			const was = this.monitors.has(id);
			ctx.broadcast("cm-gateway.allStatusStop", { hosts: [id] });
			return { _status: "OK", action, host: id, polling: false, stopped: was ? 1 : 0 };
		}
		// Starting (or extending) a poll is a run: through the same door as any other (its record has no jid).
		const by = requester(ctx);
		const req: RunRequest = { by, targets: [id], body: ALL_STATUS_CALL };
		const { config } = this.gw;
		const until = await throughTheDoor<number | Hold>(
			req,
			this.runs.doorEffects<number | Hold>(
				ctx,
				req,
				async () => {
					const ends = Date.now() + config.cmAllStatusMaxMs;
					const running = this.monitors.get(id);
					if (running) Object.assign(running, { until: ends, token: by.token });
					else {
						const timer = setInterval(() => void this.poll(id), config.cmAllStatusIntervalMs);
						timer.unref?.();
						this.monitors.set(id, { timer, until: ends, token: by.token });
						// The first poll runs now, so that a salt-api that is down is reported to the caller.
						await this.poll(id, true);
					}
					return ends;
				},
				undefined,
				hold => hold,
			),
		);
		if (typeof until !== "number") {
			// Held for approval: nothing polls; once approved, one status.all_status runs.
			const meta = ctx.meta as { $statusCode?: number; $responseHeaders?: Record<string, string> };
			meta.$statusCode = 202;
			meta.$responseHeaders = { ...meta.$responseHeaders, Location: `/api/approvals/${until.approval._id}` };
			return { _status: "OK", action, host: id, polling: false, status: "pending_approval", approval: until.approval };
		}
		return {
			_status: "OK",
			action,
			host: id,
			polling: true,
			interval: config.cmAllStatusIntervalMs / 1000,
			until: formatHttpDate(new Date(until)),
		};
	}

	/** One `status.all_status` on the host, unless the previous one is still out. */
	private async poll(host: string, rethrow = false): Promise<void> {
		const monitor = this.monitors.get(host);
		if (!monitor || this.gw.stopping()) return;
		if (Date.now() >= monitor.until) return this.stop(host);
		if (this.returns.tracker.monitorPending(host)) return;
		const { config, logger } = this.gw;
		try {
			// Every poll is a run: the token that started the poll must still allow it (revoked: it stops).
			if (!rethrow)
				await call(this.gw.broker, "tokens.authorizeRun", {
					token: monitor.token,
					client: ALL_STATUS_CALL.cm_client,
					fun: ALL_STATUS_CALL.fun,
					targets: [host],
				});
			// …and, when a maintenance window governs status.all_status on the host, inside it (closed: it stops).
			const windows = rethrow
				? null
				: await this.gw.broker.call<{ refused: string[] }, Record<string, unknown>>("maintenance-windows.check", {
						fun: ALL_STATUS_CALL.fun,
						targets: [host],
					});
			if (windows?.refused.length)
				throw new OutsideWindow(`the maintenance windows of '${host}' governing status.all_status are closed`);
		} catch (err) {
			if (isError(err, ErrorType.RunRefused) || isError(err, ErrorType.OutsideWindow)) {
				logger.warn(`Stopping the status.all_status poll of '${host}':`, (err as Error).message);
				this.stop(host);
			} else logger.warn(`status.all_status poll of '${host}' skipped:`, (err as Error).message);
			return;
		}
		try {
			const started = await this.runs.startAsync(
				{ client: "local_async", tgt: [host], tgt_type: "list", fun: "status.all_status" },
				[],
				Math.max(config.cmAllStatusIntervalMs * 3, 5000),
				{ monitor: true },
			);
			if (!started && rethrow)
				throw new NothingToRun(`host '${host}' has no accepted key on the master: nothing to poll`);
		} catch (err) {
			if (rethrow) {
				this.stop(host);
				throw err;
			}
			logger.warn(`status.all_status poll of '${host}' failed:`, (err as Error).message);
		}
	}

	/** Stops the polls of these hosts on this replica (all of them without a list). */
	stopHosts(hosts?: string[]): void {
		for (const host of hosts ?? [...this.monitors.keys()]) this.stop(host);
	}

	private stop(host: string): void {
		const m = this.monitors.get(host);
		if (!m) return;
		clearInterval(m.timer);
		this.monitors.delete(host);
	}
}
