/**
 * What mixins/gateway-ui.mixin.ts adds to the gateway, over HTTP: the alert stream (server-sent events,
 * authenticated by header like every /api route), `whoami`, the static dashboard with its security
 * headers, and the jobs collection the long work reports into.
 */
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { startEmbedded, startSplit, type Harness } from "./support/harness";
import { request, expectEveError, eventually } from "./support/http";

/** Reads a stream until `enough` says so of what came (or the stream ended), then lets it go. */
async function readUntil(
	reader: ReadableStreamDefaultReader<string>,
	enough: (text: string) => boolean,
): Promise<string> {
	let text = "";
	while (!enough(text)) {
		const { value, done } = await reader.read();
		if (done) break;
		text += value;
	}
	await reader.cancel();
	return text;
}

/** The complete server-sent `alert` events of a text, parsed. */
const alertsIn = (text: string): any[] =>
	text
		.split("\n\n")
		.slice(0, -1)
		.filter(block => /^event: alert$/m.test(block))
		.map(block => JSON.parse(/^data: (.*)$/m.exec(block)![1]));

/** Reads server-sent events until `count` alert events arrived (or the stream ended). */
const readAlerts = async (reader: ReadableStreamDefaultReader<string>, count: number): Promise<any[]> =>
	alertsIn(await readUntil(reader, text => alertsIn(text).length >= count));

