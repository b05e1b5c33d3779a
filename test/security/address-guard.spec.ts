/**
 * The outbound address guard (lib/security/address-guard.ts) and its policy per integration (docs/security.md,
 * "Outbound addresses"): every textual form of an address parsed, every IPv6 embedding of an IPv4 address
 * seen through, what each integration may reach, OUTBOUND_ALLOW; the connect-time check after DNS in each
 * client (IP resolver, Pritunl, webhooks) with a name that resolves to loopback; and over HTTP what an
 * admin sees on POST /graph, PATCH /settings/0 and POST /vpn_managers with the production default (nothing
 * allowed) and with OUTBOUND_ALLOW naming the simulators' address.
 */
import http from "node:http";
import dns from "node:dns";
import os from "node:os";
import { isIP, type AddressInfo } from "node:net";
import fc from "fast-check";
import {
	OutboundRefusedError,
	addressRefusal,
	classify,
	guardedLookup,
	isOutboundRefusal,
	literalHostRefusal,
	outboundPolicy,
	outboundUrlProblem,
	parseCidr,
	parseIp,
	type Integration,
	type OutboundPolicy,
	type Resolve,
} from "../../lib/security/address-guard";
import { loadConfig } from "../../lib/config";
import { ResolverError, checkResolverUrl, resolveBatch } from "../../services/graph/ip-resolver";
import { PritunlClient, PritunlError } from "../../services/vpn/pritunl-client";
import { deliver } from "../../services/webhooks/webhook-delivery";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError } from "../support/http";
import { ownNameUnlike } from "../support/own-name";
import { itIf } from "../support/skip";
import { SUITE_ENV } from "../support/suite-env";
import { IpResolverSimulator } from "../simulators/ip-resolver";
import { PritunlSimulator } from "../simulators/pritunl";

const INTEGRATIONS: Integration[] = ["webhook", "ip-resolver", "pritunl"];
const policy = (integration: Integration, allow: string[] = [], resolve?: Resolve) =>
	outboundPolicy(integration, { outboundAllow: allow }, resolve);
const refusal = (address: string, p: OutboundPolicy) => addressRefusal(parseIp(address)!, address, p);
const hex = (address: string) => Buffer.from(parseIp(address)!.bytes).toString("hex");

/** A DNS that knows only `names` (what /etc/hosts or a hostile DNS server would answer). */
function fakeDns(names: Record<string, string[]>): Resolve {
	return (hostname, options, callback) => {
		const list = names[hostname];
		if (!list)
			return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }), "");
		const all = list.map(address => ({ address, family: isIP(address) }));
		if (options.all) callback(null, all);
		else callback(null, all[0].address, all[0].family);
	};
}

describe("parsing every textual form", () => {
	it("reads IPv4 and IPv6 in the forms Node's net accepts, brackets and zone ids included", () => {
		expect(hex("127.0.0.1")).toBe("7f000001");
		expect(hex("::1")).toBe(hex("0:0:0:0:0:0:0:1"));
		expect(hex("::ffff:127.0.0.1")).toBe(hex("::ffff:7f00:1"));
		expect(hex("::ffff:127.0.0.1")).toBe("00000000000000000000ffff7f000001");
		expect(hex("[::1]")).toBe(hex("::1"));
		expect(hex("fe80::1%eth0")).toBe(hex("FE80::1"));
		expect(hex("1:2:3:4:5:6:7::")).toBe("00010002000300040005000600070000");
		expect(hex("::ffff:0:1.2.3.4")).toBe("0000000000000000ffff000001020304");
		expect(hex("2001:db8::1.2.3.4")).toBe("20010db8000000000000000001020304");
	});

	it("reads nothing else as an address", () => {
		for (const text of [
			"",
			"localhost",
			"01.2.3.4",
			"1.2.3",
			"256.1.1.1",
			"::1.2.3",
			"1:2:3:4:5:6:7:8:9",
			"1::2::3",
			"fe80::1%",
			"[::1",
			"0x7f.0.0.1",
		])
			expect(parseIp(text)).toBeNull();
	});
});

describe("classification: every IPv6 embedding of an IPv4 address is seen through", () => {
	const EMBEDDED: Array<[string, string, string]> = [
		["IPv4-mapped", "::ffff:127.0.0.1", "127.0.0.1"],
		["IPv4-mapped", "::ffff:7f00:1", "127.0.0.1"],
		["IPv4-mapped", "::ffff:a9fe:a9fe", "169.254.169.254"],
		["IPv4-compatible", "::127.0.0.1", "127.0.0.1"],
		["IPv4-compatible", "::169.254.169.254", "169.254.169.254"],
		["IPv4-translated (SIIT)", "::ffff:0:127.0.0.1", "127.0.0.1"],
		["IPv4-translated (SIIT)", "::ffff:0:a9fe:a9fe", "169.254.169.254"],
		["NAT64", "64:ff9b::127.0.0.1", "127.0.0.1"],
		["NAT64", "64:ff9b::a9fe:a9fe", "169.254.169.254"],
		["local-use NAT64", "64:ff9b:1::7f00:1", "127.0.0.1"],
		["local-use NAT64", "64:ff9b:1:7f00:0:100::", "127.0.0.1"],
		["6to4", "2002:7f00:1::", "127.0.0.1"],
		["6to4", "2002:a9fe:a9fe::", "169.254.169.254"],
		// Teredo: the client is the bitwise NOT of the last 32 bits (~7f000001 = 80fffffe).
		["Teredo", "2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"],
		["Teredo", "2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"],
		["ISATAP", "2001:4860:1::5efe:7f00:1", "127.0.0.1"],
		["ISATAP", "2001:4860:1::200:5efe:169.254.169.254", "169.254.169.254"],
	];

	it.each(EMBEDDED)("finds the %s form %s embedding %s", (form, address, ipv4) => {
		const findings = classify(parseIp(address)!);
		expect(findings).toContainEqual({
			cls: ipv4.startsWith("127.") ? "loopback" : "link-local",
			embedded: { ipv4, form },
		});
	});

	it.each(EMBEDDED)("refuses the %s form %s for every integration", (_form, address) => {
		for (const integration of INTEGRATIONS)
			expect(refusal(address, policy(integration))).toMatch(/is not allowed: (loopback|link-local|unspecified)/);
	});

	it("refuses them in URLs too (brackets, any spelling)", () => {
		for (const url of [
			"http://[::127.0.0.1]/",
			"http://[::ffff:0:127.0.0.1]/",
			"http://[2002:7f00:1::]/",
			"http://[2002:a9fe:a9fe::]/",
			"http://[::ffff:7f00:1]/",
			"http://[0:0:0:0:0:ffff:169.254.169.254]/",
		]) {
			for (const integration of INTEGRATIONS)
				expect(outboundUrlProblem(url, policy(integration))).toMatch(/it embeds (127\.0\.0\.1|169\.254\.169\.254)/);
		}
	});
});

