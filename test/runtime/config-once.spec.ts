/**
 * Configuration loaded once (issue 45): lib/config.ts is the one place that reads the environment, moleculer.config.ts
 * loads it once at the broker's start, and every service reads it from its broker (configOf) in `created`. Here: no
 * file of the program reads process.env or calls loadConfig elsewhere, and a broker keeps the configuration it
 * started with while a new broker reads the environment anew (how the tests change settings between starts).
 */
import fs from "node:fs";
import path from "node:path";
import { ServiceBroker } from "moleculer";
import { configOf, useConfig, loadConfig } from "../../lib/config";

const ROOT = path.resolve(__dirname, "../..");

/** Every TypeScript file of the program (not its tests, benchmarks or scripts), relative to the checkout. */
function programFiles(): string[] {
	const under = (dir: string) =>
		(fs.readdirSync(path.join(ROOT, dir), { recursive: true }) as string[])
			.filter(f => f.endsWith(".ts"))
			.map(f => path.join(dir, f));
	return ["moleculer.config.ts", ...under("services"), ...under("mixins"), ...under("lib")];
}

/** The code of a file without its comments (a comment may name the setting it explains). */
function code(file: string): string {
	return fs
		.readFileSync(path.join(ROOT, file), "utf8")
		.replace(/\/\*[\s\S]*?\*\//g, "")
		.replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

describe("where the configuration is read", () => {
	it("only lib/config.ts reads the environment", () => {
		const files = programFiles();
		expect(files).toEqual(
			expect.arrayContaining(["services/api/api.service.ts", "mixins/storage.mixin.ts", "lib/config.ts"]),
		);
		expect(files.filter(f => f !== "lib/config.ts" && /\bprocess\.env\b/.test(code(f)))).toEqual([]);
	});

	it("loadConfig is called only by lib/config.ts and the start (lib/runtime/first-screen.ts, for moleculer.config.ts and the REPL)", () => {
		const callers = programFiles().filter(f => /\bloadConfig\s*\(/.test(code(f)));
		expect(callers.sort()).toEqual(["lib/config.ts", "lib/runtime/first-screen.ts"]);
	});

	it("the checks see a read when there is one (a planted line is found)", () => {
		const planted = "const x = process.env.PORT; // and loadConfig() in the comment\nloadConfig();";
		const stripped = planted.replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
		expect(/\bprocess\.env\b/.test(stripped)).toBe(true);
		expect(stripped.match(/\bloadConfig\s*\(/g)).toHaveLength(1);
	});
});

describe("a broker's configuration", () => {
	const saved = process.env.PAGE_SIZE_DEFAULT;
	afterEach(() => {
		if (saved === undefined) delete process.env.PAGE_SIZE_DEFAULT;
		else process.env.PAGE_SIZE_DEFAULT = saved;
	});

	it("is read once: a change of the environment later reaches only a new broker", () => {
		process.env.PAGE_SIZE_DEFAULT = "7";
		const first = new ServiceBroker({ logger: false });
		const config = configOf(first);
		expect(config.pageSizeDefault).toBe(7);
		process.env.PAGE_SIZE_DEFAULT = "9";
		expect(configOf(first)).toBe(config);
		expect(configOf(first).pageSizeDefault).toBe(7);
		expect(configOf(new ServiceBroker({ logger: false })).pageSizeDefault).toBe(9);
	});

	it("is the one moleculer.config.ts gives it at its start, not read again", () => {
		process.env.PAGE_SIZE_DEFAULT = "11";
		const given = loadConfig();
		process.env.PAGE_SIZE_DEFAULT = "13";
		const broker = new ServiceBroker({ logger: false });
		useConfig(broker, given);
		expect(configOf(broker)).toBe(given);
		expect(configOf(broker).pageSizeDefault).toBe(11);
	});
});