describe("gateway: alert stream, whoami, dashboard files", () => {
	let h: Harness;
	let base = "";
	beforeAll(async () => {
		h = await startEmbedded();
		base = h.api.replace(/\/api$/, "");
	});
	afterAll(() => h?.stop());

	it("pushes every alert raised to every open stream, as server-sent events", async () => {
		const open = () =>
			fetch(`${h.api}/alerts/stream`, { headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}` } });
		const [a, b] = await Promise.all([open(), open()]);
		expect(a.status).toBe(200);
		expect(a.headers.get("content-type")).toMatch(/^text\/event-stream/);
		expect(a.headers.get("cache-control")).toMatch(/no-cache/);
		// Both streams are registered once their first bytes (`event: ready`) arrived.
		const [ra, rb] = [a, b].map(r => r.body!.pipeThrough(new TextDecoderStream()).getReader());
		for (const r of [ra, rb]) expect((await r.read()).value).toContain("event: ready");
		await h.call("alerts.raise", { type: "sse.one", level: "info", payload: { n: 1 } });
		await h.call("alerts.raiseMany", { alerts: [{ type: "sse.two", level: "error", payload: { n: 2 } }] });
		for (const alerts of await Promise.all([readAlerts(ra, 2), readAlerts(rb, 2)])) {
			expect(alerts.map(x => x.type)).toEqual(["sse.one", "sse.two"]);
			expect(alerts[1]).toMatchObject({ level: "error", payload: { n: 2 }, read: false });
			expect(alerts[0]._created).toMatch(/GMT$/);
		}
	});

	it("tells a job-return stream when returns of its job are recorded (every job's without jid), and refuses a bad jid", async () => {
		const A = "20261125040000000001";
		const B = "20261125040000000002";
		const open = (q: string) =>
			fetch(`${h.api}/actions/stream${q}`, { headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}` } });
		const [one, all] = await Promise.all([open(`?jid=${A}`), open("")]);
		expect(one.status).toBe(200);
		expect(one.headers.get("content-type")).toMatch(/^text\/event-stream/);
		const [r1, r2] = [one, all].map(r => r.body!.pipeThrough(new TextDecoderStream()).getReader());
		for (const r of [r1, r2]) expect((await r.read()).value).toContain("event: ready");
		h.broker!.broadcast("actions.returned", { jids: [B] });
		h.broker!.broadcast("actions.returned", { jids: [A, B] });
		const events = (text: string) =>
			[...text.matchAll(/^event: returns\ndata: (.*)$/gm)].map(m => JSON.parse(m[1]).jid);
		expect(events(await readUntil(r2, t => events(t).length >= 3))).toEqual([B, A, B]);
		expect(events(await readUntil(r1, t => events(t).length >= 1))).toEqual([A]);
		expectEveError(await request("GET", `${h.api}/actions/stream?jid=nope`), 400);
		expectEveError(await request("GET", `${h.api}/actions/stream`, { token: null }), 401);
		expect((await request("GET", `${h.api}/actions/stream?timeout=0`)).status).toBe(200);
	});

	it("replays to a stream that reconnects with Last-Event-ID the alerts raised since that one", async () => {
		await h.call("alerts.raise", { type: "sse.seen", level: "info", payload: {} });
		const seen = (await request("GET", `${h.api}/alerts?where=${encodeURIComponent('{"type":"sse.seen"}')}`)).body
			._items[0]._id as string;
		// Raised while the browser was reconnecting: no stream was open.
		await h.call("alerts.raise", { type: "sse.missed", level: "warning", payload: { n: 3 } });
		const res = await fetch(`${h.api}/alerts/stream`, {
			headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}`, "last-event-id": seen },
		});
		expect(res.status).toBe(200);
		const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
		const text = await readUntil(reader, t => /"sse\.missed"[^\n]*\n\n/.test(t));
		const missed = text.split("\n\n").find(block => block.includes('"sse.missed"'));
		expect(missed).toMatch(/^id: [0-9a-f]{24}\nevent: alert\ndata: /);
		expect(JSON.parse(/^data: (.*)$/m.exec(missed!)![1])).toMatchObject({
			type: "sse.missed",
			level: "warning",
			payload: { n: 3 },
			read: false,
		});
	});

	it("authenticates the stream like any route, ends it after ?timeout, and refuses a bad timeout", async () => {
		expectEveError(await request("GET", `${h.api}/alerts/stream`, { token: null }), 401);
		const ended = await request("GET", `${h.api}/alerts/stream?timeout=0`);
		expect(ended.status).toBe(200);
		expect(ended.text).toContain("event: ready");
		expectEveError(await request("GET", `${h.api}/alerts/stream?timeout=soon`), 400);
		expectEveError(await request("POST", `${h.api}/alerts/stream`, { body: {} }), 405);
	});

	it("says who the caller is", async () => {
		const me = await request("GET", `${h.api}/whoami`);
		expect(me.body).toMatchObject({ name: "bootstrap-admin", role: "admin", scope: null });
		const viewer = await request("POST", `${h.api}/tokens`, { body: { name: "ui-viewer", role: "viewer" } });
		expect((await request("GET", `${h.api}/whoami`, { token: viewer.body.token })).body).toMatchObject({
			_id: viewer.body._id,
			name: "ui-viewer",
			role: "viewer",
		});
	});

	it("serves the dashboard without a token, with security headers, and nothing outside it", async () => {
		const index = await fetch(`${base}/`);
		expect(index.status).toBe(200);
		// The built page names its bundle (content-hashed, docs/dashboard.md), from this origin.
		const entry = /<script type="module" crossorigin src="\.\/(assets\/index-[\w-]+\.js)"><\/script>/.exec(
			await index.text(),
		)?.[1];
		expect(entry).toBeDefined();
		for (const res of [index, await fetch(`${base}/${entry}`), await fetch(`${base}/nope.html`)]) {
			expect(res.headers.get("content-security-policy")).toMatch(/default-src 'self'/);
			expect(res.headers.get("x-frame-options")).toBe("DENY");
		}
		expect((await fetch(`${base}/${entry}`)).headers.get("content-type")).toMatch(/javascript/);
		expect((await fetch(`${base}/nope.html`)).status).toBe(404);
		expect((await fetch(`${base}/..%2f..%2fpackage.json`)).status).toBe(404);
		expect((await fetch(`${base}/%2e%2e/package.json`)).status).not.toBe(200);
	});

	it("records the progress of long work in jobs, one record per kind, readable as graph_jobs too", async () => {
		const job = await h.call("jobs.claim", { kind: "load_updates", params: { prefix: "patches/" } });
		expectEveError(await request("GET", `${h.api}/jobs/bogus-kind`), 404);
		await expect(h.call("jobs.claim", { kind: "load_updates" })).rejects.toMatchObject({ code: 409 });
		expect(
			await h.call("jobs.update", { id: "load_updates", run: job.run, set: { progress: { done: 1, total: 4 } } }),
		).toBe(true);
		// The run holds the kind's lease (the one lease of lib/runtime/lease.ts), renewed by its progress.
		const running = (await request("GET", `${h.api}/jobs/load_updates`)).body;
		expect(running).toMatchObject({
			status: "running",
			percent: 25,
			progress: { done: 1, total: 4 },
			lease: { owner: job.run, until: expect.stringMatching(/GMT$/) },
		});
		// A stale run (taken over) cannot write any more.
		expect(
			await h.call("jobs.update", { id: "load_updates", run: "someone-else", set: { status: "failed", error: "x" } }),
		).toBe(false);
		await h.call("jobs.update", {
			id: "load_updates",
			run: job.run,
			set: { status: "finished", result: { loaded: 4 } },
		});
		const done = (await request("GET", `${h.api}/graph_jobs/load_updates`)).body;
		expect(done).toMatchObject({
			status: "finished",
			percent: 100,
			progress: { done: 4, total: 4 },
			result: { loaded: 4 },
		});
		expect(done.lease_ms).toBeUndefined();
		// Ended, the lease is let go: the kind is free for the next run at once.
		expect(done.lease).toBeUndefined();
		const next = await h.call("jobs.claim", { kind: "load_updates" });
		expect(next.run).not.toBe(job.run);
		await h.call("jobs.update", { id: "load_updates", run: next.run, set: { status: "finished", result: {} } });
		expect(done.finished).toMatch(/GMT$/);
	});

	it("stops promptly while a browser still holds a stream open (the streams are ended first)", async () => {
		const res = await fetch(`${h.api}/alerts/stream`, {
			headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}` },
		});
		const reader = res.body!.getReader();
		await reader.read();
		const started = Date.now();
		await h.restart();
		expect(Date.now() - started).toBeLessThan(10_000);
		// The stream ended with the gateway, and the restarted one answers.
		for (
			let r = await reader.read().catch(() => ({ done: true }));
			!r.done;
			r = await reader.read().catch(() => ({ done: true }))
		) {
			// drain what was still buffered
		}
		expect((await request("GET", `${h.api}/whoami`)).status).toBe(200);
	}, 30_000);

	it("stops promptly while a client holds a connection it sent nothing on, and still answers a request half sent", async () => {
		const port = Number(new URL(h.api).port);
		const connect = async () => {
			const socket = net.connect(port, "127.0.0.1");
			await new Promise(r => socket.once("connect", r));
			return socket;
		};
		// A browser's speculative connection, or a client that connected and said nothing (yet).
		const silent = await connect();
		const silentClosed = new Promise(r => silent.once("close", r));
		// A request whose headers are on their way when the stop begins.
		const half = await connect();
		let answer = "";
		half.on("data", d => (answer += d));
		const halfEnded = new Promise(r => half.once("close", r));
		half.write(`GET /api/whoami HTTP/1.1\r\nHost: fleet\r\nAuthorization: Bearer ${process.env.FLEET_TEST_TOKEN}\r\n`);
		const started = Date.now();
		const restarting = h.restart();
		// The silent one is closed by the gateway (before, the stop waited for the client to give up: a minute).
		await silentClosed;
		half.write("\r\n");
		await restarting;
		expect(Date.now() - started).toBeLessThan(10_000);
		await halfEnded;
		// The half-sent request was answered in full, and its connection closed (the gateway was stopping).
		expect(answer).toMatch(/^HTTP\/1\.1 200 /);
		expect(answer).toMatch(/^connection: close\r$/im);
		expect(answer).toContain('"role":"admin"');
		expect((await request("GET", `${h.api}/whoami`)).status).toBe(200);
	}, 30_000);
});

