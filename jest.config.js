/** @type {import('jest').Config} */
module.exports = {
	testEnvironment: "node",
	roots: ["<rootDir>/test"],
	testMatch: ["**/*.spec.ts"],
	transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.test.json" }] },
	testTimeout: 60_000,
	// No silent passes (issue 16): a test that executes no assertion fails (expect.hasAssertions in a global beforeEach).
	setupFilesAfterEnv: ["<rootDir>/test/support/assertions.ts"],
	// The split legs start several processes; two workers keep a 2-core machine responsive.
	maxWorkers: 2,
};
