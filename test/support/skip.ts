/**
 * Tests that cannot check on some leg or machine are skipped, never passed empty (issue 16, docs/testing.md
 * "No silent passes"): decided when the test is declared, with the reason in its name, so jest reports it as
 * skipped (○ in the verbose listing, counted in "skipped") and says why.
 */

type TestFn = (name: string, fn: jest.ProvidesCallback, timeout?: number) => void;

/** `it` when `canCheck`, else `it.skip` named "<name> (skipped: <reason>)". */
export function itIf(canCheck: boolean, reason: string): TestFn {
	return canCheck
		? (name, fn, timeout) => it(name, fn, timeout)
		: (name, fn, timeout) => it.skip(`${name} (skipped: ${reason})`, fn, timeout);
}