describe("the policy of each integration", () => {
	const ALWAYS_REFUSED = [
		"0.0.0.0",
		"0.1.2.3",
		"::",
		"127.0.0.1",
		"127.8.9.10",
		"::1",
		"169.254.169.254",
		"fe80::1",
		"fe80::1%eth0",
		"224.0.0.1",
		"ff02::1",
		"240.0.0.1",
		"255.255.255.255",
		"198.18.0.1",
		"100::1",
		"::2",
		"192.0.2.1",
		"2001:db8::1",
	];
	const PRIVATE = ["10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fd00::1", "::ffff:10.0.0.1", "2002:a00:1::"];
	// Public addresses, also embedded: mapped, NAT64, 6to4, Teredo (client 8.8.8.8 = ~f7f7f7f7), ISATAP.
	const PUBLIC = [
		"8.8.8.8",
		"93.184.216.34",
		"2606:4700:4700::1111",
		"::ffff:8.8.8.8",
		"64:ff9b::8.8.8.8",
		"2002:808:808::",
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7",
		"2001:4860:1::200:5efe:808:808",
	];

	it("refuses loopback, link-local, unspecified, multicast, reserved and documentation addresses everywhere", () => {
		for (const integration of INTEGRATIONS)
			for (const a of ALWAYS_REFUSED)
				expect([a, refusal(a, policy(integration))]).toEqual([a, expect.stringContaining("is not allowed")]);
	});

	it("allows private ranges to the IP resolver and Pritunl, never to a webhook receiver", () => {
		for (const a of PRIVATE) {
			expect([a, refusal(a, policy("ip-resolver"))]).toEqual([a, null]);
			expect([a, refusal(a, policy("pritunl"))]).toEqual([a, null]);
			expect([a, refusal(a, policy("webhook"))]).toEqual([a, expect.stringMatching(/is not allowed: (private|cgnat)/)]);
		}
	});

	it("allows public addresses, in every form, everywhere", () => {
		for (const integration of INTEGRATIONS)
			for (const a of PUBLIC) expect([a, refusal(a, policy(integration))]).toEqual([a, null]);
	});

	it("lets WEBHOOK_ALLOW_PRIVATE allow private and loopback receivers, not link-local or unspecified ones", () => {
		const p = outboundPolicy("webhook", { outboundAllow: [], webhookAllowPrivate: true });
		for (const a of ["10.1.2.3", "127.0.0.1", "::1", "fd00::1", "100.64.0.1"]) expect(refusal(a, p)).toBeNull();
		for (const a of ["169.254.169.254", "fe80::1", "0.0.0.0", "::"])
			expect(refusal(a, p)).toMatch(/only OUTBOUND_ALLOW can allow it$/);
	});

	it("says how to allow an address, per integration", () => {
		expect(refusal("127.0.0.1", policy("ip-resolver"))).toBe(
			"the IP resolver's address 127.0.0.1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		);
		expect(refusal("10.0.0.1", policy("webhook"))).toBe(
			"the webhook receiver's address 10.0.0.1 is not allowed: private; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		);
		expect(refusal("2002:a9fe:a9fe::", policy("pritunl"))).toBe(
			"the Pritunl server's address 2002:a9fe:a9fe:: is not allowed: link-local (it embeds 169.254.169.254, 6to4); only OUTBOUND_ALLOW can allow it",
		);
	});
});

describe("OUTBOUND_ALLOW", () => {
	it("lets the addresses it names through, for every integration, and nothing else", () => {
		for (const integration of INTEGRATIONS) {
			const p = policy(integration, ["127.0.0.1/32", "::1", "169.254.169.254", "fe80::/10"]);
			for (const a of ["127.0.0.1", "::ffff:127.0.0.1", "::1", "169.254.169.254", "fe80::1"])
				expect([a, refusal(a, p)]).toEqual([a, null]);
			// Another loopback address, and embeddings that do not reach the named address itself.
			for (const a of ["127.0.0.2", "::127.0.0.1", "2002:7f00:1::", "2002:a9fe:a9fe::", "0.0.0.0"])
				expect([a, refusal(a, p)]).toEqual([a, expect.stringContaining("is not allowed")]);
		}
		expect(refusal("10.1.2.3", policy("webhook", ["10.0.0.0/8"]))).toBeNull();
		expect(refusal("192.168.1.1", policy("webhook", ["10.0.0.0/8"]))).toMatch(/private/);
	});

	it("allows localhost only where both loopback addresses are allowed", () => {
		expect(outboundUrlProblem("http://localhost:8080/", policy("ip-resolver", ["127.0.0.1/32"]))).toMatch(
			/localhost is not allowed: loopback/,
		);
		expect(outboundUrlProblem("http://localhost:8080/", policy("ip-resolver", ["127.0.0.0/8", "::1/128"]))).toBeNull();
	});

	it("takes addresses and CIDRs only", () => {
		expect(parseCidr("10.0.0.0/8")).toMatchObject({ family: 4, bits: 8 });
		expect(parseCidr("::1")).toMatchObject({ family: 6, bits: 128 });
		for (const bad of ["127.0.0.1/33", "::1/129", "localhost", "10.0.0.0/8/1", "10.0.0.0/x", "*"])
			expect(() => parseCidr(bad)).toThrow(/is not an address or a CIDR/);
	});

	it("is read from the environment, a bad entry stopping the start", () => {
		const saved = process.env.OUTBOUND_ALLOW;
		try {
			process.env.OUTBOUND_ALLOW = " 127.0.0.1/32 , ::1 ,";
			expect(loadConfig().outboundAllow).toEqual(["127.0.0.1/32", "::1"]);
			process.env.OUTBOUND_ALLOW = "127.0.0.1/32,nope";
			expect(() => loadConfig()).toThrow("OUTBOUND_ALLOW: 'nope' is not an address or a CIDR");
			process.env.OUTBOUND_ALLOW = "";
			expect(loadConfig().outboundAllow).toEqual([]);
		} finally {
			process.env.OUTBOUND_ALLOW = saved;
		}
	});
});

describe("the check at save", () => {
	it("takes http(s) URLs without credentials only", () => {
		const p = policy("ip-resolver");
		expect(outboundUrlProblem("not a url", p)).toBe("must be an absolute http(s) URL");
		expect(outboundUrlProblem("ftp://resolver.example/", p)).toBe("must be an http(s) URL");
		expect(outboundUrlProblem("file:///etc/passwd", p)).toBe("must be an http(s) URL");
		expect(outboundUrlProblem("http://user:pw@resolver.example/", p)).toBe("must not hold credentials");
		expect(outboundUrlProblem("https://resolver.internal.example:8443/x", p)).toBeNull();
	});

	it("judges literal addresses in every spelling the URL parser accepts, and localhost names, at once", () => {
		for (const url of [
			"http://0x7f.1/",
			"http://2130706433/",
			"http://017700000001/",
			"http://127.1/",
			"http://127.0.0.1./",
			"http://localhost/",
			"http://LOCALHOST./",
			"http://metadata.localhost/",
			"http://[::1]/",
			"http://169.254.169.254./",
		]) {
			for (const integration of INTEGRATIONS)
				expect([url, outboundUrlProblem(url, policy(integration))]).toEqual([
					url,
					expect.stringMatching(/is not allowed: (loopback|link-local)/),
				]);
		}
	});

	it("is what the IP resolver's URL check applies", () => {
		expect(() => checkResolverUrl("http://[::ffff:169.254.169.254]/", policy("ip-resolver"))).toThrow(ResolverError);
		expect(() => checkResolverUrl("http://127.0.0.1:1/", policy("ip-resolver"))).toThrow(
			/the IP resolver's address 127.0.0.1 is not allowed: loopback/,
		);
		expect(checkResolverUrl("http://10.0.0.5:8300/", policy("ip-resolver")).href).toBe("http://10.0.0.5:8300/");
	});
});

describe("the check at connect time, after DNS", () => {
	const dnsAnswers = fakeDns({
		"rebind.test": ["127.0.0.1"],
		"metadata.test": ["169.254.169.254"],
		"mixed.test": ["8.8.8.8", "169.254.169.254"],
		"public.test": ["8.8.8.8"],
	});
	const lookup = (p: OutboundPolicy, name: string, all: boolean) =>
		new Promise<{ err: NodeJS.ErrnoException | null; answer?: unknown }>(resolve =>
			guardedLookup(p)(name, { all }, (err, answer) => resolve({ err, answer })),
		);

	it("refuses a name that resolves to a loopback or link-local address, or to several of which one is", async () => {
		const p = policy("pritunl", [], dnsAnswers);
		for (const name of ["rebind.test", "metadata.test", "mixed.test"]) {
			for (const all of [false, true]) {
				const { err } = await lookup(p, name, all);
				expect(err).toMatchObject({
					code: "EOUTBOUNDREFUSED",
					message: expect.stringMatching(
						new RegExp(`^the Pritunl server's address \\S+ \\(${name.replace(".", "\\.")}\\) is not allowed`),
					),
				});
			}
		}
		expect(await lookup(p, "public.test", true)).toEqual({ err: null, answer: [{ address: "8.8.8.8", family: 4 }] });
		expect(await lookup(p, "public.test", false)).toEqual({ err: null, answer: "8.8.8.8" });
		expect((await lookup(p, "nowhere.test", false)).err).toMatchObject({ code: "ENOTFOUND" });
		// OUTBOUND_ALLOW naming the address lets the name through.
		expect((await lookup(policy("pritunl", ["127.0.0.1"], dnsAnswers), "rebind.test", false)).err).toBeNull();
	});

	describe("in each client, against a real server that must get nothing", () => {
		let server: http.Server;
		let port = 0;
		let hits = 0;
		beforeAll(async () => {
			server = http.createServer((req, res) => {
				hits++;
				req.resume();
				req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"addresses": {}}'));
			});
			await new Promise<void>(r => server.listen(0, "127.0.0.1", r));
			port = (server.address() as AddressInfo).port;
		});
		afterAll(() => new Promise(r => server.close(r)));
		beforeEach(() => (hits = 0));
		const names = fakeDns({
			"resolver.test": ["127.0.0.1"],
			"pritunl.test": ["127.0.0.1"],
			"hooks.test": ["127.0.0.1"],
		});

		it("the IP resolver: the run's request fails with the reason, unless OUTBOUND_ALLOW names the address", async () => {
			const base = new URL(`http://resolver.test:${port}/`);
			await expect(resolveBatch(base, ["web-01"], 2000, policy("ip-resolver", [], names))).rejects.toThrow(
				/^the IP resolver's address 127\.0\.0\.1 \(resolver\.test\) is not allowed: loopback; only OUTBOUND_ALLOW can allow it$/,
			);
			await expect(
				resolveBatch(new URL(`http://127.0.0.1:${port}/`), ["web-01"], 2000, policy("ip-resolver", [], names)),
			).rejects.toThrow(/^the IP resolver's address 127\.0\.0\.1 is not allowed: loopback/);
			expect(hits).toBe(0);
			expect(
				(await resolveBatch(base, ["web-01"], 2000, policy("ip-resolver", ["127.0.0.1/32"], names))).addresses.size,
			).toBe(0);
			expect(hits).toBe(1);
		});

		it("Pritunl: a 502 saying why, for a name and for a literal address", async () => {
			for (const url of [
				`http://pritunl.test:${port}`,
				`http://127.0.0.1:${port}`,
				`http://[::ffff:127.0.0.1]:${port}`,
			]) {
				const client = new PritunlClient({
					url,
					apiToken: "t",
					apiSecret: "s",
					timeoutMs: 2000,
					outbound: policy("pritunl", [], names),
				});
				const err = await client.check().then(
					() => null,
					(e: unknown) => e,
				);
				client.close();
				expect(err).toBeInstanceOf(PritunlError);
				expect(err).toMatchObject({
					code: 502,
					kind: "blocked",
					message: expect.stringMatching(
						/^the Pritunl server's address \S+( \(pritunl\.test\))? is not allowed: loopback/,
					),
				});
			}
			expect(hits).toBe(0);
		});

		it("webhooks: the attempt fails with the reason", async () => {
			const r = await deliver(
				`http://hooks.test:${port}/x`,
				"{}",
				{},
				2000,
				outboundPolicy("webhook", { outboundAllow: [], webhookAllowPrivate: false }, names),
			);
			expect(r).toMatchObject({
				ok: false,
				status: null,
				error:
					"the webhook receiver's address 127.0.0.1 (hooks.test) is not allowed: loopback; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
			});
			expect(hits).toBe(0);
		});

		// Where this machine's name does not resolve to loopback, the test is reported skipped.
		itIf(!ownNameUnlike(["loopback"]), ownNameUnlike(["loopback"]))(
			"with the system's DNS: this machine's own name, when it resolves to loopback (as in /etc/hosts here and in CI)",
			async () => {
				const name = os.hostname();
				await expect(
					resolveBatch(new URL(`http://${name}:${port}/`), ["web-01"], 2000, policy("ip-resolver")),
				).rejects.toThrow(/is not allowed: loopback/);
				expect(hits).toBe(0);
			},
		);
	});
});

describe("parsing, against independent readings", () => {
	const groupsOf = (bytes: number[]) =>
		Array.from({ length: 8 }, (_, i) => ((bytes[2 * i] << 8) | bytes[2 * i + 1]).toString(16));

	it("reads any 16 bytes back from the full form, the URL parser's compressed form and a dotted-quad tail", () => {
		fc.assert(
			fc.property(
				fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 255 })), { minLength: 16, maxLength: 16 }),
				bytes => {
					const full = groupsOf(bytes).join(":");
					// WHATWG URL serialises IPv6 in its canonical compressed form (RFC 5952)
					const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
					const dotted = groupsOf(bytes).slice(0, 6).join(":") + ":" + bytes.slice(12).join(".");
					for (const text of [full, compressed, `[${compressed}]`, dotted, `${compressed}%eth0`]) {
						expect([text, Array.from(parseIp(text)?.bytes ?? [])]).toEqual([text, bytes]);
						expect(parseIp(text)?.family).toBe(6);
					}
				},
			),
			{ numRuns: 500, seed: 16 },
		);
	});

	it.each([
		["::", "00000000000000000000000000000000"],
		["::1.2.3.4", "00000000000000000000000001020304"],
		["1::", "00010000000000000000000000000000"],
		["1::1.2.3.4", "00010000000000000000000001020304"],
		["::ffff:1.2.3.4", "00000000000000000000ffff01020304"],
		["1:2:3:4:5:6:1.2.3.4", "00010002000300040005000601020304"],
		["1:2:3:4:5::1.2.3.4", "00010002000300040005000001020304"],
		["abcd:ef01::2345", "abcdef01000000000000000000002345"],
		["ABCD:EF01::2345", "abcdef01000000000000000000002345"],
		["1:0:0:0:0:0:0:8", "00010000000000000000000000000008"],
	])("%s is %s", (text, hex) => {
		expect(Buffer.from(parseIp(text)!.bytes).toString("hex")).toBe(hex);
	});

	it("reads IPv4 as four bytes, and nothing that merely ends in a bracket", () => {
		expect(parseIp("1.2.3.4")).toEqual({ family: 4, bytes: Uint8Array.from([1, 2, 3, 4]) });
		expect(parseIp("255.0.10.1")).toEqual({ family: 4, bytes: Uint8Array.from([255, 0, 10, 1]) });
		for (const text of ["x1.2.3.4]", "a::1]", "1.2.3.4]", "[::1]x", "::1]"])
			expect([text, parseIp(text)]).toEqual([text, null]);
	});
});

