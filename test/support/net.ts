/**
 * Ports and the NATS server for the tests and the benchmark: NATS_URL (default nats://127.0.0.1:4222)
 * if a server answers there, otherwise a nats-server from PATH on a free port.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import net, { type AddressInfo } from "node:net";

export function freePort(): Promise<number> {
	return new Promise((resolve, reject) => {
		const server = net.createServer();
		server.listen(0, "127.0.0.1", () => {
			const { port } = server.address() as AddressInfo;
			server.close(() => resolve(port));
		});
		server.once("error", reject);
	});
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
