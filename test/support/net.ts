/**
 * Ports and the NATS server for the tests and the benchmark: NATS_URL (default nats://127.0.0.1:4222)
 * if a server answers there, otherwise a nats-server from PATH on a port it picks itself.
 *
 * A child process the tests start binds port 0 (the kernel picks a free port at the bind) and the test reads
 * the port back (listeningPorts, or the child's own log line): a port chosen here and bound later by the child
 * (freePort) can be taken in between by a parallel jest worker. freePort is left for what cannot work that way
 * (a port that must stay closed, or a server restarted on the port its clients know).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";

/**
 * The TCP ports process `pid` listens on, as the kernel has them (Linux: the sockets among /proc/<pid>/fd,
 * in state LISTEN in /proc/<pid>/net/tcp and tcp6). For a child told to listen on port 0.
 */
export function listeningPorts(pid: number): number[] {
	const inodes = new Set<string>();
	let fds: string[];
	try {
		fds = fs.readdirSync(`/proc/${pid}/fd`);
	} catch {
		return []; // gone, or not (yet) readable
	}
	for (const fd of fds) {
		try {
			const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
			if (m) inodes.add(m[1]);
		} catch {
			// closed meanwhile
		}
	}
	const ports = new Set<number>();
	for (const table of ["tcp", "tcp6"]) {
		let text = "";
		try {
			text = fs.readFileSync(`/proc/${pid}/net/${table}`, "utf8");
		} catch {
			continue;
		}
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...; st 0A is LISTEN
		for (const line of text.split("\n").slice(1)) {
			const cols = line.trim().split(/\s+/);
			if (cols.length > 9 && cols[3] === "0A" && inodes.has(cols[9]))
				ports.add(parseInt(cols[1].split(":").pop()!, 16));
		}
	}
	return [...ports].sort((a, b) => a - b);
}

/**
 * Waits until `child` listens on at least `count` TCP ports (listeningPorts) and gives them; fails at once if
 * it exits, or after `timeoutMs`, with `output()` (what it printed) in the error.
 */
export async function waitListening(
	child: ChildProcess,
	count: number,
	timeoutMs = 30_000,
	output: () => string = () => "",
): Promise<number[]> {
	if (!fs.existsSync("/proc/self/net/tcp")) throw new Error("reading a child's ports back needs Linux /proc");
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		if (child.exitCode !== null || child.signalCode !== null)
			throw new Error(`the process exited (${child.exitCode ?? child.signalCode}) before listening:\n${output()}`);
		const ports = child.pid ? listeningPorts(child.pid) : [];
		if (ports.length >= count) return ports;
		if (Date.now() > deadline)
			throw new Error(
				`the process did not listen on ${count} port(s) within ${timeoutMs} ms (listening: ${ports.join(", ") || "none"}):\n${output()}`,
			);
		await new Promise(r => setTimeout(r, 50));
	}
}

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
	const which = spawnSync("sh", ["-c", "command -v nats-server || ls /usr/sbin/nats-server 2>/dev/null"], {
		encoding: "utf8",
	});
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
 * A nats-server of this test's own on `port` (one it picks itself if not given), which the test may stop and start
 * again on the same port (restart(); the shared server at NATS_URL must never be touched).
 */
export interface OwnNats extends Nats {
	port: number;
	/** Kills the server (SIGKILL: no goodbye to its clients) and waits until it is gone. */
	kill(): Promise<void>;
	/** Starts it again on the same port. */
	start(): Promise<void>;
}

/**
 * Starts nats-server on `port`, or with `-p -1` on a port it picks itself and prints ("Listening for client
 * connections on 127.0.0.1:<port>", read back here); answers the port once it accepts connections.
 */
export async function spawnNats(
	bin: string,
	port: number | null,
	extraArgs: string[] = [],
): Promise<{ child: ChildProcess; port: number }> {
	const child = spawn(bin, ["-a", "127.0.0.1", "-p", port === null ? "-1" : String(port), ...extraArgs], {
		stdio: ["ignore", "ignore", "pipe"],
	});
	let out = "";
	child.stderr!.on("data", d => (out += String(d)));
	const deadline = Date.now() + 10_000;
	for (;;) {
		const bound = Number(/Listening for client connections on [^\s]*:(\d+)/.exec(out)?.[1] ?? 0);
		if (bound && (port === null || bound === port) && (await canConnect(bound))) {
			// Drained from now on, not kept: a full pipe would stall the server.
			child.stderr!.removeAllListeners("data");
			child.stderr!.resume();
			return { child, port: bound };
		}
		if (Date.now() > deadline || child.exitCode !== null) {
			child.kill("SIGKILL");
			throw new Error(`nats-server did not start${port === null ? "" : ` on port ${port}`}:\n${out}`);
		}
		await new Promise(r => setTimeout(r, 50));
	}
}

export async function startOwnNats(port?: number): Promise<OwnNats> {
	const bin = natsServerBinary();
	if (!bin) throw new Error("no nats-server binary on PATH (apt-get install nats-server)");
	// The first start binds a port of nats-server's choosing; start() after kill() needs that same port again
	// (the clients know it): it cannot be had any other way, and fails if something took it meanwhile.
	let p = port ?? null;
	let child: ChildProcess | undefined;
	const start = async () => {
		const started = await spawnNats(bin, p);
		child = started.child;
		p = started.port;
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
		port: p!,
		kill,
		start,
		stop: kill,
	};
}

export async function ensureNats(): Promise<Nats> {
	const url = new URL(process.env.NATS_URL || "nats://127.0.0.1:4222");
	if (await canConnect(Number(url.port || 4222), url.hostname))
		return { url: url.toString(), external: true, stop: async () => {} };
	const bin = natsServerBinary();
	if (!bin) {
		throw new Error(
			`No NATS server answers at ${url} and no nats-server binary was found on PATH. Start one (or apt-get install nats-server) or set NATS_URL.`,
		);
	}
	const { child, port } = await spawnNats(bin, null);
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

/** Whether `port` is a health listener (lib/runtime/health.ts): its /live answers {live, nodeID}. */
export async function isHealthListener(port: number): Promise<boolean> {
	try {
		const res = await fetch(`http://127.0.0.1:${port}/live`, { signal: AbortSignal.timeout(5000) });
		const body = (await res.json()) as { live?: unknown; nodeID?: unknown };
		return typeof body.live === "boolean" && typeof body.nodeID === "string";
	} catch {
		return false;
	}
}
