/**
 * Webhooks: admins subscribe receivers to alert types and levels; every matching alert is POSTed signed
 * (X-Fleet-Signature), retried with backoff when the receiver fails, logged in webhook_deliveries; a
 * slow receiver does not hold up a healthy one. Real HTTP on both sides: local receivers on loopback
 * (WEBHOOK_ALLOW_PRIVATE, which the SSRF test turns off through a second service instance's rules).
 */
import http from "node:http";
import dns from "node:dns";
import os from "node:os";
import type { AddressInfo } from "node:net";
import { startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery, type Reply } from "../support/http";
import { ownNameUnlike } from "../support/own-name";
import { itIf } from "../support/skip";
import { verifySignature } from "../../services/webhooks/webhook-delivery";
import { outboundPolicy, outboundUrlProblem } from "../../lib/security/address-guard";

interface Received {
	at: number;
	headers: http.IncomingHttpHeaders;
	body: string;
	valid: boolean;
}

/** A receiver that checks signatures and can fail its first N requests or answer slowly. */
class Receiver {
	received: Received[] = [];
	failFirst = 0;
	delayMs = 0;
	secret = "";
	private server = http.createServer((req, res) => {
		let body = "";
		req.on("data", c => (body += c));
		req.on("end", () => {
			const valid = verifySignature(this.secret, req.headers["x-fleet-signature"] as string | undefined, body);
			this.received.push({ at: Date.now(), headers: req.headers, body, valid });
			const answer = () => {
				if (this.failFirst > 0) {
					this.failFirst--;
					res.writeHead(500).end("no");
				} else res.writeHead(valid ? 204 : 401).end();
			};
			if (this.delayMs) setTimeout(answer, this.delayMs).unref();
			else answer();
		});
	});
	get url() {
		return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
	}
	start() {
		return new Promise<void>(r => this.server.listen(0, "127.0.0.1", () => r()));
	}
	stop() {
		this.server.closeAllConnections();
		return new Promise<void>(r => this.server.close(() => r()));
	}
}

/** The newest delivery logged for a webhook, once it has `status`. */
function newestDelivery(api: string, hook: string, status: string, what: string): Promise<any> {
	return eventually(
		async () => {
			const [d] = (await request("GET", `${api}/webhooks/${hook}/deliveries`)).body._items;
			return d?.status === status ? d : undefined;
		},
		5000,
		what,
	);
}

