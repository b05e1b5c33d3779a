/**
 * The first hour (issue 18): what the production command (moleculer-runner on the build) prints when it
 * starts, and the starts it refuses. A first start at the default LOGLEVEL is a short screen with no
 * warning and no route listing, ending in one block with the address, the one-time admin token and the
 * request to try; a CTL_ADMIN_TOKEN no request could carry and a Node.js older than 22 stop the start
 * with one line and a non-zero exit. Needs the build (`npm run build`).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import http from "node:http";
import { DIST, ROOT, boundPorts, freePort, stopProc, tempDir, type Proc } from "../support/harness";
import { itIf } from "../support/skip";

const RUNNER = path.join(ROOT, "node_modules/moleculer/bin/moleculer-runner.js");

/** The production command with `env` on top of this environment, minus the settings the suites set for their own processes. */
function start(env: Record<string, string>, services: string[] = [], node: string = process.execPath): Proc {
	const base: NodeJS.ProcessEnv = { ...process.env };
	for (const name of [
		"LOGLEVEL",
		"LOG_FORMAT",
		"CTL_ADMIN_TOKEN",
		"TRANSPORTER",
		"MONGO_URI",
		"SERVICES",
		"NODE_OPTIONS",
	])
		delete base[name];
	const child: ChildProcess = spawn(node, [RUNNER, "--config", path.join(DIST, "moleculer.config.js")], {
		cwd: ROOT,
		env: {
			...base,
			SERVICEDIR: path.join(DIST, "services"),
			PORT: "0",
			HEALTH_PORT: "0",
			HOST: "127.0.0.1",
			SERVICES: services.join(","),
			...env,
		},
		stdio: ["ignore", "pipe", "pipe"],
	});
	const log: string[] = [];
	child.stdout?.on("data", d => log.push(String(d)));
	child.stderr?.on("data", d => log.push(String(d)));
	return { child, log, services };
}

async function until<T>(
	what: string,
	proc: Proc,
	probe: () => T | undefined | Promise<T | undefined>,
	timeoutMs = 30_000,
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const value = await probe();
		if (value !== undefined) return value;
		if (proc.child.exitCode !== null)
			throw new Error(`exited (${proc.child.exitCode}) before ${what}:\n${proc.log.join("")}`);
		await new Promise(r => setTimeout(r, 50));
	}
	throw new Error(`no ${what} in time:\n${proc.log.join("")}`);
}

function exited(proc: Proc): Promise<number | null> {
	return new Promise(resolve =>
		proc.child.exitCode !== null ? resolve(proc.child.exitCode) : proc.child.once("exit", code => resolve(code)),
	);
}

/** The output once the process ended and its pipes closed. */
function closed(proc: Proc): Promise<{ code: number | null; output: string }> {
	return new Promise(resolve => proc.child.once("close", code => resolve({ code, output: proc.log.join("") })));
}

const BLOCK =
	/\nfleet-ctl is running: (http:\/\/127\.0\.0\.1:(\d+))\/ \(API: \1\/api\)\nadmin token \(shown once, keep it safe\): (fct_[A-Za-z0-9_-]{43})\nnext: curl -s \1\/api\/ -H "Authorization: Bearer \3"\n/;

beforeAll(() => {
	if (!fs.existsSync(path.join(DIST, "moleculer.config.js"))) throw new Error("no build: run `npm run build` first");
});

