/** @type {import('jest').Config} */
module.exports = {
	testEnvironment: "node",
	roots: ["<rootDir>/test"],
	testMatch: ["**/*.spec.ts"],
	transform: { "^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.test.json" }] },
	testTimeout: 60_000,
	// The split legs start several processes; two workers keep a 2-core machine responsive.
	maxWorkers: 2,
};
