/**
 * Owns the `nodegroups` collection. Definitions (name -> {regex?, grain?}) come from configuration,
 * NODEGROUPS (JSON) or NODEGROUPS_FILE (a JSON file), and are written here at start; the API reads them.
 * Items are addressable by id or by name.
 */
import fs from "node:fs";
import { EveCollection, type EveServiceSchema, type EveThis } from "../mixins/eve-collection.mixin";
import { OBJECT_ID, idFromName } from "../lib/eve/ids";
import { loadConfig } from "../lib/config";
import { nowSeconds } from "../lib/eve/dates";
import { compileSchema } from "../lib/eve/validation";
import { DuplicateKeyError, type Doc } from "../lib/storage/store";
import { ruleProblems, type NodegroupDef } from "../lib/fleet/group-rules";

const infoSchema = {
	type: "object",
	strict: true,
	props: {
		regex: { type: "string", max: 1000, optional: true },
		grain: { type: "record", key: { type: "string", min: 1, max: 200 }, value: { type: "string", max: 1000 }, optional: true },
	},
} as const;

const nodegroupSchema = {
	name: { type: "string", min: 1, max: 200, pattern: /^[\w.-]+$/ },
	type: { type: "number", integer: true },
	info: infoSchema,
} as const;

/**
 * JSON.parse reviver for the definitions. Any key is data (JSON.parse makes own properties, the store
 * encodes what it cannot hold), so `constructor` or `prototype` may name a nodegroup or a grain; only
 * `__proto__` is refused, loudly: the schema's dict check would drop that grain condition silently, and
 * the nodegroup would select more hosts than configured.
 */
function refuseProtoKey(key: string, value: unknown): unknown {
	if (key === "__proto__") throw new Error('nodegroup definitions (NODEGROUPS, NODEGROUPS_FILE): a key "__proto__" cannot be used');
	return value;
}

/** Reads the configured definitions; a broken definition stops the service with a clear message. */
export function readNodegroupDefinitions(): Array<{ name: string; info: Doc }> {
	const config = loadConfig();
	let raw = config.nodegroups;
	if (!raw && config.nodegroupsFile) raw = fs.readFileSync(config.nodegroupsFile, "utf8");
	if (!raw) return [];
	const parsed = JSON.parse(raw, refuseProtoKey) as Record<string, Doc>;
	const check = compileSchema(nodegroupSchema);
	return Object.entries(parsed).map(([name, info]) => {
		const issues = check({ name, type: 1, info }) ?? ruleProblems(info, true);
		if (issues) throw new Error(`nodegroup '${name}' is invalid: ${JSON.stringify(issues)}`);
		return { name, info };
	});
}

/** What this service has on `this` besides the Eve mixin's. */
interface NodegroupsMembers {
	syncDefinitions(): Promise<unknown>;
}

type NodegroupsThis = EveThis & NodegroupsMembers;

const NodegroupsService: EveServiceSchema<NodegroupsThis> = {
	name: "nodegroups",
	mixins: [EveCollection({ resource: "nodegroups", writes: [], idPattern: OBJECT_ID, lookupField: "name", schema: nodegroupSchema })],

	actions: {
		/** Every nodegroup as the rule that selects hosts (internal: the hosts service computes memberships). */
		rules: {
			visibility: "public",
			async handler(this: NodegroupsThis): Promise<NodegroupDef[]> {
				return (await this.store.find({}, { sort: [["name", 1]] })).map(d => ({ name: d.name, info: d.info }));
			},
		},
	},

	methods: {
		/** Makes the stored nodegroups match the configuration (ids derive from names, so replicas agree). */
		async syncDefinitions(this: NodegroupsThis) {
			const defs = readNodegroupDefinitions();
			const now = nowSeconds();
			for (const { name, info } of defs) {
				const _id = idFromName(name);
				const existing = await this.store.findOne({ _id });
				if (existing) {
					if (JSON.stringify(existing.info) !== JSON.stringify(info)) await this.store.updateMany({ _id }, { $set: { info, _updated: now } });
					continue;
				}
				try {
					await this.store.insertMany([{ name, type: 1, info, _id, _created: now, _updated: now }]);
				} catch (err) {
					if (!(err instanceof DuplicateKeyError)) throw err;
				}
			}
			await this.store.removeMany({ name: { $nin: defs.map(d => d.name) } });
			this.forgetCachedReads();
		},
	},

	async started(this: NodegroupsThis) {
		await this.store.ensureIndex("name");
		await this.syncDefinitions();
		// The definitions may differ from the ones the hosts' `nodegroups` were computed with.
		this.broker.emit("nodegroups.changed", {});
	},
};

export default NodegroupsService;
