/**
 * A suite whose timers are all accounted for (run by test/support/leak-environment.spec.ts, never by itself): one
 * cleared in afterAll, one unref'd, one about to fire, one that has fired.
 */
let interval: ReturnType<typeof setInterval>;
afterAll(() => clearInterval(interval));

it("stops or releases what it starts", async () => {
	interval = setInterval(() => undefined, 60_000);
	setInterval(() => undefined, 60_000).unref();
	await new Promise(resolve => setTimeout(resolve, 10));
	setTimeout(() => undefined, 200);
	expect(true).toBe(true);
});
