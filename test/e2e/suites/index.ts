/** Every end-to-end suite, run by each leg (embedded, MongoDB, split over NATS) against its own harness. */
import type { Harness } from "../../support/harness";
import conventions from "./conventions";
import hosts from "./hosts";
import groupsResolution from "./groups-resolution";
import graph, { graphJobs } from "./graph";
import tasks from "./tasks";
import records from "./records";
import files from "./files";
import vpn from "./vpn";
import access from "./access";
import stats from "./stats";
import eveConformance from "./eve-conformance";
import targets from "./targets";

/**
 * What a leg is, known when the suites are declared (the harness only once they run): a test that cannot
 * check on some leg is declared skipped there, with the reason (docs/testing.md, "No silent passes").
 */
export interface Leg {
	name: "embedded" | "mongo" | "nats";
	/** Where the services keep their collections: NeDB files (Harness.dataDir) or MongoDB. */
	storage: "nedb" | "mongo";
	/** Whether the services run in separate processes (the split leg) or in the test's own. */
	processes: boolean;
}

export const LEGS: Record<Leg["name"], Leg> = {
	embedded: { name: "embedded", storage: "nedb", processes: false },
	mongo: { name: "mongo", storage: "mongo", processes: false },
	nats: { name: "nats", storage: "nedb", processes: true },
};

export type Suite = (h: () => Harness, leg: Leg) => void;

export const SUITES: Record<string, Suite> = {
	conventions,
	hosts,
	"groups-resolution": groupsResolution,
	graph,
	"graph-jobs": graphJobs,
	tasks,
	records,
	files,
	vpn,
	stats,
	targets,
	access,
	"eve-conformance": eveConformance,
};
