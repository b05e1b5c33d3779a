/**
 * The baseline: a bare node:http server, no framework, that answers recorded responses byte for byte.
 * Run by bench/run.ts as a child process with one argument, a JSON file:
 *   { "routes": { "<path?query as sent>": { "status": 200, "headers": {...}, "body": "<base64>" } } }
 * Prints `LISTENING <port>` once it accepts connections. Unknown paths get a 404.
 */
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";

interface Recorded {
	status: number;
	headers: Record<string, string>;
	body: string;
}

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8")) as { routes: Record<string, Recorded> };
const routes = new Map<string, { status: number; headers: Record<string, string | number>; body: Buffer }>();
for (const [url, r] of Object.entries(spec.routes)) {
	const body = Buffer.from(r.body, "base64");
	routes.set(url, { status: r.status, headers: { ...r.headers, "Content-Length": body.length }, body });
}

const server = http.createServer((req, res) => {
	const hit = routes.get(req.url ?? "");
	if (!hit) {
		res.writeHead(404, { "Content-Length": 0 });
		res.end();
		return;
	}
	res.writeHead(hit.status, hit.headers);
	res.end(hit.body);
});

server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
	process.stdout.write(`LISTENING ${(server.address() as AddressInfo).port}\n`);
});

const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