describe("a first start at the default LOGLEVEL", () => {
	it("is a short screen: no warning, no route listing, one block with the address, the admin token and the next step", async () => {
		const dataDir = tempDir("startup");
		let proc = start({ DATA_DIR: dataDir });
		try {
			const [, url, , token] = await until(
				"the start-up block",
				proc,
				() => BLOCK.exec(proc.log.join("")) ?? undefined,
			);
			const answered = await until("the API", proc, async () => {
				const res = await fetch(`${url}/api/`, { headers: { authorization: `Bearer ${token}` } }).catch(() => null);
				return res?.status === 200 ? true : undefined;
			});
			expect(answered).toBe(true);
			await until("the end of the start", proc, () =>
				/started successfully/.test(proc.log.join("")) ? true : undefined,
			);
			const screen = proc.log.join("");
			const lines = screen.split("\n").filter(l => l.trim() !== "");
			expect(lines.filter(l => /warn/i.test(l))).toEqual([]);
			expect(screen).not.toMatch(/ => |Register route|middlewares\.|not registered/);
			expect(lines.length).toBeLessThan(30);
			expect(screen.split(token).length).toBe(3); // the token line and the curl line, nothing else

			// A restart says where it runs, and shows no token.
			await stopProc(proc);
			proc = start({ DATA_DIR: dataDir });
			await until(
				"the address",
				proc,
				() => /\nfleet-ctl is running: http:\/\/127\.0\.0\.1:\d+\/ /.exec(proc.log.join("")) ?? undefined,
			);
			await until("the end of the start", proc, () =>
				/started successfully/.test(proc.log.join("")) ? true : undefined,
			);
			expect(proc.log.join("")).not.toMatch(/admin token|next:|warn/i);
		} finally {
			await stopProc(proc);
		}
	});
});

describe("a start, seen by clients that do not wait for it", () => {
	it("answers no request 503, even one sent the moment the port opens, and logs no warning", async () => {
		const [port, health] = [await freePort(), await freePort()];
		const token = `fct_startup-early-${process.pid}-0123456789`;
		const proc = start({
			DATA_DIR: tempDir("startup-early"),
			PORT: String(port),
			HEALTH_PORT: String(health),
			CTL_ADMIN_TOKEN: token,
		});
		const headers = { authorization: `Bearer ${token}` };
		const ask = (url: string) =>
			fetch(url, { headers }).then(
				r => r.status,
				() => 0,
			);
		const answers: string[] = [];
		try {
			// As fast as one client can, from the spawn to the end of the start: the API and the readiness probe.
			while (!/started successfully/.test(proc.log.join(""))) {
				if (proc.child.exitCode !== null) throw new Error(`exited (${proc.child.exitCode}):\n${proc.log.join("")}`);
				const paths = ["/api/", "/api/hosts", "/api/groups", "/api/tasks", "/api/hosts_statistic"];
				const ready = await ask(`http://127.0.0.1:${health}/ready`);
				const api = await Promise.all(paths.map(p => ask(`http://127.0.0.1:${port}${p}`)));
				api.forEach((status, i) => status && answers.push(`${paths[i]} ${status}`));
				// Ready means every request is served: not one sent after it said so may be refused.
				if (ready === 200) expect(api).toEqual(paths.map(() => 200));
			}
			expect(answers.filter(a => !a.endsWith(" 200"))).toEqual([]);
			expect(await ask(`http://127.0.0.1:${port}/api/hosts`)).toBe(200);
			expect(await ask(`http://127.0.0.1:${health}/ready`)).toBe(200);
			await stopProc(proc);
			expect(
				proc.log
					.join("")
					.split("\n")
					.filter(l => /WARN|ERROR/.test(l)),
			).toEqual([]);
		} finally {
			await stopProc(proc);
		}
	});

	it("logs one line without a stack for a 503 of a missing Salt configuration, and nothing for a closed live stream", async () => {
		// One stream per principal: the second opens only once the gateway has seen the first one closed.
		const proc = start({ DATA_DIR: tempDir("startup-quiet"), CM_API_URL: "", STREAMS_PER_PRINCIPAL: "1" });
		try {
			const [, url, , token] = await until(
				"the start-up block",
				proc,
				() => BLOCK.exec(proc.log.join("")) ?? undefined,
			);
			await until("the end of the start", proc, () =>
				/started successfully/.test(proc.log.join("")) ? true : undefined,
			);
			const mark = proc.log.join("").length;
			const openStream = () =>
				new Promise<{ status: number; close(): void }>((resolve, reject) => {
					const req = http.get(`${url}/api/alerts/stream`, { headers: { authorization: `Bearer ${token}` } }, res => {
						if (res.statusCode !== 200) {
							res.resume();
							return resolve({ status: res.statusCode ?? 0, close: () => req.destroy() });
						}
						// Open once its first event came; closed by the client, as a browser tab closing does.
						res.once("data", () => resolve({ status: 200, close: () => req.destroy() }));
					});
					req.on("error", reject);
				});
			const first = await openStream();
			expect(first.status).toBe(200);
			first.close();
			const second = await until("a second stream (the first one's share given back)", proc, async () => {
				const stream = await openStream();
				if (stream.status === 200) return stream;
				expect(stream.status).toBe(429);
				return undefined;
			});
			const run = await fetch(`${url}/api/hosts/web-01`, {
				method: "POST",
				headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
				body: JSON.stringify({ fun: "test.ping" }),
			});
			expect(run.status).toBe(503);
			second.close();
			await stopProc(proc);
			const logged = proc.log
				.join("")
				.slice(mark)
				.split("\n")
				.filter(l => l.trim() !== "" && !/INFO {2}(API: API Gateway stopped|BROKER: ServiceBroker is stopped)/.test(l));
			expect(logged).toEqual([
				expect.stringMatching(
					/^\[[\d:.TZ]+\] WARN {2}API: 503 POST \/api\/hosts\/web-01: no configuration-management master is configured \(CM_API_URL\)/,
				),
			]);
		} finally {
			await stopProc(proc);
		}
	});
});

