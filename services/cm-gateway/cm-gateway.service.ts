/**
 * The cm-gateway: fleet-ctl's side of the Salt master, through salt-api (salt-client.ts). It owns no
 * collection; it writes hosts, actions, failed_patches, updates and alerts through their services.
 * docs/salt.md is the user-facing description. This file holds the actions and the lifecycle; each concern
 * is a class of this folder owning its state:
 *
 *  - runs.ts: remote execution (`POST /hosts/{id}`, `POST /groups/{id}`, a task's runs) through the run
 *    door (run-door.ts: authorized where it starts, audited first);
 *  - returns.ts: every return of every job started here as `actions` records, failed patches, last_action;
 *    history.ts: every job in the job history (`salt_jobs`), those started outside fleet-ctl too;
 *    job-poll.ts: the /jobs fallback, timeouts after CM_JOB_TIMEOUT_MS, jobs resumed after a restart;
 *  - events.ts: the master's event bus (returns, presence, minion starts, keys, the VNC event);
 *  - inventory.ts: the master's view written to `hosts` (refreshes, presence, alerts); reconcile.ts: the full
 *    reconciliation (at start, after reconnections, every CM_SYNC_INTERVAL_MS, `POST /api/inventory/sync`);
 *  - patches.ts: `POST /updates`; all-status.ts: `POST /hosts/{id}/all_status`.
 *
 * Without CM_API_URL none of this runs and the salt actions are not published: the gateway answers 503.
 * Run one cm-gateway per master: each one follows the event stream and would raise every alert again.
 */
