/**
 * People's tokens (services/tokens/personal.ts; docs/security.md, "Single sign-on" and "Principals"), through the
 * tokens service's own actions in an in-process broker on the embedded store: the sessions a sign-in opens and what
 * a new sign-in revokes, a person revoked, a sign-out, the tokens a caller makes for themselves (never reaching
 * further than the caller), lists and revokes of one's own. A caller is what the gateway makes of a secret
 * (`tokens.verify`); "the gateways are told" is the `tokens.created` / `tokens.updated` event their caches listen to.
 */
import { ServiceBroker } from "moleculer";
import TokensService from "../../services/tokens/tokens.service";
import { hashToken } from "../../lib/http/auth";
import type { Doc, Store } from "../../lib/storage/store";

const ADMIN = "personal-spec-admin-token-0123456789";
const DAY = 86_400_000;

interface Session {
	id: string;
	secret: string;
	expires: Date;
	revoked: number;
}
interface Answer {
	status?: number;
	body?: Doc;
	error?: { code: number; message: string; data?: { issues?: Doc } };
}

let broker: ServiceBroker;
const saved = { ...process.env };
/** The events the gateways' caches listen to, as [op, ids]. */
let told: Array<[string, string[]]> = [];

const store = (): Store => (broker.getLocalService("tokens") as unknown as { store: Store }).store;
const stored = (id: string) => store().findOne({ _id: id });
/** What the gateway makes of a secret: the caller, or null (a request with it is a 401). */
const verify = (secret: string) =>
	broker.call<Doc | null, { hash: string }>("tokens.verify", { hash: hashToken(secret) });
const live = async (...secrets: string[]) => Promise.all(secrets.map(async s => (await verify(s)) !== null));

/** What sessions.ts asks at a sign-in. */
const signIn = (subject: string, role: string, scope?: Doc, ttlS = 3600) =>
	broker.call<Session, Doc>("tokens.openSession", {
		subject,
		name: subject.replace(/^oidc:/, ""),
		role,
		...(scope ? { scope } : {}),
		ttlS,
	});

/** An action called as the gateway calls it for a request made with `secret` (no caller when null). */
async function as(secret: string | null, action: string, params: Doc = {}): Promise<Answer> {
	const user = secret === null ? undefined : await verify(secret);
	if (secret !== null && !user) throw new Error("the gateway would refuse that secret (401)");
	const meta: Doc = { user };
	try {
		const body = await broker.call<Doc, Doc>(`tokens.${action}`, params, { meta });
		return { status: (meta.$statusCode as number | undefined) ?? 200, body };
	} catch (err) {
		const e = err as { code: number; message: string; data?: { issues?: Doc } };
		return { error: { code: e.code, message: e.message, data: e.data } };
	}
}

/** A token `secret` makes for itself (POST /api/tokens/mine): its id and secret. */
async function mint(secret: string, body: Doc): Promise<{ id: string; secret: string }> {
	const res = await as(secret, "createMine", { body });
	if (res.status !== 201) throw new Error(`mine: ${JSON.stringify(res.error)}`);
	return { id: String(res.body!._id), secret: String(res.body!.token) };
}

/** A service account token an admin makes (POST /api/tokens). */
async function serviceToken(name: string, role: string, fields: Doc = {}): Promise<{ id: string; secret: string }> {
	const res = await as(ADMIN, "create", { body: { name, role, ...fields } });
	if (!res.body) throw new Error(`create: ${JSON.stringify(res.error)}`);
	return { id: String(res.body._id), secret: String(res.body.token) };
}

beforeAll(async () => {
	Object.assign(process.env, { DATA_DIR: ":memory:", MONGO_URI: "", CTL_ADMIN_TOKEN: ADMIN });
	broker = new ServiceBroker({ logger: false, transporter: null });
	broker.createService(TokensService);
	broker.createService({
		name: "gateway-cache",
		events: {
			"tokens.created"(ctx: { params: { ids: string[] } }) {
				told.push(["created", ctx.params.ids.map(String)]);
			},
			"tokens.updated"(ctx: { params: { ids: string[] } }) {
				told.push(["updated", ctx.params.ids.map(String)]);
			},
		},
	});
	await broker.start();
});
afterAll(async () => {
	await broker?.stop();
	process.env = saved;
});
beforeEach(() => {
	told = [];
});

