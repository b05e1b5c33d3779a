// @ts-check
/**
 * Mutation testing (issue 16; docs/testing.md, "Mutation testing"): `npm run mutate` (scripts/mutate.js)
 * runs Stryker over the modules that guard the fleet and prints the score per module; each must keep at
 * least MIN_SCORE% of its mutants killed.
 *
 * Adding a module is one line in MODULES; a unit spec file run against the mutants, one line in UNIT_SPECS
 * (jest.mutate.config.js and the type checker's tsconfig read them from here). Only fast unit specs
 * belong there: never the e2e harness suites, which start services and processes and take minutes.
 */
import fs from "node:fs";

export const MODULES = [
	"lib/http/auth.ts", // roles, runDenial, function globs, redact, bearer tokens
	"lib/eve/query.ts", // where / projection / sort / embedded validation, allowlists, limits, paging
	"lib/security/address-guard.ts", // outbound addresses
	"lib/security/secrets.ts", // secrets at rest
	"lib/eve/json-depth.ts", // nesting bound on client JSON
	"lib/storage/store-keys.ts", // key encoding at the storage boundary
	"services/tasks/task-claims.ts", // the scheduler's claims and lease takeovers (exactly once)
	"lib/eve/paging.ts", // page arithmetic, _meta and _links
	"services/cm-gateway/run-door.ts", // the audit-first, authorized-where-it-starts run path
	"lib/storage/nedb-plan.ts", // the embedded store's query planner: candidates, counts and pages
	"lib/storage/nedb-index.ts", // the bucket index: one key per value (each value of a list), exclusion counts
	"lib/storage/nedb-deferred.ts", // the deferred field: cut at load, read when asked, its file let go
];

export const UNIT_SPECS = [
	"test/http/auth.spec.ts",
	"test/eve/query.spec.ts",
	"test/security/address-guard.spec.ts",
	"test/security/secrets.spec.ts",
	"test/eve/json-depth.spec.ts",
	"test/storage/store-keys.spec.ts",
	"test/tasks/task-claims.spec.ts",
	"test/eve/paging.spec.ts",
	"test/cm-gateway/run-door.spec.ts",
	"test/storage/nedb-index.spec.ts", // the bucket index against NeDB's matcher, across writes and rollbacks
	"test/storage/nedb-plan.spec.ts", // the planner and the bucket index through NedbStore, against full scans
	"test/storage/nedb-deferred.spec.ts", // the deferred field through a managed file
];

/** The score every module must reach (percentage of mutants killed or timed out). */
export const MIN_SCORE = 85;

/**
 * The TypeScript checker compiles what the unit specs import (the modules under test and theirs), not the
 * whole project: a file half-way through someone's edit elsewhere cannot stop a mutation run. Generated
 * (and git-ignored) so that UNIT_SPECS stays the one list.
 */
const CHECKER_TSCONFIG = "tsconfig.mutate.json";
const checkerTsconfig = JSON.stringify({ extends: "./tsconfig.json", include: ["types/**/*.d.ts"], files: [...MODULES, ...UNIT_SPECS] }, null, "\t") + "\n";
if (!fs.existsSync(CHECKER_TSCONFIG) || fs.readFileSync(CHECKER_TSCONFIG, "utf8") !== checkerTsconfig) fs.writeFileSync(CHECKER_TSCONFIG, checkerTsconfig);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
	mutate: MODULES,
	testRunner: "jest",
	jest: { projectType: "custom", configFile: "jest.mutate.config.js" },
	checkers: ["typescript"],
	tsconfigFile: CHECKER_TSCONFIG,
	coverageAnalysis: "perTest",
	// 2 shared cores.
	concurrency: 2,
	// A mutant whose tests run this much longer than unmutated ones (an endless loop) counts as detected.
	timeoutMS: 10_000,
	timeoutFactor: 2,
	// The sandbox gets the sources and the tests (tests read files relative to it, ROOT); not builds or data.
	ignorePatterns: ["dist", "data", "coverage", "test-artifacts", "reports"],
	reporters: ["clear-text", "progress-append-only", "html", "json"],
	clearTextReporter: { allowColor: false, allowEmojis: false, reportScoreTable: true, reportMutants: true, reportTests: false },
	htmlReporter: { fileName: "reports/mutation/mutation.html" },
	jsonReporter: { fileName: "reports/mutation/mutation.json" },
	thresholds: { high: 90, low: MIN_SCORE, break: null },
	tempDirName: ".stryker-tmp",
	cleanTempDir: true,
};
