/**
 * The README's and docs' shell examples, run as a newcomer pastes them (issue 18), against one fresh `npm run demo`
 * (test/simulators/demo.ts; needs the build, which `npm test`'s pretest makes).
 *
 * The convention (docs/testing.md, "The docs' examples"): a fenced block whose info string is `sh` is an example
 * for the demo and is run; `sh elsewhere` is a command for another setup (npm ci, npm test, Docker, kubectl, the
 * MongoDB tools, processes over NATS, a Salt minion): never run, listed below by file and line; transcripts are
 * `text` or `console`.
 *
 * How they run: the demo starts with PORT=0, HEALTH_PORT=0, a temporary data dir and its simulators on free ports;
 * its ready block gives the address, the admin token and the health port. For each file (README.md first, then
 * docs/ by name) its `sh` blocks, in order, make one bash script under `set -e -o pipefail` (a value captured in
 * one block serves the next, as in a reader's shell), run verbatim in a temporary directory with T = the demo's
 * token and CURL_HOME naming a .curlrc whose `connect-to` lines send `localhost:3000` and `localhost:3001` to the
 * demo's real ports: the examples are not rewritten. A file passes when its script exits 0 and nothing it printed
 * is an Eve error (`"_status": "ERR"`: curl exits 0 on a 4xx, the body says it). The README's token line is not an
 * example: the reader pastes the `export T=…` line the demo prints, and no `sh` block may assign T (checked), so
 * the T the test gives is the one used. All files share the instance: examples that create records use names of
 * their own. Then the demo's story is checked, and that Ctrl-C stops it cleanly.
 *
 * Also, without running anything: a curl whose URL holds `{}` or `[]` (Eve's `where`, `sort`, `projection`) must
 * say `-g`, or curl reads them as globs and sends something else (`where={"status":"up"}` goes out as
 * `where="status":"up"`, a 400).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { DIST, ROOT, hasExited, tempDir } from "./support/harness";
import { request, withQuery } from "./support/http";
import { canConnect } from "./support/net";

const DOCS = [
	"README.md",
	...fs
		.readdirSync(path.join(ROOT, "docs"))
		.filter(f => f.endsWith(".md"))
		.sort()
		.map(f => `docs/${f}`),
];

interface Block {
	file: string;
	/** Line of the opening fence. */
	line: number;
	info: string;
	body: string;
}

