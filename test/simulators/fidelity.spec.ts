/// <reference types="jest" />
/**
 * Fidelity of the salt-api simulator against a real Salt 3006.0 master + salt-api (rest_cherrypy), from the
 * captures in ../shared/reference/salt-3006/ (README.md there lists the request behind each file).
 *
 * The simulator runs as `npm run sim:salt` runs it: its standalone entry (test/simulators/salt-api.ts compiled to
 * JavaScript) in a child process, on a port it binds itself (SIM_PORT=0, the URL read back from its first line),
 * with the captured fleet (SIM_IDS=web-01,web-02,db-01), short master timeouts and loop intervals (SIM_* env), and
 * its control channel on stdin (SIM_CONTROL=stdin) to drive the scenarios of the event captures.
 *
 * Every captured answer is compared by SHAPE (`shapeOf`): types, object keys and array element shapes are kept;
 * what legitimately differs is normalised (jids, stamps, fingerprints, PEM keys; maps keyed by minion id or by jid
 * become one entry holding the shapes of their values; a grains mapping is compared by key set and value types).
 * Event captures are compared as sequences of (tag pattern, data shape): the same requests and scenario steps are
 * replayed, each one waited for by the event that proves it done, and the stream between two marker events must
 * be exactly the captured one.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import ts from "typescript";
import { EventStream, until } from "./sse-reader";
import { referenceDir } from "../support/reference";

jest.setTimeout(60_000);

const ROOT = join(__dirname, "..", "..");
/** The captures (../shared/reference/salt-3006, found where .ci/run finds the shared tree). */
const FOUND = referenceDir("salt-3006");
const REF = FOUND ?? "";
/** Without the captures there is nothing to compare with: the suites are reported skipped, with the reason. */
const describeWithCaptures = (name: string, fn: () => void) =>
	FOUND
		? describe(name, fn)
		: describe.skip(`${name} (skipped: the salt-3006 captures are not found; set SHARED_DIR)`, fn);
const IDS = ["web-01", "web-02", "db-01"];
const ID_SET = new Set(IDS);
/** Custom grains of the captured fleets (not Salt core grains): the first captures', then more-2026-11-29's. */
const CUSTOM_GRAINS = new Set(["role", "roles", "env", "foo", "tier", "flag", "pattern", "app", "weird"]);

// ------------------------------------------------------------------ shapes

type Shape = string | Shape[] | { [k: string]: Shape };

const JID = /^\d{20}$/;
const STAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?$/;
const FINGERPRINT = /^([0-9a-f]{2}:){31}[0-9a-f]{2}$/;
const PEM = /^-----BEGIN PUBLIC KEY-----\n[\s\S]*\n-----END PUBLIC KEY-----$/;

/** The grains of a minion: compared by key set and value types, not by shape. */
const isGrains = (v: Record<string, unknown>) => "saltversion" in v && "cpuarch" in v && "id" in v;

const typeName = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/** Distinct shapes, in a stable order. */
function union(shapes: Shape[]): Shape[] {
	const seen = new Map<string, Shape>();
	for (const s of shapes) seen.set(JSON.stringify(s), s);
	return [...seen.keys()].sort().map(k => seen.get(k)!);
}

export function shapeOf(v: unknown): Shape {
	if (v === null || v === undefined) return "null";
	if (Array.isArray(v)) return union(v.map(shapeOf));
	if (typeof v === "object") {
		const o = v as Record<string, unknown>;
		if (isGrains(o)) return "<grains>";
		const keys = Object.keys(o);
		if (keys.length && keys.every(k => ID_SET.has(k))) return { "<minion>": union(keys.map(k => shapeOf(o[k]))) };
		if (keys.length && keys.every(k => JID.test(k))) return { "<jid>": union(keys.map(k => shapeOf(o[k]))) };
		return Object.fromEntries(keys.sort().map(k => [k, shapeOf(o[k])]));
	}
	if (typeof v === "string") {
		if (JID.test(v)) return "jid";
		if (STAMP.test(v)) return "stamp";
		if (FINGERPRINT.test(v)) return "fingerprint";
		if (PEM.test(v)) return "pem";
		return "string";
	}
	return typeof v;
}

/** Tag pattern: jids and minion ids replaced. */
const tagPattern = (tag: string) =>
	tag
		.replace(/\d{20}/g, "<jid>")
		.split("/")
		.map(p => (ID_SET.has(p) ? "<minion>" : p))
		.join("/");

interface Ev {
	tag: string;
	data: Record<string, any>;
}

const norm = (e: Ev) => ({ tag: tagPattern(e.tag), data: shapeOf(e.data) });
const isPresence = (e: Ev) => e.tag.startsWith("salt/presence/");
const isApiCall = (e: Ev) => /^salt\/(wheel|run)\//.test(e.tag);

/** Every grains mapping in a value (cache.grains answers, events). */
function grainsIn(v: unknown, out: Record<string, unknown>[] = []): Record<string, unknown>[] {
	if (Array.isArray(v)) for (const x of v) grainsIn(x, out);
	else if (v && typeof v === "object") {
		if (isGrains(v as Record<string, unknown>)) out.push(v as Record<string, unknown>);
		else for (const x of Object.values(v)) grainsIn(x, out);
	}
	return out;
}

/** The simulator's grains carry every captured core grain, each with the captured value's type. */
function expectGrainsLike(got: unknown, captured: unknown): void {
	const want = grainsIn(captured);
	const have = grainsIn(got);
	expect(want.length).toBeGreaterThan(0);
	expect(have.length).toBeGreaterThan(0);
	const ref = want[0];
	for (const g of have) {
		const missing = Object.keys(ref).filter(k => !CUSTOM_GRAINS.has(k) && !(k in g));
		expect(missing).toEqual([]);
		const types = Object.fromEntries(
			Object.keys(ref)
				.filter(k => k in g)
				.map(k => [k, typeName(g[k])]),
		);
		expect(types).toEqual(
			Object.fromEntries(
				Object.keys(ref)
					.filter(k => k in g)
					.map(k => [k, typeName(ref[k])]),
			),
		);
	}
}

// ------------------------------------------------------------------ captures

/** A captured answer (a file may end with a line of notes after the JSON: `200 15.107760s`). */
function capturedJson(file: string) {
	const text = readFileSync(join(REF, file), "utf8");
	try {
		return JSON.parse(text);
	} catch {
		return JSON.parse(text.slice(0, text.indexOf("\n")));
	}
}

function parseEvents(text: string): Ev[] {
	const out: Ev[] = [];
	for (const m of text.matchAll(/tag: (.*)\ndata: (.*)\n(?:\n|$)/g)) {
		const rec = JSON.parse(m[2]);
		expect(rec.tag).toBe(m[1]);
		out.push({ tag: rec.tag, data: rec.data });
	}
	return out;
}

const captured = (file: string) => parseEvents(readFileSync(join(REF, file), "utf8"));

