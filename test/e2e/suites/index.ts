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

export type Suite = (h: () => Harness) => void;

export const SUITES: Record<string, Suite> = { conventions, hosts, "groups-resolution": groupsResolution, graph, "graph-jobs": graphJobs, tasks, records, files, vpn, stats, access };
