/** Internal actions of the groups, nodegroups and alerts services: their params schemas and results. */
import type { GroupDef, NodegroupDef } from "../fleet/group-rules";

/** The alert levels, least to most severe. */
export const ALERT_LEVELS = ["debug", "info", "warning", "error", "critical"] as const;

/** A new alert: what `alerts.raise` takes. */
export const NEW_ALERT = {
	type: { type: "string", min: 1, max: 200 },
	level: { type: "enum", values: ALERT_LEVELS, default: "info" },
	payload: { type: "object", optional: true, default: {} },
} as const;

export const FLEET_PARAMS = {
	/** Every live host the group selects (its own, its rule's, its subgroups'). */
	"groups.hostnames": { id: "string", query: { type: "any", optional: true } },
	/** A task's `tgt` as hostnames, group ids expanded. */
	"groups.expandTargets": { tgt: { type: "array", items: "string", max: 100_000 } },
	/** The generated part of the graph for a master (POST /graph build_graph). */
	"groups.applyGenerated": {
		master: { type: "string", min: 1, max: 200 },
		nodegroups: {
			type: "array",
			max: 10_000,
			items: { type: "object", props: { name: "string", info: { type: "object", optional: true } } },
		},
	},
	/** Every group with its links and rules. */
	"groups.rules": {},
	/** Every nodegroup that selects hosts, as its rule. */
	"nodegroups.rules": {},
	/** Every nodegroup's name, with why it selects nothing here (null when it can be evaluated). */
	"nodegroups.known": {},
	/** The master's `nodegroups` option as a reconciliation read it. */
	"nodegroups.fromMaster": { nodegroups: { type: "object" } },
	"alerts.raise": NEW_ALERT,
	"alerts.raiseMany": { alerts: { type: "array", max: 10_000, items: { type: "object", props: NEW_ALERT } } },
} as const;

export interface FleetResults {
	"groups.hostnames": string[];
	"groups.expandTargets": string[];
	"groups.applyGenerated": {
		master: string;
		root: string;
		groups: number;
		created: number;
		updated: number;
		removed: number;
	};
	"groups.rules": GroupDef[];
	"nodegroups.rules": NodegroupDef[];
	"nodegroups.known": Record<string, string | null>;
	/** How many nodegroups changed. */
	"nodegroups.fromMaster": number;
	"alerts.raise": { _id: string };
	"alerts.raiseMany": { ids: string[] };
}
