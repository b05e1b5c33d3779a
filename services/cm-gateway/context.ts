/**
 * What the parts of the cm-gateway share (each part is a class in this folder that owns its own state): the
 * broker they reach the other services through, the logger, the configuration, the salt-api client, and
 * whether the service is stopping. Also the few shapes and helpers more than one part uses.
 */
import type { Logger, ServiceBroker } from "moleculer";
import type { Config } from "../../lib/config";
import type { SaltClient } from "./salt-client";

export interface GatewayContext {
	broker: ServiceBroker;
	logger: Logger;
	config: Config;
	salt: SaltClient;
	/** True once the service stops: timers are not set again, queues are not drained. */
	stopping(): boolean;
}

export interface Alert {
	type: string;
	level: "info" | "warning" | "error";
	payload: Record<string, unknown>;
}

/** A Salt job id: 20 digits (and a suffix Salt adds to ids made in the same microsecond). */
export const JID = /^\d{20}(_\d+)?$/;
/** Most records handed to `*.upsertMany` / `*.record` at once (fewer when they are large: lib/fleet/batches.ts). */
export const UPSERT_BATCH = 1000;

export const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
export const strings = (v: unknown): string[] =>
	Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];

/** Runs `fn` over `items` with at most `limit` at a time; the first failure stops the rest and is thrown. */
export async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
	let next = 0;
	let failed = false;
	const worker = async () => {
		while (!failed && next < items.length) {
			const item = items[next++];
			try {
				await fn(item);
			} catch (err) {
				failed = true;
				throw err;
			}
		}
	};
	await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
