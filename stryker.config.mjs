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
	"lib/http/auth.ts", // roles, runDenial, function globs, bearer tokens
	"lib/eve/query.ts", // where / projection / sort / embedded validation, allowlists, limits, paging
	"lib/security/address-guard.ts", // outbound addresses
	"lib/security/secrets.ts", // secrets at rest
	"lib/eve/json-depth.ts", // nesting bound on client JSON
	"lib/storage/store-keys.ts", // key encoding at the storage boundary
	"services/tasks/task-claims.ts", // the scheduler's claims and lease takeovers (exactly once)
	"lib/eve/paging.ts", // page arithmetic, _meta and _links
	"services/cm-gateway/run-door.ts", // the audit-first, authorized-where-it-starts run path
	"services/audit/record.ts", // the one audit record builder: fields bounded, arguments masked, the outcome
	"services/conformity/fix-plan.ts", // conformity fixes: what is applied, every run authorized before the first
	"lib/fleet/conformity.ts", // a host's conformity judged from its test=True return; which jobs are checks; alerts
	"services/tokens/family.ts", // principals, token families and their cascading revocation
	"services/tokens/personal.ts", // sign-in sessions, what a new sign-in revokes, tokens made for oneself
	"services/tokens/token-checks.ts", // a token acts (revoked, expired), the caller it is, the expiry sent
	"services/rollouts/plan.ts", // a rollout's batches (canary first), its failure budget as a count, a batch's failures
	"services/rollouts/decisions.ts", // the rollout driver's decisions: step, dry-run outcome, budget, pause/finish/next
	"lib/fleet/state-results.ts", // state returns read; a dry run's predicted changes and failures (silent hosts count)
	"lib/fleet/batches.ts", // records cut to fit one transporter message; text capped
	"lib/fleet/compound.ts", // compound targets: what hosts a target selects, what it refuses, what it may cost
	"lib/fleet/group-rules.ts", // which hosts a group's or nodegroup's rule selects, a host's memberships
	"lib/fleet/presence.ts", // the one presence rule: up/down transitions, heartbeat writes
	"services/hosts/presence.ts", // the master's presence readings: who goes up or down, transitions, soft delete
	"lib/security/scopes.ts", // what a scope grants: globs, classes, relays, argument matchers, guarded keywords
	"services/governance/scope.ts", // what windows and policies govern, and the dry-run rule
	"services/governance/approval-rules.ts", // approvals: the grant's digest, expiry, who votes, what votes make
	"services/cm-gateway/governance.ts", // the run door's governance step: windows, break-glass, the approval gate
	"lib/storage/nedb-plan.ts", // the embedded store's query planner: candidates, counts and pages
	"lib/storage/nedb-index.ts", // the bucket index: one key per value (each value of a list), exclusion counts
	"lib/storage/nedb-deferred.ts", // the deferred field: cut at load, read when asked, its file let go
	"lib/runtime/lease.ts", // the one lease (claim, takeover, renew, release, migration) and the one pass loop
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
	"test/audit/record.spec.ts", // services/audit/record.ts
	"test/conformity/fix-plan.spec.ts", // services/conformity/fix-plan.ts
	"test/fleet/conformity.spec.ts", // lib/fleet/conformity.ts (and lib/fleet/state-results.ts's reading)
	"test/tokens/family.spec.ts", // principals and families on an in-memory NeDB store
	"test/tokens/personal.spec.ts", // the tokens service in an in-process broker on the embedded store
	"test/tokens/token-checks.spec.ts", // pure
	"test/rollouts/plan.spec.ts", // services/rollouts/plan.ts
	"test/rollouts/decisions.spec.ts", // services/rollouts/decisions.ts
	"test/fleet/state-results.spec.ts", // lib/fleet/state-results.ts
	"test/fleet/batches.spec.ts", // lib/fleet/batches.ts
	"test/fleet/compound.spec.ts", // not compound-fleet.spec.ts (50,000 hosts, ten seconds)
	"test/fleet/group-rules.spec.ts", // rules, memberships, what each refuses
	"test/fleet/presence.spec.ts", // transitions, heartbeatDue at its bounds
	"test/hosts/presence.spec.ts", // the hosts service in an in-process broker, in-memory NeDB
	"test/security/scopes.spec.ts", // scopes.ts, and governance's dry-run rule on the effective call
	"test/governance/scope.spec.ts", // governance/scope.ts: origins, governed functions and hosts, targets
	"test/governance/approval-rules.spec.ts", // governance/approval-rules.ts
	"test/cm-gateway/governance.spec.ts", // cm-gateway/governance.ts
	"test/storage/nedb-index.spec.ts", // the bucket index against NeDB's matcher, across writes and rollbacks
	"test/storage/nedb-plan.spec.ts", // the planner and the bucket index through NedbStore, against full scans
	"test/storage/nedb-deferred.spec.ts", // the deferred field through a managed file
	"test/runtime/lease.spec.ts", // lib/runtime/lease.ts on an in-memory NeDB store, the pass loop on fake timers
];

/** The score every module must reach (percentage of mutants killed or timed out). */
export const MIN_SCORE = 85;

/**
 * The TypeScript checker compiles what the unit specs import (the modules under test and theirs), not the
 * whole project: a file half-way through someone's edit elsewhere cannot stop a mutation run. Generated
 * (and git-ignored) so that UNIT_SPECS stays the one list.
 */
const CHECKER_TSCONFIG = "tsconfig.mutate.json";
const checkerTsconfig =
	JSON.stringify(
		{ extends: "./tsconfig.json", include: ["types/**/*.d.ts"], files: [...MODULES, ...UNIT_SPECS] },
		null,
		"\t",
	) + "\n";
if (!fs.existsSync(CHECKER_TSCONFIG) || fs.readFileSync(CHECKER_TSCONFIG, "utf8") !== checkerTsconfig)
	fs.writeFileSync(CHECKER_TSCONFIG, checkerTsconfig);

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
	clearTextReporter: {
		allowColor: false,
		allowEmojis: false,
		reportScoreTable: true,
		reportMutants: true,
		reportTests: false,
	},
	htmlReporter: { fileName: "reports/mutation/mutation.html" },
	jsonReporter: { fileName: "reports/mutation/mutation.json" },
	thresholds: { high: 90, low: MIN_SCORE, break: null },
	tempDirName: ".stryker-tmp",
	cleanTempDir: true,
};
