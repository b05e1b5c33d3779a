/**
 * A Pritunl web API simulator for fleet-ctl's tests and demos, following
 * `../shared/reference/protocols.md` Part B (Pritunl of the spec's era, 2020-2022):
 *
 *  - both ways in: a session (`POST /auth/session`, the `session` cookie, `GET /state` for the CSRF
 *    token that every full-auth call must send as `Csrf-Token`; sessions end `sessionTimeout` seconds
 *    after login) and API tokens (`Auth-Token`, `Auth-Timestamp`, `Auth-Nonce`, `Auth-Signature` =
 *    base64 HMAC-SHA256 of `token&timestamp&nonce&METHOD&path`, checked exactly: the time window, the
 *    nonce length, the string length, and a nonce used twice is refused). Any failure is Pritunl's
 *    plain-text `401: Unauthorized`;
 *  - organizations and users in memory with 24-hex ids, the exact `Organization.dict()` and
 *    `User.dict()` shapes (GETs add Pritunl's UI fields), `GET /organization` as a bare array
 *    (`?page=` pages of 5), `POST /user` answering an array (more than 10 users: 202, created in the
 *    background), and Pritunl's quirks: 500 `500: Internal Server Error` for an unknown organization id
 *    (404 only on `GET /user/<org>`), PUT of a user resetting `disabled`, `bypass_secondary` and
 *    `client_to_client` when omitted, PUT of an organization requiring `name`;
 *  - profile downloads: `GET /key/<org>/<user>.tar`, a tar with one `.ovpn` per attached server.
 *
 * Tests drive it through methods: organizations and users set directly, faults (`failNext`,
 * `malformNext` — the request is carried out, its answer is garbage or the connection is reset —,
 * `delayNext` (`waiting` counts the requests it holds), `goDown("refuse" | "hang")`), session expiry now or after some requests, and what was
 * asked (`requests()`, `logins`, `signatureFailures`).
 *
 * Standalone: `npm run sim:pritunl` (env SIM_PORT, SIM_HOST, SIM_USER, SIM_PASSWORD, SIM_API_TOKEN,
 * SIM_API_SECRET).
 */
import { runStandalone } from "./standalone";
import http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export interface PritunlOrg {
	id: string;
	name: string;
	auth_api: boolean;
	auth_token: string | null;
	auth_secret: string | null;
}

export interface PritunlUser {
	id: string;
	organization: string;
	name: string;
	email: string | null;
	groups: string[];
	pin: string | null;
	type: "client" | "server";
	auth_type: string;
	yubico_id: string | null;
	otp_secret: string;
	disabled: boolean;
	bypass_secondary: boolean;
	client_to_client: boolean;
	mac_addresses: string[] | null;
	dns_servers: string[] | null;
	dns_suffix: string | null;
	port_forwarding: Array<{ protocol: string; port: string; dport: string }>;
}

export interface PritunlSimulatorOptions {
	/** The administrator's login (default pritunl / pritunl). */
	username?: string;
	password?: string;
	/** Its API token and secret (32 alphanumerics each; generated when omitted), and whether API access is on (default true). */
	apiToken?: string;
	apiSecret?: string;
	authApi?: boolean;
	/** `session_timeout`, seconds (default 43200). */
	sessionTimeout?: number;
	/** `auth_time_window` of token auth, seconds (default 43200). */
	authTimeWindow?: number;
	/** Servers whose profiles the downloads hold (default one, "vpn-1"). */
	servers?: string[];
	/** Serve HTTPS with this key and certificate (PEM). */
	tls?: { key: string | Buffer; cert: string | Buffer };
	host?: string;
}

export interface RequestRecord {
	method: string;
	path: string;
	status: number;
	auth: "session" | "token" | "none";
}

export type RequestFilter = { method?: string; path?: RegExp };
type Malform = "garbage" | "reset" | "html";

interface Fault {
	count: number;
	filter?: RequestFilter;
}

