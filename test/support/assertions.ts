/**
 * No silent passes (issue 16): every test must execute at least one assertion. A test that returns before
 * asserting anything (an early `return` on a leg where it cannot check, a loop over an empty list, an
 * assertion in a callback that never ran) fails with "Expected at least one assertion to be called".
 * A test that cannot check on some leg is declared skipped instead (`it.skip`, or `(cond ? it : it.skip)`
 * with the reason in its name), so jest reports it as skipped. See docs/testing.md, "No silent passes".
 *
 * Loaded for every spec file by jest.config.js (setupFilesAfterEnv).
 */
beforeEach(() => {
	expect.hasAssertions();
});
