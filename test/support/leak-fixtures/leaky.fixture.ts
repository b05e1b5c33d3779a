/** A suite that leaves an interval and a far timer running (run by test/support/leak-environment.spec.ts, never by itself). */
it("starts work it never stops", () => {
	setInterval(() => undefined, 60_000);
	setTimeout(() => undefined, 30_000);
	expect(true).toBe(true);
});
