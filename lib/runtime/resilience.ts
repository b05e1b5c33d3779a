/**
 * Fault handling shared by every process (moleculer.config.ts wires it):
 *  - retries: a call whose request never left this node (NATS away) is sent again, for about 2.5 s,
 *    whatever it is: nothing ran. A call whose node went away before answering is sent again only when it
 *    is idempotent (the gateway's GET/HEAD, token lookups: `retryRejected`), to another replica; a timeout
 *    never is (the remote work may still run, moleculer #874). A call addressed to a node that has left
 *    (an endpoint picked before the node went) is not sent there but to another replica: nothing ran;
 *  - bulkheads around the actions of services that wait on a slow outside system (salt-api, Pritunl):
 *    a bounded number run at once and a bounded queue waits, the rest is refused at once (503), so a
 *    hanging master cannot pile up requests until the process or the gateway runs out of memory;
 *  - NATS connection state: while the connection is down (and a moment after it is back, until the
 *    other nodes are back too) calls fail at once instead of being lost in NATS, and readiness says so.
 */
import { Errors, type Context, type ServiceBroker, type ServiceSchema } from "moleculer";
import { DOMAIN_TYPES } from "../errors";

/** Waits between the attempts of a call whose request could not be sent (2.5 s in all). */
const RESEND_DELAYS_MS = [100, 200, 400, 800, 1000];

/**
 * Sends a call again when its request never left this node (the NATS connection is down:
 * BrokerDisconnectedError, raised before publishing), whatever the call: nothing ran. Only on the hop to
 * another node, so a handler that failed half-way is never run again. Moleculer's own retry policy is off:
 * it retries any "retryable" error, including those from inside a handler that already wrote.
 *
 * Likewise a call addressed to a node that has left since its endpoint was picked goes to another
 * replica (or fails at once: ServiceNotAvailableError) instead of being published to nobody and waiting
 * out its timeout: moleculer-web picks the endpoint before authenticating, and the gateway's second try
 * of a read whose node went away (`retryRejected`) reuses that endpoint.
 */
export function ResendUndeliveredMiddleware() {
	return {
		name: "ResendUndelivered",
		remoteAction(this: ServiceBroker, next: (ctx: Context) => Promise<unknown>) {
			const broker = this;
			return function resendUndelivered(ctx: Context) {
				if (!nodeAvailable(broker, ctx.nodeID)) return elsewhere(broker, ctx);
				const attempt = (n: number): Promise<unknown> =>
					next(ctx).catch((err: Error & { nodeID?: string }) => {
						if (err?.name !== "BrokerDisconnectedError" || err.nodeID || n >= RESEND_DELAYS_MS.length) throw err;
						return new Promise(r => setTimeout(r, RESEND_DELAYS_MS[n])).then(() => attempt(n + 1));
					});
				return attempt(0);
			};
		},
	};
}

function nodeAvailable(broker: ServiceBroker, nodeID: string | null): boolean {
	const nodes = (broker.registry as unknown as { nodes: { get(id: string): { available: boolean } | undefined } })
		.nodes;
	return !nodeID || nodes.get(nodeID)?.available !== false;
}

/**
 * Runs a call, not sent yet, on another endpoint of its action (through that endpoint's own middlewares);
 * one meant for that node only (`nodeID` option) fails.
 */
function elsewhere(broker: ServiceBroker, ctx: Context): Promise<unknown> {
	const action = (ctx.action as { name: string }).name;
	const gone = ctx.nodeID;
	const registry = broker.registry as unknown as {
		getActionEndpoints(
			action: string,
		): { next(ctx: Context): { id: string; action: { handler(ctx: Context): Promise<unknown> } } | null } | undefined;
	};
	const endpoint = ctx.options?.nodeID ? null : registry.getActionEndpoints(action)?.next(ctx);
	if (!endpoint || endpoint.id === gone)
		return Promise.reject(new Errors.ServiceNotAvailableError({ action, nodeID: gone ?? undefined }));
	ctx.setEndpoint(endpoint as never);
	return endpoint.action.handler(ctx);
}

/**
 * The types of the errors that are a service's answer to a request, not a failure of the service: the domain
 * errors (lib/errors.ts), Eve's HTTP dialect (lib/eve/errors.ts), and those of the outside systems' clients
 * (salt-api, Pritunl) and of secrets at rest. Each layer throws its own; the gateway renders them all with their
 * code and message (services/api/errors.ts toEveError, the one boundary), and the circuit breaker does not count them.
 */
export const ANSWER_TYPES: ReadonlySet<string> = new Set(["EVE", "SALT_API", "PRITUNL", "SECRETS", ...DOMAIN_TYPES]);

export function isAnswer(err: { type?: unknown } | null | undefined): boolean {
	return typeof err?.type === "string" && ANSWER_TYPES.has(err.type);
}

/** What the circuit breaker counts: failures of the endpoint itself, not of this node's link or a 4xx/Eve answer. */
export function endpointFailure(err: { code?: number; type?: string; name?: string }): boolean {
	if (isAnswer(err) || err?.name === "BrokerDisconnectedError" || err?.name === "RequestRejectedError") return false;
	return (err?.code ?? 500) >= 500;
}