const OBJECT_ID = /^[a-f0-9]{24}$/;
const BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function randomFrom(alphabet: string, length: number): string {
	const bytes = randomBytes(length);
	return [...bytes].map(b => alphabet[b % alphabet.length]).join("");
}

let idCounter = randomBytes(3).readUIntBE(0, 3);
function objectId(): string {
	idCounter = (idCounter + 1) % 0xffffff;
	return (
		Math.floor(Date.now() / 1000)
			.toString(16)
			.padStart(8, "0") +
		randomBytes(5).toString("hex") +
		idCounter.toString(16).padStart(6, "0")
	);
}

/** A ustar archive of the given files (what Pritunl's key handler sends). */
export function tarArchive(files: Array<{ name: string; data: Buffer }>): Buffer {
	const blocks: Buffer[] = [];
	const now = Math.floor(Date.now() / 1000);
	for (const file of files) {
		const header = Buffer.alloc(512);
		header.write(file.name.slice(0, 99), 0, "utf8");
		header.write("0000600\0", 100);
		header.write("0000000\0", 108);
		header.write("0000000\0", 116);
		header.write(file.data.length.toString(8).padStart(11, "0") + "\0", 124);
		header.write(now.toString(8).padStart(11, "0") + "\0", 136);
		header.write("        ", 148);
		header.write("0", 156);
		header.write("ustar\0", 257);
		header.write("00", 263);
		let sum = 0;
		for (const b of header) sum += b;
		header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
		blocks.push(header, file.data, Buffer.alloc((512 - (file.data.length % 512)) % 512));
	}
	blocks.push(Buffer.alloc(1024));
	return Buffer.concat(blocks);
}

/** The files of a ustar archive (tests read the profile back). */
export function untar(archive: Buffer): Array<{ name: string; data: Buffer }> {
	const out: Array<{ name: string; data: Buffer }> = [];
	for (let at = 0; at + 512 <= archive.length; ) {
		const header = archive.subarray(at, at + 512);
		if (header.every(b => b === 0)) break;
		const name = header.subarray(0, 100).toString("utf8").replace(/\0.*$/s, "");
		const size = parseInt(header.subarray(124, 136).toString("utf8").replace(/\0.*$/s, "").trim() || "0", 8);
		out.push({ name, data: archive.subarray(at + 512, at + 512 + size) });
		at += 512 + Math.ceil(size / 512) * 512;
	}
	return out;
}

export class PritunlSimulator {
	readonly username: string;
	password: string;
	readonly apiToken: string;
	apiSecret: string;
	authApi: boolean;
	sessionTimeout: number;
	authTimeWindow: number;
	servers: string[];
	private readonly orgs = new Map<string, PritunlOrg>();
	private readonly users = new Map<string, PritunlUser>();
	private readonly sessions = new Map<string, { csrf: string; at: number }>();
	private readonly nonces = new Set<string>();
	private readonly server: http.Server;
	private readonly sockets = new Set<Socket>();
	private readonly host: string;
	private port = 0;
	private mode: "up" | "refuse" | "hang" = "up";
	private fails: Array<Fault & { status: number }> = [];
	private malforms: Array<Fault & { kind: Malform }> = [];
	private delays: Array<Fault & { ms: number }> = [];
	private expireAfter: number | null = null;
	private readonly log: RequestRecord[] = [];
	/** Successful logins (`POST /auth/session`). */
	logins = 0;
	/** Token-auth requests refused for their signature, timestamp or nonce. */
	signatureFailures = 0;
	/** Token-auth requests whose signature was checked and accepted. */
	signaturesChecked = 0;
	/** Unexpected exceptions while serving (should stay empty). */
	readonly internalErrors: unknown[] = [];
	/** Requests held by `delayNext` right now (a test can act while one is in flight). */
	waiting = 0;

