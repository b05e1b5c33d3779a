/**
 * JSON logs (lib/runtime/logging.ts): every line a service writes while it handles a request carries that
 * request's id, in its actions and in the events they cause; lines outside any request carry none.
 */
import { ServiceBroker, type Context, type Middleware, type Service } from "moleculer";
import { RequestLogMiddleware, jsonFormatter } from "../../lib/runtime/logging";

describe("request ids in JSON logs", () => {
	let broker: ServiceBroker;
	const lines: Array<Record<string, unknown>> = [];
	const capture = (...args: unknown[]) => {
		for (const a of args) if (typeof a === "string" && a.startsWith("{")) lines.push(JSON.parse(a));
	};
	const spies: jest.SpyInstance[] = [];

	beforeAll(async () => {
		for (const method of ["log", "info", "warn", "error", "debug"] as const)
			spies.push(jest.spyOn(console, method).mockImplementation(capture));
		broker = new ServiceBroker({
			nodeID: "logging-test",
			logger: { type: "Console", options: { formatter: jsonFormatter, colors: false } },
			logLevel: "info",
			middlewares: [RequestLogMiddleware({ carryRequestId: true }) as unknown as Middleware],
		});
		broker.createService({
			name: "worker",
			actions: {
				async work(this: Service, ctx: Context) {
					await new Promise(r => setTimeout(r, 5));
					this.logger.info("working");
					ctx.emit("worker.done", {});
					return true;
				},
			},
			events: {
				async "worker.done"(this: Service) {
					await Promise.resolve();
					this.logger.info("heard done");
				},
			},
		});
		await broker.start();
	});
	afterAll(async () => {
		await broker.stop();
		for (const s of spies) s.mockRestore();
	});

	it("puts the request id on the lines a service logs in the action and in the event it caused", async () => {
		await broker.call("worker.work", {}, { requestID: "req-log-1" });
		// The event's handler logs after the call has answered: waited for, not a fixed time.
		for (let i = 0; i < 100 && !lines.some(l => l.msg === "heard done"); i++) await new Promise(r => setTimeout(r, 10));
		expect(lines.find(l => l.msg === "working")).toMatchObject({
			requestID: "req-log-1",
			level: "info",
			svc: "worker",
		});
		expect(lines.find(l => l.msg === "heard done")).toMatchObject({ requestID: "req-log-1" });
	});

	it("puts none on lines logged outside a request", async () => {
		broker.getLogger("plain").info("outside");
		expect(lines.find(l => l.msg === "outside")).toBeDefined();
		expect(lines.find(l => l.msg === "outside")!.requestID).toBeUndefined();
	});
});