describe("webhooks", () => {
	let h: Harness;
	const url = (p: string, q: Record<string, unknown> = {}) => withQuery(`${h.api}/${p}`, q);
	const flaky = new Receiver();
	const slow = new Receiver();
	const fast = new Receiver();

	beforeAll(async () => {
		await Promise.all([flaky.start(), slow.start(), fast.start()]);
		// With MONGO_URI (CI's Mongo leg, against the emulator) the webhooks and their log live there.
		const mongoUri = process.env.MONGO_URI ? uniqueMongoUri(process.env.MONGO_URI) : undefined;
		h = await startEmbedded({
			mongoUri,
			env: {
				CTL_SECRET_KEY: "webhooks-test-key",
				WEBHOOK_ALLOW_PRIVATE: "true",
				WEBHOOK_RETRY_BASE_MS: "100",
				WEBHOOK_TIMEOUT_MS: "1500",
				WEBHOOK_MAX_ATTEMPTS: "3",
				WEBHOOK_CONCURRENCY: "4",
			},
		});
	});
	afterAll(async () => {
		await h?.stop();
		await Promise.all([flaky.stop(), slow.stop(), fast.stop()]);
	});

	const subscribe = async (receiver: Receiver, body: Record<string, unknown>) => {
		const res = await request("POST", url("webhooks"), { body: { url: receiver.url, ...body } });
		expect(res.status).toBe(201);
		expect(res.body.secret).toMatch(/^whsec_/);
		receiver.secret = res.body.secret;
		return res.body._id as string;
	};
	const deliveries = async (hook: string) =>
		(await request("GET", url(`webhooks/${hook}/deliveries`))).body._items as any[];

	it("shows the secret once, masks it on every read, and refuses bad subscriptions with 422", async () => {
		const id = await subscribe(fast, { types: ["never.*"], description: "masked" });
		const read = await request("GET", url(`webhooks/${id}`));
		expect(read.body.secret).toBe("********");
		expect(read.body.url).toBe(fast.url);
		const list = await request("GET", url("webhooks"));
		expect(list.body._items.every((w: any) => w.secret === "********")).toBe(true);
		expectEveError(await request("GET", url("webhooks", { where: { secret: "x" } })), 400);
		for (const body of [
			{ url: "ftp://x/y" },
			{ url: "not a url" },
			{ url: "http://u:p@example.com/" },
			{ url: fast.url, levels: ["loud"] },
			{ url: fast.url, types: [] },
			{ url: fast.url, secret: "mine" },
			{ url: fast.url, bogus: 1 },
		]) {
			expectEveError(await request("POST", url("webhooks"), { body }), 422);
		}
		expect((await request("DELETE", url(`webhooks/${id}`))).status).toBe(204);
	});

	it("delivers matching alerts signed, retries a failing receiver with backoff, and logs every delivery", async () => {
		flaky.failFirst = 2;
		const hook = await subscribe(flaky, { types: ["patch.*"], levels: ["error", "critical"] });
		await h.call("alerts.raise", { type: "patch.failed", level: "error", payload: { hostname: "web-1" } });
		await h.call("alerts.raise", { type: "patch.failed", level: "info", payload: {} });
		await h.call("alerts.raise", { type: "host.down", level: "error", payload: {} });
		const done = await eventually(
			async () => {
				const [d] = await deliveries(hook);
				return d?.status === "delivered" ? d : undefined;
			},
			10_000,
			"the delivery to succeed",
		);
		expect(done).toMatchObject({ webhook: hook, type: "patch.failed", level: "error", attempts: 3, last_status: 204 });
		expect(await deliveries(hook)).toHaveLength(1);
		expect(flaky.received).toHaveLength(3);
		expect(flaky.received.every(r => r.valid)).toBe(true);
		const body = JSON.parse(flaky.received[2].body);
		expect(body).toMatchObject({
			event: "alert",
			webhook: hook,
			alert: { type: "patch.failed", level: "error", payload: { hostname: "web-1" } },
		});
		expect(flaky.received[2].headers["x-fleet-event"]).toBe("patch.failed");
		// Backoff: the second retry waited about twice as long as the first.
		const [a, b, c] = flaky.received.map(r => r.at);
		expect(b - a).toBeGreaterThanOrEqual(70);
		expect(c - b).toBeGreaterThanOrEqual(150);
		expect((await request("GET", url("webhook_deliveries", { where: { webhook: hook } }))).body._items).toHaveLength(1);
	});

	it("gives up after WEBHOOK_MAX_ATTEMPTS and logs the failure; a tampered signature is what a receiver refuses", async () => {
		const hook = await subscribe(flaky, { types: ["give.up"] });
		flaky.failFirst = 100;
		await h.call("alerts.raise", { type: "give.up", level: "warning", payload: {} });
		const failed = await eventually(
			async () => {
				const [d] = await deliveries(hook);
				return d?.status === "failed" ? d : undefined;
			},
			10_000,
			"the delivery to fail",
		);
		expect(failed).toMatchObject({ attempts: 3, last_status: 500, last_error: "HTTP 500" });
		flaky.failFirst = 0;
		const last = flaky.received[flaky.received.length - 1];
		expect(verifySignature(flaky.secret, last.headers["x-fleet-signature"] as string, last.body + " ")).toBe(false);
		expect(verifySignature("whsec_other", last.headers["x-fleet-signature"] as string, last.body)).toBe(false);
	});

	it("keeps delivering to a healthy receiver while another one hangs until its timeout", async () => {
		slow.delayMs = 5000;
		const slowHook = await subscribe(slow, { types: ["iso.*"] });
		const fastHook = await subscribe(fast, { types: ["iso.*"] });
		const started = Date.now();
		for (let i = 0; i < 5; i++) await h.call("alerts.raise", { type: `iso.${i}`, level: "info", payload: { i } });
		await eventually(
			async () => ((await deliveries(fastHook)).filter(d => d.status === "delivered").length === 5 ? true : undefined),
			5000,
			"the fast receiver to get all five",
		);
		// All five reached the healthy receiver before the slow one's first attempt timed out.
		expect(Date.now() - started).toBeLessThan(1500);
		expect(fast.received.filter(r => r.valid)).toHaveLength(5);
		// The slow receiver had one delivery in flight at a time, never five.
		expect(slow.received.length).toBeLessThanOrEqual(1);
		const first = await eventually(
			async () => (await deliveries(slowHook)).find(d => d.attempts >= 1 && d.last_error),
			5000,
			"the slow attempt to time out",
		);
		expect(first.last_error).toMatch(/no answer within 1500 ms/);
		slow.delayMs = 0;
		expect((await request("DELETE", url(`webhooks/${slowHook}`))).status).toBe(204);
		// Deleting a webhook cancels what it still had queued.
		await eventually(
			async () =>
				(await request("GET", url("webhook_deliveries", { where: { webhook: slowHook, status: "cancelled" } }))).body
					._items.length > 0
					? true
					: undefined,
			15_000,
			"queued deliveries to be cancelled",
		);
	}, 30_000);

	it("delivers to a receiver given by name (resolved by the guarded lookup)", async () => {
		const byName = new Receiver();
		await byName.start();
		try {
			const res = await request("POST", url("webhooks"), {
				body: { url: byName.url.replace("127.0.0.1", "localhost"), types: ["named.*"] },
			});
			expect(res.status).toBe(201);
			byName.secret = res.body.secret;
			await h.call("alerts.raise", { type: "named.alert", level: "info", payload: {} });
			const [d] = await eventually(
				async () => {
					const items = await deliveries(res.body._id);
					return items[0]?.status === "delivered" ? items : undefined;
				},
				5000,
				"the delivery by name",
			);
			expect(d.last_status).toBe(204);
			expect(byName.received.map(r => r.valid)).toEqual([true]);
		} finally {
			await byName.stop();
		}
	});

	it("answers 404 for the deliveries of an unknown webhook, and only admins reach webhooks", async () => {
		expectEveError(await request("GET", url("webhooks/0000000000000000000000aa/deliveries")), 404);
		const viewer = await request("POST", url("tokens"), { body: { name: "wh-viewer", role: "viewer" } });
		const op = await request("POST", url("tokens"), { body: { name: "wh-op", role: "operator" } });
		for (const t of [viewer.body.token, op.body.token]) {
			expectEveError(await request("GET", url("webhooks"), { token: t }), 403);
			expectEveError(await request("POST", url("webhooks"), { token: t, body: { url: fast.url } }), 403);
			expectEveError(await request("GET", url("webhook_deliveries"), { token: t }), 403);
		}
	});
});

