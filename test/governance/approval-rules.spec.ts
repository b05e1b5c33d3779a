/**
 * services/governance/approval-rules.ts: what a grant covers (the exact call, hosts, target, requester, while it is
 * carried out), until when a request holds its run, who may vote on it, and what the votes make of it.
 * (test/governance.spec.ts proves the same through the API, against the salt-api simulator.)
 */
import {
	DECISIONS,
	callDigest,
	expiryOf,
	grantCovers,
	statusAfter,
	stillPending,
	voteRefusal,
	type HeldCall,
	type Vote,
} from "../../services/governance/approval-rules";
import type { MatchedPolicy } from "../../services/governance/scope";
import type { Doc } from "../../lib/storage/store";

const CALL: HeldCall = {
	cm_client: "local_async",
	fun: "cmd.run",
	arg: ["systemctl restart nginx"],
	kwarg: { runas: "www-data" },
};
const HOSTS = ["web-01", "web-02"];
const TARGET = "L@web-01,web-02";
const OP = "0000000000000000000000a1";

/** A request being carried out for CALL on HOSTS (given as TARGET), made by OP. */
const running = (over: Doc = {}): Doc => ({
	status: "running",
	digest: callDigest(CALL, HOSTS, TARGET),
	target: TARGET,
	requester: { token: OP, identity: "token:op" },
	...over,
});

describe("a grant covers exactly the call it approved", () => {
	it("passes the approved call on its hosts (in any order) as its requester, while it is carried out", () => {
		expect(grantCovers(running(), CALL, HOSTS, OP)).toBe(true);
		expect(grantCovers(running(), { ...CALL }, ["web-02", "web-01"], OP)).toBe(true);
	});

	it.each([
		["another function", { ...CALL, fun: "cmd.script" }, HOSTS],
		["another client", { ...CALL, cm_client: "local" as const }, HOSTS],
		["other arguments", { ...CALL, arg: ["reboot"] }, HOSTS],
		["an argument more", { ...CALL, arg: ["systemctl restart nginx", "runas=root"] }, HOSTS],
		["no arguments", { cm_client: "local_async" as const, fun: "cmd.run", kwarg: CALL.kwarg }, HOSTS],
		["other kwargs", { ...CALL, kwarg: { runas: "root" } }, HOSTS],
		["a kwarg more", { ...CALL, kwarg: { runas: "www-data", test: true } }, HOSTS],
		["another host", CALL, ["web-01", "db-01"]],
		["a host more", CALL, [...HOSTS, "db-01"]],
		["a host fewer", CALL, ["web-01"]],
	] as Array<[string, HeldCall, string[]]>)("refuses %s", (_what, call, hosts) => {
		expect(grantCovers(running(), call, hosts, OP)).toBe(false);
	});

	it("is bound to the target the request was made with", () => {
		expect(grantCovers(running({ target: "G@role:web" }), CALL, HOSTS, OP)).toBe(false);
		// A request made without a target (its hosts only) is its own digest.
		expect(grantCovers(running({ target: undefined }), CALL, HOSTS, OP)).toBe(false);
		expect(grantCovers(running({ target: undefined, digest: callDigest(CALL, HOSTS) }), CALL, HOSTS, OP)).toBe(true);
		expect(callDigest(CALL, HOSTS)).not.toBe(callDigest(CALL, HOSTS, TARGET));
	});

	it("refuses another token than the requester's, and a request not being carried out", () => {
		expect(grantCovers(running(), CALL, HOSTS, "0000000000000000000000b2")).toBe(false);
		for (const status of ["pending", "approved", "done", "failed", "rejected", "expired", "superseded"])
			expect(grantCovers(running({ status }), CALL, HOSTS, OP)).toBe(false);
		expect(grantCovers(null, CALL, HOSTS, OP)).toBe(false);
		expect(
			grantCovers({ status: "running", digest: callDigest(CALL, HOSTS, TARGET), target: TARGET }, CALL, HOSTS, OP),
		).toBe(false);
	});
});

describe("a request's expiry", () => {
	const policy = (expires_after: number): MatchedPolicy => ({
		policy: "p",
		name: "p",
		count: 1,
		roles: ["admin"],
		expires_after,
	});

	it("is after the shortest expires_after of its policies", () => {
		const now = new Date("2026-11-29T12:00:00.000Z");
		expect(expiryOf([policy(86_400)], now).toISOString()).toBe("2026-11-30T12:00:00.000Z");
		expect(expiryOf([policy(86_400), policy(600), policy(3600)], now).toISOString()).toBe("2026-11-29T12:10:00.000Z");
	});

	it("holds a pending request's run until then, not at that moment", () => {
		const at = Date.parse("2026-11-29T12:10:00.000Z");
		const doc = { expires: new Date(at) };
		expect(stillPending(doc, at - 1)).toBe(true);
		expect(stillPending(doc, at)).toBe(false);
		expect(stillPending(doc, at + 1)).toBe(false);
		// Read back from a store as a string: the same.
		expect(stillPending({ expires: "2026-11-29T12:10:00.000Z" }, at - 1)).toBe(true);
		expect(stillPending(null, at)).toBe(false);
	});
});

