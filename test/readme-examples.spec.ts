/**
 * The README's and docs' shell examples, read as a newcomer pastes them (issue 18). For now what can be
 * checked without running them: a curl whose URL holds `{}` or `[]` (Eve's `where`, `sort`, `projection`)
 * must say `-g`, or curl reads them as globs and sends something else (`where={"status":"up"}` goes out as
 * `where="status":"up"`, a 400).
 */
import fs from "node:fs";
import path from "node:path";

const ROOT = path.resolve(__dirname, "..");
const DOCS = ["README.md", ...fs.readdirSync(path.join(ROOT, "docs")).filter(f => f.endsWith(".md")).map(f => `docs/${f}`)];

/** Each `curl` command line of a fenced shell block in `file`. */
function curlLines(file: string): string[] {
	const text = fs.readFileSync(path.join(ROOT, file), "utf8");
	const out: string[] = [];
	for (const block of text.matchAll(/```(?:sh|bash|shell)?\n([\s\S]*?)```/g)) {
		for (const line of block[1].split("\n")) if (/(^|[\s;&|(])curl\s/.test(line)) out.push(line.trim());
	}
	return out;
}

describe("the shell examples in README.md and docs/", () => {
	it("find curl examples to check", () => {
		expect(DOCS.flatMap(curlLines).length).toBeGreaterThan(3);
	});

	it.each(DOCS)("%s: a curl whose URL holds braces or brackets turns globbing off (-g)", file => {
		const globbed = curlLines(file).filter(line => {
			const urls = [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)].map(m => m[1] ?? m[2] ?? m[3]).filter(w => /^(https?:\/\/)?[\w.-]+(:\d+|\$\w+)?\/\S*\?/.test(w) || /^\$\{?\w+\}?\/\S*\?/.test(w));
			const globOff = /\s-(\w*g\w*)\s|\s--globoff\s/.test(` ${line} `);
			return urls.some(u => /[{}[\]]/.test(u)) && !globOff;
		});
		expect(globbed).toEqual([]);
	});
});