/** The fenced blocks of `file` (``` or ~~~; indented ones in list items too, their indentation removed). */
function blocks(file: string): Block[] {
	const out: Block[] = [];
	let open: { indent: number; fence: string; info: string; line: number; body: string[] } | null = null;
	fs.readFileSync(path.join(ROOT, file), "utf8")
		.split("\n")
		.forEach((text, i) => {
			const fence = /^( *)(`{3,}|~{3,})\s*(.*)$/.exec(text);
			if (!open) {
				if (fence) open = { indent: fence[1].length, fence: fence[2], info: fence[3].trim(), line: i + 1, body: [] };
			} else if (fence && fence[2][0] === open.fence[0] && fence[2].length >= open.fence.length && fence[3] === "") {
				out.push({ file, line: open.line, info: open.info, body: open.body.join("\n") });
				open = null;
			} else open.body.push(text.slice(Math.min(open.indent, text.length - text.trimStart().length)));
		});
	return out;
}

const SHELL = new Set(["sh", "bash", "shell"]);
const shellBlocks = DOCS.flatMap(blocks).filter(b => SHELL.has(b.info.split(/\s+/)[0]));
const runnable = shellBlocks.filter(b => b.info.split(/\s+/).length === 1);
const elsewhere = shellBlocks.filter(b => b.info.split(/\s+/).slice(1).join(" ") === "elsewhere");
const where = (b: Block) => `${b.file}:${b.line}`;

/** Each `curl` command line of the shell blocks of `file`. */
function curlLines(file: string): string[] {
	return shellBlocks
		.filter(b => b.file === file)
		.flatMap(b => b.body.split("\n"))
		.filter(line => /(^|[\s;&|(])curl\s/.test(line))
		.map(line => line.trim());
}

describe("the shell examples in README.md and docs/", () => {
	it("find curl examples to check", () => {
		expect(DOCS.flatMap(curlLines).length).toBeGreaterThan(3);
	});

	it.each(DOCS)("%s: a curl whose URL holds braces or brackets turns globbing off (-g)", file => {
		const globbed = curlLines(file).filter(line => {
			const urls = [...line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)]
				.map(m => m[1] ?? m[2] ?? m[3])
				.filter(w => /^(https?:\/\/)?[\w.-]+(:\d+|\$\w+)?\/\S*\?/.test(w) || /^\$\{?\w+\}?\/\S*\?/.test(w));
			const globOff = /\s-(\w*g\w*)\s|\s--globoff\s/.test(` ${line} `);
			return urls.some(u => /[{}[\]]/.test(u)) && !globOff;
		});
		expect(globbed).toEqual([]);
	});

	it("are `sh` (run against the demo) or `sh elsewhere` (not run), and there are some of each", () => {
		expect(runnable.length).toBeGreaterThan(5);
		expect(elsewhere.length).toBeGreaterThan(0);
		expect(
			shellBlocks.filter(b => !runnable.includes(b) && !elsewhere.includes(b)).map(b => `${where(b)} \`\`\`${b.info}`),
		).toEqual([]);
	});

	it("no `sh` block sets T: the reader's T is the token the demo printed", () => {
		expect(runnable.filter(b => /(^|[\s;&|(])(export\s+)?T=/m.test(b.body)).map(where)).toEqual([]);
	});
});

describe("not run against the demo (```sh elsewhere```), but at least valid shell", () => {
	it.each(elsewhere.map(b => [`${where(b)}: ${b.body.trim().split("\n")[0].slice(0, 70)}`, b] as const))(
		"%s",
		(_, b) => {
			expect(b.body.trim()).not.toBe("");
			// bash -n parses without running: an unclosed quote or a broken continuation fails here.
			const parsed = spawnSync("bash", ["-n", "-c", b.body], { encoding: "utf8" });
			expect(parsed.stderr).toBe("");
			expect(parsed.status).toBe(0);
		},
	);
});

// ------------------------------------------------------------------ against the demo

interface Demo {
	child: ChildProcess;
	out: string[];
	api: string;
	token: string;
	ports: { api: number; health: number; salt: number; pritunl: number };
}

const READY =
	/fleet-ctl demo is ready: (http:\/\/[^/\s]+:(\d+))\/.*\n\s+export T=(\S+)\n[\s\S]*?salt-api simulator: http:\/\/[^\s]+:(\d+) [\s\S]*?Pritunl simulator: +http:\/\/[^\s]+:(\d+) [\s\S]*?health and metrics: http:\/\/localhost:(\d+)\/[\s\S]*?Ctrl-C stops everything\./;

