/**
 * The outbound address guard: the one place that decides whether fleet-ctl may connect to an address an API
 * user gave it (a webhook receiver, the IP resolver, a VPN manager's Pritunl server). docs/security.md,
 * "Outbound addresses", states the policy this file implements. It owns:
 *
 *  - parsing: IPv4 (dotted quad) and IPv6 in every textual form Node's `net` accepts (`::`, embedded dotted
 *    quads, zone ids), and the IPv4 address embedded in an IPv6 one: IPv4-mapped `::ffff:a.b.c.d`,
 *    IPv4-compatible `::a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and the local-use
 *    `64:ff9b:1::/48` (every RFC 6052 reading), 6to4 `2002::/16`, Teredo `2001::/32` (server, and the client
 *    as the bitwise NOT of the last 32 bits) and ISATAP (`…:0:5efe:a.b.c.d`, `…:200:5efe:a.b.c.d`);
 *  - classification: loopback, link-local, unspecified, private, CGNAT, multicast, reserved, documentation,
 *    public — an IPv6 address that embeds an IPv4 one has the classes of both;
 *  - the policy of each integration (which classes it may reach) and the deployment's allow list
 *    (OUTBOUND_ALLOW, read in lib/config.ts), which lets the addresses it names through everywhere;
 *  - the checks: `outboundUrlProblem` when a URL is saved (http(s) only, no credentials, a literal address
 *    or `localhost` judged at once) and, at connect time, `literalHostRefusal` (Node skips the DNS lookup of
 *    a literal address) plus `guardedLookup`, the `lookup` given to http(s).request (or undici's connect)
 *    that checks every address the name resolves to, so that DNS cannot point a saved name elsewhere.
 */
import dns from "node:dns";
import { isIP, type LookupFunction } from "node:net";

// ------------------------------------------------------------------ parsing

export interface IpAddress {
	family: 4 | 6;
	/** 4 or 16 bytes, network order. */
	bytes: Uint8Array;
}

function parseV4(text: string): Uint8Array | null {
	if (isIP(text) !== 4) return null;
	return Uint8Array.from(text.split(".").map(Number));
}

/** Hex groups separated by `:` (none in an empty part). */
function hexGroups(part: string): number[] {
	return part === "" ? [] : part.split(":").map(g => parseInt(g, 16));
}

/**
 * The 8 groups of an IPv6 text that isIP has accepted, an embedded dotted quad included. isIP has checked the
 * form (hex groups of 1 to 4 digits, at most one `::`, 8 groups without it, a valid dotted quad only at the
 * end), so only the reading is left.
 */
function v6Groups(text: string): number[] {
	let head = text;
	const tail: number[] = [];
	const lastColon = text.lastIndexOf(":");
	const v4 = parseV4(text.slice(lastColon + 1));
	if (v4) {
		tail.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
		head = text.slice(0, lastColon + 1);
		if (!head.endsWith("::")) head = head.slice(0, -1);
	}
	const [left, right = []] = head.split("::").map(hexGroups);
	return [...left, ...new Array<number>(8 - left.length - right.length - tail.length).fill(0), ...right, ...tail];
}

function parseV6(text: string): Uint8Array | null {
	if (isIP(text) !== 6) return null;
	return Uint8Array.from(v6Groups(text.split("%")[0]).flatMap(g => [g >> 8, g & 0xff]));
}

/** An address as Node's `net` accepts it (IPv6 also in URL brackets); null for anything else, names included. */
export function parseIp(text: string): IpAddress | null {
	const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
	const v4 = parseV4(bare);
	if (v4) return { family: 4, bytes: v4 };
	const v6 = parseV6(bare);
	return v6 ? { family: 6, bytes: v6 } : null;
}

const dotted = (b: Uint8Array): string => Array.from(b).join(".");

// ------------------------------------------------------------------ CIDR

export interface Cidr extends IpAddress {
	bits: number;
}

/** `a.b.c.d[/n]` or `v6[/n]` (no prefix length: the one address); throws a message naming the entry. */
export function parseCidr(text: string): Cidr {
	const [addr, len, extra] = text.trim().split("/");
	const ip = parseIp(addr);
	const max = ip?.family === 4 ? 32 : 128;
	const bits = len === undefined ? max : /^\d{1,3}$/.test(len) ? Number(len) : NaN;
	if (!ip || extra !== undefined || !(bits >= 0 && bits <= max))
		throw new Error(`'${text}' is not an address or a CIDR (a.b.c.d/n, v6::/n)`);
	return { ...ip, bits };
}