import type { Context, Service, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { configOf } from "../../lib/config";
import { countMetric } from "../../lib/runtime/metrics";
import { SaltClient } from "./salt-client";
import { GatewayAlerts } from "./alerts";
import { AllStatusPolls } from "./all-status";
import type { GatewayContext } from "./context";
import { EventFollower } from "./events";
import { Inventory } from "./inventory";
import { JobPoll } from "./job-poll";
import { Patches } from "./patches";
import { Reconciliation, type SyncResult } from "./reconcile";
import { Returns } from "./returns";
import { JobHistory } from "./history";
import { Runs, type RolloutRun, type RunMeta, type TaskRun } from "./runs";
import { Governance } from "./governance";

/** The parts, made when the service is created with a master to talk to. */
interface Parts {
	salt: SaltClient;
	returns: Returns;
	poll: JobPoll;
	runs: Runs;
	inventory: Inventory;
	reconciliation: Reconciliation;
	events: EventFollower;
	patches: Patches;
	allStatus: AllStatusPolls;
	history: JobHistory;
}

interface Vars {
	parts: Parts | null;
	stopping: boolean;
}

type CmGatewayThis = Service & Vars;

interface TargetParams {
	id: string;
	body?: unknown;
	query?: unknown;
}

/** The parts of a cm-gateway with a master; a service without one has none, and publishes no action that needs them. */
function parts(svc: CmGatewayThis): Parts {
	if (!svc.parts) throw new Error("the cm-gateway has no master configured");
	return svc.parts;
}

/** Made by the broker that loads it (moleculer's function services): which actions exist depends on its configuration. */
export default function CmGatewayService(
	broker: ServiceBroker,
): ServiceSchema<ServiceSettingSchema, Record<string, never>, Vars, CmGatewayThis> {
	const config = configOf(broker);
	const configured = config.cmApiUrl !== "";
	const target = { id: "string", body: { type: "any", optional: true }, query: { type: "any", optional: true } };

	return {
		name: "cm-gateway",
		// Without a master the actions do not exist: the gateway answers 503 for them.
		actions: configured
			? {
					runOnHost: {
						visibility: "published",
						params: target,
						handler(ctx: Context<TargetParams, RunMeta>) {
							return parts(this).runs.onTarget(ctx, "host");
						},
					},
					runOnGroup: {
						visibility: "published",
						params: target,
						handler(ctx: Context<TargetParams, RunMeta>) {
							return parts(this).runs.onTarget(ctx, "group");
						},
					},
					/** POST /api/run: the compound target resolved on the inventory (hosts.resolveTarget), then run as a list. */
					runOnTarget: {
						visibility: "published",
						params: { body: { type: "any", optional: true }, query: { type: "any", optional: true } },
						handler(ctx: Context<{ body?: unknown }, RunMeta>) {
							return parts(this).runs.onCompound(ctx);
						},
					},
					allStatus: {
						visibility: "published",
						params: target,
						handler(ctx: Context<TargetParams, RunMeta>) {
							return parts(this).allStatus.control(ctx, ctx.params.id, ctx.params.body);
						},
					},
					/**
					 * One run of a scheduled task (internal: the tasks service). `tgt` may name hosts and groups (a
					 * group is resolved now); the task's owner token must still allow it (tokens.authorizeRun);
					 * the run is a normal execution whose `actions` records carry `task`.
					 */
					runTask: {
						visibility: "public",
						params: {
							task: "string",
							run: { type: "string", optional: true },
							takeover: { type: "boolean", optional: true },
							owner: { type: "string", optional: true, nullable: true },
							cm_client: { type: "enum", values: ["local", "local_async"] },
							fun: "string",
							kwarg: { type: "object", optional: true },
							tgt: { type: "array", items: "string", max: 100_000 },
							target: { type: "string", min: 1, max: 10_000, optional: true },
							schedule: { type: "object", optional: true },
						},
						handler(ctx: Context<TaskRun>) {
							return parts(this).runs.ofTask(ctx);
						},
					},
					/**
					 * One batch of a rollout (internal: the rollouts service): its still-live hosts, authorized against the
					 * rollout owner's token now, started once per run id whoever asks again (docs/rollouts.md).
					 */
					runRolloutBatch: {
						visibility: "public",
						params: {
							rollout: "string",
							batch: { type: "number", integer: true, min: 0 },
							run: { type: "string", min: 1, max: 200 },
							takeover: { type: "boolean", optional: true },
							owner: "string",
							fun: "string",
							arg: { type: "array", optional: true },
							kwarg: { type: "object", optional: true },
							hosts: { type: "array", items: "string", max: 100_000 },
							target: { type: "string", max: 20_000 },
							total: { type: "number", integer: true, min: 0, optional: true },
						},
						handler(ctx: Context<RolloutRun>) {
							return parts(this).runs.ofRollout(ctx);
						},
					},
					/**
					 * An approved request, carried out (internal: the approvals service, once per request): its call on its
					 * hosts through the run door, as its requester's token is now.
					 */
					runApproved: {
						visibility: "public",
						params: { id: { type: "string", pattern: /^[0-9a-f]{24}$/ } },
						handler(ctx: Context<{ id: string }>) {
							return parts(this).runs.ofApproval(ctx);
						},
					},
					/** POST /api/inventory/sync (and the scheduled reconciliation's own calls). */
					sync: {
						visibility: "published",
						params: { query: { type: "any", optional: true } },
						handler(): Promise<SyncResult> {
							return parts(this).reconciliation.sync();
						},
					},
					loadUpdates: {
						visibility: "published",
						params: { query: { type: "any", optional: true } },
						handler(ctx: Context) {
							return parts(this).patches.load(ctx);
						},
					},
					/** Is the event stream open? (internal: readiness, tests) */
					eventStreamStatus: {
						visibility: "public",
						handler() {
							return parts(this).events.status();
						},
					},
				}
			: {},

		events: {
			/** Every replica stops the live polls it runs (the POST may have reached another one). */
			"cm-gateway.allStatusStop": {
				handler(ctx: Context<{ hosts?: string[] }>) {
					this.parts?.allStatus.stopHosts(ctx.params.hosts);
				},
			},
		},

		created() {
			this.stopping = false;
			this.parts = null;
			if (!configured) return;
			const salt = new SaltClient({
				url: config.cmApiUrl,
				username: config.cmApiUser,
				password: config.cmApiPassword,
				eauth: config.cmApiEauth,
				timeoutMs: config.cmApiTimeoutMs,
				concurrency: config.cmApiConcurrency,
				tlsVerify: config.cmApiTlsVerify,
				caFile: config.cmApiCa || undefined,
				onMasterUnanswering: () => inventory.presenceGuard.masterUnanswering(),
				// Runner and wheel functions are fleet-ctl's own few; an execution function is the operator's, not a label.
				onCall: (client, fun) =>
					countMetric(this.broker, "fleet.salt.api.calls.total", {
						client,
						fun: client === "runner" || client === "wheel" ? fun : "",
					}),
			});
			const gw: GatewayContext = {
				broker: this.broker,
				logger: this.logger,
				config,
				salt,
				stopping: () => this.stopping,
			};
			const alerts = new GatewayAlerts(gw);
			const inventory = new Inventory(gw, alerts);
			const reconciliation = new Reconciliation(gw, inventory);
			// A finished job that changed a host's grains has them read again, in the events' lane.
			const returns = new Returns(gw, alerts, host => events.queueRefresh(host));
			const poll = new JobPoll(gw, returns);
			const history = new JobHistory(gw, returns, poll);
			// A held state run's dry run (test=True: never governed) goes through the door too, as its requester.
			const governance = new Governance(gw, async (ctx, req, approval) => {
				const { breakGlass: _glass, definition: _definition, ...by } = req.by;
				const kwarg = { ...(req.body.kwarg ?? {}), test: true };
				const answer = await runs.start(
					ctx,
					{ ...by, path: `/api/approvals/${approval}`, auditId: undefined },
					req.targets,
					{ ...req.body, cm_client: "local_async", kwarg },
					{},
					req.target ?? `L@${req.targets.join(",")}`,
				);
				return answer.task_id;
			});
			const runs: Runs = new Runs(gw, returns, poll, history, governance);
			const events: EventFollower = new EventFollower(gw, {
				returns,
				poll,
				inventory,
				reconciliation,
				alerts,
				history,
			});
			this.parts = {
				salt,
				returns,
				poll,
				runs,
				inventory,
				reconciliation,
				events,
				patches: new Patches(gw),
				allStatus: new AllStatusPolls(gw, runs, returns),
				history,
			};
		},

		started() {
			const p = this.parts;
			if (!p) return;
			// The inventory is written through these services: start following the master once they are there.
			void this.broker
				.waitForServices([
					"hosts",
					"actions",
					"salt-jobs",
					"failed-patches",
					"alerts",
					"maintenance-windows",
					"approvals",
				])
				.then(() => {
					if (this.stopping) return;
					if (config.cmEvents) p.events.open();
					if (config.cmSyncIntervalMs > 0) p.reconciliation.schedule(0);
					void p.poll
						.resume()
						.catch((err: Error) =>
							this.logger.warn("Could not resume the jobs started before this restart:", err.message),
						);
				})
				.catch((err: Error) => this.logger.error("The cm-gateway cannot follow the master:", err.message));
		},

		async stopped() {
			this.stopping = true;
			const p = this.parts;
			if (!p) return;
			p.events.close();
			p.history.stop();
			p.poll.stop();
			p.reconciliation.stop();
			p.allStatus.stopHosts();
			// Returns already received are written before the service goes.
			await p.returns.stop();
			p.salt.close();
		},
	};
}
