/**
 * The gateway opens its port only once every other service of its process has started (lib/runtime/health.ts
 * othersStarted), so that no request is answered 503 by a service still starting. Here the tokens service's start
 * is held — a deliberately slow start — until the rest of the process has started and a client has tried the port
 * after that; the client, trying again on every refused connection, is never answered anything but 200.
 */
import type { Middleware, Service, ServiceBroker } from "moleculer";
import { ADMIN_TOKEN, freePort, startEmbedded, type Harness } from "../support/harness";
import { unstartedServices } from "../../lib/runtime/health";

it("answers no request 503 while a service of its process is still starting", async () => {
	let broker: ServiceBroker | undefined;
	let release: () => void = () => undefined;
	const held = new Promise<void>(resolve => (release = resolve));
	const holdTokens = {
		name: "HoldTokens",
		created(b: ServiceBroker) {
			broker = b;
		},
		serviceStarting(svc: Service) {
			return svc.name === "tokens" ? held : undefined;
		},
	} as unknown as Middleware;
	const port = await freePort();
	let h: Harness | undefined;
	const starting = startEmbedded({ env: { PORT: String(port) }, broker: { middlewares: [holdTokens] } }).then(
		started => (h = started),
	);
	const statuses: number[] = [];
	const ask = () =>
		fetch(`http://127.0.0.1:${port}/api/`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(
			r => r.status,
			() => 0,
		);
	try {
		// Every service but tokens (and the gateway, which may wait for it) has started: the old gateway listened by then.
		for (
			let i = 0;
			i < 3000 && !(broker && unstartedServices(broker).every(name => name === "tokens" || name === "api"));
			i++
		)
			await new Promise(r => setTimeout(r, 10));
		expect(broker && unstartedServices(broker).includes("tokens")).toBe(true);
		statuses.push(await ask());
		release();
		while (!h) statuses.push(await ask());
		statuses.push(await ask());
		// Refused connections (0) while it starts, then 200: never a 503.
		expect(statuses.filter(s => s !== 0 && s !== 200)).toEqual([]);
		expect(statuses.at(-1)).toBe(200);
	} finally {
		release();
		await starting;
		await h?.stop();
	}
}, 60_000);