function inCidr(ip: IpAddress, c: Cidr): boolean {
	if (ip.family !== c.family) return false;
	for (let bit = 0; bit < c.bits; bit += 8) {
		const mask = c.bits - bit >= 8 ? 0xff : (0xff << (8 - (c.bits - bit))) & 0xff;
		if ((ip.bytes[bit / 8] & mask) !== (c.bytes[bit / 8] & mask)) return false;
	}
	return true;
}

// ------------------------------------------------------------------ classification

export type AddressClass =
	| "public"
	| "private"
	| "cgnat"
	| "loopback"
	| "link-local"
	| "unspecified"
	| "multicast"
	| "reserved"
	| "documentation";

/** One reason an address is what it is: its own range, or an IPv4 address it embeds. */
export interface Finding {
	cls: AddressClass;
	/** The embedded IPv4 address and how it is embedded, when the finding is about one. */
	embedded?: { ipv4: string; form: string };
}

const table = (rows: Array<[string, AddressClass]>) => rows.map(([cidr, cls]) => ({ cidr: parseCidr(cidr), cls }));

const V4_RANGES = table([
	["0.0.0.0/8", "unspecified"],
	["127.0.0.0/8", "loopback"],
	["169.254.0.0/16", "link-local"],
	["10.0.0.0/8", "private"],
	["172.16.0.0/12", "private"],
	["192.168.0.0/16", "private"],
	["100.64.0.0/10", "cgnat"],
	["192.0.0.0/24", "reserved"],
	["192.0.2.0/24", "documentation"],
	["198.51.100.0/24", "documentation"],
	["203.0.113.0/24", "documentation"],
	["192.88.99.0/24", "reserved"],
	["198.18.0.0/15", "reserved"],
	["224.0.0.0/4", "multicast"],
	["240.0.0.0/4", "reserved"],
]);

const V6_RANGES = table([
	["::/128", "unspecified"],
	["::1/128", "loopback"],
	["fe80::/10", "link-local"],
	["fec0::/10", "private"],
	["fc00::/7", "private"],
	["64:ff9b:1::/48", "private"],
	["ff00::/8", "multicast"],
	["100::/64", "reserved"],
	["2001:db8::/32", "documentation"],
	["3fff::/20", "documentation"],
	["2001:2::/48", "reserved"],
	["2001:10::/28", "reserved"],
	["2001:20::/28", "reserved"],
	["5f00::/16", "reserved"],
	["2000::/3", "public"],
]);

function rangeClass(ip: IpAddress): AddressClass {
	const ranges = ip.family === 4 ? V4_RANGES : V6_RANGES;
	// IPv4 outside every special range is public; IPv6 outside 2000::/3 is not allocated for unicast.
	return ranges.find(r => inCidr(ip, r.cidr))?.cls ?? (ip.family === 4 ? "public" : "reserved");
}

const zero = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every(x => x === 0);
const startsWith = (b: Uint8Array, prefix: number[]) => prefix.every((x, i) => b[i] === x);
const pick = (b: Uint8Array, idx: number[]) => Uint8Array.from(idx.map(i => b[i]));
const LAST32 = [12, 13, 14, 15];

interface Embedding {
	form: string;
	/** Whether the IPv6 address's own range says nothing of it (it only carries the IPv4 address). */
	only: boolean;
	match(b: Uint8Array): boolean;
	/** Byte positions of each reading of the embedded address (several when the prefix length is not known). */
	readings(b: Uint8Array): Uint8Array[];
}

/** ::ffff:a.b.c.d — to the socket layer, the IPv4 address itself. */
const MAPPED: Embedding = {
	form: "IPv4-mapped",
	only: true,
	match: b => zero(b, 0, 10) && b[10] === 0xff && b[11] === 0xff,
	readings: b => [pick(b, LAST32)],
};

