/**
 * Owns the `settings` collection: the single record `_id: "0"`, present from the first start.
 * `PATCH /settings/0` takes `resolver_address` (and `master_address`, `file`) at the top level, as the
 * spec shows, or inside `addresses`. `resolver_address` must be somewhere the IP resolver may be
 * (lib/security/address-guard.ts, the "ip-resolver" policy): a loopback or link-local URL is a 422.
 */
import { EveCollection, type EveServiceSchema, type EveThis, type RestContext } from "../mixins/eve-collection.mixin";
import { nowSeconds } from "../lib/eve/dates";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";
import type { Issues } from "../lib/eve/errors";
import { configOf, type Config } from "../lib/config";
import { outboundPolicy, outboundUrlProblem } from "../lib/security/address-guard";

const URL_OR_EMPTY = /^(https?:\/\/[^\s]+)?$/;
const ADDRESS_KEYS = ["resolver_address", "master_address", "file"];

/** What this service has on `this` besides the Eve mixin's. */
interface SettingsMembers {
	config: Config;
}

type SettingsThis = EveThis & SettingsMembers;

const SettingsService: EveServiceSchema<SettingsThis> = {
	name: "settings",
	mixins: [
		EveCollection({
			resource: "settings",
			writes: ["patch"],
			idPattern: /^0$/,
			schema: {
				addresses: {
					type: "object",
					strict: true,
					props: {
						resolver_address: { type: "string", max: 2048, pattern: URL_OR_EMPTY, optional: true },
						master_address: { type: "string", max: 2048, optional: true },
						file: { type: "string", max: 64, optional: true },
					},
				},
			},
		}),
	],
	actions: {
		/** The addresses of the settings record (internal: POST /graph uses them as defaults). */
		addresses: {
			visibility: "public",
			async handler(this: SettingsThis) {
				const doc = await this.store.findOne({ _id: "0" });
				return { resolver_address: "", master_address: "", file: "", ...(doc?.addresses ?? {}) };
			},
		},
	},
	methods: {
		async prepareInput(this: SettingsThis, _ctx: RestContext, doc: Doc) {
			const top = ADDRESS_KEYS.filter(k => k in doc);
			if (top.length === 0) return { doc };
			const rest: Doc = Object.fromEntries(Object.entries(doc).filter(([k]) => !ADDRESS_KEYS.includes(k)));
			const given = Object.fromEntries(top.map(k => [k, doc[k]]));
			const nested = rest.addresses;
			// A malformed `addresses` is left for the schema to report.
			rest.addresses =
				nested === undefined
					? given
					: nested && typeof nested === "object" && !Array.isArray(nested)
						? { ...nested, ...given }
						: nested;
			return { doc: rest };
		},

		async checkRules(this: SettingsThis, ctx: RestContext, doc: Doc): Promise<Issues | null> {
			const resolver = doc.addresses?.resolver_address;
			const problem =
				typeof resolver === "string" && resolver !== ""
					? outboundUrlProblem(resolver, outboundPolicy("ip-resolver", this.config))
					: null;
			if (problem) return { addresses: { resolver_address: problem } };
			const file = doc.addresses?.file;
			if (typeof file !== "string" || file === "") return null;
			const found: string[] = await ctx.call("files.exist", { ids: [file] });
			return found.length
				? null
				: { addresses: { file: `value '${file}' must exist in resource 'files', field '_id'.` } };
		},
	},
	created(this: SettingsThis) {
		this.config = configOf(this.broker);
	},
	async started(this: SettingsThis) {
		if (await this.store.findOne({ _id: "0" })) return;
		const now = nowSeconds();
		try {
			await this.store.insertMany([
				{ addresses: { resolver_address: "", master_address: "", file: "" }, _id: "0", _created: now, _updated: now },
			]);
		} catch (err) {
			// Another replica created it first.
			if (!(err instanceof DuplicateKeyError)) throw err;
		}
	},
};

export default SettingsService;