describe("a sign-in's session", () => {
	it("is a token of the role and scope the groups give, named '<name> (session)', lasting ttlS, whose secret is answered once", async () => {
		const before = Date.now();
		const s = await signIn("oidc:ann", "operator", { functions: ["test.*"] }, 600);
		expect(s.secret).toMatch(/^fct_[A-Za-z0-9_-]{43}$/);
		expect(s.revoked).toBe(0);
		expect(s.expires.getTime()).toBeGreaterThanOrEqual(before + 600_000);
		expect(s.expires.getTime()).toBeLessThanOrEqual(Date.now() + 600_000);
		expect(await verify(s.secret)).toEqual({
			id: s.id,
			name: "ann (session)",
			role: "operator",
			scope: { functions: ["test.*"] },
			expires: s.expires,
			principal: "oidc:ann",
			subject: "oidc:ann",
			session: true,
		});
		const record = (await stored(s.id))!;
		expect(record).toMatchObject({
			hash: hashToken(s.secret),
			prefix: s.secret.slice(0, 8),
			revoked: false,
			session: true,
		});
		expect(JSON.stringify(record)).not.toContain(s.secret);
		expect(told).toEqual([["created", [s.id]]]);
		// Without a scope, none.
		const unscoped = await signIn("oidc:ann-unscoped", "viewer");
		expect(await verify(unscoped.secret)).toEqual(expect.objectContaining({ role: "viewer", scope: undefined }));
		expect("scope" in (await stored(unscoped.id))!).toBe(false);
	});

	it("drops the session records that expired more than 7 days ago when a new one opens; keeps the others", async () => {
		const old = await signIn("oidc:old", "viewer");
		const recent = await signIn("oidc:old", "viewer");
		const script = await mint(recent.secret, { name: "old-script" });
		await store().updateMany({ _id: old.id }, { $set: { expires: new Date(Date.now() - 7 * DAY - 60_000) } });
		await store().updateMany({ _id: recent.id }, { $set: { expires: new Date(Date.now() - 7 * DAY + 60_000) } });
		await store().updateMany({ _id: script.id }, { $set: { expires: new Date(Date.now() - 8 * DAY) } });
		await signIn("oidc:someone-else", "viewer");
		expect([await stored(old.id), await stored(recent.id), await stored(script.id)].map(d => d?._id ?? null)).toEqual([
			null,
			recent.id,
			script.id,
		]);
	});
});

describe("the internal actions the sign-in calls", () => {
	it("refuse what the sign-in never sends (a validation error, nothing written)", async () => {
		const refused = (action: string, params: Doc) =>
			expect(broker.call(`tokens.${action}`, params)).rejects.toMatchObject({ name: "ValidationError", code: 422 });
		const session = { subject: "oidc:val", name: "Val", role: "viewer", ttlS: 60 };
		await refused("openSession", { ...session, ttlS: 1.5 });
		await refused("openSession", { ...session, ttlS: 0 });
		await refused("openSession", { ...session, role: "root" });
		await refused("openSession", { ...session, subject: "" });
		await refused("revokeSubject", { subject: "" });
		await refused("closeSession", { hash: "f".repeat(63) });
		expect(await store().count({ subject: "oidc:val" })).toBe(0);
		const s = await signIn("oidc:val", "viewer");
		const res = await as(s.secret, "revokeMine", { id: 12 });
		expect(res.error).toMatchObject({ code: 422 });
	});
});