describe("webhook queue bounds", () => {
	let h: Harness;
	const dead = new Receiver();
	const healthy = new Receiver();
	beforeAll(async () => {
		await Promise.all([dead.start(), healthy.start()]);
		h = await startEmbedded({
			env: {
				CTL_SECRET_KEY: "webhooks-test-key",
				WEBHOOK_ALLOW_PRIVATE: "true",
				WEBHOOK_TIMEOUT_MS: "3000",
				WEBHOOK_QUEUE_MAX: "3",
				WEBHOOK_CONCURRENCY: "4",
			},
		});
	});
	afterAll(async () => {
		await h?.stop();
		await Promise.all([dead.stop(), healthy.stop()]);
	});

	it("drops what a hanging receiver cannot take, and never what a healthy one can", async () => {
		dead.delayMs = 10_000;
		const hook = async (r: Receiver) => {
			const res = await request("POST", withQuery(`${h.api}/webhooks`, {}), {
				body: { url: r.url, types: ["burst.*"] },
			});
			r.secret = res.body.secret;
			return res.body._id as string;
		};
		const deadHook = await hook(dead);
		const healthyHook = await hook(healthy);
		const log = async (id: string) =>
			(await request("GET", withQuery(`${h.api}/webhooks/${id}/deliveries`, { max_results: 50 }))).body._items as any[];
		// Alerts at the pace the healthy receiver keeps up with; the dead one's backlog grows meanwhile.
		for (let i = 0; i < 8; i++) {
			await h.call("alerts.raise", { type: `burst.${i}`, level: "info", payload: { i } });
			await eventually(
				async () =>
					(await log(healthyHook)).filter(d => d.status === "delivered").length === i + 1 ? true : undefined,
				5000,
				`the healthy receiver to get alert ${i}`,
			);
		}
		const deadLog = await log(deadHook);
		// One in flight and three waiting; the other four were refused at once.
		expect(deadLog.filter(d => d.status === "dropped")).toHaveLength(4);
		expect(deadLog.find(d => d.status === "dropped").last_error).toMatch(/queue is full \(3\)/);
		expect(healthy.received.filter(r => r.valid)).toHaveLength(8);
	}, 20_000);
});

