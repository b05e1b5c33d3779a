/** @type {import('jest').Config} */
module.exports = {
	// Node's environment, and a suite that leaves a timer running fails (test/support/leak-environment.ts).
	testEnvironment: "<rootDir>/test/support/leak-environment.ts",
	roots: ["<rootDir>/test"],
	testMatch: ["**/*.spec.ts"],
	transform: {
		"^.+\\.ts$": ["ts-jest", { tsconfig: "tsconfig.test.json" }],
		// The OpenID Connect libraries are ES modules only, and jest's loader does not use Node's require(esm): these
		// few are compiled to CommonJS for it (production code loads them with require(esm), Node >= 22.12).
		"/node_modules/(openid-client|oauth4webapi|jose|oidc-provider)/.+\\.js$": [
			"ts-jest",
			{ tsconfig: { allowJs: true, module: "commonjs", target: "ES2022", isolatedModules: true } },
		],
	},
	transformIgnorePatterns: ["/node_modules/(?!(openid-client|oauth4webapi|jose|oidc-provider)/)"],
	testTimeout: 60_000,
	// No silent passes (issue 16): a test that executes no assertion fails (expect.hasAssertions in a global beforeEach).
	setupFilesAfterEnv: ["<rootDir>/test/support/assertions.ts"],
	// The split legs start several processes; two workers keep a 2-core machine responsive.
	maxWorkers: 2,
};