describe("a sign-in that gives less than before", () => {
	it("revokes, at a lower role, the tokens above it and what was made from them; the person's others and other people's stay", async () => {
		const first = await signIn("oidc:bo", "admin");
		const adminScript = await mint(first.secret, { name: "bo-admin" });
		const fromAdmin = await mint(adminScript.secret, { name: "bo-admin-viewer", role: "viewer" });
		const operatorScript = await mint(first.secret, { name: "bo-operator", role: "operator" });
		const viewerScript = await mint(first.secret, { name: "bo-viewer", role: "viewer" });
		const someoneElse = await signIn("oidc:cy", "admin");
		told = [];
		const second = await signIn("oidc:bo", "operator");
		// The session and the admin script reached further; fromAdmin went with its maker.
		expect(second.revoked).toBe(2);
		expect(
			await live(
				first.secret,
				adminScript.secret,
				fromAdmin.secret,
				operatorScript.secret,
				viewerScript.secret,
				someoneElse.secret,
				second.secret,
			),
		).toEqual([false, false, false, true, true, true, true]);
		expect(told).toEqual([["created", [second.id]]]);
		// Signed in again the same: nothing more goes.
		const third = await signIn("oidc:bo", "operator");
		expect(third.revoked).toBe(0);
		expect(await live(operatorScript.secret, viewerScript.secret, second.secret, third.secret)).toEqual([
			true,
			true,
			true,
			true,
		]);
	});

	it("revokes, at the same role and a narrower scope, the tokens beyond it and what was made from them; a session ends alone", async () => {
		const first = await signIn("oidc:di", "operator", { functions: ["test.*", "grains.*"] });
		const grains = await mint(first.secret, { name: "di-grains", scope: { functions: ["grains.items"] } });
		const both = await mint(first.secret, { name: "di-both", scope: { functions: ["test.ping", "grains.items"] } });
		const fromBoth = await mint(both.secret, { name: "di-both-ping", scope: { functions: ["test.ping"] } });
		const ping = await mint(first.secret, { name: "di-ping", scope: { functions: ["test.ping"] } });
		const all = await mint(first.secret, { name: "di-test", scope: { functions: ["test.*"] }, role: "viewer" });
		const second = await signIn("oidc:di", "operator", { functions: ["test.*"] });
		expect(second.revoked).toBe(3);
		expect(
			await live(first.secret, grains.secret, both.secret, fromBoth.secret, ping.secret, all.secret, second.secret),
		).toEqual([false, false, false, false, true, true, true]);
		// A person given a scope keeps no unscoped token; one whose scope goes keeps every token.
		const unscoped = await signIn("oidc:ed", "operator");
		const wide = await mint(unscoped.secret, { name: "ed-wide" });
		const narrow = await mint(unscoped.secret, { name: "ed-narrow", scope: { functions: ["test.ping"] } });
		expect((await signIn("oidc:ed", "operator", { functions: ["test.*"] })).revoked).toBe(2);
		expect(await live(unscoped.secret, wide.secret, narrow.secret)).toEqual([false, false, true]);
		expect((await signIn("oidc:ed", "operator")).revoked).toBe(0);
		expect(await live(narrow.secret)).toEqual([true]);
	});

	it("revokes, at a scope limited to groups, the tokens of other groups or of none", async () => {
		const [g1, g2] = ["aaaaaaaaaaaaaaaaaaaaaaa1", "aaaaaaaaaaaaaaaaaaaaaaa2"];
		const first = await signIn("oidc:fa", "operator", { groups: [g1, g2] });
		const inG1 = await mint(first.secret, { name: "fa-g1", scope: { groups: [g1] } });
		const inG2 = await mint(first.secret, { name: "fa-g2", scope: { groups: [g2] } });
		expect((await signIn("oidc:fa", "operator", { groups: [g1] })).revoked).toBe(2);
		expect(await live(first.secret, inG1.secret, inG2.secret)).toEqual([false, true, false]);
	});
});

