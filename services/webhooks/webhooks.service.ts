/**
 * Owns the `webhooks` collection: URLs that admins subscribe to alerts, by alert type (globs: `host.*`,
 * `*`) and level. Every alert raised anywhere (alerts.service emits `alerts.raised` to one webhooks
 * replica) is delivered to each matching active webhook as a signed JSON POST (services/webhooks/webhook-delivery.ts),
 * retried with exponential backoff, every attempt logged in `webhook_deliveries`.
 *
 * The secret that signs a webhook's deliveries is made by the server, shown once in the creating response,
 * stored encrypted (lib/security/secrets.ts) and masked on every read.
 *
 * Isolation: deliveries wait in a bounded in-memory queue (WEBHOOK_QUEUE_MAX per webhook; beyond it a
 * delivery is logged `dropped`), at most ONE is in flight per webhook, each attempt has a timeout, and
 * raising an alert never waits for any delivery. Two lanes: receivers in good standing share
 * WEBHOOK_CONCURRENCY slots; a receiver whose last attempt failed, or whose current attempt has gone
 * unanswered for SLOW_AFTER_MS, is in the slow lane, which takes no shared slot (bounded only by the one
 * attempt per webhook). So however many receivers hang, each holds a shared slot for at most SLOW_AFTER_MS
 * once, then never again until it answers, and healthy receivers' deliveries go on. The queue is not
 * persisted: deliveries still pending when the process stops stay `pending` in the log (docs/webhooks.md).
 */
import type { Context } from "moleculer";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, newObjectId } from "../../lib/eve/ids";
import { globMatches } from "../../lib/http/auth";
import { formatHttpDate } from "../../lib/eve/dates";
import type { Issues } from "../../lib/eve/errors";
import { configOf, type Config } from "../../lib/config";
import { encryptSecret, decryptSecret } from "../../lib/security/secrets";
import { deliver, newWebhookSecret, signature } from "./webhook-delivery";
import { outboundPolicy, outboundUrlProblem } from "../../lib/security/address-guard";
import type { Doc } from "../../lib/storage/store";

const LEVELS = ["debug", "info", "warning", "error", "critical"];
const MAX_BACKOFF_MS = 5 * 60_000;
/** An attempt still unanswered after this long gives its shared slot back and goes on in the slow lane. */
const SLOW_AFTER_MS = 1000;

interface Delivery {
	id: string;
	hook: string;
	alert: Doc;
	body: string;
	attempts: number;
	dueAt: number;
}

export function hookMatches(hook: Doc, alert: { type: string; level: string }): boolean {
	if (hook.active === false) return false;
	const types: string[] = hook.types ?? ["*"];
	if (!types.some(t => globMatches(t, alert.type))) return false;
	return !Array.isArray(hook.levels) || hook.levels.length === 0 || hook.levels.includes(alert.level);
}

/** What this service has on `this` besides the Eve mixin's. */
interface WebhooksMembers {
	config: Config;
	/** Deliveries waiting for a slot. */
	queue: Delivery[];
	/** Deliveries in flight to receivers in good standing. */
	inflight: number;
	/** Receivers with a delivery in flight (one at a time each). */
	busy: Set<string>;
	/** Receivers that failed lately: their own lane. */
	failing: Set<string>;
	timer: NodeJS.Timeout | null;
	stopping: boolean;
	log(d: Delivery, set: Doc): Promise<unknown>;
	enqueue(hook: Doc, alert: Doc): Promise<unknown>;
	pump(): void;
	start(d: Delivery, shared: boolean): void;
	attemptBroke(d: Delivery, err: Error): Promise<unknown>;
	attempt(d: Delivery): Promise<unknown>;
}

type WebhooksThis = EveThis & WebhooksMembers;

