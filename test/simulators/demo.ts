/**
 * `npm run demo` (issue 18): fleet-ctl started as `npm start` starts it, wired to the salt-api and Pritunl
 * simulators, with a little data seeded through the HTTP API, so that every README and docs example and every
 * dashboard page shows real data on a fresh machine. Owns the demo's fleet (five hosts up, one down, one key
 * pending), its data directory and admin token (`<data dir>/demo-admin.token`, made once), the seed (the VPN
 * manager `demo` on the Pritunl simulator, the VPN organization `fleet` whose users are the hosts, the group
 * `databases`, the task `ping databases`; each created only when missing, so a second run on the same data dir
 * changes nothing) and the block printed once all is ready. test/readme-examples.spec.ts runs the docs against it.
 *
 * Environment: PORT (3000) and HEALTH_PORT as for `npm start`; DEMO_DATA_DIR or DATA_DIR (./data-demo);
 * DEMO_PRITUNL_PORT (9700: the VPN manager kept in the data dir names it), DEMO_SALT_PORT (0: any free port).
 * fleet-ctl gets the salt-api simulator's CM_API_*, the data dir, the token as CTL_ADMIN_TOKEN, loopback added to
 * OUTBOUND_ALLOW and STATS_SNAPSHOT_INTERVAL 10 unless set; the rest of the environment as it is. Ctrl-C (SIGINT)
 * or SIGTERM stops fleet-ctl, then the simulators, exit 0; fleet-ctl ending by itself stops them, with its code.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { isHealthListener, listeningPorts } from "../support/net";
import { PritunlSimulator } from "./pritunl";
import { SaltApiSimulator } from "./salt-api";

const ROOT = path.resolve(__dirname, "../../.."); // dist/test/simulators → the checkout
const HOSTS = ["web-01", "web-02", "web-03", "db-01", "db-02"]; // up; the README's examples use web-01
const DOWN = "app-01";
const PENDING = "new-01";

const env = process.env;
const dataDir = path.resolve(env.DEMO_DATA_DIR || env.DATA_DIR || "data-demo");
const say = (line: string) => process.stdout.write(`[demo] ${line}\n`);

// What runs, for stop(): fleet-ctl first (it talks to the simulators), then the simulators.
let child: ChildProcess | undefined;
const sims: { stop(): Promise<void> }[] = [];
let stopping = false;
async function stop(code: number): Promise<void> {
	if (stopping) return;
	stopping = true;
	const c = child;
	if (c && c.exitCode === null && c.signalCode === null) {
		const kill = setTimeout(() => c.kill("SIGKILL"), 15_000);
		await new Promise(resolve => (c.once("exit", resolve), c.kill("SIGTERM")));
		clearTimeout(kill);
	}
	await Promise.all(sims.map(s => s.stop()));
	process.exit(code);
}
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));

/** The admin token of this data dir: made once (`fct_` and 43 base64url characters), then read back. */
function adminToken(): string {
	const file = path.join(dataDir, "demo-admin.token");
	if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim();
	const token = `fct_${randomBytes(32).toString("base64url")}`;
	fs.mkdirSync(dataDir, { recursive: true });
	fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
	return token;
}

