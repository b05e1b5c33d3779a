/**
 * Owns the `nodegroups` collection: the master's nodegroups, read from the master at every reconciliation of
 * the cm-gateway (`fromMaster`: runner `config.get nodegroups`), and the local definitions of NODEGROUPS (JSON)
 * or NODEGROUPS_FILE (a JSON file), read at start, which override the master's of the same name. A definition
 * is a rule ({regex?, grain?, target?}) or, as in the master's configuration, a compound string or a list of
 * words. Items are addressable by id or by name; `source` says where each came from.
 */
import fs from "node:fs";
import { EveCollection, type EveServiceSchema, type EveThis } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID, idFromName } from "../../lib/eve/ids";
import { configOf, type Config } from "../../lib/config";
import { nowSeconds } from "../../lib/eve/dates";
import { compileSchema } from "../../lib/eve/validation";
import { DuplicateKeyError, type Doc } from "../../lib/storage/store";
import { ruleProblems, type NodegroupDef, type Rule } from "../../lib/fleet/group-rules";
import { action } from "../../lib/contracts/call";
import { expandNodegroups } from "./salt-nodegroups";

const infoSchema = {
	type: "object",
	strict: true,
	props: {
		regex: { type: "string", max: 1000, optional: true },
		grain: {
			type: "record",
			key: { type: "string", min: 1, max: 200 },
			value: { type: "string", max: 1000 },
			optional: true,
		},
		target: { type: "string", max: 1000, optional: true },
	},
} as const;

/** Where a nodegroup comes from: the master's configuration, or fleet-ctl's (NODEGROUPS, which wins). */
type Source = "master" | "config";

/** A nodegroup as stored: its rule, or why the master's definition cannot be evaluated here (it then selects no host). */
interface Definition {
	name: string;
	info: Rule;
	problem?: string;
}

const nodegroupSchema = {
	name: { type: "string", min: 1, max: 200, pattern: /^[\w.-]+$/ },
	type: { type: "number", integer: true },
	info: infoSchema,
	source: { type: "enum", values: ["master", "config"], optional: true },
	problem: { type: "string", optional: true },
} as const;

/**
 * JSON.parse reviver for the definitions. Any key is data (JSON.parse makes own properties, the store
 * encodes what it cannot hold), so `constructor` or `prototype` may name a nodegroup or a grain; only
 * `__proto__` is refused, loudly: the schema's dict check would drop that grain condition silently, and
 * the nodegroup would select more hosts than configured.
 */
function refuseProtoKey(key: string, value: unknown): unknown {
	if (key === "__proto__")
		throw new Error('nodegroup definitions (NODEGROUPS, NODEGROUPS_FILE): a key "__proto__" cannot be used');
	return value;
}

/** Reads the configured definitions; a broken definition stops the service with a clear message. */
export function readNodegroupDefinitions(config: Pick<Config, "nodegroups" | "nodegroupsFile">): Definition[] {
	let raw = config.nodegroups;
	if (!raw && config.nodegroupsFile) raw = fs.readFileSync(config.nodegroupsFile, "utf8");
	if (!raw) return [];
	const parsed = JSON.parse(raw, refuseProtoKey) as Record<string, unknown>;
	if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
		throw new Error("NODEGROUPS must be a JSON object: name -> definition");
	// Salt-style definitions (a compound string or a list of words) may name each other with N@, as on a master.
	const saltStyle = Object.fromEntries(
		Object.entries(parsed).filter(([, def]) => typeof def === "string" || Array.isArray(def)),
	);
	const expanded = new Map(expandNodegroups(saltStyle).map(e => [e.name, e]));
	const check = compileSchema(nodegroupSchema);
	return Object.entries(parsed).map(([name, def]) => {
		const salt = expanded.get(name);
		if (salt && "problem" in salt) throw new Error(`nodegroup '${name}' is invalid: ${salt.problem}`);
		const info = (salt ? { target: salt.target } : def) as Rule;
		const issues = check({ name, type: 1, info }) ?? ruleProblems(info, true);
		if (issues) throw new Error(`nodegroup '${name}' is invalid: ${JSON.stringify(issues)}`);
		return { name, info };
	});
}

