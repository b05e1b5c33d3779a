/**
 * The checks on one token record (services/tokens/token-checks.ts; docs/security.md, "API tokens"): a revoked or
 * expired token acts no more, from the instant of its expiry; the caller the gateway and a run's audit know; why a
 * token authorizes no run; the expiry a client sends (an HTTP-date or ISO 8601). The clock is given; every
 * expectation is a literal.
 */
import {
	expiryIssue,
	parseExpires,
	runCaller,
	tokenRefusal,
	usable,
	verifiedCaller,
} from "../../services/tokens/token-checks";

const NOW = Date.parse("2030-01-01T00:00:00.000Z");
const ID = "0123456789abcdef01234567";
const record = (fields: Record<string, unknown> = {}) => ({
	_id: ID,
	name: "ci",
	role: "operator",
	revoked: false,
	hash: "h".repeat(64),
	...fields,
});

describe("a token acts", () => {
	it("while stored, not revoked and before its expiry; from the instant of its expiry, no more", () => {
		expect(usable(record(), NOW)).toBe(true);
		expect(usable(record({ expires: new Date(NOW + 1) }), NOW)).toBe(true);
		expect(usable(record({ expires: new Date(NOW) }), NOW)).toBe(false);
		expect(usable(record({ expires: new Date(NOW - 1) }), NOW)).toBe(false);
		expect(usable(record({ revoked: true }), NOW)).toBe(false);
		expect(usable(record({ revoked: true, expires: new Date(NOW + 60_000) }), NOW)).toBe(false);
		expect(usable(null, NOW)).toBe(false);
		// Only `revoked: true` revokes; an expiry that is no date (never written so) does not end it.
		expect(usable(record({ revoked: undefined }), NOW)).toBe(true);
		expect(usable(record({ expires: "2000-01-01T00:00:00Z" }), NOW)).toBe(true);
	});

	it("authorizes a run only when found and acting: otherwise the refusal says which", () => {
		expect(tokenRefusal(null, NOW)).toBe("no token authorizes it (unknown token)");
		expect(tokenRefusal(record({ revoked: true }), NOW)).toBe("the token that authorizes it is revoked or expired");
		expect(tokenRefusal(record({ expires: new Date(NOW) }), NOW)).toBe(
			"the token that authorizes it is revoked or expired",
		);
		expect(tokenRefusal(record({ expires: new Date(NOW + 1000) }), NOW)).toBeNull();
	});
});

describe("the caller a token is", () => {
	it("for the gateway: id, name, role, scope, expiry and principal; the person and the session when it has them; never its hash", () => {
		const expires = new Date(NOW + 3_600_000);
		expect(verifiedCaller(record({ scope: { functions: ["test.*"] }, expires }), "token:svc")).toEqual({
			id: ID,
			name: "ci",
			role: "operator",
			scope: { functions: ["test.*"] },
			expires,
			principal: "token:svc",
		});
		expect(verifiedCaller(record({ subject: "oidc:ann", session: true }), "oidc:ann")).toEqual({
			id: ID,
			name: "ci",
			role: "operator",
			scope: undefined,
			expires: undefined,
			principal: "oidc:ann",
			subject: "oidc:ann",
			session: true,
		});
		const script = verifiedCaller(record({ subject: "oidc:ann", session: false }), "oidc:ann");
		expect(script).toEqual({
			id: ID,
			name: "ci",
			role: "operator",
			scope: undefined,
			expires: undefined,
			principal: "oidc:ann",
			subject: "oidc:ann",
		});
		expect("session" in script).toBe(false);
		expect("subject" in verifiedCaller(record({ subject: "" }), "token:x")).toBe(false);
	});

	it("for a run's audit: id, name, role and principal, with its scope and person when it has them", () => {
		expect(runCaller(record(), "token:svc")).toEqual({ id: ID, name: "ci", role: "operator", principal: "token:svc" });
		expect(Object.keys(runCaller(record(), "token:svc")).sort()).toEqual(["id", "name", "principal", "role"]);
		expect(
			runCaller(
				record({ scope: { groups: ["g"] }, subject: "oidc:bo", expires: new Date(NOW), session: true }),
				"oidc:bo",
			),
		).toEqual({
			id: ID,
			name: "ci",
			role: "operator",
			principal: "oidc:bo",
			scope: { groups: ["g"] },
			subject: "oidc:bo",
		});
	});
});

describe("the expiry a client sends", () => {
	it("is an HTTP-date or an ISO 8601 time, made a Date; a Date or none is kept as it is", () => {
		expect(parseExpires({ name: "a", expires: "Tue, 01 Jan 2030 00:00:00 GMT" })).toEqual({
			doc: { name: "a", expires: new Date("2030-01-01T00:00:00Z") },
		});
		expect(parseExpires({ name: "a", expires: "2030-01-01T12:30:00Z" })).toEqual({
			doc: { name: "a", expires: new Date("2030-01-01T12:30:00Z") },
		});
		expect(parseExpires({ name: "a", expires: "2030-01-01T12:30:00+02:00" })).toEqual({
			doc: { name: "a", expires: new Date("2030-01-01T10:30:00Z") },
		});
		const date = new Date(NOW);
		const withDate = { name: "a", expires: date };
		expect(parseExpires(withDate).doc).toBe(withDate);
		const without = { name: "a" };
		expect(parseExpires(without)).toEqual({ doc: without });
		expect(parseExpires(without).doc).toBe(without);
	});

	it("is refused otherwise, saying what it must be: a bare date, a number, garbage, null, an impossible time, no string", () => {
		const issue = { expires: "must be of datetime type (an HTTP-date or ISO 8601)" };
		// A year of four digits: the expanded form (+002030-…) is ISO 8601 only by agreement.
		const refused = [
			"2030-01-01",
			"01/01/2030",
			"tomorrow",
			"",
			"x2030-01-01T00:00:00Z",
			"+002030-01-01T00:00:00Z",
			"2030-13-45T99:00:00Z",
		];
		for (const expires of [
			...refused,
			1893456000000,
			null,
			{},
			["2030-01-01T00:00:00Z"],
			["Tue, 01 Jan 2030 00:00:00 GMT"],
		]) {
			expect(parseExpires({ name: "a", expires })).toEqual({ doc: { name: "a", expires }, issues: issue });
		}
	});

	it("must be later than now", () => {
		expect(expiryIssue({ expires: new Date(NOW + 1) }, NOW)).toBeNull();
		expect(expiryIssue({ expires: new Date(NOW) }, NOW)).toEqual({ expires: "must be in the future" });
		expect(expiryIssue({ expires: new Date(NOW - 1) }, NOW)).toEqual({ expires: "must be in the future" });
		expect(expiryIssue({}, NOW)).toBeNull();
		expect(expiryIssue({ expires: "2000-01-01" }, NOW)).toBeNull();
	});
});