describe("starts that are refused", () => {
	it("a CTL_ADMIN_TOKEN shorter than a token may be: exit 1 with the reason, in one line", async () => {
		const proc = start({ DATA_DIR: tempDir("startup-short"), CTL_ADMIN_TOKEN: "fct_short" });
		const { code, output } = await closed(proc);
		expect(code).toBe(1);
		expect(output).toBe(
			"fleet-ctl cannot start: CTL_ADMIN_TOKEN is too short (9 characters): a token needs at least 16, or every request with it is refused (401)\n",
		);
	});

	it("a CTL_ADMIN_TOKEN with characters no Authorization header carries: exit 1 with the reason", async () => {
		const proc = start({ DATA_DIR: tempDir("startup-space"), CTL_ADMIN_TOKEN: "fct_a token with spaces in it" });
		const { code, output } = await closed(proc);
		expect(code).toBe(1);
		expect(output).toMatch(/^fleet-ctl cannot start: CTL_ADMIN_TOKEN must be at most 512 characters of .*\(401\)\n$/);
	});

	const older = ["/usr/bin/node", "/usr/local/bin/node"].find(bin => {
		try {
			return (
				fs.existsSync(bin) && Number(/^v(\d+)/.exec(execFileSync(bin, ["--version"], { encoding: "utf8" }))?.[1]) < 22
			);
		} catch {
			return false;
		}
	});
	itIf(older !== undefined, "no Node.js older than 22 on this machine (looked at /usr/bin/node, /usr/local/bin/node)")(
		"Node.js older than 22: exit 1 with one line, before Moleculer prints anything",
		async () => {
			const proc = start({ DATA_DIR: tempDir("startup-node") }, [], older);
			const { code, output } = await closed(proc);
			expect(code).toBe(1);
			expect(output).toMatch(/^fleet-ctl needs Node\.js 22 or newer \(this is v\d+\.\d+\.\d+\): [^\n]+\n$/);
		},
	);
});

describe("the membership computation of the hosts service", () => {
	it("does not keep a process running hosts alone from starting, nor from stopping", async () => {
		const proc = start({ DATA_DIR: tempDir("startup-hosts"), LOGLEVEL: "info" }, ["hosts"]);
		try {
			await until("the start", proc, () =>
				/ServiceBroker with \d+ service\(s\) started successfully/.test(proc.log.join("")) ? true : undefined,
			);
			// The membership loop has had its first turn (a timer due at once, set as the service started: timers run before
			// the requests that came in meanwhile): its health listener answered a request sent after the start.
			const { health } = await boundPorts(proc, { healthOnly: true });
			expect((await fetch(`http://127.0.0.1:${health}/live`)).status).toBe(200);
			const began = Date.now();
			const output = closed(proc);
			proc.child.kill("SIGTERM");
			expect(await exited(proc)).toBe(0);
			expect(Date.now() - began).toBeLessThan(5000);
			// All it printed, its output closed: had the loop asked for the absent groups service instead of waiting, it said so.
			expect((await output).output).not.toMatch(/WARN|groups\.rules/);
		} finally {
			await stopProc(proc);
		}
	});
});