describe("split over NATS: alerts reach the gateway's streams and the webhooks from the data process", () => {
	let h: Harness;
	const hits: string[] = [];
	const receiver = http.createServer((req, res) => {
		let body = "";
		req.on("data", c => (body += c));
		req.on("end", () => {
			hits.push(JSON.parse(body).alert.type);
			res.writeHead(204).end();
		});
	});
	beforeAll(async () => {
		await new Promise<void>(r => receiver.listen(0, "127.0.0.1", () => r()));
		h = await startSplit({ env: { WEBHOOK_ALLOW_PRIVATE: "true" } });
	}, 90_000);
	afterAll(async () => {
		await h?.stop();
		receiver.closeAllConnections();
		await new Promise<void>(r => receiver.close(() => r()));
	});

	it("pushes an alert raised in the data process to a stream held by the gateway process, and delivers it", async () => {
		const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
		expect((await request("POST", `${h.api}/webhooks`, { body: { url, types: ["split.*"] } })).status).toBe(201);
		const res = await fetch(`${h.api}/alerts/stream`, {
			headers: { authorization: `Bearer ${process.env.FLEET_TEST_TOKEN}` },
		});
		const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
		expect((await reader.read()).value).toContain("event: ready");
		await h.call("alerts.raise", { type: "split.alert", level: "critical", payload: {} });
		const text = await readUntil(reader, t => t.includes("split.alert"));
		expect(text).toMatch(/event: alert\ndata: \{.*"type":"split.alert"/);
		// Delivered once, by the one webhooks replica the balanced event reached: a later alert's delivery arrives
		// after it, and nothing else did (not a fixed wait).
		await eventually(async () => (hits.length ? true : undefined), 5000, "the delivery");
		await h.call("alerts.raise", { type: "split.marker", level: "info", payload: {} });
		await eventually(
			async () => (hits.includes("split.marker") ? true : undefined),
			5000,
			"the later alert's delivery",
		);
		expect(hits).toEqual(["split.alert", "split.marker"]);
	}, 30_000);
});
