/**
 * The jest configuration Stryker runs against each mutant (`npm run mutate`): the project's jest.config.js
 * restricted to the fast unit spec files listed in stryker.config.mjs (UNIT_SPECS). The e2e harness suites,
 * which start services and processes and take minutes, never run here.
 */
const base = require("./jest.config.js");
const { UNIT_SPECS } = require("./stryker.config.mjs");

/** @type {import('jest').Config} */
module.exports = {
	...base,
	testMatch: UNIT_SPECS.map(spec => `<rootDir>/${spec}`),
	// Stryker wraps the test environment and loads it with a plain require(), which neither expands <rootDir> nor
	// compiles TypeScript: the leak-checking environment (test/support/leak-environment.ts) cannot load there, and
	// a leaked timer is not what a mutant is judged on. Node's own environment instead.
	testEnvironment: "node",
};
