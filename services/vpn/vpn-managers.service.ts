/**
 * Owns the `vpn_managers` collection: credentials of Pritunl servers. The password (and, beyond the
 * spec, an API token and secret) is stored encrypted (lib/security/secrets.ts) and always shown as asterisks.
 * A manager is only created once the vpn service has logged in with it (docs/vpn.md), and only at an
 * address the outbound guard allows a Pritunl server (lib/security/address-guard.ts, the "pritunl" policy).
 */
import { X509Certificate } from "node:crypto";
import {
	EveCollection,
	type EveServiceSchema,
	type EveThis,
	type RestContext,
	type WriteInfo,
} from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Issues } from "../../lib/eve/errors";
import { Conflict } from "../../lib/errors";
import { encryptSecret, decryptSecret } from "../../lib/security/secrets";
import type { Doc } from "../../lib/storage/store";
import { configOf, type Config } from "../../lib/config";
import { outboundPolicy, outboundUrlProblem, type OutboundPolicy } from "../../lib/security/address-guard";
import { pritunlBaseUrl } from "./pritunl-client";
import { action, call } from "../../lib/contracts/call";
import type { VpnManagerCredentials } from "../../lib/contracts/vpn";

/** Fields kept encrypted at rest and masked on the way out. */
const SECRETS = ["password", "api_token", "api_secret"];

/** Why the guard refuses a `server_address` (host[:port] or a URL), or null; a malformed one is vpn.checkManager's to report. */
function serverAddressProblem(serverAddress: unknown, policy: OutboundPolicy): string | null {
	let base: string;
	try {
		base = pritunlBaseUrl(String(serverAddress));
	} catch {
		return null;
	}
	return outboundUrlProblem(base, policy);
}

/** Every `-----BEGIN CERTIFICATE-----` block of a PEM text parses as an X.509 certificate. */
function validPem(pem: string): boolean {
	const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
	if (!blocks.length) return false;
	try {
		for (const block of blocks) new X509Certificate(block);
		return true;
	} catch {
		return false;
	}
}

/** What this service has on `this` besides the Eve mixin's. */
interface VpnManagersMembers {
	config: Config;
}

type VpnManagersThis = EveThis & VpnManagersMembers;

const VpnManagersService: EveServiceSchema<VpnManagersThis> = {
	name: "vpn-managers",
	mixins: [
		EveCollection({
			resource: "vpn_managers",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			masked: SECRETS,
			schema: {
				name: { type: "string", min: 1, max: 200 },
				server_address: { type: "string", min: 1, max: 2048 },
				dashboard_address: { type: "string", max: 2048, pattern: /^https?:\/\/[^\s]+$/ },
				username: { type: "string", min: 1, max: 200 },
				password: { type: "string", min: 1, max: 1024 },
				// Beyond the spec: a CA (PEM) that signs this Pritunl's certificate, and API-token auth.
				ca_certificate: { type: "string", max: 65_536, optional: true, pattern: /-----BEGIN CERTIFICATE-----/ },
				api_token: { type: "string", min: 1, max: 256, optional: true },
				api_secret: { type: "string", min: 1, max: 512, optional: true },
			},
		}),
	],
	actions: {
		/** A manager's credentials in clear, for the vpn service only (never published). */
		credentials: action("vpn-managers.credentials", {
			visibility: "public",
			async handler(this: VpnManagersThis, ctx) {
				const doc = await this.visibleItem(ctx.params.id);
				const clear: Doc = { ...doc };
				for (const f of SECRETS) if (typeof doc[f] === "string") clear[f] = decryptSecret(this.config, doc[f]);
				return clear as VpnManagerCredentials;
			},
		}),
	},
	methods: {
		/** Pritunl must accept the credentials before they are kept: the vpn service tries them. */
		async checkRules(this: VpnManagersThis, ctx: RestContext, doc: Doc, info: WriteInfo): Promise<Issues | null> {
			if ((doc.api_token === undefined) !== (doc.api_secret === undefined)) {
				return { [doc.api_token === undefined ? "api_token" : "api_secret"]: "api_token and api_secret go together" };
			}
			if (typeof doc.ca_certificate === "string" && !validPem(doc.ca_certificate))
				return { ca_certificate: "must be one or more PEM certificates" };
			if (info.op !== "create") return null;
			const blocked = serverAddressProblem(doc.server_address, outboundPolicy("pritunl", this.config));
			if (blocked) return { server_address: blocked };
			return call(ctx, "vpn.checkManager", { manager: doc });
		},
		async beforeStore(this: VpnManagersThis, _ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Doc> {
			const out = { ...doc };
			for (const f of SECRETS) if (typeof out[f] === "string") out[f] = encryptSecret(this.config, out[f]);
			return out;
		},
		async removeDocs(this: VpnManagersThis, ctx: RestContext, docs: Doc[]) {
			const ids = docs.map(d => String(d._id));
			const used: number = await call(ctx, "vpn-organizations.countByManager", { ids });
			if (used > 0) throw new Conflict("the VPN manager still has organizations; delete them first");
			await this.store.removeMany({ _id: { $in: ids } });
			// An organization stored between the count and the removal (its create checked the manager just
			// before) would be left without its manager: then the manager comes back and the delete is refused.
			if ((await call(ctx, "vpn-organizations.countByManager", { ids })) > 0) {
				await this.store.insertMany(docs);
				await this.notifyChanged(ctx, "updated", ids);
				throw new Conflict("the VPN manager still has organizations; delete them first");
			}
			await this.notifyChanged(ctx, "removed", ids);
		},
	},
	created(this: VpnManagersThis) {
		this.config = configOf(this.broker);
	},
};

export default VpnManagersService;