/** The master's `nodegroups` option as stored definitions: what fleet-ctl cannot evaluate keeps its reason. */
export function masterDefinitions(option: Record<string, unknown>): Definition[] {
	return expandNodegroups(option).map(e => {
		if ("problem" in e) return { name: e.name, info: {}, problem: e.problem };
		const issues = ruleProblems({ target: e.target }, true);
		return issues
			? {
					name: e.name,
					info: {},
					problem: `the master's nodegroup '${e.name}' (${e.target}) cannot be evaluated by fleet-ctl: ${issues.target}`,
				}
			: { name: e.name, info: { target: e.target } };
	});
}

/** What this service has on `this` besides the Eve mixin's. */
interface NodegroupsMembers {
	/** The local definitions (NODEGROUPS), read once at creation. */
	configured: Definition[];
	sync(source: Source, defs: Definition[]): Promise<number>;
}

type NodegroupsThis = EveThis & NodegroupsMembers;

const NodegroupsService: EveServiceSchema<NodegroupsThis> = {
	name: "nodegroups",
	mixins: [
		EveCollection({
			resource: "nodegroups",
			writes: [],
			idPattern: OBJECT_ID,
			lookupField: "name",
			schema: nodegroupSchema,
		}),
	],

	actions: {
		/** Every nodegroup that selects hosts, as its rule (internal: the hosts service computes memberships). */
		rules: action("nodegroups.rules", {
			visibility: "public",
			async handler(this: NodegroupsThis): Promise<NodegroupDef[]> {
				return (await this.store.find({ problem: { $exists: false } }, { sort: [["name", 1]] })).map(d => ({
					name: d.name,
					info: d.info,
				}));
			},
		}),
		/** Every nodegroup's name, with why it selects nothing here (null when it can be evaluated): for `N@` in targets. */
		known: action("nodegroups.known", {
			visibility: "public",
			async handler(this: NodegroupsThis): Promise<Record<string, string | null>> {
				const docs = await this.store.find({}, { only: ["name", "problem"] });
				return Object.fromEntries(docs.map(d => [d.name as string, typeof d.problem === "string" ? d.problem : null]));
			},
		}),
		/** The master's `nodegroups` option, as the cm-gateway read it at a reconciliation (local definitions win). Answers how many changed. */
		fromMaster: action("nodegroups.fromMaster", {
			visibility: "public",
			async handler(this: NodegroupsThis, ctx) {
				const local = new Set(this.configured.map(d => d.name));
				const changed = await this.sync(
					"master",
					masterDefinitions(ctx.params.nodegroups).filter(d => !local.has(d.name)),
				);
				if (changed) this.broker.emit("nodegroups.changed", {});
				return changed;
			},
		}),
	},

	methods: {
		/**
		 * Makes the stored nodegroups of one source match `defs` (ids derive from names, so replicas agree): a local
		 * definition replaces the master's of the same name. Answers how many records changed.
		 */
		async sync(this: NodegroupsThis, source: Source, defs: Definition[]): Promise<number> {
			const now = nowSeconds();
			let changed = 0;
			for (const { name, info, problem } of defs) {
				const _id = idFromName(name);
				const existing = await this.store.findOne({ _id });
				const fields: Doc = { info, source };
				if (existing) {
					const same =
						JSON.stringify(existing.info) === JSON.stringify(info) &&
						existing.source === source &&
						existing.problem === problem;
					if (same) continue;
					await this.store.updateMany(
						{ _id },
						problem === undefined
							? { $set: { ...fields, _updated: now }, $unset: { problem: true } }
							: { $set: { ...fields, problem, _updated: now } },
					);
					changed += 1;
					continue;
				}
				try {
					await this.store.insertMany([
						{
							name,
							type: 1,
							...fields,
							...(problem === undefined ? {} : { problem }),
							_id,
							_created: now,
							_updated: now,
						},
					]);
					changed += 1;
				} catch (err) {
					if (!(err instanceof DuplicateKeyError)) throw err;
				}
			}
			// Records of this source no longer defined (records from before `source` existed were local ones).
			const mine = source === "config" ? { $or: [{ source: "config" }, { source: { $exists: false } }] } : { source };
			changed += await this.store.removeMany({ ...mine, name: { $nin: defs.map(d => d.name) } });
			if (changed) this.forgetCachedReads();
			return changed;
		},
	},

	created(this: NodegroupsThis) {
		this.configured = readNodegroupDefinitions(configOf(this.broker));
	},

	async started(this: NodegroupsThis) {
		await this.store.ensureIndex("name");
		await this.sync("config", this.configured);
		// The definitions may differ from the ones the hosts' `nodegroups` were computed with.
		this.broker.emit("nodegroups.changed", {});
	},
};

export default NodegroupsService;
