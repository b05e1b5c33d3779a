/**
 * A real OpenID Connect provider for the sign-in tests: `oidc-provider` (OpenID Certified), in this process, on
 * 127.0.0.1 with a port of its own, its built-in login and consent pages (any password; the login is the account),
 * PKCE required, the ID token carrying the profile, email and `groups` claims, and RP-initiated logout. Accounts
 * are kept in a map the test changes between sign-ins (the provider reads them at every token it issues).
 *
 * The listening socket comes first and the provider second, so that the issuer names the real port; the client's
 * redirect URI is fleet-ctl's, so fleet-ctl's port is chosen before either starts.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Account {
	name: string;
	email: string;
	groups: string[];
}

export interface TestProvider {
	issuer: string;
	accounts: Map<string, Account>;
	close(): Promise<void>;
}

export async function startOidcProvider(opts: {
	clientId: string;
	clientSecret: string;
	rpUrl: string;
	accounts: Record<string, Account>;
}): Promise<TestProvider> {
	const { default: Provider } = await import("oidc-provider");
	const accounts = new Map(Object.entries(opts.accounts));
	const server: Server = createServer();
	await new Promise<void>(resolve => server.listen(0, "127.0.0.1", resolve));
	const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	const provider = new Provider(issuer, {
		clients: [
			{
				client_id: opts.clientId,
				client_secret: opts.clientSecret,
				redirect_uris: [`${opts.rpUrl}/auth/callback`],
				post_logout_redirect_uris: [`${opts.rpUrl}/`],
				grant_types: ["authorization_code"],
				response_types: ["code"],
			},
		],
		claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"], groups: ["groups"] },
		// The claims in the ID token itself (by default a code flow's ID token has only `sub`).
		conformIdTokenClaims: false,
		async findAccount(_ctx, sub) {
			const account = accounts.get(sub);
			if (!account) return undefined;
			return {
				accountId: sub,
				claims: async () => ({
					sub,
					name: account.name,
					email: account.email,
					email_verified: true,
					groups: [...account.groups],
				}),
			};
		},
		pkce: { required: () => true },
		// fleet-ctl's cookies share the host: the provider's have names of their own.
		cookies: {
			keys: ["oidc-test-cookie-key"],
			names: { session: "op_session", interaction: "op_interaction", resume: "op_interaction_resume" },
		},
		ttl: { IdToken: 300, AccessToken: 300, AuthorizationCode: 60, Interaction: 300, Session: 600, Grant: 600 },
		features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
	});
	// Its built-in pages import a web font from another origin: the browser tests allow no request off the machine.
	provider.use(async (ctx, next) => {
		await next();
		if (typeof ctx.body === "string" && ctx.response.is("html"))
			ctx.body = ctx.body.replace(/@import url\(https:\/\/fonts\.googleapis\.com[^)]*\);?/g, "");
	});
	server.on("request", provider.callback());
	return {
		issuer,
		accounts,
		close: () =>
			new Promise<void>(resolve => {
				server.closeAllConnections();
				server.close(() => resolve());
			}),
	};
}
