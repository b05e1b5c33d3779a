/** Every end-to-end suite, run by each leg (embedded, MongoDB, split over NATS) against its own harness. */
import type { Harness } from "../../support/harness";
import conventions from "./conventions";

export type Suite = (h: () => Harness) => void;

export const SUITES: Record<string, Suite> = { conventions };