/** `node dist/test/simulators/demo.js` in a process group of its own (killed whole), as on a fresh machine. */
async function startDemo(temps: string[]): Promise<Demo> {
	const script = path.join(DIST, "test/simulators/demo.js");
	if (!fs.existsSync(script)) throw new Error("no build: run `npm run build` first");
	const dataDir = tempDir("demo");
	temps.push(dataDir);
	// Only what a fresh shell has: nothing the other suites set (CTL_ADMIN_TOKEN, DATA_DIR, …) reaches the demo.
	const base = Object.fromEntries(
		["PATH", "HOME", "LANG", "TMPDIR"].filter(k => process.env[k] !== undefined).map(k => [k, process.env[k]!]),
	);
	const env = {
		...base,
		PORT: "0",
		HEALTH_PORT: "0",
		HOST: "127.0.0.1",
		DEMO_DATA_DIR: dataDir,
		DEMO_PRITUNL_PORT: "0",
		DEMO_SALT_PORT: "0",
	};
	const child = spawn(process.execPath, [script], {
		cwd: ROOT,
		env,
		detached: true,
		stdio: ["ignore", "pipe", "pipe"],
	});
	const out: string[] = [];
	child.stdout!.on("data", d => out.push(String(d)));
	child.stderr!.on("data", d => out.push(String(d)));
	const began = Date.now();
	for (;;) {
		const text = out.join("");
		const m = READY.exec(text);
		if (m)
			return {
				child,
				out,
				api: `${m[1]}/api`,
				token: m[3],
				ports: { api: Number(m[2]), salt: Number(m[4]), pritunl: Number(m[5]), health: Number(m[6]) },
			};
		if (hasExited(child))
			throw new Error(`the demo exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${text}`);
		if (!text && Date.now() - began > 60_000) throw new Error("the demo printed nothing within 60 s");
		if (Date.now() - began > 180_000) throw new Error(`no ready block from the demo within 180 s:\n${text}`);
		await new Promise(r => setTimeout(r, 100));
	}
}

function exited(child: ChildProcess, timeoutMs: number): Promise<number | string | null> {
	return new Promise(resolve => {
		if (hasExited(child)) return resolve(child.exitCode ?? child.signalCode);
		const timer = setTimeout(() => resolve(null), timeoutMs);
		child.once("exit", (code, signal) => (clearTimeout(timer), resolve(code ?? signal)));
	});
}

/** Signals the demo's whole process group (the demo and fleet-ctl, as Ctrl-C in a terminal does). */
function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
	try {
		process.kill(-child.pid!, signal);
	} catch {
		// gone already
	}
}

interface Run {
	code: number | null;
	stdout: string;
	stderr: string;
}