describe("webhook isolation from more hanging receivers than WEBHOOK_CONCURRENCY", () => {
	const CONCURRENCY = 4;
	let h: Harness;
	const hanging = Array.from({ length: CONCURRENCY + 2 }, () => new Receiver());
	const healthy = new Receiver();
	beforeAll(async () => {
		await Promise.all([...hanging, healthy].map(r => r.start()));
		// A timeout long enough that a healthy delivery which waits for a hanging attempt is plain to see.
		h = await startEmbedded({
			env: {
				CTL_SECRET_KEY: "webhooks-test-key",
				WEBHOOK_ALLOW_PRIVATE: "true",
				WEBHOOK_TIMEOUT_MS: "10000",
				WEBHOOK_CONCURRENCY: String(CONCURRENCY),
			},
		});
	});
	afterAll(async () => {
		await h?.stop();
		await Promise.all([...hanging, healthy].map(r => r.stop()));
	});

	it("delivers to a healthy receiver before any hanging receiver's attempt has timed out", async () => {
		const hook = async (r: Receiver, types: string[]) => {
			const res = await request("POST", `${h.api}/webhooks`, { body: { url: r.url, types } });
			expect(res.status).toBe(201);
			r.secret = res.body.secret;
			return res.body._id as string;
		};
		const hangingHooks: string[] = [];
		for (const r of hanging) {
			r.delayMs = 60_000;
			hangingHooks.push(await hook(r, ["stall.*"]));
		}
		const healthyHook = await hook(healthy, ["ok.*"]);
		// The hanging receivers first, so that they take every shared slot.
		await h.call("alerts.raise", { type: "stall.now", level: "error", payload: {} });
		await eventually(
			async () => (hanging.filter(r => r.received.length > 0).length >= CONCURRENCY ? true : undefined),
			10_000,
			"the hanging receivers to be called",
		);
		await h.call("alerts.raise", { type: "ok.now", level: "info", payload: {} });
		await eventually(
			async () => (healthy.received.length > 0 ? true : undefined),
			30_000,
			"the healthy receiver to be called",
		);
		const log = async (id: string) => (await request("GET", `${h.api}/webhooks/${id}/deliveries`)).body._items as any[];
		const hangingLog = (await Promise.all(hangingHooks.map(log))).flat();
		// No hanging attempt had timed out (10 s) when the healthy receiver got its alert.
		expect(hangingLog.filter(d => d.last_error)).toEqual([]);
		expect(healthy.received.map(r => r.valid)).toEqual([true]);
		expect(await newestDelivery(h.api, healthyHook, "delivered", "the healthy delivery to be logged")).toMatchObject({
			attempts: 1,
			last_status: 204,
		});
		// Every hanging receiver has its attempt in flight (one each), none waits for a shared slot.
		await eventually(
			async () => (hanging.every(r => r.received.length === 1) ? true : undefined),
			5000,
			"every hanging receiver to be called once",
		);
	}, 60_000);
});

describe("webhook SSRF guard", () => {
	const policy = (allowPrivate: boolean, allow: string[] = []) =>
		outboundPolicy("webhook", { outboundAllow: allow, webhookAllowPrivate: allowPrivate });

	it("refuses loopback, private and CGNAT receivers unless WEBHOOK_ALLOW_PRIVATE is set", () => {
		for (const u of [
			"http://127.0.0.1/x",
			"http://localhost:8080/",
			"http://10.1.2.3/",
			"http://192.168.1.1/",
			"http://100.64.0.1/",
			"http://[::1]/",
			"http://[fd00::1]/",
			"http://[::ffff:127.0.0.1]/",
		]) {
			expect(outboundUrlProblem(u, policy(false))).toMatch(
				/^the webhook receiver's address \S+ is not allowed: (loopback|private|cgnat)/,
			);
			expect(outboundUrlProblem(u, policy(true))).toBeNull();
		}
		expect(outboundUrlProblem("https://hooks.example.com/fleet", policy(false))).toBeNull();
		expect(outboundUrlProblem("http://93.184.216.34/", policy(false))).toBeNull();
	});

	it("refuses link-local (cloud metadata) and unspecified receivers even with WEBHOOK_ALLOW_PRIVATE, unless OUTBOUND_ALLOW names them", () => {
		const named = ["169.254.169.254/32", "fe80::/10", "0.0.0.0/32", "::/128", "2002::/16"];
		for (const u of [
			"http://169.254.169.254/latest/meta-data",
			"http://[fe80::1]/",
			"http://0.0.0.0/",
			"http://[::]/",
			"http://[::ffff:169.254.169.254]/",
			"http://[2002:a9fe:a9fe::]/",
		]) {
			expect(outboundUrlProblem(u, policy(true))).toMatch(
				/is not allowed: (link-local|unspecified).*only OUTBOUND_ALLOW can allow it$/,
			);
			expect(outboundUrlProblem(u, policy(true, named))).toBeNull();
		}
	});

	it("refuses the IPv6 forms that embed a loopback or link-local IPv4 address", () => {
		for (const u of [
			"http://[::127.0.0.1]/",
			"http://[::ffff:0:127.0.0.1]/",
			"http://[2002:7f00:1::]/",
			"http://[2002:a9fe:a9fe::]/",
			"http://[::ffff:7f00:1]/",
			"http://[64:ff9b::a9fe:a9fe]/",
		]) {
			expect(outboundUrlProblem(u, policy(false))).toMatch(/it embeds (127\.0\.0\.1|169\.254\.169\.254)/);
		}
	});
});

