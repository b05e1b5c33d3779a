/**
 * lib/runtime/crash-guard.ts in a process of its own (as the services run it): an exception thrown in a timer
 * while a request is handled, one thrown by the request handler itself, and a promise rejection nobody
 * handles, each answer that request 500 in
 * Eve's shape; the process stays up and serves the next request. Without the guard, Node exits.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { DIST } from "../support/harness";

const SERVER = (guarded: boolean) => `
const http = require("node:http");
const guard = require(${JSON.stringify(path.join(DIST, "lib/runtime/crash-guard.js"))});
${guarded ? 'guard.installCrashGuard({ error: (...a) => process.stderr.write("logged: " + a.map(String).join(" ") + "\\n") });' : ""}
const server = http.createServer((req, res) => {
	if (req.url === "/throw") setTimeout(() => { throw new Error("escaped from a timer"); }, 5);
	else if (req.url === "/throw-now") throw new Error("thrown by the request handler itself");
	else if (req.url === "/reject") Promise.reject(new Error("nobody awaits this"));
	else res.end("alive");
});
${guarded ? "guard.scopeRequests(server);" : ""}
server.listen(0, "127.0.0.1", () => process.stdout.write("PORT " + server.address().port + "\\n"));
`;

function start(guarded: boolean): Promise<{ child: ChildProcess; port: number; stderr: string[] }> {
	const child = spawn(process.execPath, ["-e", SERVER(guarded)], { stdio: ["ignore", "pipe", "pipe"] });
	const stderr: string[] = [];
	child.stderr!.on("data", d => stderr.push(String(d)));
	return new Promise((resolve, reject) => {
		child.stdout!.on("data", d => {
			const m = /PORT (\d+)/.exec(String(d));
			if (m) resolve({ child, port: Number(m[1]), stderr });
		});
		child.once("exit", code => reject(new Error(`exited ${code}: ${stderr.join("")}`)));
	});
}

const exited = (child: ChildProcess) =>
	new Promise<number | null>(resolve =>
		child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", resolve),
	);

describe("the crash guard", () => {
	it("answers 500 in Eve's shape for the request an error escaped from, and the process goes on", async () => {
		const { child, port, stderr } = await start(true);
		try {
			for (const path of ["/throw", "/reject", "/throw-now"]) {
				const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5000) });
				expect(res.status).toBe(500);
				expect(await res.json()).toEqual({ _status: "ERR", _error: { code: 500, message: expect.any(String) } });
			}
			expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe("alive");
			expect(child.exitCode).toBeNull();
			expect(stderr.join("")).toMatch(/logged: .*escaped from a timer/);
			expect(stderr.join("")).toMatch(/logged: .*nobody awaits this/);
			expect(stderr.join("")).toMatch(/logged: .*thrown by the request handler itself/);
		} finally {
			child.kill("SIGKILL");
		}
	});

	it("is what keeps it alive: without it the same request kills the process", async () => {
		const { child, port } = await start(false);
		await fetch(`http://127.0.0.1:${port}/throw`).catch(() => undefined);
		expect(await exited(child)).not.toBe(0);
	});
});