describe("revoking a person (a sign-in whose groups give no role)", () => {
	it("revokes every token of theirs, found by subject or by principal, with what was made from them, and tells the gateways", async () => {
		const s = await signIn("oidc:gil", "operator");
		const script = await mint(s.secret, { name: "gil-script" });
		const job = await mint(script.secret, { name: "gil-job", role: "viewer" });
		// A record that names the person by principal only.
		await store().updateMany({ _id: job.id }, { $unset: { subject: true } });
		const other = await signIn("oidc:hal", "operator");
		told = [];
		expect(await broker.call("tokens.revokeSubject", { subject: "oidc:gil" })).toEqual({ revoked: 3 });
		expect(await live(s.secret, script.secret, job.secret, other.secret)).toEqual([false, false, false, true]);
		expect(told.length).toBe(1);
		expect(told[0][0]).toBe("updated");
		expect([...told[0][1]].sort()).toEqual([s.id, script.id, job.id].sort());
		// Nothing left to revoke: nothing said.
		told = [];
		expect(await broker.call("tokens.revokeSubject", { subject: "oidc:gil" })).toEqual({ revoked: 0 });
		expect(await broker.call("tokens.revokeSubject", { subject: "oidc:nobody" })).toEqual({ revoked: 0 });
		expect(told).toEqual([]);
	});
});

describe("a sign-out", () => {
	it("ends the session only (the tokens made in it are the person's), and tells the gateways; a token that is no session is not closed", async () => {
		const s = await signIn("oidc:ida", "operator");
		const script = await mint(s.secret, { name: "ida-script" });
		told = [];
		expect(await broker.call("tokens.closeSession", { hash: hashToken(script.secret) })).toEqual({ closed: false });
		expect(told).toEqual([]);
		expect(await broker.call("tokens.closeSession", { hash: hashToken(s.secret) })).toEqual({ closed: true });
		expect(told.map(([op]) => op)).toEqual(["updated"]);
		expect(await live(s.secret, script.secret)).toEqual([false, true]);
		// The record stays, revoked, so the audit log still names whose session it was.
		expect(await stored(s.id)).toMatchObject({
			name: "ida (session)",
			subject: "oidc:ida",
			session: true,
			revoked: true,
		});
	});
});