	constructor(opts: PritunlSimulatorOptions = {}) {
		this.username = opts.username ?? "pritunl";
		this.password = opts.password ?? "pritunl";
		this.apiToken = opts.apiToken ?? randomFrom(ALNUM, 32);
		this.apiSecret = opts.apiSecret ?? randomFrom(ALNUM, 32);
		this.authApi = opts.authApi ?? true;
		this.sessionTimeout = opts.sessionTimeout ?? 43_200;
		this.authTimeWindow = opts.authTimeWindow ?? 43_200;
		this.servers = opts.servers ?? ["vpn-1"];
		this.host = opts.host ?? "127.0.0.1";
		const handler = (req: http.IncomingMessage, res: http.ServerResponse) => void this.handle(req, res);
		this.server = opts.tls
			? https.createServer({ key: opts.tls.key, cert: opts.tls.cert }, handler)
			: http.createServer(handler);
		this.server.on("connection", (s: Socket) => {
			this.sockets.add(s);
			s.on("close", () => this.sockets.delete(s));
		});
	}

	get url(): string {
		return `${this.server instanceof https.Server ? "https" : "http"}://${this.host}:${this.port}`;
	}

	async start(port = 0): Promise<{ url: string }> {
		await new Promise<void>((resolve, reject) => {
			this.server.once("error", reject);
			this.server.listen(port, this.host, () => resolve());
		});
		this.port = (this.server.address() as AddressInfo).port;
		return { url: this.url };
	}

	async stop(): Promise<void> {
		for (const s of this.sockets) s.destroy();
		await new Promise<void>(resolve => this.server.close(() => resolve()));
	}

	// ---------------------------------------------------------------- state, for tests

	addOrg(name: string, opts: { authApi?: boolean } = {}): PritunlOrg {
		const org: PritunlOrg = { id: objectId(), name, auth_api: false, auth_token: null, auth_secret: null };
		if (opts.authApi) this.setAuthApi(org, true);
		this.orgs.set(org.id, org);
		return org;
	}

	addUser(orgId: string, fields: Partial<PritunlUser> & { name: string }): PritunlUser {
		const org = this.orgs.get(orgId);
		if (!org) throw new Error(`no organization ${orgId}`);
		const user: PritunlUser = {
			id: objectId(),
			organization: orgId,
			email: null,
			groups: [],
			pin: null,
			type: "client",
			auth_type: "local",
			yubico_id: null,
			otp_secret: randomFrom(BASE32, 16),
			disabled: false,
			bypass_secondary: false,
			client_to_client: false,
			mac_addresses: null,
			dns_servers: null,
			dns_suffix: null,
			port_forwarding: [],
			...fields,
		};
		this.users.set(user.id, user);
		return user;
	}

	updateUser(userId: string, fields: Partial<PritunlUser>): PritunlUser {
		const user = this.users.get(userId);
		if (!user) throw new Error(`no user ${userId}`);
		Object.assign(user, fields);
		return user;
	}

	removeUser(userId: string): void {
		this.users.delete(userId);
	}

	removeOrg(orgId: string): void {
		this.orgs.delete(orgId);
		for (const u of [...this.users.values()]) if (u.organization === orgId) this.users.delete(u.id);
	}

	org(id: string): PritunlOrg | undefined {
		return this.orgs.get(id);
	}

	orgList(): Array<ReturnType<PritunlSimulator["orgDict"]>> {
		return [...this.orgs.values()].map(o => this.orgDict(o));
	}

	usersOf(orgId: string): PritunlUser[] {
		return [...this.users.values()].filter(u => u.organization === orgId);
	}

	user(id: string): PritunlUser | undefined {
		return this.users.get(id);
	}

	/** What the simulator answers for a user (`User.dict()`), as fleet-ctl should mirror it. */
	userDict(u: PritunlUser) {
		const org = this.orgs.get(u.organization);
		return {
			id: u.id,
			organization: u.organization,
			organization_name: org?.name ?? "",
			name: u.name,
			email: u.email,
			groups: [...u.groups],
			pin: Boolean(u.pin),
			type: u.type,
			auth_type: u.auth_type,
			yubico_id: u.yubico_id,
			otp_secret: u.otp_secret,
			disabled: u.disabled,
			bypass_secondary: u.bypass_secondary,
			client_to_client: u.client_to_client,
			mac_addresses: u.mac_addresses,
			dns_servers: u.dns_servers,
			dns_suffix: u.dns_suffix,
			port_forwarding: u.port_forwarding.map(p => ({ ...p })),
		};
	}

