/** The end-to-end suites with the gateway and the data services in separate processes over NATS. */
import { startSplit, type Harness } from "../support/harness";
import { SUITES } from "./suites";

describe("split over NATS", () => {
	let h: Harness;
	beforeAll(async () => {
		h = await startSplit();
	}, 120_000);
	afterAll(() => h?.stop(), 60_000);

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h));
});