describe("webhook SSRF guard in the service (WEBHOOK_ALLOW_PRIVATE unset)", () => {
	let h: Harness;
	const receiver = new Receiver();
	beforeAll(async () => {
		await receiver.start();
		// The production default: nothing allowed beyond each integration's nature (the suites' harness allows 127.0.0.1).
		h = await startEmbedded({
			env: {
				WEBHOOK_ALLOW_PRIVATE: "false",
				OUTBOUND_ALLOW: "",
				WEBHOOK_RETRY_BASE_MS: "50",
				WEBHOOK_MAX_ATTEMPTS: "1",
			},
		});
	});
	afterAll(async () => {
		await h?.stop();
		await receiver.stop();
	});

	it("refuses private receivers on create and patch (422)", async () => {
		for (const url of [
			receiver.url,
			"http://localhost./x",
			"http://[::1]:80/",
			"http://169.254.169.254/latest/meta-data/",
			"http://[::127.0.0.1]/",
			"http://[::ffff:0:127.0.0.1]/",
			"http://[2002:7f00:1::]/",
			"http://[2002:a9fe:a9fe::]/",
		]) {
			const err = expectEveError(await request("POST", `${h.api}/webhooks`, { body: { url } }), 422);
			expect(err._issues.url).toMatch(/^the webhook receiver's address \S+ is not allowed: (loopback|link-local)/);
		}
		const ok = await request("POST", `${h.api}/webhooks`, {
			body: { url: "https://hooks.example.com/fleet", active: false },
		});
		expect(ok.status).toBe(201);
		expectEveError(await request("PATCH", `${h.api}/webhooks/${ok.body._id}`, { body: { url: receiver.url } }), 422);
	});

	it("refuses a private address literal at delivery time when it was allowed at create and no longer is", async () => {
		// WEBHOOK_ALLOW_PRIVATE was on when the webhook was made, off when its alert is delivered.
		const config = (h.broker!.getLocalService("webhooks") as unknown as { config: { webhookAllowPrivate: boolean } })
			.config;
		config.webhookAllowPrivate = true;
		let res: Reply;
		try {
			res = await request("POST", `${h.api}/webhooks`, { body: { url: receiver.url, types: ["literal.*"] } });
		} finally {
			config.webhookAllowPrivate = false;
		}
		expect(res.status).toBe(201);
		await h.call("alerts.raise", { type: "literal.probe", level: "info", payload: {} });
		const d = await newestDelivery(h.api, res.body._id, "failed", "the delivery to be refused");
		expect(d).toMatchObject({
			attempts: 1,
			last_status: null,
			last_error:
				"the webhook receiver's address 127.0.0.1 is not allowed: loopback; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		});
		expect(receiver.received).toHaveLength(0);
	});

	// This machine's own name resolves to a loopback or private address here (and in CI); elsewhere there is
	// nothing to show, and the test is reported skipped.
	const unlike = ownNameUnlike(["loopback", "private"]);
	itIf(!unlike, unlike)("refuses at connect time a name that resolves to a private address", async () => {
		const name = os.hostname();
		const { address } = await dns.promises.lookup(name);
		const url = receiver.url.replace("127.0.0.1", name);
		const res = await request("POST", `${h.api}/webhooks`, { body: { url, types: ["ssrf.*"] } });
		expect(res.status).toBe(201);
		await h.call("alerts.raise", { type: "ssrf.probe", level: "info", payload: {} });
		const d = await newestDelivery(h.api, res.body._id, "failed", "the delivery to be refused");
		expect(d.last_error).toMatch(
			new RegExp(
				`^the webhook receiver's address ${address.replace(/\./g, "\\.")} \\(${name}\\) is not allowed: (loopback|private)`,
			),
		);
		expect(receiver.received).toHaveLength(0);
	});
});