const EMBEDDINGS: Embedding[] = [
	MAPPED,
	{
		form: "IPv4-translated (SIIT)",
		only: true,
		match: b => zero(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && zero(b, 10, 12),
		readings: b => [pick(b, LAST32)],
	},
	// Deprecated: its own range (::/8, reserved) applies too. :: and ::1 are not embeddings but themselves.
	{
		form: "IPv4-compatible",
		only: false,
		match: b => zero(b, 0, 12) && !zero(b, 12, 15),
		readings: b => [pick(b, LAST32)],
	},
	{
		form: "NAT64",
		only: true,
		match: b => startsWith(b, [0, 0x64, 0xff, 0x9b]) && zero(b, 4, 12),
		readings: b => [pick(b, LAST32)],
	},
	{
		// RFC 6052 with the operator's own prefix length (/96, /64, /56 or /48; the u octet, byte 8, skipped): every reading is checked.
		form: "local-use NAT64",
		only: false,
		match: b => startsWith(b, [0, 0x64, 0xff, 0x9b, 0, 1]),
		readings: b => [LAST32, [9, 10, 11, 12], [7, 9, 10, 11], [6, 7, 9, 10]].map(idx => pick(b, idx)),
	},
	{ form: "6to4", only: false, match: b => startsWith(b, [0x20, 0x02]), readings: b => [pick(b, [2, 3, 4, 5])] },
	// Teredo: the server, then the client, stored as the bitwise NOT of the last 32 bits.
	{
		form: "Teredo",
		only: false,
		match: b => startsWith(b, [0x20, 0x01, 0, 0]),
		readings: b => [pick(b, [4, 5, 6, 7]), pick(b, LAST32).map(x => ~x & 0xff)],
	},
	// ISATAP: an interface id of 0000:5efe or 0200:5efe (the u/l bit) then the IPv4 address, under any prefix.
	{
		form: "ISATAP",
		only: false,
		match: b => (b[8] & 0xfd) === 0 && b[9] === 0 && b[10] === 0x5e && b[11] === 0xfe,
		readings: b => [pick(b, LAST32)],
	},
];

/** Every class an address has: its own range's, and that of each IPv4 address it embeds. */
export function classify(ip: IpAddress): Finding[] {
	if (ip.family === 4) return [{ cls: rangeClass(ip) }];
	const found = EMBEDDINGS.filter(e => e.match(ip.bytes));
	const own: Finding[] = found.some(e => e.only) ? [] : [{ cls: rangeClass(ip) }];
	const embedded = found.flatMap(e =>
		e
			.readings(ip.bytes)
			.map(v4 => ({ cls: rangeClass({ family: 4, bytes: v4 }), embedded: { ipv4: dotted(v4), form: e.form } })),
	);
	// Embedded first: a refusal names the IPv4 address that decided it when there is one.
	return [...embedded, ...own];
}

// ------------------------------------------------------------------ policy

export type Integration = "webhook" | "ip-resolver" | "pritunl";

export interface OutboundPolicy {
	integration: Integration;
	/** Who is at the address, in messages: "the webhook receiver". */
	peer: string;
	/** The classes this integration may reach. */
	allowed: ReadonlySet<AddressClass>;
	/** OUTBOUND_ALLOW: addresses allowed whatever their class. */
	allowList: readonly Cidr[];
	/** What WEBHOOK_ALLOW_PRIVATE lets through (webhooks only), for the messages. */
	privateSwitch: ReadonlySet<AddressClass>;
	/** Name resolution (dns.lookup; tests give their own). */
	resolve: Resolve;
}

/** dns.lookup as the connect-time check calls it (answers an address, or every address with `all`). */
export type Resolve = (
	hostname: string,
	options: dns.LookupOptions,
	callback: (err: NodeJS.ErrnoException | null, answer: string | dns.LookupAddress[], family?: number) => void,
) => void;

const systemResolve: Resolve = (hostname, options, callback) => dns.lookup(hostname, options, callback);

/** What the deployment configures (lib/config.ts). */
export interface OutboundSettings {
	outboundAllow: readonly string[];
	webhookAllowPrivate?: boolean;
}

const PEERS: Record<Integration, string> = {
	webhook: "the webhook receiver",
	"ip-resolver": "the IP resolver",
	pritunl: "the Pritunl server",
};
/** Private ranges follow each integration's nature: a resolver and a Pritunl server live on the private network. */
const BY_NATURE: Record<Integration, AddressClass[]> = {
	webhook: ["public"],
	"ip-resolver": ["public", "private", "cgnat"],
	pritunl: ["public", "private", "cgnat"],
};
/** What WEBHOOK_ALLOW_PRIVATE=true adds for webhooks (as before: receivers on an internal network, and loopback). */
const WEBHOOK_PRIVATE: AddressClass[] = ["private", "cgnat", "loopback"];

export function outboundPolicy(
	integration: Integration,
	settings: OutboundSettings,
	resolve: Resolve = systemResolve,
): OutboundPolicy {
	const privateSwitch = new Set(integration === "webhook" ? WEBHOOK_PRIVATE : []);
	const allowed = new Set([...BY_NATURE[integration], ...(settings.webhookAllowPrivate ? privateSwitch : [])]);
	return {
		integration,
		peer: PEERS[integration],
		allowed,
		allowList: settings.outboundAllow.map(parseCidr),
		privateSwitch,
		resolve,
	};
}

function allowListed(ip: IpAddress, policy: OutboundPolicy): boolean {
	// An IPv4-mapped address is the IPv4 address itself to the socket layer: an entry for either matches.
	const mapped =
		ip.family === 6 && MAPPED.match(ip.bytes) ? { family: 4 as const, bytes: pick(ip.bytes, LAST32) } : null;
	return policy.allowList.some(c => inCidr(ip, c) || (mapped !== null && inCidr(mapped, c)));
}

function explain(f: Finding): string {
	return f.embedded ? `${f.cls} (it embeds ${f.embedded.ipv4}, ${f.embedded.form})` : f.cls;
}

function howToAllow(f: Finding, policy: OutboundPolicy): string {
	return policy.privateSwitch.has(f.cls)
		? "WEBHOOK_ALLOW_PRIVATE=true or OUTBOUND_ALLOW allows it"
		: "only OUTBOUND_ALLOW can allow it";
}

/** Why `ip` may not be reached under `policy`, or null when it may. `shown` is how the address is named. */
export function addressRefusal(ip: IpAddress, shown: string, policy: OutboundPolicy): string | null {
	if (allowListed(ip, policy)) return null;
	const bad = classify(ip).find(f => !policy.allowed.has(f.cls));
	return bad ? `${policy.peer}'s address ${shown} is not allowed: ${explain(bad)}; ${howToAllow(bad, policy)}` : null;
}

/** The host of a URL without brackets or trailing dots, lower case. */
function bareHost(url: URL): string {
	return url.hostname
		.replace(/^\[|\]$/g, "")
		.replace(/\.+$/, "")
		.toLowerCase();
}

function isLocalhostName(host: string): boolean {
	return host === "localhost" || host.endsWith(".localhost");
}

/** A host as written (a literal address, `localhost`, or a name left to the connect-time check). */
function hostRefusal(host: string, policy: OutboundPolicy): string | null {
	const ip = parseIp(host);
	if (ip) return addressRefusal(ip, host, policy);
	if (!isLocalhostName(host)) return null;
	// localhost (RFC 6761) is loopback whatever DNS says: allowed only where both loopback addresses are.
	const v4 = addressRefusal(parseIp("127.0.0.1")!, host, policy);
	return v4 ?? addressRefusal(parseIp("::1")!, host, policy);
}

/** A URL as a user saves it: the reason it is refused, or null. */
export function outboundUrlProblem(raw: string, policy: OutboundPolicy): string | null {
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		return "must be an absolute http(s) URL";
	}
	if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http(s) URL";
	if (url.username || url.password) return "must not hold credentials";
	return hostRefusal(bareHost(url), policy);
}

