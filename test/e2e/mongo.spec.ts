/** The end-to-end suites on MongoDB storage; runs only when MONGO_URI is set. */
import { startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";
import { SUITE_ENV } from "../support/suite-env";
import { LEGS, SUITES } from "./suites";

const mongoUri = process.env.MONGO_URI;
const describeIf = mongoUri ? describe : describe.skip;

describeIf(`MongoDB storage${mongoUri ? "" : " (skipped: MONGO_URI is not set)"}`, () => {
	let h: Harness;
	beforeAll(async () => {
		// With MongoDB, secrets need a key from the environment (no key file next to NeDB data).
		// captureLogs at the production level (info): the access suite scans what the services logged for secrets.
		h = await startEmbedded({
			mongoUri: uniqueMongoUri(mongoUri as string),
			env: { ...SUITE_ENV, CTL_SECRET_KEY: "e2e-mongo-leg-secret-key", LOGLEVEL: "info" },
			captureLogs: true,
		});
	});
	afterAll(() => h?.stop());

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h, LEGS.mongo));
});