/** Runs `script` with bash in `cwd`, with `env` only; killed after `timeoutMs`. */
function bash(script: string, cwd: string, env: Record<string, string>, timeoutMs = 90_000): Promise<Run> {
	const file = path.join(cwd, `.script-${Date.now()}.sh`);
	fs.writeFileSync(file, script);
	return new Promise(resolve => {
		const child = spawn("bash", [file], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
		let stdout = "";
		let stderr = "";
		child.stdout.on("data", d => (stdout += String(d)));
		child.stderr.on("data", d => (stderr += String(d)));
		const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
		child.once("close", code => (clearTimeout(timer), resolve({ code, stdout, stderr })));
	});
}

const MARK = (i: number) => `@@block ${i}@@`;
const EVE_ERROR = /"_status"\s*:\s*"ERR"/;

describe("every ```sh example, run against a fresh `npm run demo`", () => {
	let demo: Demo | undefined;
	let cwd = "";
	let env: Record<string, string> = {};

	const temps: string[] = [];

	beforeAll(async () => {
		const missing = spawnSync("bash", ["-c", "for t in curl jq; do command -v $t >/dev/null || echo $t; done"], {
			encoding: "utf8",
		}).stdout.trim();
		if (missing)
			throw new Error(`the examples need ${missing.split("\n").join(" and ")} on PATH (apt-get install curl jq)`);
		demo = await startDemo(temps);
		cwd = tempDir("examples");
		const curlHome = tempDir("curlhome");
		temps.push(cwd, curlHome);
		fs.writeFileSync(
			path.join(curlHome, ".curlrc"),
			`connect-to = localhost:3000:127.0.0.1:${demo.ports.api}\nconnect-to = localhost:3001:127.0.0.1:${demo.ports.health}\n`,
		);
		env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, LANG: "C.UTF-8", CURL_HOME: curlHome, T: demo.token };
		// The examples reach the demo through the .curlrc (else they would find whatever listens on :3000).
		const probe = await bash('curl -s localhost:3000/api/whoami -H "Authorization: Bearer $T"', cwd, env);
		if (!/"role":"admin"/.test(probe.stdout))
			throw new Error(`curl does not reach the demo through ${curlHome}/.curlrc: ${JSON.stringify(probe)}`);
	}, 240_000);

	afterAll(async () => {
		if (demo) {
			signalGroup(demo.child, "SIGTERM");
			if ((await exited(demo.child, 20_000)) === null) signalGroup(demo.child, "SIGKILL");
		}
		for (const dir of temps) fs.rmSync(dir, { recursive: true, force: true });
	}, 30_000);

	const files = DOCS.filter(file => runnable.some(b => b.file === file));
	it.each(files)(
		"%s",
		async file => {
			const mine = runnable.filter(b => b.file === file);
			const script = [
				"set -e -o pipefail",
				...mine.flatMap((b, i) => [`printf '\\n${MARK(i)}\\n'; printf '\\n${MARK(i)}\\n' >&2`, b.body]),
			].join("\n");
			const run = await bash(script, cwd, env);
			const part = (text: string, i: number) => text.split(MARK(i))[1]?.split(MARK(i + 1))[0] ?? "";
			const failures: string[] = [];
			mine.forEach((b, i) => {
				const [stdout, stderr] = [part(run.stdout, i), part(run.stderr, i)];
				const reached = run.stdout.includes(MARK(i));
				const failedHere = run.code !== 0 && reached && !run.stdout.includes(MARK(i + 1));
				if (failedHere || EVE_ERROR.test(stdout + stderr)) {
					failures.push(
						`${where(b)} ${failedHere ? `exited ${run.code}` : "answered an Eve error"}\n--- block ---\n${b.body}\n--- stdout ---\n${stdout.trim()}\n--- stderr ---\n${stderr.trim()}`,
					);
				}
			});
			if (run.code !== 0 && !failures.length) failures.push(`exit ${run.code}\n${run.stdout}\n${run.stderr}`);
			expect(failures).toEqual([]);
		},
		120_000,
	);

	it("tells the demo's story: its hosts up, VPN identities, its group, task and organization, the README's group web", async () => {
		const { api, token } = demo!;
		const get = async (p: string, query?: Record<string, unknown>) => {
			const reply = await request("GET", query ? withQuery(`${api}/${p}`, query) : `${api}/${p}`, { token });
			expect(reply.status).toBe(200);
			return reply.body;
		};
		const hosts: any[] = (await get("hosts", { max_results: 50 }))._items;
		const status = Object.fromEntries(hosts.map(h => [h._id, h.status]));
		expect(status).toMatchObject({
			"web-01": "up",
			"web-02": "up",
			"web-03": "up",
			"db-01": "up",
			"db-02": "up",
			"app-01": "down",
		});
		expect(hosts.find(h => h._id === "new-01")).toMatchObject({ key: "pending" });
		expect(
			hosts.filter(h => h.vpn_representation && Object.keys(h.vpn_representation).length > 0).map(h => h._id),
		).toContain("web-01");
		const [web] = (await get("groups", { where: { name: "web" } }))._items;
		expect(web.hosts).toContain("web-01");
		expect(JSON.stringify(await get(`groups/${web._id}/hostnames`))).toContain('"web-01"');
		const [databases] = (await get("groups", { where: { name: "databases" } }))._items;
		expect(databases.info).toEqual({ regex: "db-" });
		expect((await get("tasks", { where: { name: "ping databases" } }))._items).toEqual([
			expect.objectContaining({ fun: "test.ping", tgt: [databases._id], status: "scheduled" }),
		]);
		expect((await get("vpn_organizations", { where: { name: "fleet" } }))._items[0].vpn_representation.user_count).toBe(
			6,
		);
	});

	it("stops on Ctrl-C (SIGINT to its process group): fleet-ctl and both simulators gone, exit code 0", async () => {
		const { child, ports } = demo!;
		signalGroup(child, "SIGINT");
		expect(await exited(child, 30_000)).toBe(0);
		for (const port of [ports.api, ports.health, ports.salt, ports.pritunl]) expect(await canConnect(port)).toBe(false);
	}, 40_000);
});
