/**
 * The container image, without a Docker daemon: the Dockerfile's runtime stage is read, its CMD is run
 * exactly as written on the build output (the image's /app is this checkout's dist/ and node_modules),
 * and what that stage copies is checked to need production dependencies only.
 */
import fs from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { ADMIN_TOKEN, ROOT, listeningPorts, tempDir, uniqueMongoUri } from "./support/harness";
import { itIf } from "./support/skip";

interface Stage {
	from: string;
	lines: Array<{ instr: string; args: string }>;
}

/** The Dockerfile as stages of instructions (continuation lines joined, comments dropped). */
function readDockerfile(): Stage[] {
	const text = fs.readFileSync(path.join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
	const stages: Stage[] = [];
	for (const raw of text.split("\n")) {
		const line = raw.trim();
		if (!line || line.startsWith("#")) continue;
		const [, instr, args] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
		if (!instr) continue;
		if (instr.toUpperCase() === "FROM") stages.push({ from: args, lines: [] });
		else stages[stages.length - 1].lines.push({ instr: instr.toUpperCase(), args });
	}
	return stages;
}

const stages = readDockerfile();
const runtime = stages[stages.length - 1];
const last = (instr: string) => [...runtime.lines].reverse().find(l => l.instr === instr)?.args;
const execForm = (instr: string): string[] => {
	const args = last(instr);
	if (!args) throw new Error(`the runtime stage has no ${instr}`);
	return JSON.parse(args);
};
const runtimeEnv = (): Record<string, string> => {
	const env: Record<string, string> = {};
	for (const l of runtime.lines.filter(l => l.instr === "ENV"))
		for (const [, k, v] of l.args.matchAll(/(\w+)=(\S+)/g)) env[k] = v;
	return env;
};

describe("the Dockerfile", () => {
	it("builds in one stage and runs Node 22 as a non-root user under an init, with node itself as the command", () => {
		expect(stages.length).toBeGreaterThanOrEqual(2);
		for (const s of stages) expect(s.from).toMatch(/^node:22[-.\w]*/);
		expect(last("USER")).toBeDefined();
		expect(last("USER")).not.toMatch(/^(root|0)(:|$)/);
		const entrypoint = execForm("ENTRYPOINT");
		expect(entrypoint[0]).toMatch(/tini$/);
		expect(runtime.lines.some(l => l.instr === "RUN" && /install[^&]*\btini\b/.test(l.args))).toBe(true);
		// node, not npm: npm would not pass SIGTERM on
		expect(execForm("CMD")[0]).toBe("node");
	});

	it("copies only compiled JavaScript into the runtime stage, which needs production dependencies only", () => {
		const copies = runtime.lines
			.filter(l => l.instr === "COPY")
			.map(l => l.args.split(/\s+/).filter(a => !a.startsWith("--")));
		const sources = copies.map(c => c[0].replace(/^\/app\//, ""));
		expect(sources).toEqual(expect.arrayContaining(["package.json", "node_modules", "dist"]));
		// what the build stage removes from dist/ before the runtime stage copies it
		const removed = stages[0].lines
			.filter(l => l.instr === "RUN")
			.flatMap(l => [...l.args.matchAll(/rm -rf ((?:dist\/\S+\s*)+)/g)].flatMap(m => m[1].trim().split(/\s+/)));
		expect(removed).toEqual(expect.arrayContaining(["dist/test", "dist/bench"]));
		expect(
			fs.existsSync(path.join(ROOT, "dist/moleculer.config.js")) && fs.existsSync(path.join(ROOT, "dist/services")),
		).toBe(true);
		const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
		const allowed = new Set([...Object.keys(pkg.dependencies), ...builtinModules]);
		const files: string[] = [];
		const shipped = (p: string) => !removed.some(r => p === r || p.startsWith(`${r}/`));
		const walk = (p: string): void => {
			if (!shipped(path.relative(ROOT, p))) return;
			if (fs.statSync(p).isDirectory()) for (const f of fs.readdirSync(p)) walk(path.join(p, f));
			else if (p.endsWith(".js")) files.push(p);
		};
		for (const src of sources.filter(s => s.startsWith("dist"))) walk(path.join(ROOT, src));
		expect(files.length).toBeGreaterThan(20);
		const outside: string[] = [];
		for (const file of files) {
			for (const [, spec] of fs.readFileSync(file, "utf8").matchAll(/require\("([^"]+)"\)/g)) {
				if (spec.startsWith(".")) {
					// a relative import must stay inside what the stage copies
					const target = path.relative(ROOT, path.resolve(path.dirname(file), spec));
					const inside =
						sources.some(s => target === s.replace(/\.js$/, "") || target.startsWith(`${s}/`)) && shipped(target);
					if (!inside) outside.push(`${path.relative(ROOT, file)} -> ${spec}`);
					continue;
				}
				const name = spec.startsWith("node:")
					? spec.slice(5)
					: spec.startsWith("@")
						? spec.split("/").slice(0, 2).join("/")
						: spec.split("/")[0];
				if (!allowed.has(name)) outside.push(`${path.relative(ROOT, file)} -> ${spec}`);
			}
		}
		expect(outside).toEqual([]);
	});

	// On NeDB files, and on the Mongo path when the run has a MongoDB (CI: the emulator, not MongoDB), whose
	// driver warns about deprecated use: every line must still be one JSON object.
	// As the image runs it, where this machine allows: as the Dockerfile's USER, with the checkout (the image's
	// /app) mounted read-only in a mount namespace of its own, only DATA_DIR (its volume) and /tmp writable.
	const imageUser = String(last("USER")).split(":");
	const asImageUser = (...cmd: string[]) =>
		spawnSync(
			"setpriv",
			[`--reuid=${imageUser[0]}`, `--regid=${imageUser[1] ?? imageUser[0]}`, "--clear-groups", ...cmd],
			{ cwd: "/" },
		).status === 0;
	// Also: that user can reach this checkout and this node (a clone under a private home could not).
	const confinable =
		process.getuid?.() === 0 &&
		fs.existsSync("/usr/bin/setpriv") &&
		spawnSync("unshare", ["-m", "--propagation", "private", "true"]).status === 0 &&
		asImageUser(
			process.execPath,
			"-e",
			`require("fs").accessSync(${JSON.stringify(path.join(ROOT, "dist/moleculer.config.js"))})`,
		);
	// Where a case cannot run here it is reported skipped, with the reason.
	const mongoUri = process.env.MONGO_URI;
	const storages: Array<[string, () => Record<string, string>, boolean, boolean, string]> = [
		["NeDB", () => ({ MONGO_URI: "" }), false, true, ""],
		[
			"the Mongo path",
			() => ({ MONGO_URI: uniqueMongoUri(mongoUri as string), CTL_SECRET_KEY: "image-secret" }),
			false,
			!!mongoUri,
			"MONGO_URI is not set",
		],
		[
			"NeDB, as the image's user on a read-only /app",
			() => ({ MONGO_URI: "" }),
			true,
			confinable,
			"not root, no mount namespaces or setpriv, or the image's user cannot reach this checkout",
		],
	];

	for (const [name, storage, confined, canCheck, reason] of storages)
		itIf(canCheck, reason)(
			`runs its CMD on the build output (${name}): the API and the health listener answer, only JSON lines, SIGTERM exits 0`,
			async () => {
				const [command, ...args] = execForm("CMD");
				expect(command).toBe("node");
				const dataDir = tempDir("image");
				// PORT and HEALTH_PORT 0: the process binds ports of its own choosing, read back below.
				const env: NodeJS.ProcessEnv = {
					...process.env,
					...runtimeEnv(),
					DATA_DIR: dataDir,
					PORT: "0",
					HEALTH_PORT: "0",
					HOST: "127.0.0.1",
					CTL_ADMIN_TOKEN: ADMIN_TOKEN,
					TRANSPORTER: "",
					SERVICES: "",
					...storage(),
				};
				expect(env.NODE_ENV).toBe("production");
				// WORKDIR /app holds what the build stage made: here, this checkout after `npm run build`
				// biome-ignore lint/suspicious/noImplicitAnyLet: the two spawns below differ in stdio types; TypeScript infers their union
				let child;
				if (confined) {
					const [uid, gid = uid] = imageUser;
					fs.chownSync(dataDir, Number(uid), Number(gid));
					// unshare and sh exec into node: the child is node itself, and gets the SIGTERM.
					const script = `mount --bind "$ROOT_DIR" "$ROOT_DIR" && mount -o remount,bind,ro "$ROOT_DIR" && exec setpriv --reuid=${uid} --regid=${gid} --clear-groups "$0" "$@"`;
					child = spawn("unshare", ["-m", "--propagation", "private", "sh", "-c", script, process.execPath, ...args], {
						cwd: ROOT,
						env: { ...env, ROOT_DIR: ROOT, HOME: "/tmp" },
						stdio: ["ignore", "pipe", "pipe"],
					});
				} else child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
				const log: string[] = [];
				child.stdout.on("data", d => log.push(String(d)));
				child.stderr.on("data", d => log.push(String(d)));
				try {
					// The ports, from its own log lines (LOG_FORMAT=json, at info): the health listener's and the API gateway's.
					const said = (what: RegExp) => Number(what.exec(log.join(""))?.[1] ?? 0);
					let [port, healthPort] = [0, 0];
					for (let i = 0; i < 300 && !(port && healthPort) && child.exitCode === null; i++) {
						[port, healthPort] = [
							said(/API Gateway listening on http:\/\/127\.0\.0\.1:(\d+)/),
							said(/Health and metrics on http:\/\/[^:]+:(\d+)/),
						];
						if (!(port && healthPort)) await new Promise(r => setTimeout(r, 100));
					}
					expect({ port: port > 0, healthPort: healthPort > 0, log: port && healthPort ? "" : log.join("") }).toEqual({
						port: true,
						healthPort: true,
						log: "",
					});
					// The same ports as the kernel has them listening for the process (node itself: exec all the way down).
					expect(listeningPorts(child.pid!)).toEqual([port, healthPort].sort((a, b) => a - b));
					let ready = 0;
					for (let i = 0; i < 300 && ready !== 200 && child.exitCode === null; i++) {
						ready = await fetch(`http://127.0.0.1:${healthPort}/ready`).then(
							r => r.status,
							() => 0,
						);
						if (ready !== 200) await new Promise(r => setTimeout(r, 100));
					}
					expect({ ready, log: ready === 200 ? "" : log.join("") }).toEqual({ ready: 200, log: "" });
					const res = await fetch(`http://127.0.0.1:${port}/api/settings/0`, {
						headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
					});
					expect(res.status).toBe(200);
					// A write reaches DATA_DIR (the volume), the only place the image's user may write.
					const made = await fetch(`http://127.0.0.1:${port}/api/groups`, {
						method: "POST",
						headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
						body: JSON.stringify({ name: `image-${confined ? "ro" : "rw"}` }),
					});
					expect(made.status).toBe(201);
					// LOG_FORMAT=json from the image: every line is one JSON object
					const lines = log.join("").split("\n").filter(Boolean);
					expect(lines.length).toBeGreaterThan(0);
					for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
				} finally {
					const exited = new Promise<number | null>(resolve => child.once("exit", code => resolve(code)));
					child.kill("SIGTERM");
					expect(await exited).toBe(0);
				}
			},
		);

	it("refuses to start without MONGO_URI where the manifests require shared storage", async () => {
		const [, ...args] = execForm("CMD");
		const env: NodeJS.ProcessEnv = {
			...process.env,
			...runtimeEnv(),
			MONGO_URI: "",
			REQUIRE_MONGO_URI: "true",
			DATA_DIR: tempDir("image-nomongo"),
			PORT: "0",
			HEALTH_PORT: "0",
			TRANSPORTER: "",
			SERVICES: "",
		};
		const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		child.stdout.on("data", d => (out += String(d)));
		child.stderr.on("data", d => (out += String(d)));
		const code = await new Promise<number | null>(resolve => child.once("exit", c => resolve(c)));
		expect(code).not.toBe(0);
		expect(out).toMatch(/MONGO_URI is empty but REQUIRE_MONGO_URI is set/);
	}, 30_000);
});
