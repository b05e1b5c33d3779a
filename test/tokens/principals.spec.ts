/**
 * Principals, not tokens (issue 43, docs/security.md "Principals"): a token minted from a token
 * (`POST /api/tokens/mine`) belongs to the same person or service account, and is revoked with its maker, at any
 * depth; approvals count principals, so a requester's second token is still the requester and a voter's second
 * token is still the same voter; records from before principals get theirs at the start, on either store.
 * Runs go to the salt-api simulator, whose job log says what really ran.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { describeWithMongo, startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";
import { configOf } from "../../lib/config";
import { request, expectEveError, eventually, withQuery } from "../support/http";
import { hashToken, newToken } from "../../lib/http/auth";
import { newObjectId } from "../../lib/eve/ids";
import type { Store } from "../../lib/storage/store";

interface Minted {
	id: string;
	secret: string;
}

function principalsSuite(mongoUri: string | undefined): void {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A: string, B: string;

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	const as = (secret: string | undefined, method: string, path: string, body?: unknown) =>
		request(method, url(path), { token: secret, body });
	/** A token the admin makes (POST /api/tokens): a service account of its own. */
	const serviceToken = async (name: string, role: string): Promise<Minted> => {
		const res = await request("POST", url("tokens"), { body: { name, role } });
		if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`);
		return { id: res.body._id, secret: res.body.token };
	};
	/** A token `maker` makes for itself (POST /api/tokens/mine). */
	const mint = async (maker: Minted, name: string, role?: string, scope?: { functions: string[] }): Promise<Minted> => {
		const res = await as(maker.secret, "POST", "tokens/mine", {
			name,
			...(role ? { role } : {}),
			...(scope ? { scope } : {}),
		});
		if (res.status !== 201) throw new Error(`mine: ${res.status} ${res.text}`);
		return { id: res.body._id, secret: res.body.token };
	};
	/** A token with a scope `maker` makes for itself. */
	const mintScoped = (maker: Minted, name: string, scope: { functions: string[] }, role?: string) =>
		mint(maker, name, role, scope);
	const whoami = async (t: Minted) => (await as(t.secret, "GET", "whoami")).status;
	const store = (): Store => (h.broker!.getLocalService("tokens") as unknown as { store: Store }).store;
	const created = async (path: string, body: unknown): Promise<string> => {
		const res = await request("POST", url(path), { body });
		if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
		return res.body._id;
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 3,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
		});
		await sim.start();
		h = await startEmbedded({
			mongoUri,
			env: { ...sim.cmApiEnv, CM_SYNC_INTERVAL_MS: "3600000", CM_JOB_POLL_MS: "100", CM_JOB_TIMEOUT_MS: "3000" },
		});
		await eventually(
			async () =>
				(await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		[A, B] = sim.upMinions();
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("a token minted from a token", () => {
		it("belongs to its maker's principal and names its maker; the family is found by principal, and lists as a tree", async () => {
			const svc = await serviceToken("ci", "operator");
			const own = (await request("GET", url(`tokens/${svc.id}`))).body;
			expect(own.principal).toBe(`token:${svc.id}`);
			expect(own.owner).toBeUndefined();
			const child = await mint(svc, "ci-child");
			const grandchild = await mint(child, "ci-grandchild", "viewer");
			const family = (await request("GET", url("tokens", { where: { principal: own.principal }, sort: "_id" }))).body
				._items;
			expect(
				family.map((t: { _id: string; owner?: string; principal: string }) => [t._id, t.owner ?? null, t.principal]),
			).toEqual([
				[svc.id, null, own.principal],
				[child.id, svc.id, own.principal],
				[grandchild.id, child.id, own.principal],
			]);
			// `owner` alone finds only the first generation.
			expect(
				(await request("GET", url("tokens", { where: { owner: svc.id } }))).body._items.map(
					(t: { _id: string }) => t._id,
				),
			).toEqual([child.id]);
			expect((await as(grandchild.secret, "GET", "whoami")).body).toMatchObject({
				_id: grandchild.id,
				role: "viewer",
				principal: own.principal,
			});
			// The maker lists what it made, at any depth, each naming its maker; the child lists only its own.
			const mine = (await as(svc.secret, "GET", "tokens/mine")).body._items;
			expect(mine.map((t: { _id: string; owner: string }) => [t._id, t.owner])).toEqual([
				[grandchild.id, child.id],
				[child.id, svc.id],
			]);
			expect((await as(child.secret, "GET", "tokens/mine")).body._items.map((t: { _id: string }) => t._id)).toEqual([
				grandchild.id,
			]);
		});

		it("is revoked with its maker, at any depth, at once (admin DELETE /api/tokens/{id})", async () => {
			const leaked = await serviceToken("leaked", "operator");
			const child = await mint(leaked, "leaked-child");
			const grandchild = await mint(child, "leaked-grandchild");
			// Every one known to the gateway (its token cache) before the revocation.
			for (const t of [leaked, child, grandchild]) expect(await whoami(t)).toBe(200);
			expect((await request("DELETE", url(`tokens/${leaked.id}`))).status).toBe(204);
			expect([await whoami(leaked), await whoami(child), await whoami(grandchild)]).toEqual([401, 401, 401]);
			const family = (await request("GET", url("tokens", { where: { principal: `token:${leaked.id}` } }))).body._items;
			expect(family.map((t: { revoked: boolean }) => t.revoked)).toEqual([true, true, true]);
			// A revoked token runs nothing either (tasks and approvals ask tokens.authorizeRun).
			await expect(
				h.call("tokens.authorizeRun", { token: grandchild.id, client: "local", fun: "test.ping", targets: [A] }),
			).rejects.toMatchObject({ code: 403 });
		});

		it("is revoked with its maker through DELETE /api/tokens/mine/{id}; a token cannot revoke its maker", async () => {
			const svc = await serviceToken("mine-root", "operator");
			const child = await mint(svc, "mine-child");
			const grandchild = await mint(child, "mine-grandchild");
			for (const t of [svc, child, grandchild]) expect(await whoami(t)).toBe(200);
			expectEveError(await as(child.secret, "DELETE", `tokens/mine/${svc.id}`), 404);
			expect((await as(svc.secret, "DELETE", `tokens/mine/${child.id}`)).status).toBe(204);
			expect([await whoami(svc), await whoami(child), await whoami(grandchild)]).toEqual([200, 401, 401]);
		});

		it("cannot be made from a token revoked since the gateway let the request in (401), and nothing is written", async () => {
			const svc = await serviceToken("race-root", "operator");
			expect(await whoami(svc)).toBe(200);
			// Revoked in the store without telling the gateways: its cached caller still lets the request in.
			await store().updateMany({ _id: svc.id }, { $set: { revoked: true } });
			const refused = expectEveError(await as(svc.secret, "POST", "tokens/mine", { name: "too-late" }), 401);
			expect(refused._error.message).toMatch(/revoked/);
			expect(await store().count({ owner: svc.id })).toBe(0);
		});
	});

	describe("a person", () => {
		it("is the principal of their sessions and of the tokens made from them; a sign-out ends only the session, revoking the person ends all", async () => {
			const session = await h.call<{ id: string; secret: string }>("tokens.openSession", {
				subject: "oidc:alice",
				name: "Alice",
				role: "operator",
				ttlS: 3600,
			});
			const script = await mint({ id: session.id, secret: session.secret }, "alice-ci");
			const fromScript = await mint(script, "alice-ci-narrow", "viewer");
			expect((await as(fromScript.secret, "GET", "whoami")).body).toMatchObject({
				principal: "oidc:alice",
				subject: "oidc:alice",
			});
			expect((await request("GET", url(`tokens/${script.id}`))).body).toMatchObject({
				principal: "oidc:alice",
				owner: session.id,
			});
			await h.call("tokens.closeSession", { hash: hashToken(session.secret) });
			expect([
				await whoami({ id: session.id, secret: session.secret }),
				await whoami(script),
				await whoami(fromScript),
			]).toEqual([401, 200, 200]);
			expect(await h.call("tokens.revokeSubject", { subject: "oidc:alice" })).toEqual({ revoked: 2 });
			expect([await whoami(script), await whoami(fromScript)]).toEqual([401, 401]);
		});

		it("signed in again with the same role and a narrower scope, keeps only the tokens within it: the others are revoked (docs/security.md, sign-in)", async () => {
			// What the sign-in (services/api/sessions.ts) asks for a person whose groups give `scope`.
			const signIn = (scope: { functions: string[] }) =>
				h.call<{ id: string; secret: string; revoked: number }>("tokens.openSession", {
					subject: "oidc:carol",
					name: "Carol",
					role: "operator",
					scope,
					ttlS: 3600,
				});
			const first = await signIn({ functions: ["test.*", "grains.*"] });
			const session = { id: first.id, secret: first.secret };
			const grains = await mintScoped(session, "carol-grains", { functions: ["grains.items"] });
			const both = await mintScoped(session, "carol-both", { functions: ["test.ping", "grains.items"] });
			// Within the new scope itself, but made from a token that reaches further: it goes with its maker.
			const fromBoth = await mintScoped(both, "carol-both-child", { functions: ["test.ping"] });
			const ping = await mintScoped(session, "carol-ping", { functions: ["test.ping"] });
			const viewer = await mintScoped(session, "carol-viewer", { functions: ["test.*"] }, "viewer");
			for (const t of [session, grains, both, fromBoth, ping, viewer]) expect(await whoami(t)).toBe(200);

			// The group that gave grains.* was taken away at the provider: same role, narrower scope. The first session
			// reaches further and ends, alone (as at a sign-out): the tokens made in it within test.* keep working.
			const second = await signIn({ functions: ["test.*"] });
			expect(await Promise.all([session, grains, both, fromBoth, ping, viewer, second].map(whoami))).toEqual([
				401, 401, 401, 401, 200, 200, 200,
			]);
			// Runs are refused to the revoked tokens as well (tasks and approvals ask tokens.authorizeRun).
			await expect(
				h.call("tokens.authorizeRun", { token: grains.id, client: "local", fun: "grains.items", targets: [A] }),
			).rejects.toMatchObject({ code: 403 });
			expect(
				await h.call("tokens.authorizeRun", { token: ping.id, client: "local", fun: "test.ping", targets: [A] }),
			).toMatchObject({ id: ping.id, principal: "oidc:carol" });

			// Signed in again with the same scope: nothing more is revoked.
			const third = await signIn({ functions: ["test.*"] });
			expect(await Promise.all([ping, viewer, second, third].map(whoami))).toEqual([200, 200, 200, 200]);
		});
	});

	describe("approvals count principals", () => {
		it("refuses the requester's minted token as an approver, whatever its role (operator and admin policies)", async () => {
			const policy = await created("approval_policies", {
				name: "cmd.run by two",
				functions: ["cmd.run"],
				approvers: { count: 1, roles: ["operator", "admin"] },
			});
			for (const role of ["operator", "admin"]) {
				const from = sim.jobs().length;
				const requester = await serviceToken(`requester-${role}`, role);
				const held = await as(requester.secret, "POST", `hosts/${A}`, { fun: "cmd.run", arg: [`id # ${role}`] });
				expect(held.status).toBe(202);
				const id = held.body.approval._id;
				const second = await mint(requester, `requester-${role}-second`);
				const refused = expectEveError(
					await as(second.secret, "POST", `approvals/${id}/approve`, { comment: "looks fine to me" }),
					403,
				);
				expect(refused._error.message).toMatch(/requester .* cannot approve/);
				expectEveError(await as(second.secret, "POST", `approvals/${id}/reject`, {}), 403);
				expect((await request("GET", url(`approvals/${id}`))).body).toMatchObject({ status: "pending", votes: [] });
				expect(sim.jobs().length).toBe(from);
				// Another principal's vote runs it, once.
				const ok = await request("POST", url(`approvals/${id}/approve`), { body: {} });
				expect(ok.body.status).toBe("done");
				expect(
					sim
						.jobs()
						.slice(from)
						.map(j => [j.fun, j.arg]),
				).toEqual([["cmd.run", [`id # ${role}`]]]);
			}
			expect((await request("DELETE", url(`approval_policies/${policy}`))).status).toBe(204);
		});

		it("counts one vote per principal, whichever of its tokens votes", async () => {
			const policy = await created("approval_policies", {
				name: "pkg by two admins",
				functions: ["pkg.install"],
				approvers: { count: 2, roles: ["admin"] },
			});
			const from = sim.jobs().length;
			const op = await serviceToken("pkg-op", "operator");
			const voter = await serviceToken("voter", "admin");
			const voterAgain = await mint(voter, "voter-again");
			const id = (await as(op.secret, "POST", `hosts/${B}`, { fun: "pkg.install", arg: ["nginx"] })).body.approval._id;
			expect((await as(voter.secret, "POST", `approvals/${id}/approve`, {})).body.status).toBe("pending");
			const twice = expectEveError(await as(voterAgain.secret, "POST", `approvals/${id}/approve`, {}), 409);
			expect(twice._error.message).toMatch(/already voted/);
			expect(sim.jobs().length).toBe(from);
			// A second principal completes it.
			expect((await request("POST", url(`approvals/${id}/approve`), { body: {} })).body.status).toBe("done");
			expect(
				sim
					.jobs()
					.slice(from)
					.map(j => j.fun),
			).toEqual(["pkg.install"]);
			expect((await request("DELETE", url(`approval_policies/${policy}`))).status).toBe(204);
		});
	});

	describe("records from before principals", () => {
		it("get their principal at the start, and the live tokens made from revoked ones are revoked", async () => {
			const now = new Date();
			const old = (fields: Record<string, unknown>) => {
				const secret = newToken();
				return {
					secret,
					doc: {
						_id: newObjectId(),
						role: "operator",
						hash: hashToken(secret),
						prefix: secret.slice(0, 8),
						revoked: false,
						_created: now,
						_updated: now,
						...fields,
					},
				};
			};
			const root = old({ name: "old-root" });
			const child = old({ name: "old-child", owner: root.doc._id });
			const grandchild = old({ name: "old-grandchild", owner: child.doc._id });
			const person = old({ name: "old-person", subject: "oidc:bob" });
			const personChild = old({ name: "old-person-child", subject: "oidc:bob", owner: person.doc._id });
			const leaked = old({ name: "old-leaked", revoked: true });
			const leakedChild = old({ name: "old-leaked-child", owner: leaked.doc._id });
			const orphan = old({ name: "old-orphan", owner: "0123456789abcdef01234567" });
			const all = [root, child, grandchild, person, personChild, leaked, leakedChild, orphan];
			await store().insertMany(all.map(t => t.doc));
			await h.restart();
			const principalOf = async (t: { doc: { _id: string } }) =>
				(await request("GET", url(`tokens/${t.doc._id}`))).body.principal;
			expect(await Promise.all(all.map(principalOf))).toEqual([
				`token:${root.doc._id}`,
				`token:${root.doc._id}`,
				`token:${root.doc._id}`,
				"oidc:bob",
				"oidc:bob",
				`token:${leaked.doc._id}`,
				`token:${leaked.doc._id}`,
				"token:0123456789abcdef01234567",
			]);
			const status = (t: { secret: string }) => as(t.secret, "GET", "whoami").then(r => r.status);
			expect(await Promise.all([root, grandchild, personChild, leakedChild].map(status))).toEqual([200, 200, 200, 401]);
			expect(await store().count({ principal: { $exists: false } })).toBe(0);
		});
	});

	describe("a changed CTL_ADMIN_TOKEN", () => {
		// Last: the suite's admin token is revoked here.
		it("revokes the previous bootstrap admin with every token minted from it", async () => {
			const admin = { id: "", secret: process.env.FLEET_TEST_TOKEN! };
			const child = await mint(admin, "admin-script");
			const grandchild = await mint(child, "admin-script-job", "viewer");
			const rotated = newToken();
			// The setting as a start with the new CTL_ADMIN_TOKEN has it (the configuration is read once, at the start).
			const config = configOf(h.broker!);
			const before = config.adminToken;
			config.adminToken = rotated;
			try {
				await (h.broker!.getLocalService("tokens") as unknown as { bootstrap(): Promise<void> }).bootstrap();
			} finally {
				config.adminToken = before;
			}
			expect([await whoami(admin), await whoami(child), await whoami(grandchild)]).toEqual([401, 401, 401]);
			expect((await as(rotated, "GET", "whoami")).body).toMatchObject({ name: "bootstrap-admin", role: "admin" });
		});
	});
}

describe("principals, not tokens (NeDB)", () => principalsSuite(undefined));
describeWithMongo("principals, not tokens (MongoDB wire protocol)", uri =>
	principalsSuite(uri ? uniqueMongoUri(uri) : undefined),
);
