/** The hosts service's internal actions: their params schemas (declared by services/hosts/) and results. */
import { HOSTNAME } from "../eve/ids";

const names = (max: number) => ({ type: "array", items: "string", max }) as const;
const presenceReading = {
	up: { ...names(100_000), default: [] },
	down: { ...names(100_000), default: [] },
	complete: { type: "boolean", default: false },
} as const;

export const HOSTS_PARAMS = {
	"hosts.resolveTarget": { target: { type: "string", min: 1, max: 10_000 }, field: { type: "string", optional: true } },
	"hosts.upsertMany": {
		hosts: {
			type: "array",
			max: 50_000,
			items: { type: "object", props: { _id: { type: "string", pattern: HOSTNAME } } },
		},
	},
	"hosts.inventoryState": {
		ids: { ...names(100_000), optional: true },
		// A page of the fleet in _id order (the hosts after `after`), so that no answer outgrows a NATS message.
		after: { type: "string", optional: true },
		limit: { type: "number", integer: true, min: 1, max: 100_000, optional: true },
	},
	"hosts.resolve": {
		explicit: names(1_000_000),
		rules: {
			type: "array",
			max: 10_000,
			items: {
				type: "object",
				props: {
					regex: "string|optional",
					grain: { type: "record", optional: true, value: "string" },
					target: "string|optional",
				},
			},
		},
	},
	"hosts.liveAddresses": {},
	"hosts.unlinked": {},
	"hosts.statisticEntries": {
		since: { type: "date", optional: true },
		after: { type: "string", optional: true },
		limit: { type: "number", integer: true, min: 1, max: 10_000, default: 2000 },
	},
	"hosts.softDeletedAmong": { ids: names(100_000) },
	"hosts.setPresence": { ...presenceReading, changesOnly: { type: "boolean", default: false } },
	"hosts.presenceLoss": presenceReading,
	"hosts.setPresent": { ids: names(100_000), present: "boolean" },
	"hosts.setVpn": {
		orgs: names(100_000),
		/** Every organization record there is (a full sync): hosts naming any other lose their identity. */
		existing: { ...names(100_000), optional: true },
		assignments: {
			type: "array",
			max: 100_000,
			items: { type: "object", props: { _id: "string", vpn_organization: "string", vpn_representation: "object" } },
		},
	},
	"hosts.vpnIdentity": { id: "string" },
	"hosts.liveIds": {},
	"hosts.setConformity": {
		hosts: { type: "array", max: 100_000, items: { type: "object", props: { _id: "string", conformity: "object" } } },
	},
} as const;

/** A minion key's state on the master. */
export type KeyState = "accepted" | "pending" | "rejected" | "denied";

/** The other key a host's id goes by on the master (a key conflict). */
export interface KeyConflict {
	key: Exclude<KeyState, "accepted">;
	fingerprint?: string;
}

/** What fleet-ctl holds about a host, as `hosts.inventoryState` answers it (the inventory compares it with the master). */
export interface InventoryState {
	_id: string;
	key?: string;
	status?: string;
	fingerprint?: string;
	fingerprint_history: Array<{ added: Date | string; fingerprint: string }>;
	key_conflict?: KeyConflict;
	_soft_deleted: boolean;
}

/** A host's entry in a statistics snapshot: the entry fields it has, never its grains. */
export interface StatisticEntry {
	_id: string;
	_soft_deleted: boolean;
	_updated?: Date;
	[field: string]: unknown;
}

export interface HostsResults {
	"hosts.resolveTarget": {
		/** The live hosts it selects, sorted. */ hosts: string[] /** Ids it names that are no live host. */;
		missing: string[];
	};
	"hosts.upsertMany": { created: number; updated: number };
	"hosts.inventoryState": InventoryState[];
	"hosts.resolve": string[];
	"hosts.liveAddresses": Array<{ _id: string; ip?: string }>;
	"hosts.unlinked": string[];
	"hosts.statisticEntries": {
		entries: StatisticEntry[] /** The newest `_updated` among them. */;
		seen: Date | null;
		more: boolean;
	};
	"hosts.softDeletedAmong": string[];
	/** The live hosts that changed. */
	"hosts.setPresence": { wentUp: string[]; wentDown: string[] };
	/** The live accepted hosts up now, and how many of them the reading takes down. */
	"hosts.presenceLoss": { up: number; losing: number };
	"hosts.setPresent": string[];
	"hosts.setVpn": string[];
	"hosts.vpnIdentity": {
		_id: string;
		vpn_organization: string | null;
		vpn_representation: Record<string, unknown> | null;
	};
	"hosts.liveIds": string[];
	"hosts.setConformity": string[];
}
