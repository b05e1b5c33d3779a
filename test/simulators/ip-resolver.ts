/**
 * An IP resolver speaking fleet-ctl's resolver protocol (docs/graph.md): `POST /resolve` with
 * {"hosts": [...]} answers {"addresses": {host: {ip, gateway}}} for the hosts it knows. Addresses are
 * deterministic (TEST-NET ranges). Faults for tests: `mode` "down" (connection closed), "error" (500),
 * "garbage" (not JSON), "poison" (a __proto__ key), "hostile" (good entries mixed with names not asked,
 * addresses that are not IPs, extra fields), "slow" (answers after `slowMs`), "huge" (an answer of 5 MB).
 *
 * Standalone: `npm run sim:resolver` (SIM_PORT, default 8300), prints its URL.
 */
import { runStandalone } from "./standalone";
import http from "node:http";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";

export type ResolverMode = "ok" | "down" | "error" | "garbage" | "poison" | "hostile" | "slow" | "huge";

export class IpResolverSimulator {
	mode: ResolverMode = "ok";
	slowMs = 15_000;
	/** Every request's host list, in order. */
	readonly requests: string[][] = [];
	private server: http.Server | null = null;
	url = "";

	/** Hosts whose name contains "unknown" are not known to the resolver. */
	constructor(private readonly knows: (host: string) => boolean = h => !h.includes("unknown")) {}

	/** The address the resolver gives a host: a public one, and a gateway for every other host. */
	address(host: string): { ip: string; gateway?: string } {
		const h = createHash("sha1").update(host).digest();
		const ip = `203.0.113.${1 + (h[0] % 250)}`;
		return h[1] % 2 ? { ip, gateway: `198.51.100.${1 + (h[2] % 250)}` } : { ip };
	}

	async start(port = 0, host = "127.0.0.1"): Promise<{ url: string }> {
		this.server = http.createServer((req, res) => void this.handle(req, res));
		await new Promise<void>(r => this.server!.listen(port, host, r));
		this.url = `http://${host}:${(this.server.address() as AddressInfo).port}`;
		return { url: this.url };
	}

	async stop(): Promise<void> {
		if (!this.server) return;
		this.server.closeAllConnections();
		await new Promise(r => this.server!.close(r));
		this.server = null;
	}

	private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
		const chunks: Buffer[] = [];
		for await (const c of req) chunks.push(c as Buffer);
		if (req.method !== "POST" || req.url !== "/resolve") {
			res.writeHead(404).end();
			return;
		}
		let hosts: string[] = [];
		try {
			const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
			hosts = Array.isArray(body?.hosts) ? body.hosts.filter((h: unknown) => typeof h === "string") : [];
		} catch {
			res.writeHead(400, { "Content-Type": "application/json" }).end('{"error":"bad JSON"}');
			return;
		}
		this.requests.push(hosts);
		const addresses: Record<string, unknown> = {};
		for (const h of hosts) if (this.knows(h)) addresses[h] = this.address(h);
		const json = (value: unknown): void =>
			void res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(value));
		switch (this.mode) {
			case "down":
				req.socket.destroy();
				return;
			case "error":
				res.writeHead(500, { "Content-Type": "text/plain" }).end("resolver exploded");
				return;
			case "garbage":
				res.writeHead(200, { "Content-Type": "application/json" }).end("<html>not json</html>");
				return;
			case "poison":
				res
					.writeHead(200, { "Content-Type": "application/json" })
					.end(`{"addresses":{},"__proto__":{"polluted":true}}`);
				return;
			case "hostile":
				return json({
					addresses: {
						...addresses,
						"not-asked.example": { ip: "203.0.113.9" },
						[hosts[0] ?? "x"]: { ip: "999.1.1.1" },
						[hosts[1] ?? "y"]: { ip: "203.0.113.10", gateway: "<script>" },
						[hosts[2] ?? "z"]: { ip: "203.0.113.11", extra: { nested: true } },
					},
				});
			case "slow":
				await new Promise(r => setTimeout(r, this.slowMs));
				return json({ addresses });
			case "huge":
				return json({ addresses, padding: "x".repeat(5 * 1024 * 1024) });
			default:
				return json({ addresses });
		}
	}
}

if (require.main === module) {
	runStandalone(async () => {
		const sim = new IpResolverSimulator();
		const { url } = await sim.start(Number(process.env.SIM_PORT || 8300), process.env.SIM_HOST || "127.0.0.1");
		process.stdout.write(
			`IP resolver simulator at ${url} (POST ${url}/resolve {"hosts": [...]})\nUse it: POST /api/graph {"action": "request_ips", "ip_resolver": "${url}"}\n`,
		);
		return () => sim.stop();
	});
}
