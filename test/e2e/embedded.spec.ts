/** The end-to-end suites on the embedded default: one process, NeDB files. */
import { startEmbedded, tempDir, type Harness } from "../support/harness";
import { request } from "../support/http";
import { SUITE_ENV } from "../support/suite-env";
import { LEGS, SUITES } from "./suites";

describe("embedded (NeDB)", () => {
	let h: Harness;
	const dataDir = tempDir("embedded");
	beforeAll(async () => {
		// captureLogs at the production level (info): the access suite scans what the services logged for secrets.
		h = await startEmbedded({ dataDir, env: { ...SUITE_ENV, LOGLEVEL: "info" }, captureLogs: true });
	});
	afterAll(() => h?.stop());

	for (const [name, suite] of Object.entries(SUITES)) describe(name, () => suite(() => h, LEGS.embedded));

	it("keeps its data across a restart", async () => {
		const created = await request("POST", `${h.api}/groups`, { body: { name: "survivor", type: 0 } });
		expect(created.status).toBe(201);
		await h.restart();
		const again = await request("GET", `${h.api}/groups/${created.body._id}`);
		expect(again.status).toBe(200);
		expect(again.body.name).toBe("survivor");
	});
});