describe("a token a caller makes for itself (POST /api/tokens/mine)", () => {
	it("needs a caller (401) and a token's fields (422 saying so)", async () => {
		expect((await as(null, "createMine", { body: { name: "x" } })).error).toMatchObject({ code: 401 });
		const s = await signIn("oidc:jo", "operator");
		for (const body of [undefined, null, "x", ["x"], [{ name: "x" }]]) {
			const res = await as(s.secret, "createMine", { body });
			expect(res.error).toMatchObject({
				code: 422,
				data: { issues: { body: 'a token: {"name": "…", "role"?, "scope"?, "expires"?}' } },
			});
		}
		expect((await as(s.secret, "createMine", { body: {} })).error).toMatchObject({
			code: 422,
			data: { issues: { name: expect.any(String) } },
		});
		expect((await as(s.secret, "createMine", { body: { name: "x", role: "root" } })).error).toMatchObject({
			code: 422,
			data: { issues: { role: expect.any(String) } },
		});
		expect((await as(s.secret, "createMine", { body: { name: "x", expires: "soon" } })).error).toMatchObject({
			code: 422,
			data: { issues: { expires: "must be of datetime type (an HTTP-date or ISO 8601)" } },
		});
		expect(await store().count({ principal: "oidc:jo", session: { $ne: true } })).toBe(0);
	});

	it("is the caller's principal (a person's, with their subject), names its maker, has the caller's role unless asked, and is answered once with its secret (201)", async () => {
		const s = await signIn("oidc:kim", "operator", { functions: ["test.*"] });
		const before = Date.now();
		told = [];
		const res = await as(s.secret, "createMine", { body: { name: "kim-ci", scope: { functions: ["test.ping"] } } });
		expect(res.status).toBe(201);
		const made = res.body!;
		expect(made).toEqual({
			_status: "OK",
			_id: expect.stringMatching(/^[a-f0-9]{24}$/),
			name: "kim-ci",
			role: "operator",
			scope: { functions: ["test.ping"] },
			arbitrary_code: false,
			expires: expect.any(Date),
			prefix: String(made.token).slice(0, 8),
			revoked: false,
			principal: "oidc:kim",
			owner: s.id,
			_created: expect.any(Date),
			token: expect.stringMatching(/^fct_/),
		});
		// 90 days unless asked.
		expect((made.expires as Date).getTime()).toBeGreaterThanOrEqual(before + 90 * DAY);
		expect((made.expires as Date).getTime()).toBeLessThanOrEqual(Date.now() + 90 * DAY);
		expect(told).toEqual([["created", [made._id]]]);
		expect(await verify(String(made.token))).toMatchObject({
			id: made._id,
			name: "kim-ci",
			role: "operator",
			principal: "oidc:kim",
			subject: "oidc:kim",
		});
		expect((await stored(String(made._id)))!.hash).toBe(hashToken(String(made.token)));
		// A service account's token makes one of the same service account, without a subject, saying where it can run anything.
		const svc = await serviceToken("kim-svc", "admin");
		const child = (await as(svc.secret, "createMine", { body: { name: "svc-child" } })).body!;
		expect(child).toMatchObject({
			role: "admin",
			principal: `token:${svc.id}`,
			owner: svc.id,
			arbitrary_code: true,
			warning: expect.any(String),
		});
		expect("scope" in child).toBe(false);
		expect("subject" in (await stored(String(child._id)))!).toBe(false);
		expect(await verify(String(child.token))).not.toHaveProperty("subject");
	});

	it("never reaches further than the caller: a role above theirs, a scope beyond theirs (403 saying why)", async () => {
		const s = await signIn("oidc:lu", "operator", { functions: ["test.*"] });
		const above = await as(s.secret, "createMine", {
			body: { name: "lu-admin", role: "admin", scope: { functions: ["test.ping"] } },
		});
		expect(above.error).toEqual(
			expect.objectContaining({ code: 403, message: "a token you make may not have a role above yours (operator)" }),
		);
		const beyond = await as(s.secret, "createMine", { body: { name: "lu-cmd", scope: { functions: ["cmd.run"] } } });
		expect(beyond.error).toEqual(
			expect.objectContaining({
				code: 403,
				message: "a token you make may not reach further than you: functions outside your scope: cmd.run",
			}),
		);
		const unscoped = await as(s.secret, "createMine", { body: { name: "lu-all" } });
		expect(unscoped.error).toEqual(
			expect.objectContaining({
				code: 403,
				message:
					"a token you make may not reach further than you: your scope limits the functions: give scope.functions, among yours",
			}),
		);
		expect(
			(
				await as(s.secret, "createMine", {
					body: { name: "lu-viewer", role: "viewer", scope: { functions: ["test.*"] } },
				})
			).status,
		).toBe(201);
		expect((await as(s.secret, "listMine")).body!._items).toEqual([expect.objectContaining({ name: "lu-viewer" })]);
	});

	it("lasts at most a year, and no longer than the token that makes it (a session's expiry does not bind it); not in the past (422)", async () => {
		const s = await signIn("oidc:mo", "operator", undefined, 60);
		const yearAndDay = new Date(Date.now() + 366 * DAY);
		const tooLong = await as(s.secret, "createMine", { body: { name: "mo-long", expires: yearAndDay.toISOString() } });
		expect(tooLong.error).toMatchObject({
			code: 422,
			data: {
				issues: {
					expires: expect.stringMatching(/^must be at most \d{4}-.*Z \(a year, and no later than the token you use\)$/),
				},
			},
		});
		const limit = Date.parse(
			String((tooLong.error!.data!.issues as Doc).expires).replace(/^must be at most (\S+) .*$/, "$1"),
		);
		expect(limit).toBeGreaterThan(Date.now() + 364 * DAY);
		expect(limit).toBeLessThanOrEqual(Date.now() + 365 * DAY);
		const year = await as(s.secret, "createMine", {
			body: { name: "mo-year", expires: new Date(Date.now() + 364 * DAY).toISOString() },
		});
		expect(year.status).toBe(201);
		const past = await as(s.secret, "createMine", {
			body: { name: "mo-past", expires: new Date(Date.now() - 60_000).toISOString() },
		});
		expect(past.error).toMatchObject({ code: 422, data: { issues: { expires: "must be in the future" } } });
		// A token that expires in 10 days makes tokens for 10 days at most, and for 10 by default.
		const short = await serviceToken("mo-short", "operator", {
			expires: new Date(Date.now() + 10 * DAY).toISOString(),
		});
		const shortExpiry = ((await stored(short.id))!.expires as Date).getTime();
		const byDefault = (await as(short.secret, "createMine", { body: { name: "mo-default" } })).body!;
		expect((byDefault.expires as Date).getTime()).toBe(shortExpiry);
		const over = await as(short.secret, "createMine", {
			body: { name: "mo-over", expires: new Date(shortExpiry + 1000).toISOString() },
		});
		expect(over.error).toMatchObject({
			code: 422,
			data: {
				issues: {
					expires: `must be at most ${new Date(shortExpiry).toISOString()} (a year, and no later than the token you use)`,
				},
			},
		});
		expect(
			(
				await as(short.secret, "createMine", {
					body: { name: "mo-exact", expires: new Date(shortExpiry).toISOString() },
				})
			).status,
		).toBe(201);
		// A token without expiry makes 90-day tokens by default, like a session.
		const lasting = await serviceToken("mo-lasting", "operator");
		const fromLasting = (await as(lasting.secret, "createMine", { body: { name: "mo-90" } })).body!;
		expect((fromLasting.expires as Date).getTime()).toBeGreaterThan(Date.now() + 89 * DAY);
	});

	it("expires later than the instant it is made (422 at that very instant)", async () => {
		const s = await signIn("oidc:now", "operator");
		const caller = (await verify(s.secret))!;
		const at = new Date(Date.now() + 60_000);
		// Only the clock's Date is fixed: timers run as ever.
		jest.useFakeTimers({
			now: at,
			doNotFake: [
				"nextTick",
				"setImmediate",
				"clearImmediate",
				"setInterval",
				"clearInterval",
				"setTimeout",
				"clearTimeout",
				"queueMicrotask",
				"hrtime",
				"performance",
			],
		});
		try {
			const meta = { user: caller };
			await expect(
				broker.call("tokens.createMine", { body: { name: "now", expires: at.toISOString() } }, { meta }),
			).rejects.toMatchObject({ code: 422, data: { issues: { expires: "must be in the future" } } });
			expect(
				await broker.call(
					"tokens.createMine",
					{ body: { name: "now-plus", expires: new Date(at.getTime() + 1).toISOString() } },
					{ meta },
				),
			).toMatchObject({ name: "now-plus" });
		} finally {
			jest.useRealTimers();
		}
	});

	it("is refused (401) when its maker was revoked since the gateway let the request in, and nothing is left live", async () => {
		const svc = await serviceToken("nu", "operator");
		const caller = (await verify(svc.secret))!;
		await store().updateMany({ _id: svc.id }, { $set: { revoked: true } });
		const meta: Doc = { user: caller };
		await expect(broker.call("tokens.createMine", { body: { name: "nu-late" } }, { meta })).rejects.toMatchObject({
			code: 401,
			message: "the API token is invalid, expired or revoked",
		});
		expect(await store().count({ owner: svc.id })).toBe(0);
	});

	it("is revoked at once (401) when its maker is revoked while it is written", async () => {
		const svc = await serviceToken("ol", "operator");
		const caller = (await verify(svc.secret))!;
		const tokens = store();
		const insertMany = tokens.insertMany.bind(tokens);
		// The revocation of the maker lands between the check before the write and the write.
		tokens.insertMany = async (docs: Doc[]) => {
			await tokens.updateMany({ _id: svc.id }, { $set: { revoked: true } });
			await insertMany(docs);
		};
		told = [];
		try {
			await expect(
				broker.call("tokens.createMine", { body: { name: "ol-raced" } }, { meta: { user: caller } }),
			).rejects.toMatchObject({ code: 401, message: "the API token is invalid, expired or revoked" });
		} finally {
			tokens.insertMany = insertMany;
		}
		const made = await tokens.find({ owner: svc.id });
		expect(made.map(d => [d.name, d.revoked])).toEqual([["ol-raced", true]]);
		expect(told).toEqual([["updated", [String(made[0]._id)]]]);
	});
});