	orgDict(o: PritunlOrg) {
		const userCount = [...this.users.values()].filter(u => u.organization === o.id && u.type === "client").length;
		return {
			id: o.id,
			name: o.name,
			auth_api: o.auth_api,
			auth_token: o.auth_token,
			auth_secret: o.auth_secret,
			user_count: userCount,
		};
	}

	/** The profile archive the simulator serves for a user (to compare downloads with). */
	profile(orgId: string, userId: string): Buffer {
		const org = this.orgs.get(orgId) as PritunlOrg;
		const user = this.users.get(userId) as PritunlUser;
		return tarArchive(
			this.servers.map(server => ({
				name: `${org.name}_${user.name}_${server}.ovpn`,
				data: Buffer.from(
					`# Pritunl profile of ${user.name} (${org.name}) on ${server}\nclient\ndev tun\nremote ${this.host} 1194 udp\n<key>\n-----BEGIN PRIVATE KEY-----\n${createHmac("sha256", "sim").update(`${user.id}/${server}`).digest("base64")}\n-----END PRIVATE KEY-----\n</key>\n`,
				),
			})),
		);
	}

	// ---------------------------------------------------------------- faults, for tests

	/** The next `count` matching requests answer `status` (Pritunl's plain-text error) without running. */
	failNext(count: number, status: number, filter?: RequestFilter): void {
		this.fails.push({ count, status, filter });
	}

	/** The next `count` matching requests are carried out, then answered with garbage, an HTML page or a reset connection. */
	malformNext(count: number, kind: Malform = "garbage", filter?: RequestFilter): void {
		this.malforms.push({ count, kind, filter });
	}

	/** The next `count` matching requests wait `ms` before they are carried out. */
	delayNext(count: number, ms: number, filter?: RequestFilter): void {
		this.delays.push({ count, ms, filter });
	}

	clearFaults(): void {
		this.fails = [];
		this.malforms = [];
		this.delays = [];
		this.expireAfter = null;
	}

	/** Every session ends now (the next session call gets 401). */
	expireSessions(): void {
		this.sessions.clear();
	}

	/** Every session ends once `count` more requests have been served. */
	expireSessionsAfter(count: number): void {
		this.expireAfter = count;
	}

	/** "refuse": nothing listens; "hang": connections are accepted and never answered. */
	async goDown(mode: "refuse" | "hang" = "refuse"): Promise<void> {
		this.mode = mode;
		if (mode === "refuse") {
			for (const s of this.sockets) s.destroy();
			await new Promise<void>(resolve => this.server.close(() => resolve()));
		}
	}

	async comeBack(): Promise<void> {
		if (this.mode === "refuse")
			await new Promise<void>(resolve => this.server.listen(this.port, this.host, () => resolve()));
		else for (const s of this.sockets) s.destroy();
		this.mode = "up";
	}

	requests(): RequestRecord[] {
		return [...this.log];
	}

	// ---------------------------------------------------------------- HTTP

	private take<T extends Fault>(list: T[], method: string, path: string): T | undefined {
		const fault = list.find(
			f =>
				f.count > 0 &&
				(!f.filter?.method || f.filter.method === method) &&
				(!f.filter?.path || f.filter.path.test(path)),
		);
		if (fault) fault.count--;
		return fault;
	}