async function main(): Promise<void> {
	const salt = new SaltApiSimulator({
		ids: [...HOSTS, DOWN],
		presenceIntervalMs: 15_000,
		timeout: 2,
		gatherJobTimeout: 2,
	});
	salt.setDown(DOWN);
	salt.addMinion({ id: PENDING }); // its key waits for `salt-key -a`
	const pritunl = new PritunlSimulator();
	await salt.start(Number(env.DEMO_SALT_PORT || 0));
	sims.push(salt);
	await pritunl.start(Number(env.DEMO_PRITUNL_PORT ?? 9700)).catch((err: Error) => {
		throw new Error(
			`the Pritunl simulator cannot listen (${err.message}): set DEMO_PRITUNL_PORT to a free port, with a new data dir (the VPN manager in this one names the port)`,
		);
	});
	sims.push(pritunl);
	const token = adminToken();

	// fleet-ctl exactly as `npm start` runs it.
	const runner = path.join(path.dirname(require.resolve("moleculer", { paths: [ROOT] })), "bin/moleculer-runner.js"); // not in its "exports"
	const proc = (child = spawn(process.execPath, [runner, "--config", "dist/moleculer.config.js"], {
		cwd: ROOT,
		stdio: ["ignore", "pipe", "inherit"],
		env: {
			...env,
			...salt.cmApiEnv,
			DATA_DIR: dataDir,
			PORT: env.PORT ?? "3000",
			CTL_ADMIN_TOKEN: token,
			OUTBOUND_ALLOW: [env.OUTBOUND_ALLOW, "127.0.0.1/32,::1"].filter(Boolean).join(","), // the Pritunl simulator is on loopback
			STATS_SNAPSHOT_INTERVAL: env.STATS_SNAPSHOT_INTERVAL ?? "10", // the online chart fills within minutes
		},
	}));
	let out = "";
	proc.stdout!.on("data", (d: Buffer) => {
		process.stdout.write(d);
		if (out.length < 100_000) out += String(d);
	});

	proc.once("exit", (code, signal) => {
		if (stopping) return;
		say(`fleet-ctl exited (${code ?? signal}); stopping the simulators`);
		void stop(code ?? 1);
	});

	// Where it runs: the start block's first line (PORT=0 works too).
	const url = await until(
		"fleet-ctl's start",
		() => /fleet-ctl is running: (http:\/\/[^/\s]+)\//.exec(out)?.[1],
		120_000,
	);
	const api = async (method: string, p: string, body?: unknown): Promise<any> => {
		const res = await fetch(`${url}/api/${p}`, {
			method,
			headers: {
				authorization: `Bearer ${token}`,
				...(body === undefined ? {} : { "content-type": "application/json" }),
			},
			body: body === undefined ? undefined : JSON.stringify(body),
		});
		const text = await res.text();
		if (!res.ok) throw new Error(`${method} /api/${p}: ${res.status} ${text}`);
		return text ? JSON.parse(text) : null;
	};
	/** A record made with POST, as GET shows it (POST answers only its `_id` and `_links`). */
	const create = async (collection: string, body: unknown) =>
		api("GET", `${collection}/${(await api("POST", collection, body))._id}`);
	const named = async (collection: string, name: string) =>
		(await api("GET", `${collection}?where=${encodeURIComponent(JSON.stringify({ name }))}`))._items[0];
	await until("the API", () => api("GET", "whoami").catch(() => undefined), 60_000);
	await until("the hosts of the inventory sync", async () => {
		const up = (
			await api("GET", `hosts?max_results=50&where=${encodeURIComponent(JSON.stringify({ status: "up" }))}`)
		)._items.map((h: any) => h._id);
		return HOSTS.every(h => up.includes(h)) || undefined;
	});

	// The seed, each part only when missing.
	const group =
		(await named("groups", "databases")) ??
		(await create("groups", { name: "databases", type: 1, info: { regex: "db-" } }));
	if (!(await named("tasks", "ping databases")))
		await api("POST", "tasks", {
			name: "ping databases",
			fun: "test.ping",
			tgt: [group._id],
			start: new Date().toUTCString(),
			interval: 300,
		});
	const login = { username: pritunl.username, password: pritunl.password };
	const manager =
		(await named("vpn_managers", "demo")) ??
		(await create("vpn_managers", {
			name: "demo",
			server_address: pritunl.url,
			dashboard_address: `${pritunl.url}/`,
			...login,
		}));
	if (manager.server_address !== pritunl.url)
		say(
			`the VPN manager "demo" of ${dataDir} is at ${manager.server_address}, not here: no VPN identities (start with a new data dir)`,
		);
	else {
		// The simulator keeps nothing: an organization of an earlier run is gone from it, so make it again.
		let org = await named("vpn_organizations", "fleet");
		if (org && !pritunl.org(org.vpn_representation.id)) {
			await api("DELETE", `vpn_organizations/${org._id}`);
			org = undefined;
		}
		org ??= await create("vpn_organizations", {
			name: "fleet",
			vpn_representation: { name: "fleet" },
			cipher_type: "rsa",
			vpn_manager: manager._id,
		});
		const pritunlOrg = org.vpn_representation.id;
		// fleet-ctl never makes Pritunl users: the hosts' are made in the simulator, named like the hosts (docs/vpn.md).
		for (const name of [...HOSTS, DOWN])
			pritunl.addUser(pritunlOrg, {
				name,
				...(name === "web-01" ? { yubico_id: "ccccccbcgujh" } : name === "db-01" ? { pin: "123456" } : {}),
			});
		await api("POST", `vpn_organizations/${org._id}/sync`);
	}

	// HEALTH_PORT=0 (or 3001 taken): the port fleet-ctl bound that answers /live as a health listener does.
	let health: number | undefined = env.HEALTH_PORT && env.HEALTH_PORT !== "0" ? Number(env.HEALTH_PORT) : undefined;
	for (const port of health ? [] : listeningPorts(proc.pid!))
		if (!health && (await isHealthListener(port))) health = port;
	const local = url.replace("http://", "");
	console.log(
		[
			"",
			`fleet-ctl demo is ready: ${url}/ (sign in with the token below; API: ${url}/api)`,
			`  export T=${token}`,
			`  curl -s ${local}/api/hosts -H "Authorization: Bearer $T" | jq '._items[] | {_id, status, key}'`,
			`  fleet: ${HOSTS.join(", ")} up, ${DOWN} down, ${PENDING} pending; group databases, task "ping databases",`,
			`         VPN manager demo with organization fleet (every host a Pritunl user)`,
			`  salt-api simulator: ${salt.url} (saltapi / saltapi)`,
			`  Pritunl simulator:  ${pritunl.url} (pritunl / pritunl)`,
			...(health ? [`  health and metrics: http://localhost:${health}/ready, /metrics`] : []),
			`  data: ${shown(dataDir)} (the token is in demo-admin.token; delete the directory to start over)`,
			"Ctrl-C stops everything.",
			"",
		].join("\n"),
	);
}

/** A path as a person would type it here: relative below the current directory, else absolute. */
function shown(p: string): string {
	const rel = path.relative(process.cwd(), p);
	return rel && !rel.startsWith("..") ? `./${rel}` : p;
}

/** Polls `probe` every 200 ms until it gives something; fails after `timeoutMs`. */
async function until<T>(
	what: string,
	probe: () => T | undefined | Promise<T | undefined>,
	timeoutMs = 60_000,
): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const value = await probe();
		if (value !== undefined) return value;
		if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs / 1000} s`);
		await new Promise(r => setTimeout(r, 200));
	}
}

main().catch((err: Error) => {
	say(`cannot start: ${err.message}`);
	void stop(1);
});
