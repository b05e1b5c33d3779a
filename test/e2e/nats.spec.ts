/** The end-to-end suites with the gateway and the data services in separate processes over NATS. */
import { startSplit, type Harness } from "../support/harness";
import { SUITE_ENV } from "../support/suite-env";
import { LEGS, SUITES } from "./suites";

describe("split over NATS", () => {
	let h: Harness;
	beforeAll(async () => {
		// At the production log level (not the harness's quieter default): the access suite scans this output for secrets.
		h = await startSplit({ env: { ...SUITE_ENV, LOGLEVEL: "info" } });
	}, 120_000);
	afterAll(() => h?.stop(), 60_000);

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h, LEGS.nats));
});