	private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
		if (this.mode === "hang") return;
		const method = req.method ?? "GET";
		const url = new URL(req.url ?? "/", "http://x");
		const path = url.pathname;
		const chunks: Buffer[] = [];
		for await (const c of req) chunks.push(c as Buffer);
		const raw = Buffer.concat(chunks);
		let auth: RequestRecord["auth"] = "none";
		const record = (status: number) => {
			this.log.push({ method, path, status, auth });
			if (this.log.length > 5000) this.log.shift();
			if (this.expireAfter !== null && --this.expireAfter <= 0) {
				this.expireAfter = null;
				this.sessions.clear();
			}
		};
		const delay = this.take(this.delays, method, path);
		if (delay) {
			this.waiting++;
			await new Promise(r => setTimeout(r, delay.ms));
			this.waiting--;
		}
		const fail = this.take(this.fails, method, path);
		if (fail) {
			record(fail.status);
			return this.text(res, fail.status, `${fail.status}: ${http.STATUS_CODES[fail.status] ?? "Error"}`);
		}
		let answer: {
			status: number;
			json?: unknown;
			text?: string;
			bytes?: Buffer;
			headers?: Record<string, string | string[]>;
		};
		try {
			const who = this.authenticate(req, method, path);
			auth = who;
			answer =
				who === "none" && !(method === "POST" && path === "/auth/session")
					? { status: 401, text: "401: Unauthorized" }
					: this.route(method, path, url.searchParams, raw, req);
		} catch (err) {
			if (err instanceof Answer) answer = err.answer;
			else {
				this.internalErrors.push(err);
				answer = { status: 500, text: "500: Internal Server Error" };
			}
		}
		record(answer.status);
		const malform = this.take(this.malforms, method, path);
		if (malform) {
			if (malform.kind === "reset") return void res.socket?.destroy();
			if (malform.kind === "html")
				return this.text(res, 200, "<html><body>Pritunl is starting</body></html>", "text/html");
			return this.text(res, 200, '{"id": "5f1c', "application/json");
		}
		for (const [k, v] of Object.entries(answer.headers ?? {})) res.setHeader(k, v);
		if (answer.bytes) {
			res.writeHead(answer.status, { "Content-Length": answer.bytes.length });
			return void res.end(answer.bytes);
		}
		if (answer.text !== undefined) return this.text(res, answer.status, answer.text);
		const body = JSON.stringify(answer.json);
		res.writeHead(answer.status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
		res.end(body);
	}

	private text(res: http.ServerResponse, status: number, text: string, type = "text/plain; charset=utf-8"): void {
		res.writeHead(status, { "Content-Type": type, "Content-Length": Buffer.byteLength(text) });
		res.end(text);
	}

	/** Who asks: a valid token signature, a live session (with its CSRF token where the route needs it), or nobody. */
	private authenticate(req: http.IncomingMessage, method: string, path: string): RequestRecord["auth"] {
		const h = (name: string, max: number) => {
			const v = req.headers[name];
			return typeof v === "string" ? v.slice(0, max) : undefined;
		};
		const token = h("auth-token", 256);
		const timestamp = h("auth-timestamp", 64);
		const nonce = h("auth-nonce", 32);
		const signature = h("auth-signature", 512);
		if (token !== undefined || timestamp !== undefined || nonce !== undefined || signature !== undefined) {
			if (!token || !timestamp || !nonce || !signature) return this.badSignature();
			if (token !== this.apiToken || !this.authApi || this.apiSecret.length < 8) return this.badSignature();
			const ts = Number(timestamp);
			if (!Number.isInteger(ts) || Math.abs(ts - Date.now() / 1000) > this.authTimeWindow) return this.badSignature();
			const authString = [token, timestamp, nonce, method, path].join("&");
			if (authString.length > 10240 || nonce.length < 8) return this.badSignature();
			const expected = Buffer.from(createHmac("sha256", this.apiSecret).update(authString).digest("base64"));
			const given = Buffer.from(signature);
			if (expected.length !== given.length || !timingSafeEqual(expected, given)) return this.badSignature();
			const key = `${token}\0${nonce}`;
			if (this.nonces.has(key)) return this.badSignature();
			this.nonces.add(key);
			this.signaturesChecked++;
			return "token";
		}
		const cookie = /(?:^|;\s*)session=([A-Za-z0-9_-]+)/.exec(String(req.headers.cookie ?? ""))?.[1];
		const session = cookie ? this.sessions.get(cookie) : undefined;
		if (!session) return "none";
		if (Date.now() - session.at > this.sessionTimeout * 1000) {
			this.sessions.delete(cookie as string);
			return "none";
		}
		const light = path === "/state" || path.startsWith("/key/") || (method === "DELETE" && path === "/auth/session");
		if (!light && req.headers["csrf-token"] !== session.csrf) return "none";
		return "session";
	}

