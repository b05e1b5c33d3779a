/**
 * The webhooks part of `npm run bench` (BENCH_ONLY=webhooks): BENCH_ALERTS (default 300) alerts raised in
 * batches of 10 through alerts.raiseMany, delivered to one healthy local receiver. Measured twice, side
 * by side: alone (the baseline), and with BENCH_HANGING (default 3) more webhooks whose receivers accept
 * the connection and never answer (each attempt waits for WEBHOOK_TIMEOUT_MS = 2000, then is retried).
 *
 * Reported: how long raising the alerts took (it must not wait for any delivery), the healthy receiver's
 * deliveries per second, and the lateness of each delivery (received minus raised), p50/p99/max.
 * Everything runs in one production process (every service) on NeDB, the receivers in the bench process.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { ServiceBroker, type BrokerOptions } from "moleculer";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	quantile,
	runProductionCommand,
	serviceNames,
	sleep,
	stopProc,
	waitForHttp200,
	type Proc,
} from "./support";

const ALERTS = envInt("BENCH_ALERTS", 300);
const HANGING = envInt("BENCH_HANGING", 3, 0);

interface Receiver {
	url: string;
	arrivals: Map<number, number>;
	close(): Promise<void>;
}

function receiver(answer: boolean): Promise<Receiver> {
	const arrivals = new Map<number, number>();
	const server = http.createServer((req, res) => {
		let body = "";
		req.on("data", c => (body += c));
		req.on("end", () => {
			if (!answer) return; // hangs until the sender's timeout
			try {
				const n = JSON.parse(body).alert?.payload?.n;
				if (typeof n === "number" && !arrivals.has(n)) arrivals.set(n, Date.now());
			} catch {
				// not ours
			}
			res.writeHead(204).end();
		});
	});
	return new Promise(resolve =>
		server.listen(0, "127.0.0.1", () =>
			resolve({
				url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
				arrivals,
				close: () => {
					server.closeAllConnections();
					return new Promise<void>(r => server.close(() => r()));
				},
			}),
		),
	);
}

export async function benchWebhooks(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const rows: string[] = [];
	let valid = true;
	for (const hanging of [0, HANGING]) {
		const { nats, namespace, base, env } = await benchCluster(`webhooks${hanging}`, `${dataDir}-${hanging}`, {
			WEBHOOK_ALLOW_PRIVATE: "true",
			WEBHOOK_TIMEOUT_MS: "2000",
			WEBHOOK_QUEUE_MAX: String(ALERTS * (HANGING + 2)),
			CM_API_URL: "",
		});
		const procs: Proc[] = [runProductionCommand(`webhooks-${hanging}`, serviceNames(), env)];
		const broker = new ServiceBroker({
			namespace,
			nodeID: `bench-webhooks-${process.pid}-${hanging}`,
			transporter: nats.url as BrokerOptions["transporter"],
			logger: false,
			serializer: "JSONExt",
			requestTimeout: 60_000,
		});
		const healthy = await receiver(true);
		const stuck = await Promise.all(Array.from({ length: hanging }, () => receiver(false)));
		try {
			await broker.start();
			await broker.waitForServices(["alerts", "webhooks", "webhook-deliveries", "api"], 60_000);
			await waitForHttp200(`${base}/api/settings/0`, 60_000, procs);
			for (const r of [healthy, ...stuck]) {
				const res = await apiJson(base, "POST", "/api/webhooks", { url: r.url, types: ["bench.*"] });
				if (res.status !== 201) throw new Error(`POST /api/webhooks answered ${res.status}`);
			}
			log(`webhooks: ${ALERTS} alerts, 1 healthy receiver${hanging ? ` and ${hanging} that never answer` : ""} ...`);
			const raisedAt = new Map<number, number>();
			const start = Date.now();
			for (let i = 0; i < ALERTS; i += 10) {
				const batch = Array.from({ length: Math.min(10, ALERTS - i) }, (_, k) => ({
					type: "bench.alert",
					level: "info",
					payload: { n: i + k },
				}));
				const at = Date.now();
				await broker.call("alerts.raiseMany", { alerts: batch });
				for (const a of batch) raisedAt.set(a.payload.n, at);
			}
			const raiseMs = Date.now() - start;
			const deadline = Date.now() + 120_000;
			while (healthy.arrivals.size < ALERTS && Date.now() < deadline) await sleep(50);
			const lastArrival = Math.max(...healthy.arrivals.values());
			const late = [...healthy.arrivals].map(([n, at]) => at - (raisedAt.get(n) ?? at));
			if (healthy.arrivals.size < ALERTS) valid = false;
			rows.push(
				[
					hanging ? `+${hanging} hanging` : "alone (baseline)",
					`${fmt(raiseMs)} ms`,
					`${healthy.arrivals.size}/${ALERTS}`,
					fmt((healthy.arrivals.size / Math.max(1, lastArrival - start)) * 1000, 0),
					`${fmt(quantile(late, 0.5))} ms`,
					`${fmt(quantile(late, 0.99))} ms`,
					`${fmt(Math.max(...late))} ms`,
				].join(" | "),
			);
		} finally {
			await broker.stop();
			await Promise.all(procs.map(stopProc));
			await Promise.all([healthy, ...stuck].map(r => r.close()));
		}
	}
	const head = "receivers | raising all alerts | delivered | deliveries/s | lateness p50 | p99 | max";
	return {
		report: [
			`| ${head} |`,
			`|${head
				.split("|")
				.map(() => "---")
				.join("|")}|`,
			...rows.map(r => `| ${r} |`),
		].join("\n"),
		valid,
	};
}