describe("classification, finding by finding", () => {
	const findings = (address: string) => classify(parseIp(address)!);
	const embeds = (cls: string, ipv4: string, form: string) => ({ cls, embedded: { ipv4, form } });

	it.each([
		// IPv4 ranges, at their edges (docs/security.md, "Outbound addresses")
		["0.0.0.0", "unspecified"],
		["0.255.255.255", "unspecified"],
		["1.0.0.0", "public"],
		["9.255.255.255", "public"],
		["10.0.0.0", "private"],
		["10.255.255.255", "private"],
		["11.0.0.0", "public"],
		["100.63.255.255", "public"],
		["100.64.0.0", "cgnat"],
		["100.127.255.255", "cgnat"],
		["100.128.0.0", "public"],
		["126.255.255.255", "public"],
		["127.0.0.0", "loopback"],
		["127.255.255.255", "loopback"],
		["128.0.0.0", "public"],
		["169.253.255.255", "public"],
		["169.254.0.0", "link-local"],
		["169.254.255.255", "link-local"],
		["169.255.0.0", "public"],
		["172.15.255.255", "public"],
		["172.16.0.0", "private"],
		["172.31.255.255", "private"],
		["172.32.0.0", "public"],
		["192.0.0.0", "reserved"],
		["192.0.0.255", "reserved"],
		["192.0.1.0", "public"],
		["192.0.2.0", "documentation"],
		["192.0.2.255", "documentation"],
		["192.88.99.1", "reserved"],
		["192.167.255.255", "public"],
		["192.168.0.0", "private"],
		["192.168.255.255", "private"],
		["192.169.0.0", "public"],
		["198.17.255.255", "public"],
		["198.18.0.0", "reserved"],
		["198.19.255.255", "reserved"],
		["198.20.0.0", "public"],
		["198.51.100.7", "documentation"],
		["203.0.113.7", "documentation"],
		["223.255.255.255", "public"],
		["224.0.0.0", "multicast"],
		["239.255.255.255", "multicast"],
		["240.0.0.0", "reserved"],
		["255.255.255.255", "reserved"],
		// IPv4 that would look like an IPv6 embedding if read as one: only its own range counts
		["0.100.255.155", "unspecified"],
		["32.2.1.1", "public"],
		["32.1.0.0", "public"],
		// IPv6 ranges
		["::", "unspecified"],
		["::1", "loopback"],
		["::2", "reserved"],
		["fe80::", "link-local"],
		["febf:ffff::", "link-local"],
		["fec0::1", "private"],
		["fe7f::1", "reserved"],
		["fc00::", "private"],
		["fdff::1", "private"],
		["fbff::1", "reserved"],
		["ff00::", "multicast"],
		["ff02::1", "multicast"],
		["100::1", "reserved"],
		["100:0:0:1::", "reserved"],
		["2001:db8::1", "documentation"],
		["3fff:fff::1", "documentation"],
		["3fff:1000::1", "public"],
		["2001:2::1", "reserved"],
		["2001:10::1", "reserved"],
		["2001:20::1", "reserved"],
		["5f00::1", "reserved"],
		["2606:4700::1111", "public"],
		["1fff::1", "reserved"],
		["4000::1", "reserved"],
		// near misses of the embeddings: one byte off, so only the own range counts
		["::ff:808:808", "reserved"],
		["::ff00:808:808", "reserved"],
		["::fffe:808:808", "reserved"],
		["1::ffff:808:808", "reserved"],
		["::1:ffff:808:808", "reserved"],
		["::feff:0:808:808", "reserved"],
		["::fffe:0:808:808", "reserved"],
		["::ffff:1:808:808", "reserved"],
		["1::ffff:0:808:808", "reserved"],
		["fe80::ff:808:808", "link-local"],
		["fe80::ffff:808:808", "link-local"],
		["64:ff9b:0:1::808:808", "reserved"],
		["2606:4700::400:5efe:7f00:1", "public"],
		["2606:4700::100:5efe:7f00:1", "public"],
		["2606:4700::1:5efe:7f00:1", "public"],
		["2606:4700::5ffe:7f00:1", "public"],
		["2606:4700::5eff:7f00:1", "public"],
		["2003:7f00:1::", "public"],
		["2001:1:4136:e378:8000:63bf:80ff:fffe", "public"],
	])("%s is %s, and nothing else", (address, cls) => {
		expect(findings(address)).toEqual([{ cls }]);
	});

	it("an address that embeds IPv4 has the classes of both, the embedded ones first", () => {
		expect(findings("::ffff:808:808")).toEqual([embeds("public", "8.8.8.8", "IPv4-mapped")]);
		expect(findings("::ffff:0:808:808")).toEqual([embeds("public", "8.8.8.8", "IPv4-translated (SIIT)")]);
		expect(findings("::8.8.8.8")).toEqual([embeds("public", "8.8.8.8", "IPv4-compatible"), { cls: "reserved" }]);
		expect(findings("64:ff9b::808:808")).toEqual([embeds("public", "8.8.8.8", "NAT64")]);
		// local-use NAT64: every RFC 6052 reading (prefix /96, /64, /56, /48; byte 8 skipped)
		expect(findings("64:ff9b:1:102:3:405:607:809")).toEqual([
			embeds("public", "6.7.8.9", "local-use NAT64"),
			embeds("public", "3.4.5.6", "local-use NAT64"),
			embeds("public", "2.3.4.5", "local-use NAT64"),
			embeds("public", "1.2.3.4", "local-use NAT64"),
			{ cls: "private" },
		]);
		expect(findings("2002:808:808::")).toEqual([embeds("public", "8.8.8.8", "6to4"), { cls: "public" }]);
		expect(findings("2001:0:4136:e378:8000:63bf:f7f7:f7f7")).toEqual([
			embeds("public", "65.54.227.120", "Teredo"),
			embeds("public", "8.8.8.8", "Teredo"),
			{ cls: "public" },
		]);
		expect(findings("2606:4700::200:5efe:7f00:1")).toEqual([
			embeds("loopback", "127.0.0.1", "ISATAP"),
			{ cls: "public" },
		]);
		expect(findings("2606:4700::5efe:7f00:1")).toEqual([embeds("loopback", "127.0.0.1", "ISATAP"), { cls: "public" }]);
		expect(findings("2001:db8::5efe:808:808")).toEqual([
			embeds("public", "8.8.8.8", "ISATAP"),
			{ cls: "documentation" },
		]);
	});

	it("refuses by the strictest finding, whichever it is", () => {
		const p = policy("webhook");
		expect(refusal("::8.8.8.8", p)).toBe(
			"the webhook receiver's address ::8.8.8.8 is not allowed: reserved; only OUTBOUND_ALLOW can allow it",
		);
		expect(refusal("2001:db8::5efe:808:808", p)).toBe(
			"the webhook receiver's address 2001:db8::5efe:808:808 is not allowed: documentation; only OUTBOUND_ALLOW can allow it",
		);
		expect(refusal("64:ff9b:1:102:3:405:607:809", p)).toBe(
			"the webhook receiver's address 64:ff9b:1:102:3:405:607:809 is not allowed: private; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		);
		expect(refusal("64:ff9b:1:102:3:405:607:809", policy("ip-resolver"))).toBeNull();
		expect(refusal("::ffff:0:808:808", p)).toBeNull();
		expect(refusal("fe80::ff:808:808", p)).toBe(
			"the webhook receiver's address fe80::ff:808:808 is not allowed: link-local; only OUTBOUND_ALLOW can allow it",
		);
		expect(refusal("::ffff:10.0.0.1", p)).toBe(
			"the webhook receiver's address ::ffff:10.0.0.1 is not allowed: private (it embeds 10.0.0.1, IPv4-mapped); WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		);
	});
});

describe("OUTBOUND_ALLOW entries", () => {
	it("match their own family only (an IPv4 entry also the IPv4-mapped form)", () => {
		const anyV6 = policy("webhook", ["::/0"]);
		expect(refusal("::1", anyV6)).toBeNull();
		expect(refusal("127.0.0.1", anyV6)).toBe(
			"the webhook receiver's address 127.0.0.1 is not allowed: loopback; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		);
		const anyV4 = policy("webhook", ["0.0.0.0/0"]);
		expect(refusal("127.0.0.1", anyV4)).toBeNull();
		expect(refusal("::ffff:127.0.0.1", anyV4)).toBeNull();
		expect(refusal("::1", anyV4)).toBe(
			"the webhook receiver's address ::1 is not allowed: loopback; WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it",
		);
	});

	it("cover exactly their prefix, to the bit", () => {
		const p = policy("ip-resolver", ["127.0.0.0/31", "169.254.169.252/30", "fe80::/12"]);
		for (const a of ["127.0.0.0", "127.0.0.1", "169.254.169.252", "169.254.169.255", "fe80::1", "fe8f:ffff::1"])
			expect([a, refusal(a, p)]).toEqual([a, null]);
		for (const a of ["127.0.0.2", "169.254.169.251", "169.254.170.0", "fe90::1"])
			expect([a, refusal(a, p)]).toEqual([a, expect.stringContaining("is not allowed")]);
	});

	it("are read as written, spaces around them aside", () => {
		expect(parseCidr(" 10.0.0.0/8 ")).toEqual({ family: 4, bytes: Uint8Array.from([10, 0, 0, 0]), bits: 8 });
		expect(parseCidr("0.0.0.0/0")).toEqual({ family: 4, bytes: Uint8Array.from([0, 0, 0, 0]), bits: 0 });
		expect(parseCidr("10.1.2.3")).toMatchObject({ family: 4, bits: 32 });
		expect(parseCidr("::/0")).toMatchObject({ family: 6, bits: 0 });
		expect(parseCidr("10.0.0.0/32")).toMatchObject({ bits: 32 });
		for (const bad of [
			"10.0.0.0/0008",
			"10.0.0.0/ 8",
			"10.0.0.0/8 x",
			"10.0.0.0/",
			"10.0.0.0/-1",
			"10.0.0.0/1e1",
			"/8",
			"",
		]) {
			expect(() => parseCidr(bad)).toThrow(`'${bad}' is not an address or a CIDR (a.b.c.d/n, v6::/n)`);
		}
	});
});

describe("the URL checks, case by case", () => {
	const p = policy("ip-resolver");

	it("refuses credentials of any kind", () => {
		expect(outboundUrlProblem("http://user@resolver.example/", p)).toBe("must not hold credentials");
		expect(outboundUrlProblem("http://:pw@resolver.example/", p)).toBe("must not hold credentials");
	});

	it("judges a host with its trailing dots and in any case as the address or localhost it is", () => {
		expect(outboundUrlProblem("http://127.0.0.1../", p)).toBe(
			"the IP resolver's address 127.0.0.1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		);
		expect(outboundUrlProblem("http://LocalHost../", p)).toBe(
			"the IP resolver's address localhost is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		);
		expect(outboundUrlProblem("http://[::1]/", p)).toBe(
			"the IP resolver's address ::1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		);
		expect(outboundUrlProblem("http://a.localhost/", p)).toBe(
			"the IP resolver's address a.localhost is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		);
		expect(outboundUrlProblem("http://notlocalhost/", p)).toBeNull();
		expect(outboundUrlProblem("http://localhost.example/", p)).toBeNull();
	});

	it("literalHostRefusal: a refused literal address, never a name (names are judged after DNS)", () => {
		const err = literalHostRefusal(new URL("http://[::ffff:7f00:1]:8080/x"), p);
		expect(err).toBeInstanceOf(OutboundRefusedError);
		expect(err).toMatchObject({
			name: "OutboundRefusedError",
			code: "EOUTBOUNDREFUSED",
			message:
				"the IP resolver's address ::ffff:7f00:1 is not allowed: loopback (it embeds 127.0.0.1, IPv4-mapped); only OUTBOUND_ALLOW can allow it",
		});
		expect(literalHostRefusal(new URL("http://10.0.0.1/"), p)).toBeNull();
		expect(literalHostRefusal(new URL("http://localhost/"), p)).toBeNull();
		expect(literalHostRefusal(new URL("http://resolver.example/"), p)).toBeNull();
	});

	it("isOutboundRefusal tells a refusal from network errors, also once it lost its class (over the transporter)", () => {
		expect(isOutboundRefusal(new OutboundRefusedError("x"))).toBe(true);
		expect(isOutboundRefusal({ code: "EOUTBOUNDREFUSED", message: "x" })).toBe(true);
		expect(isOutboundRefusal(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBe(false);
		expect(isOutboundRefusal(new Error("EOUTBOUNDREFUSED"))).toBe(false);
		expect(isOutboundRefusal(null)).toBe(false);
		expect(isOutboundRefusal(undefined)).toBe(false);
	});
});

describe("the connect-time lookup, answer by answer", () => {
	const lookupWith = (resolve: Resolve, name: string, all: boolean) =>
		new Promise<{ err: NodeJS.ErrnoException | null; answer?: unknown; family?: number }>(done =>
			guardedLookup(policy("pritunl", [], resolve))(name, { all }, (err, answer, family) =>
				done({ err, answer, family }),
			),
		);

	it("answers as dns.lookup would: the first address and its family, or all of them", async () => {
		const resolve = fakeDns({ "two.test": ["2606:4700::1111", "8.8.8.8"] });
		expect(await lookupWith(resolve, "two.test", false)).toEqual({ err: null, answer: "2606:4700::1111", family: 6 });
		expect(await lookupWith(resolve, "two.test", true)).toEqual({
			err: null,
			answer: [
				{ address: "2606:4700::1111", family: 6 },
				{ address: "8.8.8.8", family: 4 },
			],
			family: undefined,
		});
	});

	it("takes a resolver that answers one address though asked for all", async () => {
		const single: Resolve = (_name, _options, callback) => callback(null, "8.8.4.4", 4);
		expect(await lookupWith(single, "one.test", false)).toEqual({ err: null, answer: "8.8.4.4", family: 4 });
		expect(await lookupWith(single, "one.test", true)).toEqual({
			err: null,
			answer: [{ address: "8.8.4.4", family: 4 }],
			family: undefined,
		});
		const loop: Resolve = (_name, _options, callback) => callback(null, "127.0.0.1", 4);
		expect((await lookupWith(loop, "loop.test", false)).err).toMatchObject({
			code: "EOUTBOUNDREFUSED",
			message:
				"the Pritunl server's address 127.0.0.1 (loop.test) is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
		});
	});

	it("refuses an answer that is not an address, and says a name with no address is not found", async () => {
		const odd: Resolve = (_name, _options, callback) => callback(null, [{ address: "not-an-ip", family: 4 }]);
		expect((await lookupWith(odd, "odd.test", true)).err).toMatchObject({
			code: "EOUTBOUNDREFUSED",
			message: "the Pritunl server's name odd.test resolved to something that is not an address",
		});
		const none: Resolve = (_name, _options, callback) => callback(null, []);
		const { err } = await lookupWith(none, "none.test", false);
		expect(err).toMatchObject({ code: "ENOTFOUND", message: "getaddrinfo ENOTFOUND none.test" });
		const failing: Resolve = (_name, _options, callback) =>
			callback(Object.assign(new Error("getaddrinfo EAI_AGAIN x"), { code: "EAI_AGAIN" }), "");
		expect((await lookupWith(failing, "x", false)).err).toMatchObject({ code: "EAI_AGAIN" });
	});
});

describe("what an admin sees over HTTP", () => {
	let h: Harness;
	const resolver = new IpResolverSimulator();
	let pritunl: PritunlSimulator;
	const url = (p: string) => `${h.api}/${p}`;
	const manager = (server_address: string) => ({
		name: `ag-${Math.random().toString(36).slice(2, 8)}`,
		server_address,
		dashboard_address: "https://vpn.example/",
		username: "fleet",
		password: "Guard-pw-1",
	});

	beforeAll(async () => {
		await resolver.start();
		pritunl = new PritunlSimulator({ username: "fleet", password: "Guard-pw-1" });
		await pritunl.start();
	});
	afterAll(async () => {
		await resolver.stop();
		await pritunl.stop();
	});

	describe("the production default: OUTBOUND_ALLOW unset", () => {
		beforeAll(async () => {
			h = await startEmbedded({ env: { ...SUITE_ENV, OUTBOUND_ALLOW: "" } });
			await h.call("hosts.upsertMany", { hosts: [{ _id: "ag-web-01", status: "up", key: "accepted" }] });
		});
		afterAll(() => h?.stop());

		it("POST /graph refuses a loopback or link-local ip_resolver with 422", async () => {
			for (const [ip_resolver, message] of [
				[
					"http://127.0.0.1:1/",
					"the IP resolver's address 127.0.0.1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
				],
				[
					"http://[::ffff:169.254.169.254]/",
					"the IP resolver's address ::ffff:a9fe:a9fe is not allowed: link-local (it embeds 169.254.169.254, IPv4-mapped); only OUTBOUND_ALLOW can allow it",
				],
				[
					resolver.url,
					"the IP resolver's address 127.0.0.1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
				],
			]) {
				const err = expectEveError(
					await request("POST", url("graph"), { body: { action: "request_ips", ip_resolver } }),
					422,
				);
				expect(err._issues).toEqual({ ip_resolver: message });
			}
			expect(resolver.requests).toHaveLength(0);
		});

		it("PATCH /settings/0 refuses such a resolver_address with 422 and keeps the stored one", async () => {
			for (const resolver_address of ["http://127.0.0.1:1/", "http://[::ffff:169.254.169.254]/"]) {
				const err = expectEveError(await request("PATCH", url("settings/0"), { body: { resolver_address } }), 422);
				expect(err._issues).toEqual({
					addresses: {
						resolver_address: expect.stringMatching(
							/^the IP resolver's address \S+ is not allowed: (loopback|link-local)/,
						),
					},
				});
			}
			expect((await request("GET", url("settings/0"))).body.addresses.resolver_address).toBe("");
			// A private resolver is where resolvers live.
			expect(
				(await request("PATCH", url("settings/0"), { body: { resolver_address: "http://10.20.30.40:8300/" } })).status,
			).toBe(200);
			expect((await request("PATCH", url("settings/0"), { body: { resolver_address: "" } })).status).toBe(200);
		});

		it("POST /vpn_managers refuses a link-local or loopback server_address with 422, without trying to log in", async () => {
			for (const server_address of ["https://169.254.169.254", pritunl.url]) {
				const err = expectEveError(await request("POST", url("vpn_managers"), { body: manager(server_address) }), 422);
				expect(err._issues).toEqual({
					server_address: expect.stringMatching(
						/^the Pritunl server's address (169\.254\.169\.254|127\.0\.0\.1) is not allowed: (link-local|loopback); only OUTBOUND_ALLOW can allow it$/,
					),
				});
			}
			expect(pritunl.logins).toBe(0);
			expect((await request("GET", url("vpn_managers"))).body._meta.total).toBe(0);
		});

		itIf(!ownNameUnlike(["loopback"]), ownNameUnlike(["loopback"]))(
			"a request_ips run whose resolver name resolves to loopback fails at connect, saying why",
			async () => {
				const name = os.hostname();
				const { address } = await dns.promises.lookup(name);
				const port = new URL(resolver.url).port;
				const started = await request("POST", url("graph"), {
					body: { action: "request_ips", ip_resolver: `http://${name}:${port}/` },
				});
				expect(started.status).toBe(202);
				let job: any;
				for (let i = 0; i < 200; i++) {
					job = (await request("GET", url("graph_jobs/request_ips"))).body;
					if (job.status !== "running") break;
					await new Promise(r => setTimeout(r, 25));
				}
				expect(job.status).toBe("failed");
				expect(job.error).toMatch(
					new RegExp(
						`the IP resolver's address ${address.replace(/\./g, "\\.")} \\(${name}\\) is not allowed: loopback`,
					),
				);
				expect(resolver.requests).toHaveLength(0);
			},
		);
	});

	describe("OUTBOUND_ALLOW naming the simulators' address", () => {
		beforeAll(async () => {
			h = await startEmbedded({ env: { ...SUITE_ENV, OUTBOUND_ALLOW: "127.0.0.1/32" } });
			await h.call("hosts.upsertMany", { hosts: [{ _id: "ag-web-01", status: "up", key: "accepted" }] });
		});
		afterAll(() => h?.stop());

		it("lets the resolver, the settings and the VPN manager on 127.0.0.1 through, and still refuses what it does not name", async () => {
			const started = await request("POST", url("graph"), {
				body: { action: "request_ips", ip_resolver: resolver.url },
			});
			expect(started.status).toBe(202);
			expect(
				(await request("PATCH", url("settings/0"), { body: { resolver_address: "http://127.0.0.1:1/" } })).status,
			).toBe(200);
			const created = await request("POST", url("vpn_managers"), { body: manager(pritunl.url) });
			expect(created.status).toBe(201);
			for (const ip_resolver of ["http://[::1]/", "http://[::ffff:169.254.169.254]/", "http://127.0.0.2/"]) {
				const err = expectEveError(
					await request("PATCH", url("settings/0"), { body: { resolver_address: ip_resolver } }),
					422,
				);
				expect(err._issues.addresses.resolver_address).toMatch(/is not allowed/);
			}
		});

		it("a Pritunl call refused at connect is a 502 saying why", async () => {
			const m = await request("POST", url("vpn_managers"), { body: manager(pritunl.url) });
			expect(m.status).toBe(201);
			// As if OUTBOUND_ALLOW had been narrowed since the manager was made.
			const vpn = h.broker!.getLocalService("vpn") as unknown as { config: { outboundAllow: string[] } };
			const saved = vpn.config.outboundAllow;
			vpn.config.outboundAllow = [];
			const before = pritunl.requests().length;
			try {
				const org = await request("POST", url("vpn_organizations"), {
					body: { name: "ag-org", vpn_representation: { name: "ag-org" }, cipher_type: "rsa", vpn_manager: m.body._id },
				});
				const err = expectEveError(org, 502);
				expect(err._error.message).toBe(
					"the Pritunl server's address 127.0.0.1 is not allowed: loopback; only OUTBOUND_ALLOW can allow it",
				);
			} finally {
				vpn.config.outboundAllow = saved;
			}
			expect(pritunl.requests().length).toBe(before);
		});
	});
});