	private badSignature(): "none" {
		this.signatureFailures++;
		return "none";
	}

	private route(
		method: string,
		path: string,
		query: URLSearchParams,
		raw: Buffer,
		req: http.IncomingMessage,
	): { status: number; json?: unknown; text?: string; bytes?: Buffer; headers?: Record<string, string | string[]> } {
		const parts = path.split("/").filter(Boolean);
		const json = () => {
			try {
				return JSON.parse(raw.toString("utf8") || "null");
			} catch {
				throw new Answer({ status: 400, text: "400: Bad Request" });
			}
		};
		if (path === "/auth/session" && method === "POST") {
			const body = json() ?? {};
			if (body.username !== this.username || body.password !== this.password)
				return { status: 401, json: { error: "auth_invalid", error_msg: "Authentication credentials are not valid." } };
			const sid = randomBytes(24).toString("base64url");
			this.sessions.set(sid, { csrf: randomBytes(16).toString("hex"), at: Date.now() });
			this.logins++;
			return {
				status: 200,
				json: { authenticated: true, default: false },
				headers: { "Set-Cookie": [`session=${sid}; Secure; HttpOnly; Path=/`] },
			};
		}
		if (path === "/auth/session" && method === "DELETE") {
			const cookie = /(?:^|;\s*)session=([A-Za-z0-9_-]+)/.exec(String(req.headers.cookie ?? ""))?.[1];
			if (cookie) this.sessions.delete(cookie);
			return { status: 200, json: { authenticated: false } };
		}
		if (path === "/state" && method === "GET") {
			const cookie = /(?:^|;\s*)session=([A-Za-z0-9_-]+)/.exec(String(req.headers.cookie ?? ""))?.[1];
			const csrf = cookie ? this.sessions.get(cookie)?.csrf : undefined;
			return {
				status: 200,
				json: { csrf_token: csrf ?? null, super_user: true, version: 1_032_024_000, username: this.username },
			};
		}
		// URL parts named *_id longer than 10 characters are parsed as ObjectIds; an invalid one is None.
		const oid = (s: string | undefined) => (s && OBJECT_ID.test(s) ? s : null);
		const internal = () => new Answer({ status: 500, text: "500: Internal Server Error" });

		if (parts[0] === "organization") {
			if (parts.length === 1 && method === "GET") {
				const all = [...this.orgs.values()]
					.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
					.map(o => this.orgDict(o));
				if (!query.has("page")) return { status: 200, json: all };
				const page = Math.max(0, Number(query.get("page")) || 0);
				return {
					status: 200,
					json: {
						page,
						page_total: Math.max(0, Math.ceil(all.length / 5) - 1),
						organizations: all.slice(page * 5, page * 5 + 5),
					},
				};
			}
			if (parts.length === 1 && method === "POST") {
				const body = json();
				if (!body || typeof body !== "object" || typeof body.name !== "string") throw internal();
				const org = this.addOrg(body.name, { authApi: body.auth_api === true });
				return { status: 200, json: this.orgDict(org) };
			}
			if (parts.length === 2) {
				const org = this.orgs.get(oid(parts[1]) ?? "");
				if (method === "GET") {
					if (!org) throw internal();
					return { status: 200, json: this.orgDict(org) };
				}
				if (method === "PUT") {
					if (!org) throw internal();
					const body = json();
					if (!body || typeof body.name !== "string") throw internal();
					org.name = body.name;
					if (body.auth_api !== undefined) this.setAuthApi(org, body.auth_api === true);
					if (org.auth_api && body.auth_token === true) org.auth_token = randomFrom(ALNUM, 32);
					if (org.auth_api && body.auth_secret === true) org.auth_secret = randomFrom(ALNUM, 32);
					return { status: 200, json: this.orgDict(org) };
				}
				if (method === "DELETE") {
					if (!org) throw internal();
					this.removeOrg(org.id);
					return { status: 200, json: {} };
				}
			}
		}

		if (parts[0] === "user" && parts.length >= 2) {
			const org = this.orgs.get(oid(parts[1]) ?? "");
			if (parts.length === 2 && method === "GET") {
				if (!org) return { status: 404, text: "404: Not Found" };
				const all = this.usersOf(org.id)
					.filter(u => u.type === "client")
					.sort((a, b) => (a.name < b.name ? -1 : 1))
					.map(u => this.userView(u));
				if (!query.has("page")) return { status: 200, json: all };
				const page = Math.max(0, Number(query.get("page")) || 0);
				return {
					status: 200,
					json: {
						page,
						page_total: Math.max(0, Math.ceil(all.length / 10) - 1),
						server_count: this.servers.length,
						users: all.slice(page * 10, page * 10 + 10),
					},
				};
			}
			if (parts.length === 2 && method === "POST") {
				if (!org) throw internal();
				const body = json();
				const docs = Array.isArray(body) ? body : [body];
				const make = (d: Record<string, any>) => {
					if (!d || typeof d.name !== "string") throw internal();
					if (d.pin !== undefined && d.pin !== null && d.pin !== "") {
						if (!/^\d+$/.test(String(d.pin)))
							throw new Answer({
								status: 400,
								json: { error: "pin_not_digits", error_msg: "User pin must contain only digits." },
							});
						if (String(d.pin).length < 6)
							throw new Answer({
								status: 400,
								json: { error: "pin_too_short", error_msg: "User pin must be at least 6 digits." },
							});
					}
					return this.addUser(org.id, {
						name: d.name,
						email: d.email ?? null,
						groups: Array.isArray(d.groups) ? d.groups : [],
						pin: d.pin ? String(d.pin) : null,
						auth_type: ["local", "duo", "yubico", "google", "saml", "radius", "plugin"].includes(d.auth_type)
							? d.auth_type
							: "local",
						yubico_id: typeof d.yubico_id === "string" ? d.yubico_id.slice(0, 12) : null,
						disabled: d.disabled === true,
						bypass_secondary: d.bypass_secondary === true,
						client_to_client: d.client_to_client === true,
						mac_addresses: d.mac_addresses ?? null,
						dns_servers: d.dns_servers ?? null,
						dns_suffix: d.dns_suffix ?? null,
						port_forwarding: Array.isArray(d.port_forwarding) ? d.port_forwarding : [],
					});
				};
				if (docs.length > 10) {
					setImmediate(() => docs.forEach(d => make(d)));
					return {
						status: 202,
						json: { status: "users_background", status_msg: "Users are being added in the background." },
					};
				}
				return { status: 200, json: docs.map(d => this.userDict(make(d))) };
			}
			const user = this.users.get(oid(parts[2]) ?? "");
			const mine = user && org && user.organization === org.id ? user : undefined;
			if (parts.length === 3 && method === "GET") {
				if (!mine) return { status: 404, text: "404: Not Found" };
				return { status: 200, json: this.userView(mine) };
			}
			if (parts.length === 3 && method === "PUT") {
				if (!mine) throw internal();
				const body = json() ?? {};
				for (const key of [
					"name",
					"email",
					"groups",
					"auth_type",
					"yubico_id",
					"mac_addresses",
					"dns_servers",
					"dns_suffix",
					"port_forwarding",
				] as const) {
					if (key in body) (mine as any)[key] = body[key];
				}
				// The quirk: booleans a PUT leaves out are reset to false.
				mine.disabled = body.disabled === true;
				mine.bypass_secondary = body.bypass_secondary === true;
				mine.client_to_client = body.client_to_client === true;
				if (body.pin !== true && "pin" in body) mine.pin = body.pin ? String(body.pin) : null;
				return { status: 200, json: this.userDict(mine) };
			}
			if (parts.length === 3 && method === "DELETE") {
				if (!mine) throw internal();
				this.users.delete(mine.id);
				return { status: 200, json: {} };
			}
			if (parts.length === 4 && parts[3] === "otp_secret" && method === "PUT") {
				if (!mine) throw internal();
				mine.otp_secret = randomFrom(BASE32, 16);
				return { status: 200, json: this.userDict(mine) };
			}
		}

		if (parts[0] === "key" && parts.length === 3 && method === "GET" && parts[2].endsWith(".tar")) {
			const org = this.orgs.get(oid(parts[1]) ?? "");
			const user = this.users.get(oid(parts[2].slice(0, -4)) ?? "");
			if (!org || !user || user.organization !== org.id) return { status: 404, text: "404: Not Found" };
			return {
				status: 200,
				bytes: this.profile(org.id, user.id),
				headers: {
					"Content-Type": "application/octet-stream",
					"Content-Disposition": `attachment; filename="${user.name}.tar"`,
				},
			};
		}
		return { status: 404, text: "404: Not Found" };
	}