describe("one's own tokens (GET and DELETE /api/tokens/mine)", () => {
	it("lists a person's every token but sessions, newest first, never their hashes; a service account's, those made from it at any depth", async () => {
		const s = await signIn("oidc:pia", "operator");
		const a = await mint(s.secret, { name: "pia-a" });
		const b = await mint(a.secret, { name: "pia-b", role: "viewer" });
		const otherSession = await signIn("oidc:pia", "operator");
		const c = await mint(otherSession.secret, { name: "pia-c" });
		const listed = (await as(s.secret, "listMine")).body!._items as Doc[];
		expect(listed.map(t => t.name)).toEqual(["pia-c", "pia-b", "pia-a"]);
		expect(listed[1]).toEqual({
			_id: b.id,
			name: "pia-b",
			role: "viewer",
			arbitrary_code: false,
			expires: expect.any(Date),
			prefix: b.secret.slice(0, 8),
			revoked: false,
			principal: "oidc:pia",
			owner: a.id,
			_created: expect.any(Date),
		});
		expect((await as(c.secret, "listMine")).body!._items).toEqual(listed);

		const svc = await serviceToken("pia-svc", "operator");
		const child = await mint(svc.secret, { name: "svc-child" });
		const grandchild = await mint(child.secret, { name: "svc-grandchild" });
		const sibling = await mint(svc.secret, { name: "svc-sibling" });
		expect(((await as(svc.secret, "listMine")).body!._items as Doc[]).map(t => t.name)).toEqual([
			"svc-sibling",
			"svc-grandchild",
			"svc-child",
		]);
		expect(((await as(child.secret, "listMine")).body!._items as Doc[]).map(t => t._id)).toEqual([grandchild.id]);
		expect((await as(sibling.secret, "listMine")).body!._items as Doc[]).toEqual([]);
		expect((await as(null, "listMine")).error).toMatchObject({ code: 401 });
	});

	it("revokes one of the caller's own with what was made from it (204), telling the gateways; anyone else's is a 404", async () => {
		const svc = await serviceToken("qi-svc", "operator");
		const child = await mint(svc.secret, { name: "qi-child" });
		const grandchild = await mint(child.secret, { name: "qi-grandchild" });
		const other = await serviceToken("qi-other", "operator");
		for (const id of [svc.id, other.id, "not-an-id", "ffffffffffffffffffffffff"]) {
			expect((await as(child.secret, "revokeMine", { id })).error).toEqual(
				expect.objectContaining({ code: 404, message: `no token '${id}' of yours` }),
			);
		}
		// What the caller sent is echoed 24 characters at most.
		expect((await as(child.secret, "revokeMine", { id: `${child.id}-and-more` })).error).toEqual(
			expect.objectContaining({ code: 404, message: `no token '${child.id}' of yours` }),
		);
		expect((await as(null, "revokeMine", { id: child.id })).error).toMatchObject({ code: 401 });
		expect(await live(svc.secret, child.secret, grandchild.secret, other.secret)).toEqual([true, true, true, true]);
		told = [];
		const res = await as(svc.secret, "revokeMine", { id: child.id });
		expect([res.status, res.body]).toEqual([204, null]);
		expect(told).toEqual([["updated", [child.id, child.id, grandchild.id]]]);
		expect(await live(svc.secret, child.secret, grandchild.secret, other.secret)).toEqual([true, false, false, true]);
		// A person revokes theirs; not their session.
		const s = await signIn("oidc:ray", "operator");
		const script = await mint(s.secret, { name: "ray-script" });
		expect((await as(script.secret, "revokeMine", { id: s.id })).error).toMatchObject({ code: 404 });
		expect((await as(s.secret, "revokeMine", { id: script.id })).status).toBe(204);
		expect(await live(s.secret, script.secret)).toEqual([true, false]);
	});
});