describe("who may vote on a request", () => {
	const ADMINS: MatchedPolicy = {
		policy: "p1",
		name: "cmd.run by an admin",
		count: 1,
		roles: ["admin"],
		expires_after: 600,
	};
	const OPS: MatchedPolicy = {
		policy: "p2",
		name: "nginx by ops",
		count: 1,
		roles: ["operator", "admin"],
		expires_after: 600,
	};
	const request = (votes: Vote[] = [], policies = [ADMINS]): Doc => ({
		status: "pending",
		requester: { token: OP, identity: "token:op", name: "op" },
		policies,
		votes,
	});
	const voter = (over: Partial<{ id: string; name: string; role: string; principal: string }> = {}) => ({
		id: "0000000000000000000000c3",
		name: "alice",
		role: "admin",
		principal: "oidc:alice",
		...over,
	});

	it("lets an approver of a role a policy names vote", () => {
		expect(voteRefusal(request(), voter())).toBeNull();
		expect(voteRefusal(request([], [ADMINS, OPS]), voter({ role: "operator" }))).toBeNull();
	});

	it("refuses the requester, by any token of their principal or by the requesting token (403)", () => {
		for (const v of [voter({ principal: "token:op" }), voter({ id: OP, principal: "oidc:someone-else" })]) {
			const refused = voteRefusal(request(), v);
			expect([refused?.code, refused?.message]).toEqual([
				403,
				"the requester of a run cannot approve or reject it: another approver must",
			]);
		}
	});

	it("refuses a second vote of the same principal, whichever token it uses (409)", () => {
		const refused = voteRefusal(
			request([{ decision: "approved", role: "admin", identity: "oidc:alice" }]),
			voter({ id: "0000000000000000000000d4" }),
		);
		expect([refused?.code, refused?.message]).toEqual([409, "alice has already voted on this request"]);
		expect(voteRefusal(request([{ decision: "approved", role: "admin", identity: "oidc:bob" }]), voter())).toBeNull();
	});

	it("refuses a role no policy names, naming the roles that may (403)", () => {
		const refused = voteRefusal(request([], [ADMINS, OPS]), voter({ role: "viewer" }));
		expect([refused?.code, refused?.message]).toEqual([
			403,
			"the role viewer cannot decide this request: its policies take approvers of the roles admin, operator",
		]);
		expect(voteRefusal(request([], [ADMINS]), voter({ role: "operator" }))?.message).toBe(
			"the role operator cannot decide this request: its policies take approvers of the roles admin",
		);
	});

	it("reads the decision from the path's word only", () => {
		expect(DECISIONS).toEqual({ approve: "approved", reject: "rejected" });
		expect(DECISIONS.maybe).toBeUndefined();
	});
});

describe("what the votes make of a request", () => {
	const TWO_ADMINS: MatchedPolicy = {
		policy: "p1",
		name: "two admins",
		count: 2,
		roles: ["admin"],
		expires_after: 600,
	};
	const ONE_OP: MatchedPolicy = {
		policy: "p2",
		name: "an operator",
		count: 1,
		roles: ["operator"],
		expires_after: 600,
	};
	const vote = (decision: "approved" | "rejected", role: string, identity: string): Vote => ({
		decision,
		role,
		identity,
	});

	it("approves once every policy has its count of approvals from its own roles", () => {
		expect(statusAfter([TWO_ADMINS], [vote("approved", "admin", "a")])).toBe("pending");
		expect(statusAfter([TWO_ADMINS], [vote("approved", "admin", "a"), vote("approved", "admin", "b")])).toBe(
			"approved",
		);
		expect(
			statusAfter(
				[TWO_ADMINS],
				[vote("approved", "admin", "a"), vote("approved", "admin", "b"), vote("approved", "admin", "c")],
			),
		).toBe("approved");
		// An operator's approval does not count for the admins' policy, and the admins' do not for the operators'.
		expect(statusAfter([TWO_ADMINS], [vote("approved", "admin", "a"), vote("approved", "operator", "o")])).toBe(
			"pending",
		);
		expect(statusAfter([TWO_ADMINS, ONE_OP], [vote("approved", "admin", "a"), vote("approved", "admin", "b")])).toBe(
			"pending",
		);
		expect(
			statusAfter(
				[TWO_ADMINS, ONE_OP],
				[vote("approved", "admin", "a"), vote("approved", "operator", "o"), vote("approved", "admin", "b")],
			),
		).toBe("approved");
	});

	it("rejects at the first rejection, whatever approvals came before", () => {
		expect(statusAfter([TWO_ADMINS], [vote("rejected", "admin", "a")])).toBe("rejected");
		expect(statusAfter([TWO_ADMINS], [vote("approved", "admin", "a"), vote("rejected", "admin", "b")])).toBe(
			"rejected",
		);
		expect(statusAfter([ONE_OP], [vote("approved", "operator", "o"), vote("rejected", "operator", "p")])).toBe(
			"rejected",
		);
	});
});