	/** `User.dict()` plus the UI fields Pritunl's GETs add. */
	private userView(u: PritunlUser) {
		return {
			...this.userDict(u),
			gravatar: true,
			audit: false,
			status: false,
			sso: null,
			auth_modes: [],
			dns_mapping: null,
			network_links: [],
			servers: this.servers.map(name => ({ id: objectId(), name, status: false, virt_address: null })),
		};
	}

	private setAuthApi(org: PritunlOrg, on: boolean): void {
		org.auth_api = on;
		org.auth_token = on ? (org.auth_token ?? randomFrom(ALNUM, 32)) : null;
		org.auth_secret = on ? (org.auth_secret ?? randomFrom(ALNUM, 32)) : null;
	}
}

class Answer extends Error {
	constructor(readonly answer: { status: number; json?: unknown; text?: string }) {
		super(String(answer.status));
	}
}

// ------------------------------------------------------------------ standalone

async function main(): Promise<() => Promise<void>> {
	const env = process.env;
	const sim = new PritunlSimulator({
		username: env.SIM_USER || undefined,
		password: env.SIM_PASSWORD || undefined,
		apiToken: env.SIM_API_TOKEN || undefined,
		apiSecret: env.SIM_API_SECRET || undefined,
		host: env.SIM_HOST || "127.0.0.1",
	});
	const demo = sim.addOrg("demo", { authApi: true });
	sim.addUser(demo.id, { name: "web-01.site-a.example", yubico_id: "ccccccbcgujh" });
	sim.addUser(demo.id, { name: "db-01.site-a.example", pin: "123456" });
	const { url } = await sim.start(env.SIM_PORT ? Number(env.SIM_PORT) : 9700);
	console.log(
		[
			`Pritunl simulator listening on ${url}`,
			`  session login: username=${sim.username} password=${sim.password}`,
			`  API token:     token=${sim.apiToken} secret=${sim.apiSecret}`,
			`  organization:  demo (${demo.id}) with users web-01.site-a.example, db-01.site-a.example`,
			`  a manager:     curl -XPOST localhost:3000/api/vpn_managers -H "Authorization: Bearer $T" -H 'content-type: application/json' \\`,
			`                   -d '{"name":"sim","server_address":"${url}","dashboard_address":"${url}/","username":"${sim.username}","password":"${sim.password}"}'`,
		].join("\n"),
	);
	return () => sim.stop();
}

if (require.main === module) runStandalone(main);
