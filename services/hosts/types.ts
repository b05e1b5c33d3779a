/**
 * What the hosts service has on `this` besides the Eve mixin's: the parts' state and methods
 * (presence.ts, memberships.ts, fleet-metric.ts) and the inventory's write check.
 */
import type { Context } from "moleculer";
import type { EveThis } from "../../mixins/eve-collection.mixin";
import type { Check } from "../../lib/eve/validation";
import type { Doc } from "../../lib/storage/store";
import type { GroupIndex } from "../../lib/fleet/group-rules";
import type { PresenceReading } from "./presence";
import type { PassLoop } from "../../lib/runtime/lease";

interface HostsMembers {
	/** The full host schema: what the inventory writes is checked against it. */
	inventoryCheck: Check;
	countTimer?: NodeJS.Timeout;
	countSoonTimer?: NodeJS.Timeout | null;
	/** The recomputations of memberships, one at a time (lib/runtime/lease.ts). */
	memberships: PassLoop;
	countHosts(): Promise<void>;
	countHostsSoon(): void;
	groupIndex(ctx: Context): Promise<GroupIndex>;
	updateMembership(ctx: Context, ids?: string[]): Promise<number>;
	scheduleMembership(delayMs?: number): void;
	membershipSources(): Promise<void>;
	presenceDocs(reading: PresenceReading): Promise<{ up: Set<string>; docs: Doc[] }>;
	newHost(h: Doc, now: Date): Doc;
	targetHosts(ctx: Context, expression: string): Promise<import("./targets").Resolution>;
}

export type HostsThis = EveThis & HostsMembers;