const WebhooksService: EveServiceSchema<WebhooksThis> = {
	name: "webhooks",
	mixins: [
		EveCollection({
			resource: "webhooks",
			idPattern: OBJECT_ID,
			readOnlyFields: ["secret"],
			masked: ["secret"],
			secretPaths: ["secret"],
			schema: {
				url: { type: "string", min: 1, max: 2048 },
				types: {
					type: "array",
					items: { type: "string", pattern: /^[A-Za-z0-9_.*-]{1,200}$/ },
					min: 1,
					max: 100,
					optional: true,
				},
				levels: { type: "array", items: { type: "enum", values: LEVELS }, max: LEVELS.length, optional: true },
				active: { type: "boolean", optional: true },
				description: { type: "string", max: 500, optional: true },
			},
		}),
	],

	events: {
		"alerts.raised": {
			async handler(this: WebhooksThis, ctx: Context<{ alerts: Doc[] }>) {
				const hooks = await this.store.find({ active: { $ne: false } });
				for (const alert of ctx.params.alerts)
					for (const hook of hooks)
						if (hookMatches(hook, alert as { type: string; level: string })) await this.enqueue(hook, alert);
			},
		},
	},

	methods: {
		async checkRules(this: WebhooksThis, _ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Issues | null> {
			if (typeof doc.url !== "string") return null;
			const problem = outboundUrlProblem(doc.url, outboundPolicy("webhook", this.config));
			return problem ? { url: problem } : null;
		},

		async beforeStore(this: WebhooksThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Doc> {
			if (info.op !== "create") return doc;
			const secret = newWebhookSecret();
			// Shown to the creator once (eveCreate), stored encrypted.
			(ctx.locals as Record<string, string[]>).secrets ??= [];
			(ctx.locals as Record<string, string[]>).secrets.push(secret);
			return { active: true, types: ["*"], ...doc, secret: encryptSecret(this.config, secret) };
		},

		async eveCreate(this: WebhooksThis, ctx: RestContext, body: unknown) {
			const res = (await this.createRecords(ctx, body)) as Doc;
			const secrets: string[] = (ctx.locals as Record<string, string[]>).secrets ?? [];
			if (res._items) res._items.forEach((item: Doc, i: number) => (item.secret = secrets[i]));
			else res.secret = secrets[0];
			return res;
		},

		async log(this: WebhooksThis, d: Delivery, set: Doc) {
			try {
				await this.broker.call("webhook-deliveries.log", {
					id: d.id,
					set: {
						webhook: d.hook,
						alert: String(d.alert._id),
						type: d.alert.type,
						level: d.alert.level,
						attempts: d.attempts,
						...set,
					},
				});
			} catch (err) {
				this.logger.warn("Could not log a webhook delivery:", (err as Error).message);
			}
		},

		async enqueue(this: WebhooksThis, hook: Doc, alert: Doc) {
			const id = newObjectId();
			const rendered = {
				...alert,
				_created: alert._created ? formatHttpDate(new Date(alert._created)) : undefined,
				_updated: alert._updated ? formatHttpDate(new Date(alert._updated)) : undefined,
			};
			const d: Delivery = {
				id,
				hook: String(hook._id),
				alert,
				body: JSON.stringify({ id, event: "alert", webhook: String(hook._id), alert: rendered }),
				attempts: 0,
				dueAt: Date.now(),
			};
			// Bounded per receiver: a dead receiver's backlog must not crowd out deliveries to the others.
			if (
				this.queue.reduce((n: number, q: Delivery) => n + (q.hook === d.hook ? 1 : 0), 0) >= this.config.webhookQueueMax
			) {
				await this.log(d, {
					status: "dropped",
					last_error: `this webhook's delivery queue is full (${this.config.webhookQueueMax})`,
				});
				return;
			}
			this.queue.push(d);
			await this.log(d, { status: "pending", next_attempt: new Date(d.dueAt) });
			this.pump();
		},

		/**
		 * Starts every due delivery there is room for: no other delivery to the same webhook in flight, and a
		 * free shared slot unless the webhook is in the slow lane (its last attempt failed).
		 */
		pump(this: WebhooksThis) {
			if (this.stopping) return;
			const now = Date.now();
			let nextDue = Infinity;
			for (let i = 0; i < this.queue.length; ) {
				const d: Delivery = this.queue[i];
				const slow = this.failing.has(d.hook);
				if (d.dueAt > now || this.busy.has(d.hook) || (!slow && this.inflight >= this.config.webhookConcurrency)) {
					if (d.dueAt > now) nextDue = Math.min(nextDue, d.dueAt);
					i++;
					continue;
				}
				this.queue.splice(i, 1);
				this.start(d, !slow);
			}
			if (nextDue < Infinity) {
				if (this.timer) clearTimeout(this.timer);
				this.timer = setTimeout(
					() => {
						this.timer = null;
						this.pump();
					},
					Math.max(5, nextDue - now),
				);
				this.timer.unref?.();
			}
		},

		/** Runs one attempt, holding a shared slot (if `shared`) until it ends or SLOW_AFTER_MS has passed. */
		start(this: WebhooksThis, d: Delivery, shared: boolean) {
			this.busy.add(d.hook);
			let holding = shared;
			if (holding) this.inflight++;
			const release = () => {
				if (!holding) return;
				holding = false;
				this.inflight--;
				this.pump();
			};
			const demote = holding ? setTimeout(release, SLOW_AFTER_MS) : null;
			demote?.unref?.();
			void this.attempt(d)
				.catch((err: Error) => this.attemptBroke(d, err))
				.finally(() => {
					if (demote) clearTimeout(demote);
					this.busy.delete(d.hook);
					if (holding) release();
					else this.pump();
				});
		},

		/** An attempt that failed on our side (storage, a secret that no longer decrypts): logged, never thrown into the void. */
		async attemptBroke(this: WebhooksThis, d: Delivery, err: Error) {
			this.logger.error(`Webhook delivery ${d.id} could not be attempted:`, err.message);
			await this.log(d, {
				status: "failed",
				next_attempt: null,
				last_error: `fleet-ctl could not attempt the delivery: ${err.message}`.slice(0, 500),
			});
		},

		async attempt(this: WebhooksThis, d: Delivery) {
			const hook = await this.store.findOne({ _id: d.hook });
			if (!hook || hook.active === false) {
				this.failing.delete(d.hook);
				await this.log(d, {
					status: "cancelled",
					next_attempt: null,
					last_error: hook ? "the webhook was deactivated" : "the webhook was deleted",
				});
				return;
			}
			d.attempts++;
			const t = Math.floor(Date.now() / 1000);
			const headers = {
				"x-fleet-event": String(d.alert.type),
				"x-fleet-delivery": d.id,
				"x-fleet-signature": signature(decryptSecret(this.config, hook.secret), t, d.body),
			};
			const r = await deliver(
				hook.url,
				d.body,
				headers,
				this.config.webhookTimeoutMs,
				outboundPolicy("webhook", this.config),
			);
			const common = { last_status: r.status, last_error: r.error, duration_ms: r.durationMs };
			// A failed attempt puts the webhook in the slow lane, a success takes it back out.
			if (r.ok) {
				this.failing.delete(d.hook);
				await this.log(d, { ...common, status: "delivered", delivered: new Date(), next_attempt: null });
				return;
			}
			this.failing.add(d.hook);
			if (d.attempts >= this.config.webhookMaxAttempts) {
				await this.log(d, { ...common, status: "failed", next_attempt: null });
				return;
			}
			const backoff = Math.min(MAX_BACKOFF_MS, this.config.webhookRetryBaseMs * 2 ** (d.attempts - 1));
			d.dueAt = Date.now() + Math.round(backoff * (0.8 + Math.random() * 0.4));
			this.queue.push(d);
			await this.log(d, { ...common, status: "pending", next_attempt: new Date(d.dueAt) });
		},
	},

	created(this: WebhooksThis) {
		this.config = configOf(this.broker);
		this.queue = [] as Delivery[];
		this.inflight = 0;
		this.busy = new Set<string>();
		/** Webhooks whose last attempt failed: their attempts run in the slow lane. */
		this.failing = new Set<string>();
		this.timer = null;
		this.stopping = false;
	},

	stopped(this: WebhooksThis) {
		this.stopping = true;
		if (this.timer) clearTimeout(this.timer);
	},
};

export default WebhooksService;