// ------------------------------------------------------------------ connect time

/** A connection the guard refused; `code` tells it from network errors. */
export class OutboundRefusedError extends Error {
	readonly code = "EOUTBOUNDREFUSED";
	constructor(message: string) {
		super(message);
		this.name = "OutboundRefusedError";
	}
}

export function isOutboundRefusal(err: unknown): err is OutboundRefusedError {
	return err instanceof OutboundRefusedError || (err as { code?: unknown } | null)?.code === "EOUTBOUNDREFUSED";
}

/** Before connecting: Node connects to a literal address without a lookup, so it is checked here. */
export function literalHostRefusal(url: URL, policy: OutboundPolicy): OutboundRefusedError | null {
	const host = bareHost(url);
	const ip = parseIp(host);
	const why = ip ? addressRefusal(ip, host, policy) : null;
	return why ? new OutboundRefusedError(why) : null;
}

type LookupCallback = (
	err: NodeJS.ErrnoException | null,
	address?: string | dns.LookupAddress[],
	family?: number,
) => void;

/** The first address of a DNS answer the policy refuses, as a message. */
function answerRefusal(answer: dns.LookupAddress[], hostname: string, policy: OutboundPolicy): string | null {
	for (const { address } of answer) {
		const ip = parseIp(address);
		const why = ip
			? addressRefusal(ip, `${address} (${hostname})`, policy)
			: `${policy.peer}'s name ${hostname} resolved to something that is not an address`;
		if (why) return why;
	}
	return null;
}

/**
 * The `lookup` of an outbound connection: resolves every address of the name and refuses the connection
 * if ANY of them is refused — so a name cannot be re-pointed (DNS rebinding) at what the save-time check
 * refused, nor slip a refused address in among good ones — then answers as dns.lookup would have (every
 * address when Node asks for all, to try several; else the first).
 */
export function guardedLookup(policy: OutboundPolicy): LookupFunction {
	return (hostname, options, callback) => {
		const done = callback as unknown as LookupCallback;
		policy.resolve(hostname, { ...options, all: true }, (err, answer) => {
			if (err) return done(err);
			const all = Array.isArray(answer) ? answer : [{ address: answer, family: isIP(answer) }];
			const why = answerRefusal(all, hostname, policy);
			if (why) return done(new OutboundRefusedError(why));
			if (!all.length)
				return done(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }));
			if (options.all) done(null, all);
			else done(null, all[0].address, all[0].family);
		});
	};
}