/** Runs an idempotent call once more when the node handling it went away before answering. */
export async function retryRejected<T>(call: () => Promise<T>): Promise<T> {
	try {
		return await call();
	} catch (err) {
		if ((err as Error)?.name !== "RequestRejectedError") throw err;
		return call();
	}
}

/** Services whose actions wait on an outside system; `vpn` talks to Pritunl. */
export const SLOW_BACKEND_SERVICES = ["cm-gateway", "vpn"];

export interface BulkheadOptions {
	concurrency: number;
	maxQueueSize: number;
}

/** Puts a bulkhead on every action of the slow-backend services (an action's own `bulkhead` wins). */
export function SlowBackendBulkheads(opts: BulkheadOptions) {
	// Moleculer takes a queue of 0 as unbounded, and with no concurrency nothing would ever run.
	if (!(opts.concurrency >= 1) || !(opts.maxQueueSize >= 1))
		throw new Error(
			`Bulkheads need BULKHEAD_CONCURRENCY >= 1 and BULKHEAD_QUEUE >= 1 (Moleculer takes a queue of 0 as unbounded), got ${opts.concurrency} and ${opts.maxQueueSize}`,
		);
	return {
		name: "SlowBackendBulkheads",
		serviceCreating(_service: unknown, schema: ServiceSchema) {
			if (!SLOW_BACKEND_SERVICES.includes(schema.name) || !schema.actions) return;
			for (const [name, def] of Object.entries(schema.actions)) {
				if (!def) continue;
				const action = (typeof def === "function" ? { handler: def } : def) as { bulkhead?: object };
				(schema.actions as Record<string, unknown>)[name] = {
					...action,
					bulkhead: { enabled: true, ...opts, ...action.bulkhead },
				};
			}
		},
	};
}

/**
 * A node that comes back under the same id with a new instance (a container restarted in its pod keeps
 * NODEID = the pod's name) cannot answer what its previous instance was asked: those requests are
 * failed at once (503 at the gateway; reads are retried), instead of waiting for their timeout.
 */
export function RestartedNodeMiddleware() {
	return {
		name: "RestartedNodes",
		created(broker: {
			localBus: { on(event: string, fn: (p: { node: { id: string; instanceID: string } }) => void): void };
			transit?: { removePendingRequestByNodeID(id: string): void };
			logger: { warn(...a: unknown[]): void };
		}) {
			const instances = new Map<string, string>();
			const seen = ({ node }: { node: { id: string; instanceID: string } }) => {
				const before = instances.get(node.id);
				instances.set(node.id, node.instanceID);
				if (before && before !== node.instanceID && broker.transit) {
					broker.logger.warn(
						`Node '${node.id}' restarted: failing the requests its previous instance had not answered`,
					);
					broker.transit.removePendingRequestByNodeID(node.id);
				}
			};
			broker.localBus.on("$node.connected", seen);
			broker.localBus.on("$node.updated", seen);
		},
	};
}

/**
 * How long after a reconnection to NATS calls still wait: the other nodes lost the same server and come
 * back within nats.js's reconnect wait (2 s plus up to 0.1 s of jitter) of this one; a request sent before
 * they resubscribed would be lost and wait out its timeout.
 */
const RECONNECT_SETTLE_MS = 3000;

interface NatsTransporter {
	connected: boolean;
	client?: { status?(): AsyncIterable<{ type: string; data: unknown }> };
}

/**
 * Moleculer's NATS transporter keeps saying it is connected while nats.js reconnects, so calls made then
 * are buffered and often lost. This follows the client's status: on a disconnection the transporter is
 * marked down (calls fail at once with BrokerDisconnectedError, which the policy retries) and the requests
 * waiting for an answer fail (RequestRejectedError: 503 at the gateway, reads retried); once reconnected
 * and settled, it is marked up and this node announces itself again.
 */
export function NatsConnectionMiddleware() {
	return {
		name: "NatsConnection",
		started(broker: ServiceBroker) {
			const transit = broker.transit as unknown as
				| {
						tx: NatsTransporter;
						pendingRequests: Map<string, { nodeID: string }>;
						removePendingRequestByNodeID(id: string): void;
						discoverer?: unknown;
				  }
				| undefined;
			const tx = transit?.tx;
			const status = tx?.client?.status?.bind(tx.client);
			if (!transit || !tx || !status) return;
			const logger = broker.getLogger("nats-connection");
			let settle: NodeJS.Timeout | null = null;
			void (async () => {
				for await (const s of status()) {
					if (s.type === "disconnect") {
						// calls now fail with BrokerDisconnectedError, which ResendUndelivered sends again once back
						if (settle) clearTimeout(settle);
						settle = null;
						tx.connected = false;
						logger.warn("NATS connection lost: calls fail until it is back");
						for (const nodeID of new Set([...transit.pendingRequests.values()].map(r => r.nodeID)))
							transit.removePendingRequestByNodeID(nodeID);
					} else if (s.type === "reconnect") {
						if (settle) clearTimeout(settle);
						settle = setTimeout(() => {
							settle = null;
							tx.connected = true;
							logger.info("NATS connection back");
							void (broker.registry as unknown as { discoverer: { sendLocalNodeInfo(): Promise<void> } }).discoverer
								.sendLocalNodeInfo()
								.catch(() => undefined);
						}, RECONNECT_SETTLE_MS);
						settle.unref();
					}
				}
			})().catch(() => undefined);
		},
	};
}