// ------------------------------------------------------------------ the simulator as a process

/** The simulator's sources compiled to JavaScript (what `npm run build` makes of them), in a scratch directory. */
function compileSimulator(dir: string): string {
	const src = join(ROOT, "test", "simulators");
	const files = [
		"salt-api.ts",
		"standalone.ts",
		...readdirSync(join(src, "salt"))
			.filter(f => f.endsWith(".ts"))
			.map(f => `salt/${f}`),
	];
	for (const f of files) {
		const out = ts.transpileModule(readFileSync(join(src, f), "utf8"), {
			compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
			fileName: f,
		}).outputText;
		const dest = join(dir, "test", "simulators", f.replace(/\.ts$/, ".js"));
		mkdirSync(dirname(dest), { recursive: true });
		writeFileSync(dest, out);
	}
	return join(dir, "test", "simulators", "salt-api.js");
}

class SimProcess {
	url = "";
	private child!: ChildProcess;
	private nextId = 1;
	private readonly waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
	private readonly output: string[] = [];

	static async start(entry: string, env: Record<string, string>): Promise<SimProcess> {
		const p = new SimProcess();
		p.child = spawn(process.execPath, [entry], {
			env: { ...process.env, SIM_PORT: "0", SIM_IDS: IDS.join(","), SIM_CONTROL: "stdin", ...env },
			stdio: ["pipe", "pipe", "pipe"],
		});
		p.child.stderr!.on("data", (d: Buffer) => p.output.push(d.toString()));
		const lines = createInterface({ input: p.child.stdout! });
		const listening = new Promise<string>((resolve, reject) => {
			p.child.once("exit", code => reject(new Error(`simulator exited (${code}): ${p.output.join("")}`)));
			lines.on("line", line => {
				p.output.push(line);
				const url = /listening on (http:\/\/\S+)/.exec(line);
				if (url) resolve(url[1]);
				if (line.startsWith("control ")) {
					const msg = JSON.parse(line.slice("control ".length));
					const w = p.waiting.get(msg.id);
					if (!w) return;
					p.waiting.delete(msg.id);
					if ("error" in msg) w.reject(new Error(msg.error));
					else w.resolve(msg.result);
				}
			});
		});
		p.url = await listening;
		return p;
	}

	/** Call a control method of the simulator in the child (SIM_CONTROL=stdin). */
	control<T = unknown>(method: string, ...args: unknown[]): Promise<T> {
		const id = this.nextId++;
		return new Promise<T>((resolve, reject) => {
			this.waiting.set(id, { resolve, reject });
			this.child.stdin!.write(`${JSON.stringify({ id, method, args })}\n`);
		});
	}

	async stop(): Promise<void> {
		if (this.child.exitCode !== null) return;
		const exited = new Promise(r => this.child.once("exit", r));
		this.child.kill("SIGTERM");
		await exited;
	}
}

// ------------------------------------------------------------------ HTTP

interface Reply {
	status: number;
	text: string;
	json: any;
	type: string;
}

async function call(base: string, path: string, opts: { token?: string; body?: unknown } = {}): Promise<Reply> {
	const headers: Record<string, string> = { Accept: "application/json" };
	if (opts.token) headers["X-Auth-Token"] = opts.token;
	if (opts.body !== undefined) headers["Content-Type"] = "application/json";
	const res = await fetch(base + path, {
		method: opts.body === undefined ? "GET" : "POST",
		headers,
		body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
	});
	const text = await res.text();
	const type = res.headers.get("content-type") ?? "";
	return { status: res.status, text, type, json: type.startsWith("application/json") ? JSON.parse(text) : undefined };
}

async function login(base: string): Promise<string> {
	const r = await call(base, "/login", { body: { username: "saltapi", password: "saltapi", eauth: "pam" } });
	expect(r.status).toBe(200);
	return r.json.return[0].token;
}

/**
 * Record what the stream shows while `steps` run: a marker event before and after (fired through the control
 * channel, so it follows everything the steps made the master fire), the events in between returned.
 */
async function recorded(sim: SimProcess, stream: EventStream, steps: () => Promise<void>): Promise<Ev[]> {
	const n = Math.random().toString(36).slice(2);
	await sim.control("fireEvent", `fidelity/begin/${n}`, {});
	await stream.wait(e => e.tag === `fidelity/begin/${n}`, "the begin marker");
	await steps();
	await sim.control("fireEvent", `fidelity/end/${n}`, {});
	await stream.wait(e => e.tag === `fidelity/end/${n}`, "the end marker");
	const from = stream.events.findIndex(e => e.tag === `fidelity/begin/${n}`);
	const to = stream.events.findIndex(e => e.tag === `fidelity/end/${n}`);
	return stream.events.slice(from + 1, to);
}

/** Start a simulator process (`setup` run on it first), log in and open its event stream. */
async function openSim(
	env: Record<string, string>,
	setup: (sim: SimProcess) => Promise<void> = async () => undefined,
): Promise<{ sim: SimProcess; token: string; stream: EventStream }> {
	const sim = await SimProcess.start(entry, env);
	await setup(sim);
	const token = await login(sim.url);
	const stream = await EventStream.open(`${sim.url}/events?token=${token}`, { unwrap: true });
	await until(() => stream.raw.startsWith("retry: 400\n") || undefined, 5000, "the event stream");
	return { sim, token, stream };
}

async function closeSim(sim: SimProcess | undefined, stream: EventStream | undefined): Promise<void> {
	stream?.close();
	await sim?.stop();
}

// ------------------------------------------------------------------ the tests

const PATCHES = {
	"patches/fix-motd.sls": "fix-motd:\n  file.managed:\n    - name: /etc/motd\n    - contents: patched\n",
	"patches/broken-pkg.sls":
		"ok-step:\n  cmd.run:\n    - name: echo before-failure\n\nfailing-step:\n  cmd.run:\n    - name: /bin/false --this-fails\n\nmissing-file:\n  file.exists:\n    - name: /nonexistent/fleet-ctl-test\n",
};

