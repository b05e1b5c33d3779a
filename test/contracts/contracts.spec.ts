/**
 * lib/contracts: a wrong param, an unknown action or a misread result on an internal call fails `tsc`; every
 * contracted action is declared with its contract (so its service validates with the contract's schema) and called
 * only through it.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import ts from "typescript";
import { PARAMS } from "../../lib/contracts/actions";

const ROOT = path.resolve(__dirname, "../..");
const FIXTURE = path.join(__dirname, "wrong-calls.fixture.ts");

function diagnostics(file: string): string[] {
	const config = ts.readConfigFile(path.join(ROOT, "tsconfig.json"), ts.sys.readFile).config;
	const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
	const program = ts.createProgram([file], { ...options, noEmit: true });
	return ts
		.getPreEmitDiagnostics(program)
		.map(
			d =>
				`${d.file ? path.relative(ROOT, d.file.fileName) + ":" + (d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1) : ""} ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`,
		);
}

function sources(dir: string): string[] {
	return fs
		.readdirSync(path.join(ROOT, dir), { withFileTypes: true, recursive: true })
		.filter(e => e.isFile() && e.name.endsWith(".ts"))
		.map(e => path.join(e.parentPath, e.name));
}

describe("typed internal calls (lib/contracts)", () => {
	it("rejects every wrong call and handler of the fixture, and nothing else in it", () => {
		// Each mistake carries @ts-expect-error: a mistake tsc stops rejecting is "Unused '@ts-expect-error' directive".
		expect(diagnostics(FIXTURE)).toEqual([]);
		const lines = fs
			.readFileSync(FIXTURE, "utf8")
			.split("\n")
			.filter(l => l.trim().startsWith("// @ts-expect-error"));
		expect(lines.length).toBe(9);
	}, 120_000);

	it("fails to compile once a mistake's expectation is taken away", () => {
		const copy = path.join(__dirname, "wrong-calls.stripped.fixture.ts");
		fs.writeFileSync(copy, fs.readFileSync(FIXTURE, "utf8").replace(/^\s*\/\/ @ts-expect-error.*\n/gm, ""));
		try {
			const found = diagnostics(copy);
			expect(found).toHaveLength(9);
			expect(found.join("\n")).toMatch(/Property 'target' is missing/);
			expect(found.join("\n")).toMatch(/'"hosts.resolveTargets"' is not assignable/);
		} finally {
			fs.rmSync(copy);
		}
	}, 120_000);

	const code = [...sources("services"), ...sources("mixins"), ...sources("lib")].filter(
		f => !f.includes(`${path.sep}contracts${path.sep}`),
	);
	const text = new Map(code.map(f => [f, fs.readFileSync(f, "utf8")]));

	it.each(Object.keys(PARAMS))("%s is declared with its contract and called only through it", name => {
		const declared = [...text].filter(([, s]) => s.includes(`action("${name}", {`));
		expect(declared.map(([f]) => path.relative(ROOT, f))).toHaveLength(1);
		const raw = [...text].filter(([, s]) =>
			new RegExp(`\\.\\s*(call|mcall)(<[^(]*>)?\\(\\s*"${name.replace(".", "\\.")}"`).test(s),
		);
		expect(raw.map(([f]) => path.relative(ROOT, f))).toEqual([]);
	});
});
