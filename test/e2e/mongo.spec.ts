/** The end-to-end suites on MongoDB storage; runs only when MONGO_URI is set. */
import { startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";
import { SUITES } from "./suites";

const mongoUri = process.env.MONGO_URI;
const describeIf = mongoUri ? describe : describe.skip;

describeIf("MongoDB storage", () => {
	let h: Harness;
	beforeAll(async () => {
		h = await startEmbedded({ mongoUri: uniqueMongoUri(mongoUri as string) });
	});
	afterAll(() => h?.stop());

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h));
});
