/**
 * The pieces of single sign-on that need no provider (services/api/sessions.ts): reading cookies, the CSRF token a
 * session's writes carry, and OIDC_ROLES mapping a person's groups to a role.
 */
import { csrfOf, parseCookies, roleFor } from "../../services/api/sessions";
import { loadConfig, type OidcRoleRule } from "../../lib/config";

describe("sessions", () => {
	it("reads a request's cookies, the first of a name winning, values decoded", () => {
		expect(parseCookies("a=1; fleet_session=fct_x%2By; a=2; junk; =v")).toEqual({ a: "1", fleet_session: "fct_x+y" });
		expect(parseCookies(undefined)).toEqual({});
		// Malformed percent-encoding is no cookie (and no crash).
		expect(parseCookies("fleet_session=%E0%A4%A; b=2")).toEqual({ b: "2" });
	});

	it("derives a session's CSRF token from its secret: the same for the same session, another for another, never the secret", () => {
		const a = csrfOf("fct_secret-a");
		expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
		expect(csrfOf("fct_secret-a")).toBe(a);
		expect(csrfOf("fct_secret-b")).not.toBe(a);
		expect(a).not.toContain("secret");
	});

	it("maps groups to the first rule that matches, `*` matching anyone, none when no rule does", () => {
		const rules: OidcRoleRule[] = [
			{ group: "fleet-admins", role: "admin" },
			{ group: "fleet-ops", role: "operator", scope: { functions: ["test.*"] } },
			{ group: "*", role: "viewer" },
		];
		expect(roleFor(rules, ["fleet-ops", "fleet-admins"])?.role).toBe("admin");
		expect(roleFor(rules, ["fleet-ops"])).toEqual({
			group: "fleet-ops",
			role: "operator",
			scope: { functions: ["test.*"] },
		});
		expect(roleFor(rules, [])?.role).toBe("viewer");
		expect(roleFor(rules.slice(0, 2), ["contractors"])).toBeNull();
	});
});

describe("OIDC_ROLES scopes", () => {
	const saved = { ...process.env };
	afterEach(() => {
		process.env = { ...saved };
	});
	const withRoles = (roles: unknown) => {
		Object.assign(process.env, {
			OIDC_ISSUER: "https://id.example.com",
			OIDC_CLIENT_ID: "fleet-ctl",
			CTL_PUBLIC_URL: "https://fleet.example.com",
			OIDC_ROLES: JSON.stringify(roles),
		});
		return () => loadConfig();
	};

	it("stops the start on a scope a token could not have (a pattern RE2 cannot compile, an unknown class, an unknown field)", () => {
		expect(
			withRoles([
				{
					group: "ops",
					role: "operator",
					scope: { functions: ["cmd.run"], calls: { "cmd.run": { args: ["(unclosed"] } } },
				},
			]),
		).toThrow(/OIDC_ROLES: the scope of group 'ops' is not valid: .*args/);
		expect(withRoles([{ group: "ops", role: "operator", scope: { functions: ["@everything"] } }])).toThrow(
			/OIDC_ROLES: the scope of group 'ops'/,
		);
		expect(withRoles([{ group: "ops", role: "operator", scope: { functions: ["test.*"], hosts: ["web-*"] } }])).toThrow(
			/OIDC_ROLES: the scope of group 'ops'/,
		);
	});

	it("takes the scopes tokens take", () => {
		const rules = [
			{
				group: "ops",
				role: "operator",
				scope: { functions: ["@read", "state.apply"], calls: { "state.apply": { mods: ["web*"], saltenv: ["base"] } } },
			},
		];
		expect(withRoles(rules)().oidc?.roles).toEqual(rules);
	});
});
