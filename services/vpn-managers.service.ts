/**
 * Owns the `vpn_managers` collection: credentials of Pritunl servers. The password is stored
 * encrypted (lib/secrets.ts) and always shown as asterisks.
 */
import type { Context } from "moleculer";
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext, type WriteInfo } from "../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../lib/eve/ids";
import { conflict } from "../lib/eve/errors";
import { encryptSecret, decryptSecret } from "../lib/secrets";
import type { Doc } from "../lib/store";

const VpnManagersService: EveServiceSchema = {
	name: "vpn-managers",
	mixins: [
		EveCollection({
			resource: "vpn_managers",
			writes: ["create", "remove"],
			idPattern: OBJECT_ID,
			masked: ["password"],
			schema: {
				name: { type: "string", min: 1, max: 200 },
				server_address: { type: "string", min: 1, max: 2048 },
				dashboard_address: { type: "string", max: 2048, pattern: /^https?:\/\/[^\s]+$/ },
				username: { type: "string", min: 1, max: 200 },
				password: { type: "string", min: 1, max: 1024 },
			},
		}),
	],
	actions: {
		/** A manager's credentials in clear, for the vpn service only (never published). */
		credentials: {
			visibility: "public",
			params: { id: "string" },
			async handler(this: EveThis, ctx: Context<{ id: string }>) {
				const doc = await this.visibleItem(ctx.params.id);
				return { ...doc, password: decryptSecret(doc.password) };
			},
		},
	},
	methods: {
		async beforeStore(this: EveThis, _ctx: RestContext, doc: Doc, _info: WriteInfo): Promise<Doc> {
			return typeof doc.password === "string" ? { ...doc, password: encryptSecret(doc.password) } : doc;
		},
		async removeDocs(this: EveThis, ctx: RestContext, docs: Doc[]) {
			const ids = docs.map(d => String(d._id));
			const used: number = await ctx.call("vpn-organizations.countByManager", { ids });
			if (used > 0) throw conflict("the VPN manager still has organizations; delete them first");
			await this.store.removeMany({ _id: { $in: ids } });
			await this.notifyChanged(ctx, "removed", ids);
		},
	},
};

export default VpnManagersService;
