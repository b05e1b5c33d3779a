/**
 * The stack's floor: Moleculer and moleculer-web as fleet-ctl configures its metrics, and nothing of fleet-ctl
 * (no authentication, no caches, no Eve layer): one alias per recorded response, each answered by an action
 * returning the recorded bytes and headers. Run by bench/run.ts next to the bare node:http server, with the
 * same JSON file (bench/bare-server.ts); prints `LISTENING <port>` once it accepts connections.
 *
 * Over NATS (FLOOR_TRANSPORTER set), as fleet-ctl's split deployment: FLOOR_ROLE=answer runs the answering
 * service alone, FLOOR_ROLE=gateway the gateway alone, both on that transporter with fleet-ctl's serializer
 * (lib/runtime/serializer.ts) in FLOOR_NAMESPACE; every request then crosses NATS to the other process and back.
 *
 * What fleet-ctl adds to a routed read is the distance from this floor; what no routed read on this stack can go
 * under is the distance from the floor to the bare server. A read whose answer fleet-ctl's gateway keeps is sent
 * before routing (services/api/kept-reads.ts), so it can beat this floor.
 */
import fs from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ServiceBroker, type BrokerOptions, type Context } from "moleculer";
import ApiGateway from "moleculer-web";
import brokerConfig from "../moleculer.config";

interface Recorded {
	status: number;
	headers: Record<string, string>;
	body: string;
}

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8")) as { routes: Record<string, Recorded> };
const answers = Object.entries(spec.routes).map(([url, r]) => ({
	url,
	headers: r.headers,
	body: Buffer.from(r.body, "base64"),
}));

const transporter = (process.env.FLOOR_TRANSPORTER || null) as BrokerOptions["transporter"];
const role = transporter ? process.env.FLOOR_ROLE : "both";
if (role !== "both" && role !== "answer" && role !== "gateway")
	throw new Error("FLOOR_ROLE must be answer or gateway over a transporter");
const broker = new ServiceBroker({
	nodeID: `floor-${role}-${process.pid}`,
	namespace: process.env.FLOOR_NAMESPACE ?? "",
	logger: false,
	transporter,
	serializer: brokerConfig.serializer,
	metrics: process.env.FLOOR_METRICS === "off" ? false : brokerConfig.metrics,
});

if (role !== "gateway")
	broker.createService({
		name: "floor",
		actions: {
			answer: {
				visibility: "published",
				handler(ctx: Context<{ at: number }, Record<string, unknown>>) {
					const a = answers[ctx.params.at];
					const { "content-type": type, ...headers } = a.headers;
					ctx.meta.$responseType = type;
					ctx.meta.$responseHeaders = headers;
					return a.body;
				},
			},
		},
	});

// The query string is part of what was recorded: one alias per path, the recorded answer picked by the whole URL.
const byUrl = new Map(answers.map((a, at) => [a.url, at]));
let listening = 0;
if (role !== "answer")
	broker.createService({
		name: "api",
		mixins: [ApiGateway as never],
		settings: {
			port: Number(process.env.PORT ?? 0),
			ip: "127.0.0.1",
			logRequest: null,
			logResponse: null,
			routes: [
				{
					path: "/",
					mappingPolicy: "restrict",
					bodyParsers: false,
					aliases: Object.fromEntries(
						[...new Set(answers.map(a => a.url.split("?")[0]))].map(p => [`GET ${p}`, "floor.answer"]),
					),
					onBeforeCall(
						_ctx: Context<unknown, Record<string, unknown>>,
						_route: unknown,
						req: IncomingMessage & { $params: Record<string, unknown> },
					) {
						req.$params = { at: byUrl.get(req.url ?? "") ?? -1 };
					},
				},
			],
		},
		started(this: { server: { address(): { port: number } } }) {
			listening = this.server.address().port;
			if (role === "both") process.stdout.write(`LISTENING ${listening}\n`);
		},
	} as never);

void broker.start().then(async () => {
	if (role === "answer") process.stdout.write("ANSWERING\n");
	// The gateway answers once the other process's action is known here (else its first requests are 404s).
	else if (role === "gateway") {
		await broker.waitForServices(["floor"], 30_000);
		process.stdout.write(`LISTENING ${listening}\n`);
	}
});
const stop = () => void broker.stop().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
export type { ServerResponse };
