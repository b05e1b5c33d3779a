/** The end-to-end suites on the embedded default: one process, NeDB files. */
import { startEmbedded, tempDir, type Harness } from "../support/harness";
import { request } from "../support/http";
import { SUITE_ENV } from "../support/suite-env";
import { SUITES } from "./suites";

describe("embedded (NeDB)", () => {
	let h: Harness;
	const dataDir = tempDir("embedded");
	beforeAll(async () => {
		h = await startEmbedded({ dataDir, env: SUITE_ENV });
	});
	afterAll(() => h?.stop());

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h));

	it("keeps its data across a restart", async () => {
		const created = await request("POST", `${h.api}/groups`, { body: { name: "survivor", type: 0 } });
		expect(created.status).toBe(201);
		await h.restart();
		const again = await request("GET", `${h.api}/groups/${created.body._id}`);
		expect(again.status).toBe(200);
		expect(again.body.name).toBe("survivor");
	});
});
