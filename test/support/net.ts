/**
 * Ports and the NATS server for the tests and the benchmark: NATS_URL (default nats://127.0.0.1:4222)
 * if a server answers there, otherwise a nats-server from PATH on a free port.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import net, { type AddressInfo } from "node:net";

/**
 * A port free now, for a process the test starts later. Taken below Linux's ephemeral range (32768+): a port
 * the kernel hands out itself (an outgoing connection's source port, another listen(0)) can then never take
 * it in between, which happened in CI (EADDRINUSE); random, so parallel test workers rarely pick the same.
 */
export async function freePort(): Promise<number> {
	for (let attempt = 0; ; attempt++) {
		const port = 10_000 + Math.floor(Math.random() * 22_000);
		const free = await new Promise<boolean>(resolve => {
			const server = net.createServer();
			server.once("error", () => resolve(false));
			server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
		});
		if (free) return port;
		if (attempt > 50) throw new Error("no free port found below the ephemeral range");
	}
}

export function canConnect(port: number, host = "127.0.0.1"): Promise<boolean> {
	return new Promise(resolve => {
		const socket = net.connect({ port, host });
		socket.setTimeout(1000);
		socket.once("connect", () => {
			socket.destroy();
			resolve(true);
		});
		socket.once("error", () => resolve(false));
		socket.once("timeout", () => {
			socket.destroy();
			resolve(false);
		});
	});
}

/** The nats-server binary (PATH or Debian's /usr/sbin), or null. */
export function natsServerBinary(): string | null {
	const which = spawnSync("sh", ["-c", "command -v nats-server || ls /usr/sbin/nats-server 2>/dev/null"], { encoding: "utf8" });
	return which.stdout.trim().split("\n")[0] || null;
}

export interface Nats {
	url: string;
	/** True when the server was already running (this process did not start it). */
	external: boolean;
	/** The server this process started, if it did. */
	child?: ChildProcess;
	/** Stops a server this process started (and waits for it); leaves an external one alone. */
	stop(): Promise<void>;
}

/**
 * A nats-server of this test's own on `port` (a free one if not given), which the test may stop and start
 * again on the same port (restart(); the shared server at NATS_URL must never be touched).
 */
export interface OwnNats extends Nats {
	port: number;
	/** Kills the server (SIGKILL: no goodbye to its clients) and waits until it is gone. */
	kill(): Promise<void>;
	/** Starts it again on the same port. */
	start(): Promise<void>;
}

export async function startOwnNats(port?: number): Promise<OwnNats> {
	const bin = natsServerBinary();
	if (!bin) throw new Error("no nats-server binary on PATH (apt-get install nats-server)");
	const p = port ?? (await freePort());
	let child: ChildProcess | undefined;
	const start = async () => {
		const c = spawn(bin, ["-a", "127.0.0.1", "-p", String(p)], { stdio: "ignore" });
		child = c;
		const deadline = Date.now() + 10_000;
		while (!(await canConnect(p))) {
			if (Date.now() > deadline || c.exitCode !== null) {
				c.kill("SIGKILL");
				throw new Error(`nats-server did not start on port ${p}`);
			}
			await new Promise(r => setTimeout(r, 50));
		}
	};
	const kill = async () => {
		const c = child;
		if (!c || c.exitCode !== null || c.signalCode !== null) return;
		const gone = new Promise<void>(resolve => c.once("exit", () => resolve()));
		c.kill("SIGKILL");
		await gone;
	};
	await start();
	return {
		url: `nats://127.0.0.1:${p}`,
		external: false,
		get child() {
			return child;
		},
		port: p,
		kill,
		start,
		stop: kill,
	};
}

export async function ensureNats(): Promise<Nats> {
	const url = new URL(process.env.NATS_URL || "nats://127.0.0.1:4222");
	if (await canConnect(Number(url.port || 4222), url.hostname)) return { url: url.toString(), external: true, stop: async () => {} };
	const bin = natsServerBinary();
	if (!bin) {
		throw new Error(`No NATS server answers at ${url} and no nats-server binary was found on PATH. Start one (or apt-get install nats-server) or set NATS_URL.`);
	}
	const port = await freePort();
	const child = spawn(bin, ["-a", "127.0.0.1", "-p", String(port)], { stdio: "ignore" });
	const deadline = Date.now() + 10_000;
	while (!(await canConnect(port))) {
		if (Date.now() > deadline || child.exitCode !== null) {
			child.kill("SIGKILL");
			throw new Error(`nats-server did not start on port ${port}`);
		}
		await new Promise(r => setTimeout(r, 100));
	}
	const exited = new Promise<void>(resolve => child.once("exit", () => resolve()));
	return {
		url: `nats://127.0.0.1:${port}`,
		external: false,
		child,
		stop: async () => {
			if (child.exitCode === null) child.kill("SIGTERM");
			await exited;
		},
	};
}