let scratch = "";
let entry = "";
beforeAll(() => {
	scratch = mkdtempSync(join(tmpdir(), "salt-sim-"));
	entry = compileSimulator(scratch);
});
afterAll(() => {
	if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describeWithCaptures("salt-api simulator vs the Salt 3006 captures: answers and event sequences", () => {
	// A master whose maintenance loop is run by hand (firePresence), so that presence events come exactly where
	// a scenario puts them; master timeout 1 s and gather_job_timeout 1 s.
	let sim: SimProcess;
	let token = "";
	let stream: EventStream;
	const low = (chunk: Record<string, unknown>) => call(sim.url, "/", { token, body: chunk });
	/** A local_async job, waited for until `rets` minions returned (and every event before them arrived). */
	const asyncJob = async (chunk: Record<string, unknown>, rets: number) => {
		const r = await low({ client: "local_async", ...chunk });
		expect(r.status).toBe(200);
		const jid = r.json.return[0].jid as string;
		await until(
			() => stream.count(e => e.tag.startsWith(`salt/job/${jid}/ret/`)) === rets || undefined,
			10_000,
			`${rets} returns of ${jid}`,
		);
		return jid;
	};

	beforeAll(async () => {
		({ sim, token, stream } = await openSim(
			{ SIM_LOOP_MS: "3600000", SIM_TIMEOUT: "1", SIM_GATHER_JOB_TIMEOUT: "1", SIM_LATENCY_MS: "2,15" },
			async p => {
				for (const [path, text] of Object.entries(PATCHES)) await p.control("setFile", path, text);
			},
		));
	});
	afterAll(() => closeSim(sim, stream));

	it("answers each request of the README's table like the capture (key.list_all, key.finger, manage.status, cache.grains, file_list, file_roots.read, local_async, /jobs/<jid>, state_fail)", async () => {
		const cases: [string, Record<string, unknown>][] = [
			["key_list_all.json", { client: "wheel", fun: "key.list_all" }],
			["key_finger.json", { client: "wheel", fun: "key.finger", match: "*" }],
			["manage_status.json", { client: "runner", fun: "manage.status" }],
			["file_list.json", { client: "runner", fun: "fileserver.file_list" }],
			[
				"file_roots_read.json",
				{ client: "wheel", fun: "file_roots.read", path: "patches/fix-motd.sls", saltenv: "base" },
			],
			["local_async.json", { client: "local_async", tgt: "*", fun: "test.ping" }],
		];
		for (const [file, chunk] of cases) {
			const r = await low(chunk);
			expect([file, r.status, shapeOf(r.json)]).toEqual([file, 200, shapeOf(capturedJson(file))]);
		}
		// The exact values that matter.
		expect((await low({ client: "wheel", fun: "key.list_all" })).json.return[0].data.return).toEqual(
			capturedJson("key_list_all.json").return[0].data.return,
		);
		expect((await low({ client: "runner", fun: "manage.status" })).json).toEqual(capturedJson("manage_status.json"));
		const read = await low({ client: "wheel", fun: "file_roots.read", path: "patches/fix-motd.sls", saltenv: "base" });
		expect(read.json.return[0].data.return).toEqual([]);
		const finger = (await low({ client: "wheel", fun: "key.finger", match: "*" })).json.return[0].data.return;
		expect(Object.keys(finger)).toEqual(Object.keys(capturedJson("key_finger.json").return[0].data.return));
		expect(finger.local["master.pem"]).not.toBe(finger.local["master.pub"]);

		// cache.grains: the grains by key set and value types.
		const grains = await low({ client: "runner", fun: "cache.grains", tgt: "*" });
		expect(shapeOf(grains.json)).toEqual(shapeOf(capturedJson("cache_grains.json")));
		expectGrainsLike(grains.json, capturedJson("cache_grains.json"));

		// GET /jobs/<jid> of a finished job (the capture's test.echo hi to web-01 and db-01).
		const job = await low({
			client: "local_async",
			tgt: ["web-01", "db-01"],
			tgt_type: "list",
			fun: "test.echo",
			arg: ["hi"],
		});
		const jid = job.json.return[0].jid;
		let jobReply: Reply | undefined;
		for (const end = Date.now() + 10_000; Date.now() < end; ) {
			jobReply = await call(sim.url, `/jobs/${jid}`, { token });
			if (Object.keys(jobReply.json.info[0].Result).length === 2) break;
			await new Promise(r => setTimeout(r, 20));
		}
		expect(shapeOf(jobReply!.json)).toEqual(shapeOf(capturedJson("jobs_jid.json")));
		expect(jobReply!.json.info[0]).toMatchObject({
			Function: "test.echo",
			Arguments: ["hi"],
			Target: ["web-01", "db-01"],
			"Target-type": "list",
			User: "saltapi",
			Minions: ["db-01", "web-01"],
		});

		// state.apply of the patch whose second and third steps fail, through `local` with full_return.
		await sim.control("failPatch", "patches.broken-pkg", "*", {
			stepId: ["failing-step", "missing-file"],
			retcode: 1,
			stderr: "",
		});
		const state = await low({
			client: "local",
			tgt: "db-01",
			fun: "state.apply",
			kwarg: { mods: "patches.broken-pkg" },
			full_return: true,
		});
		expect(shapeOf(state.json)).toEqual(shapeOf(capturedJson("state_fail.json")));
		expect(Object.keys(state.json.return[0]["db-01"].ret)).toEqual(
			Object.keys(capturedJson("state_fail.json").return[0]["db-01"].ret),
		);
		expect(Object.keys(state.json.return[0]["db-01"])).toEqual(["ret", "out", "retcode", "jid"]);
		expect(state.json.return[0]["db-01"]).toMatchObject({ out: "highstate", retcode: 2 });
	});

	it("local: full_return gives false for a minion that did not return; no matching minion gives [{}] for local and local_async", async () => {
		await sim.control("setDown", "web-02");
		try {
			const r = await low({
				client: "local",
				tgt: ["web-01", "web-02"],
				tgt_type: "list",
				fun: "test.ping",
				full_return: true,
			});
			expect(r.json).toEqual({
				return: [{ "web-01": { ret: true, retcode: 0, jid: expect.stringMatching(JID) }, "web-02": false }],
			});
		} finally {
			await sim.control("setUp", "web-02");
		}
		expect((await low({ client: "local", tgt: "nomatch*", fun: "test.ping" })).json).toEqual({ return: [{}] });
		expect((await low({ client: "local_async", tgt: "nomatch*", fun: "test.ping" })).json).toEqual({ return: [{}] });
	});

	it("events1: start-up sync (local_async, jobs.list_job, key.list_all, key.finger, manage.status, file_list, file_roots.read, cache.grains)", async () => {
		let jid = "";
		const got = await recorded(sim, stream, async () => {
			jid = await asyncJob({ tgt: ["web-01", "db-01"], tgt_type: "list", fun: "test.echo", arg: ["hi"] }, 2);
			await low({ client: "runner", fun: "jobs.list_job", jid });
			await low({ client: "wheel", fun: "key.list_all" });
			await low({ client: "wheel", fun: "key.finger", match: "*" });
			await low({ client: "runner", fun: "manage.status" });
			await low({ client: "runner", fun: "fileserver.file_list" });
			await low({ client: "wheel", fun: "file_roots.read", path: "patches/fix-motd.sls", saltenv: "base" });
			await low({ client: "runner", fun: "cache.grains", tgt: "web-01" });
		});
		const want = captured("events1.txt").filter(e => !isPresence(e));
		expect(got.map(norm)).toEqual(want.map(norm));
		expectGrainsLike(got, want);
	});

	it("events2: local_async runs (test.ping, cmd.run with kwargs, a failing state.apply, metadata, a missing sls) and a loop with nothing changed", async () => {
		await sim.control("failPatch", "patches.broken-pkg", "*", {
			stepId: ["failing-step", "missing-file"],
			retcode: 1,
			stderr: "",
		});
		const got = await recorded(sim, stream, async () => {
			await asyncJob({ tgt: ["web-01"], tgt_type: "list", fun: "test.ping" }, 1);
			await asyncJob({ tgt: ["web-01"], tgt_type: "list", fun: "cmd.run", kwarg: { cmd: "echo hello" } }, 1);
			await asyncJob(
				{ tgt: ["db-01"], tgt_type: "list", fun: "state.apply", kwarg: { mods: "patches.broken-pkg" } },
				1,
			);
			await asyncJob({ tgt: ["web-02"], tgt_type: "list", fun: "test.ping", metadata: { fleet_ctl_run: "run123" } }, 1);
			await low({ client: "runner", fun: "jobs.list_jobs", kwarg: { search_metadata: { fleet_ctl_run: "run123" } } });
			await asyncJob({ tgt: ["db-01"], tgt_type: "list", fun: "state.apply", arg: ["patches.does-not-exist"] }, 1);
			await sim.control("firePresence");
		});
		// The capture ends with three loops; one is replayed here.
		const want = captured("events2.txt").slice(0, -2);
		expect(got.map(norm)).toEqual(want.map(norm));
		// Return events carry kwargs without __kwarg__; the /new event keeps it.
		const cmd = got.find(e => /\/ret\//.test(e.tag) && e.data.fun === "cmd.run")!;
		expect(cmd.data.fun_args).toEqual([{ cmd: "echo hello" }]);
		expect(got.find(e => /\/new$/.test(e.tag) && e.data.fun === "cmd.run")!.data.arg).toEqual([
			{ __kwarg__: true, cmd: "echo hello" },
		]);
		await sim.control("clearPatchFailures");
	});

	it("events3: a minion stopped (lost at the next loop, not before) and `local` runs waiting on it (the master's find_job jobs)", async () => {
		const got = await recorded(sim, stream, async () => {
			await sim.control("setDown", "web-02");
			await sim.control("firePresence");
			await low({ client: "local", tgt: ["web-01", "web-02"], tgt_type: "list", fun: "test.ping" });
			await sim.control("firePresence");
			await low({ client: "local", tgt: ["web-01", "web-02"], tgt_type: "list", fun: "test.ping" });
			await sim.control("firePresence");
		});
		// The capture stops in the middle of a third run.
		const want = captured("events3.txt").slice(0, -3);
		expect(got.map(norm)).toEqual(want.map(norm));
		expect(got.filter(e => /\/new$/.test(e.tag)).map(e => e.data.fun)).toEqual([
			"test.ping",
			"saltutil.find_job",
			"test.ping",
			"saltutil.find_job",
		]);
		// Started again: announced at once by its start (auth first), the presence change only at the next loop.
		const back = await recorded(sim, stream, async () => {
			await sim.control("setUp", "web-02");
			await stream.wait(e => e.tag === "salt/minion/web-02/start", "the start event");
		});
		expect(back.map(e => e.tag)).toEqual(["salt/auth", "salt/minion/web-02/start"]);
		expect(Object.keys(back[1].data)).toEqual(["id", "cmd", "pretag", "data", "tag", "_stamp"]);
		const loop = await recorded(sim, stream, () => sim.control("firePresence").then(() => undefined));
		expect(loop.map(e => [e.tag, e.data.new ?? e.data.present, e.data.lost])).toEqual([
			["salt/presence/change", ["web-02"], []],
			["salt/presence/present", ["db-01", "web-01", "web-02"], undefined],
		]);
	});

	it("events4: GET /events with a session that is no longer valid: CherryPy's 401 page, byte for byte", async () => {
		const r = await call(sim.url, "/events?token=0123456789abcdef0123456789abcdef01234567");
		expect(r.status).toBe(401);
		expect(r.text).toBe(readFileSync(join(REF, "events4.txt"), "utf8"));
	});

	it("events5: salt-call event.send of a custom tag (its auth, the pillar refresh, __pub_* keys, its return), then the API reads", async () => {
		const got = await recorded(sim, stream, async () => {
			await sim.control("fireMinionEvent", "web-01", "ctl/vnc/connect", {
				hostname: "spoofed-name",
				status: "disconnected",
			});
			await stream.wait(e => e.tag.endsWith("/ret/web-01") && e.data.fun === "event.send", "the salt-call return");
		});
		const want = captured("events5.txt");
		expect(got.map(norm)).toEqual(want.filter(e => !isApiCall(e)).map(norm));
		expect(got.find(e => e.tag === "ctl/vnc/connect")!.data).toEqual({
			...want.find(e => e.tag === "ctl/vnc/connect")!.data,
			data: {
				...want.find(e => e.tag === "ctl/vnc/connect")!.data.data,
				__pub_pid: expect.any(Number),
				__pub_jid: expect.stringMatching(JID),
			},
			_stamp: expect.stringMatching(STAMP),
		});
		// The reads fleet-ctl made on the auth event.
		const reads = await recorded(sim, stream, async () => {
			await low({ client: "wheel", fun: "key.finger", match: "web-01" });
			await low({ client: "runner", fun: "cache.grains", tgt: ["web-01"], tgt_type: "list" });
		});
		expect(reads.map(norm)).toEqual(want.filter(isApiCall).map(norm));
		expectGrainsLike(reads, want);
	});

	it("events6: a minion with a new key (in minions and minions_denied, both fingerprints), lost at the next loop, a scheduled run without it", async () => {
		let fresh = "";
		const got = await recorded(sim, stream, async () => {
			fresh = await sim.control<string>("presentNewKey", "web-02");
			await low({ client: "wheel", fun: "key.finger", match: "web-02" });
			await low({ client: "runner", fun: "cache.grains", tgt: ["web-02"], tgt_type: "list" });
			await sim.control("firePresence");
			await sim.control("firePresence");
			const jid = await asyncJob(
				{
					tgt: ["db-01", "web-01", "web-02"],
					tgt_type: "list",
					fun: "cmd.run",
					kwarg: { cmd: "echo task-ran-$(date +%s)" },
					metadata: { fleet_ctl_run: "6b053f508af65ed7d36d174c", fleet_ctl_task: "6b053eac8af65ed7d36d1740" },
				},
				2,
			);
			await low({ client: "runner", fun: "jobs.list_job", jid });
			await low({ client: "wheel", fun: "key.finger", match: "web-02" });
			await low({ client: "runner", fun: "jobs.list_job", jid });
		});
		expect(got.map(norm)).toEqual(captured("events6.txt").map(norm));
		const keys = (await low({ client: "wheel", fun: "key.list_all" })).json.return[0].data.return;
		expect({ minions: keys.minions, denied: keys.minions_denied }).toEqual({
			minions: ["db-01", "web-01", "web-02"],
			denied: ["web-02"],
		});
		expect(got.find(e => e.tag.startsWith("salt/wheel/") && e.data.return)!.data.return.minions_denied).toEqual({
			"web-02": fresh,
		});
		// The old key back on the minion, the denied one removed: it starts again.
		const back = await recorded(sim, stream, async () => {
			await sim.control("restoreOldKey", "web-02");
			await sim.control("firePresence");
		});
		expect(back.map(e => e.tag)).toEqual([
			"salt/auth",
			"salt/minion/web-02/start",
			"salt/presence/change",
			"salt/presence/present",
		]);
		expect(back[0].data).toMatchObject({ result: true, act: "accept", id: "web-02" });
		expect((await low({ client: "wheel", fun: "key.list_all" })).json.return[0].data.return.minions_denied).toEqual([]);
	});

	it("manage.present and manage.alived publish nothing; manage.status pings every minion", async () => {
		await sim.control("resetExecutions");
		const got = await recorded(sim, stream, async () => {
			expect((await low({ client: "runner", fun: "manage.present" })).json.return[0]).toEqual([
				"db-01",
				"web-01",
				"web-02",
			]);
			expect((await low({ client: "runner", fun: "manage.alived" })).json.return[0]).toEqual([
				"db-01",
				"web-01",
				"web-02",
			]);
		});
		expect(await sim.control("executions")).toEqual([]);
		expect(got.filter(e => /^salt\/job\//.test(e.tag))).toEqual([]);
		await low({ client: "runner", fun: "manage.status" });
		expect(
			(await sim.control<{ id: string; fun: string }[]>("executions")).map(e => `${e.fun} ${e.id}`).sort(),
		).toEqual(["test.ping db-01", "test.ping web-01", "test.ping web-02"]);
	});
});

describeWithCaptures(
	"salt-api simulator vs the Salt 3006 captures: a master restart and a master down (events7)",
	() => {
		const LOOP = 400;
		const DELAY = 150;
		const DOWN = 300;
		let sim: SimProcess;
		let token = "";
		beforeAll(async () => {
			sim = await SimProcess.start(entry, {
				SIM_LOOP_MS: String(LOOP),
				SIM_RESTART_PRESENT_DELAY_MS: String(DELAY),
				SIM_MASTER_DOWN_MS: String(DOWN),
				SIM_MASTER_REQ_TIMEOUT_MS: "20000",
				SIM_TIMEOUT: "1",
				SIM_GATHER_JOB_TIMEOUT: "1",
				SIM_LATENCY_MS: "2,15",
			});
			token = await login(sim.url);
		});
		afterAll(() => sim?.stop());

		it("keeps the stream open; the first event after the start is an empty presence list, the true list one loop later; minions authenticate again at the first publication", async () => {
			const want = captured("events7.txt");
			const stream = await EventStream.open(`${sim.url}/events?token=${token}`, { unwrap: true });
			try {
				await until(() => stream.raw.startsWith("retry: 400\n") || undefined, 5000, "the event stream");
				// A job of before the restart: its list_job after it (Arguments keep __kwarg__, Metadata, Result).
				const before = await call(sim.url, "/", {
					token,
					body: {
						client: "local_async",
						tgt: IDS,
						tgt_type: "list",
						fun: "cmd.run",
						kwarg: { cmd: "echo task-ran-$(date +%s)" },
						metadata: { fleet_ctl_run: "a", fleet_ctl_task: "b" },
					},
				});
				const oldJid = before.json.return[0].jid;
				// Every return of it first: a return still on its way would land after the restart (a minion's
				// req channel retries it, in real Salt as here), ahead of the presence event this test is about.
				await until(
					() => stream.count(e => e.tag.startsWith(`salt/job/${oldJid}/ret/`)) === IDS.length || undefined,
					5000,
					"the returns of the job",
				);
				const mark = stream.events.length;
				const sentAt = Date.now();
				await sim.control("restartMaster", { downMs: 100 });
				// Nothing else first: the empty list, then (one loop later) the change and the full list.
				const firstPresent = await stream.wait(
					(e: Ev) => stream.events.indexOf(e) >= mark && e.tag === "salt/presence/present",
					"the first loop after the start",
				);
				// Not before the master's start (100 ms down) plus restartPresentDelayMs.
				expect(Date.now() - sentAt).toBeGreaterThanOrEqual(100 + DELAY - 5);
				expect(stream.events.slice(mark, stream.events.indexOf(firstPresent) + 1).map(e => e.tag)).toEqual([
					"salt/presence/present",
				]);
				await until(() => stream.events.slice(mark).filter(isPresence).length >= 3 || undefined, 5000, "the true list");
				const stampMs = (e: Ev) => Date.parse(`${e.data._stamp}Z`);
				const [, change] = stream.events.slice(mark).filter(isPresence);
				// One loop later, by the master's own clock.
				expect(stampMs(change) - stampMs(firstPresent)).toBeGreaterThanOrEqual(LOOP - 5);
				expect(stream.events.slice(mark).filter(isPresence).slice(0, 3).map(norm)).toEqual(
					want.filter(isPresence).slice(0, 3).map(norm),
				);
				expect(stream.events.slice(mark).filter(isPresence)[0].data.present).toEqual([]);
				expect(stream.closed).toBe(false);
				// list_job of the job of before the restart.
				const listed = await call(sim.url, "/", {
					token,
					body: { client: "runner", fun: "jobs.list_job", jid: oldJid },
				});
				expect(shapeOf(listed.json.return[0])).toEqual(shapeOf(want[1].data.return));
				// The first publication after the restart: every minion authenticates again (salt/auth), then returns.
				const from = stream.events.length;
				const r = await call(sim.url, "/", {
					token,
					body: {
						client: "local_async",
						tgt: ["db-01", "web-01", "web-02"],
						tgt_type: "list",
						fun: "cmd.run",
						kwarg: { cmd: "echo task-ran-$(date +%s)" },
						metadata: { fleet_ctl_run: "c", fleet_ctl_task: "b" },
					},
				});
				const jid = r.json.return[0].jid;
				await until(
					() => stream.count(e => e.tag.startsWith(`salt/job/${jid}/ret/`)) === 3 || undefined,
					5000,
					"the returns",
				);
				const got = stream.events.slice(from).filter(e => !isPresence(e) && !isApiCall(e));
				const firstJob = want.findIndex(e => JID.test(e.tag));
				const wantRun = want
					.slice(firstJob)
					.filter(e => !isApiCall(e) && !isPresence(e))
					.slice(0, 8);
				expect(got.map(norm)).toEqual(wantRun.map(norm));
				expect(
					got
						.filter(e => e.tag === "salt/auth")
						.map(e => e.data.id)
						.sort(),
				).toEqual(["db-01", "web-01", "web-02"]);
				// No minion restarted.
				expect(stream.events.slice(mark).filter(e => /^salt\/minion\//.test(e.tag))).toEqual([]);
			} finally {
				stream.close();
			}
		});

		it("while the master is down salt-api answers local calls 500 (its generic JSON) after a while, local_async later; a login and a wheel call wait for the master", async () => {
			await sim.control("goDown", "master-down");
			try {
				// A login sent now waits for the master (its token is minted by the master).
				let loginAnsweredAt = 0;
				const pending = call(sim.url, "/login", {
					body: { username: "saltapi", password: "saltapi", eauth: "pam" },
				}).then(r => {
					loginAnsweredAt = Date.now();
					return r;
				});
				const t0 = Date.now();
				const r = await call(sim.url, "/", { token, body: { client: "local", tgt: "*", fun: "test.ping" } });
				expect({ status: r.status, type: r.type, body: r.text }).toEqual({
					status: 500,
					type: "application/json",
					body: '{"status": 500, "return": "An unexpected error occurred"}',
				});
				expect(Date.now() - t0).toBeGreaterThanOrEqual(DOWN - 20);
				// A wheel call is held until the master is back (master_down_timings.md: key.list_all answered 200 then).
				let wheelAnsweredAt = 0;
				const wheel = call(sim.url, "/", { token, body: { client: "wheel", fun: "key.list_all" } }).then(w => {
					wheelAnsweredAt = Date.now();
					return w;
				});
				// A local_async call fails too, later (15 s against 5 s on the real master: three times as long).
				const t1 = Date.now();
				expect(
					(await call(sim.url, "/", { token, body: { client: "local_async", tgt: "*", fun: "test.ping" } })).status,
				).toBe(500);
				expect(Date.now() - t1).toBeGreaterThanOrEqual(3 * DOWN - 20);
				// The login and the wheel call are still waiting, and are answered once the master is back.
				expect([loginAnsweredAt, wheelAnsweredAt]).toEqual([0, 0]);
				const backAt = Date.now();
				await sim.control("comeBack");
				expect((await pending).status).toBe(200);
				const w = await wheel;
				expect([w.status, shapeOf(w.json)]).toEqual([200, shapeOf(capturedJson("key_list_all.json"))]);
				expect(Math.min(loginAnsweredAt, wheelAnsweredAt)).toBeGreaterThanOrEqual(backAt);
			} finally {
				await sim.control("comeBack");
			}
		});
	},
);

// ------------------------------------------------------------------ the second run (more-2026-11-29)

/** The second run's captures (more-2026-11-29/README.md there lists the request behind each file). */
const MORE = "more-2026-11-29";
const more = (file: string) => join(MORE, file);

/** `status.all_status` by structure: rows keyed by device, interface, mount or counter become one `<row>` entry. */
function statusShape(s: Record<string, any>): Shape {
	const rows = (o: Record<string, unknown>): Shape => ({ "<row>": union(Object.values(o).map(shapeOf)) });
	return {
		keys: Object.keys(s).sort(),
		cpuinfo: shapeOf(s.cpuinfo),
		cpustats: shapeOf(
			Object.fromEntries(Object.entries(s.cpustats).map(([k, v]) => [k.replace(/^cpu\d+$/, "cpuN"), v])),
		),
		diskstats: rows(s.diskstats),
		diskusage: rows(s.diskusage),
		loadavg: shapeOf(s.loadavg),
		meminfo: rows(s.meminfo),
		netdev: rows(s.netdev),
		netstats: Object.fromEntries(Object.keys(s.netstats).map(k => [k, rows(s.netstats[k])])),
		uptime: shapeOf(s.uptime),
		vmstats: rows(s.vmstats),
		w: typeName(s.w),
	};
}

/** The second run's grains of each minion (cache_grains_custom.json), to give the simulator's. */
const capturedGrains = () =>
	capturedJson(more("cache_grains_custom.json")).return[0] as Record<string, Record<string, unknown>>;
/** Their custom grains only. */
const customGrains = (id: string) =>
	Object.fromEntries(Object.entries(capturedGrains()[id]).filter(([k]) => CUSTOM_GRAINS.has(k)));

describeWithCaptures("salt-api simulator vs the 2026-11-29 captures: answers and event sequences", () => {
	let sim: SimProcess;
	let token = "";
	let stream: EventStream;
	const low = (chunk: Record<string, unknown>) => call(sim.url, "/", { token, body: chunk });
	const apiFree = (evs: Ev[]) => evs.filter(e => !isApiCall(e));
	/** A CLI job and all its returns. */
	const cli = async (tgt: unknown, fun: string, arg: unknown[], tgtType: string) => {
		const pub = await sim.control<{ jid: string; minions: string[] }>("cliJob", tgt, fun, arg, { tgtType });
		await until(
			() => stream.count(e => e.tag.startsWith(`salt/job/${pub.jid}/ret/`)) === pub.minions.length || undefined,
			10_000,
			`the returns of ${fun}`,
		);
	};

	beforeAll(async () => {
		({ sim, token, stream } = await openSim(
			{ SIM_LOOP_MS: "3600000", SIM_TIMEOUT: "1", SIM_GATHER_JOB_TIMEOUT: "1", SIM_LATENCY_MS: "2,15" },
			async p => {
				// The captured master: its states, nodegroups and grains (core and custom, so that targets select what
				// they selected on the real master).
				for (const f of [
					"common.sls",
					"rollfail.sls",
					"rollfail1.sls",
					"top-level.sls",
					"top.sls",
					"patches/fail-second.sls",
					"patches/fix-motd.sls",
				])
					await p.control("setFile", f, readFileSync(join(REF, MORE, "states", f), "utf8"));
				await p.control("setNodegroups", capturedJson(more("nodegroup_matching.json")).master_nodegroups);
				for (const [id, g] of Object.entries(capturedGrains())) await p.control("setGrains", id, g, { replace: true });
			},
		));
	});
	afterAll(() => closeSim(sim, stream));

	it("answers the state runs like the captures (test=True conformant, drift, sls_id with its requisite, after the fix, a failing patch, a failing cmd)", async () => {
		const same = async (file: string, chunk: Record<string, unknown>) => {
			const r = await low({ client: "local", full_return: true, ...chunk });
			const want = capturedJson(more(file));
			expect([file, r.status, shapeOf(r.json)]).toEqual([file, 200, shapeOf(want)]);
			// The same states (the Jinja rendered: the names hold the minion's id), each with the same result.
			const states = (j: any) =>
				Object.values(j.return[0] as Record<string, any>).map(m => [
					m.retcode,
					Object.entries(m.ret).map(([tag, st]: [string, any]) => [tag, st.result, st.__run_num__]),
				]);
			expect([file, states(r.json)]).toEqual([file, states(want)]);
		};
		const motdDiff = capturedJson(more("state_sls_id_fix.json")).return[0]["web-01"].ret[
			"file_|-motd_|-/srv/fleet/managed/web-01/motd_|-managed"
		].changes;
		await same("state_apply_test_conformant.json", {
			tgt: ["web-02"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { test: true },
		});
		await sim.control("setDrift", "web-01", "common", "motd", motdDiff);
		await same("state_apply_test_drift.json", {
			tgt: ["web-01"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { test: true },
		});
		await same("state_sls_id_fix.json", {
			tgt: ["web-01"],
			tgt_type: "list",
			fun: "state.sls_id",
			arg: ["motd", "common"],
			kwarg: { queue: true },
		});
		await same("state_apply_test_after_fix.json", {
			tgt: ["web-01"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { test: true },
		});
		// patches.fail-second with test=True: its file.exists is false (the file is missing), retcode 2.
		await sim.control("failPatch", "patches.fail-second", ["web-01"], { stepId: "step-three" });
		await same("state_apply_test_patch.json", {
			tgt: ["web-01"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { mods: "patches.fail-second", test: true },
		});
		// rollfail: `test "<id>" != "web-02"` passes on db-01 and exits 1 on web-02.
		await sim.control("failPatch", "rollfail", ["web-02"], { retcode: 1, stderr: "", stdout: "" });
		await same("state_apply_ok_cmd.json", {
			tgt: ["db-01"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { mods: "rollfail" },
		});
		await same("state_apply_fail_cmd_retcode2.json", {
			tgt: ["web-02"],
			tgt_type: "list",
			fun: "state.apply",
			kwarg: { mods: "rollfail" },
		});
		await sim.control("clearPatchFailures");
	});

	it("answers local runs like the captures (cmd.run exit 3, full_return, a minion down, status.all_status), the key conflict's key.finger and key.list_all, cache.grains with custom grains", async () => {
		const same = async (file: string, chunk: Record<string, unknown>) => {
			const r = await low(chunk);
			expect([file, r.status, shapeOf(r.json)]).toEqual([file, 200, shapeOf(capturedJson(more(file)))]);
			return r.json;
		};
		expect(
			(
				await same("local_cmd_run_exit3.json", {
					client: "local",
					tgt: ["web-01"],
					tgt_type: "list",
					fun: "cmd.run",
					arg: ["exit 3"],
					full_return: true,
				})
			).return[0]["web-01"],
		).toMatchObject({ ret: "", retcode: 3 });
		await same("local_full_return.json", {
			client: "local",
			tgt: ["web-01", "db-01"],
			tgt_type: "list",
			fun: "test.ping",
			full_return: true,
		});
		await sim.control("setDown", "web-02");
		try {
			expect(
				await same("local_full_return_down.json", {
					client: "local",
					tgt: ["web-02"],
					tgt_type: "list",
					fun: "test.ping",
					full_return: true,
				}),
			).toEqual(capturedJson(more("local_full_return_down.json")));
		} finally {
			await sim.control("setUp", "web-02");
		}
		const status = await low({
			client: "local",
			tgt: ["web-01"],
			tgt_type: "list",
			fun: "status.all_status",
			full_return: true,
		});
		const wantStatus = capturedJson(more("status_all_status.json")).return[0]["web-01"];
		const gotStatus = status.json.return[0]["web-01"];
		expect(shapeOf({ ...gotStatus, ret: null })).toEqual(shapeOf({ ...wantStatus, ret: null }));
		expect(statusShape(gotStatus.ret)).toEqual(statusShape(wantStatus.ret));
		const grains = await same("cache_grains_custom.json", { client: "runner", fun: "cache.grains", tgt: "*" });
		expectGrainsLike(grains, capturedJson(more("cache_grains_custom.json")));
		expect(grains.return[0]["web-01"]).toMatchObject(customGrains("web-01"));
		// web-02 presents a new key: both key reads as captured.
		await sim.control("presentNewKey", "web-02");
		try {
			expect(
				(await same("key_list_all_conflict.json", { client: "wheel", fun: "key.list_all" })).return[0].data.return,
			).toEqual(capturedJson(more("key_list_all_conflict.json")).return[0].data.return);
			await same("key_finger_conflict.json", { client: "wheel", fun: "key.finger", match: "*" });
		} finally {
			await sim.control("restoreOldKey", "web-02");
			await sim.control("firePresence");
		}
	});

	it("selects the minions the real master selected for each compound expression and nodegroup (compound_differential.json, nodegroup_matching.json)", async () => {
		const rows = [
			...capturedJson(more("compound_differential.json")).results,
			...capturedJson(more("nodegroup_matching.json")).results,
		] as { expr: string; master_preview: string[]; salt_msg: string }[];
		const differ: unknown[] = [];
		let returns = 0;
		const from = stream.events.length;
		for (const row of rows) {
			const r = await low({ client: "local_async", tgt: row.expr, tgt_type: "compound", fun: "test.ping" });
			const got = r.status === 200 && r.json.return[0].minions ? [...r.json.return[0].minions].sort() : [];
			returns += got.length;
			if (JSON.stringify(got) !== JSON.stringify([...row.master_preview].sort()))
				differ.push({ expr: row.expr, sim: got, status: r.status, master: row.master_preview });
		}
		expect(differ).toEqual([]);
		// Every return in before the next scenario records the stream.
		await until(
			() =>
				stream.events.slice(from).filter(e => /^salt\/job\/\d{20}\/ret\//.test(e.tag)).length >= returns || undefined,
			10_000,
			"the returns",
		);
	});

	it("replays the CLI jobs (events_cli_jobs.txt: -C, -L, a glob, -G, -N published as compound, --async) and a --static run published twice (events_cli_static_batch.txt)", async () => {
		const got = await recorded(sim, stream, async () => {
			await cli("web-*", "test.ping", [], "compound");
			await cli(["web-01", "db-01"], "test.echo", ["hello"], "list");
			await cli("web-*", "cmd.run", ["exit 2"], "glob");
			await cli("env:prod", "test.ping", [], "grain");
			await cli("web", "grains.get", ["env"], "nodegroup");
			await cli("db-01", "test.sleep", [3], "glob");
		});
		const want = captured(more("events_cli_jobs.txt"));
		expect(got.map(norm)).toEqual(want.map(norm));
		const news = (evs: Ev[]) =>
			evs.filter(e => /\/new$/.test(e.tag)).map(e => [e.data.tgt_type, e.data.tgt, e.data.fun, e.data.arg]);
		expect(news(got)).toEqual(news(want));
		expect(
			got
				.filter(e => /\/ret\//.test(e.tag) && e.data.fun === "grains.get")
				.map(e => [e.data.id, e.data.return])
				.sort(),
		).toEqual(
			want
				.filter(e => /\/ret\//.test(e.tag) && e.data.fun === "grains.get")
				.map(e => [e.data.id, e.data.return])
				.sort(),
		);
		const batch = await recorded(sim, stream, async () => {
			const run = await sim.control<{ jid: string }>("cliStaticJob", "web-01", "test.ping", [], {
				tgtType: "compound",
			});
			await until(
				() => stream.count(e => e.tag === `salt/job/${run.jid}/ret/web-01`) === 1 || undefined,
				10_000,
				"the run's return",
			);
		});
		const wantBatch = captured(more("events_cli_static_batch.txt"));
		expect(batch.map(norm)).toEqual(wantBatch.map(norm));
		expect(news(batch)).toEqual(news(wantBatch));
	});

	it("replays salt-call event.send from web-01 and db-01 (events_salt_call_event_send.txt: the return without a /new)", async () => {
		const got = await recorded(sim, stream, async () => {
			await sim.control("fireMinionEvent", "web-01", "ctl/vnc/connect", { hostname: "web-01", status: "connected" });
			await sim.control("fireMinionEvent", "db-01", "ctl/vnc/connect", { hostname: "web-01", status: "disconnected" });
			await stream.wait(e => e.tag.endsWith("/ret/db-01") && e.data.fun === "event.send", "db-01's salt-call return");
		});
		const want = apiFree(captured(more("events_salt_call_event_send.txt")));
		expect(got.map(norm)).toEqual(want.map(norm));
		expect(got.filter(e => /\/new$/.test(e.tag))).toEqual([]);
	});

	it("replays a minion stopped and started, and one restarted with a new key then its old key back (events_minion_stop_start.txt, events_key_conflict.txt)", async () => {
		const stopStart = await recorded(sim, stream, async () => {
			await sim.control("setDown", "db-01");
			await sim.control("firePresence");
			await sim.control("setUp", "db-01");
		});
		expect(stopStart.map(norm)).toEqual(captured(more("events_minion_stop_start.txt")).map(norm));
		await sim.control("firePresence");
		const conflict = await recorded(sim, stream, async () => {
			await sim.control("presentNewKey", "web-02");
			await sim.control("firePresence");
			await sim.control("firePresence");
			await sim.control("restoreOldKey", "web-02");
			await sim.control("firePresence");
		});
		expect(conflict.map(norm)).toEqual(captured(more("events_key_conflict.txt")).map(norm));
	});

	it("replays a key deleted under a running minion, the minion restarted (pending), its key accepted (events_key_delete_reaccept.txt)", async () => {
		const got = await recorded(sim, stream, async () => {
			await sim.control("firePresence");
			await low({ client: "wheel", fun: "key.delete", match: "db-01" });
			await sim.control("firePresence");
			await sim.control("firePresence");
			await sim.control("setDown", "db-01");
			await sim.control("setUp", "db-01");
			await sim.control("firePresence");
			await low({ client: "wheel", fun: "key.accept", match: "db-01" });
			await sim.control("firePresence");
		});
		const want = captured(more("events_key_delete_reaccept.txt"));
		// The pending minion retries its auth every acceptance_wait_time (10 s): the capture has a second `pend`,
		// which the simulator does not repeat; and db-01's start came 0.4 s after the loop that found it, where
		// the simulator's comes at once (before that loop).
		const pends = want.filter(e => e.tag === "salt/auth" && e.data.act === "pend");
		expect(pends).toHaveLength(2);
		const start = want.find(e => /^salt\/minion\/.*\/start$/.test(e.tag))!;
		const wantOnce = want.filter(e => e !== pends[1] && e !== start);
		const acceptAt = wantOnce.findIndex(e => e.tag === "salt/auth" && e.data.act === "accept");
		wantOnce.splice(acceptAt + 1, 0, start);
		expect(apiFree(got).map(norm)).toEqual(wantOnce.map(norm));
		expect(
			apiFree(got)
				.filter(e => e.tag === "salt/presence/change")
				.map(e => [e.data.new, e.data.lost]),
		).toEqual([
			[[], ["db-01"]],
			[["db-01"], []],
		]);
	});
});

describeWithCaptures(
	"salt-api simulator vs the 2026-11-29 captures: master restarts after 20 s and after 3.5 min",
	() => {
		const LOOP = 4000;
		const DELAY = 100;
		const LONG = 600;
		let sim: SimProcess;
		let token = "";
		let stream: EventStream;
		beforeAll(async () => {
			({ sim, token, stream } = await openSim({
				SIM_LOOP_MS: String(LOOP),
				SIM_RESTART_PRESENT_DELAY_MS: String(DELAY),
				SIM_LONG_OUTAGE_MS: String(LONG),
				SIM_MASTER_DOWN_MS: "300",
				SIM_TIMEOUT: "1",
				SIM_GATHER_JOB_TIMEOUT: "1",
				SIM_LATENCY_MS: "2,15",
			}));
		});
		afterAll(() => closeSim(sim, stream));
		const local = (tgt: string[]) =>
			call(sim.url, "/", { token, body: { client: "local", tgt, tgt_type: "list", fun: "test.ping" } });

		it("a short outage: present [] first, the full list one loop later (events_master_restart_20s.txt)", async () => {
			const mark = stream.events.length;
			await sim.control("restartMaster", { downMs: 100 });
			await until(() => stream.events.slice(mark).filter(isPresence).length >= 3 || undefined, 3 * LOOP, "two loops");
			expect(stream.events.slice(mark).filter(isPresence).slice(0, 3).map(norm)).toEqual(
				captured(more("events_master_restart_20s.txt")).slice(0, 3).map(norm),
			);
			expect(stream.events.slice(mark).find(isPresence)!.data.present).toEqual([]);
		});

		it("a long outage: the first loop already lists the minions back, one late minion misses a run (find_job, false) and is back one loop later (events_master_restart_3min.txt)", async () => {
			const want = captured(more("events_master_restart_3min.txt"));
			const mark = stream.events.length;
			await sim.control("restartMaster", { downMs: LONG + 100, late: ["web-01"] });
			await stream.wait(
				(e: Ev) => stream.events.indexOf(e) >= mark && e.tag === "salt/presence/present",
				"the first loop",
			);
			// A local run to the late minion: find_job, then false with no jid.
			expect((await local(["web-01"])).json).toEqual({ return: [{ "web-01": false }] });
			await until(
				() => stream.events.slice(mark).filter(isPresence).length >= 4 || undefined,
				2 * LOOP,
				"the next loop",
			);
			const r = await local(["web-01"]);
			expect(r.json).toEqual({ return: [{ "web-01": true }] });
			const got = stream.events.slice(mark);
			const upToRet = (evs: Ev[]) => evs.slice(0, evs.findIndex(e => /\/ret\/web-01$/.test(e.tag)) + 1);
			expect(upToRet(got).map(norm)).toEqual(upToRet(want).map(norm));
			expect(
				got
					.filter(isPresence)
					.slice(0, 4)
					.map(e => e.data.new ?? e.data.present),
			).toEqual([["db-01", "web-02"], ["db-01", "web-02"], ["web-01"], ["db-01", "web-01", "web-02"]]);
		});
	},
);
