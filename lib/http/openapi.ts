/**
 * The OpenAPI 3.1 document of /api, generated — never written by hand — from the route table
 * (lib/http/routes.ts: paths, methods, roles, body kinds) and the collections' record schemas (the
 * fastest-validator schemas each collection service gives to mixins/eve-collection.mixin.ts, turned into
 * JSON Schema 2020-12 here). The gateway builds it on request from what the running services describe
 * (`<service>.eveSchema`), so a collection whose service is down is documented without its fields.
 */
import { ROUTES, type RouteMethod } from "./routes";
import { ROLES } from "./auth";

export type JsonSchema = Record<string, unknown>;

/** What a collection service says about itself (mixins/eve-collection.mixin.ts, action `eveSchema`). */
export interface CollectionDescription {
	resource: string;
	/** Records as they are shown (every field, `_id`, `_created`, `_updated`, read-only ones). */
	item: JsonSchema;
	/** A document as POST takes it (required fields required), or null for read-only collections. */
	create: JsonSchema | null;
	/** A PATCH body (nothing required), or null. */
	patch: JsonSchema | null;
}

type Rule = string | Record<string, any>;

function ruleObject(rule: Rule): Record<string, any> {
	if (typeof rule !== "string") return rule;
	// fastest-validator shorthand: "string", "number|optional", "string|min:3"
	const [type, ...flags] = rule.split("|");
	const out: Record<string, any> = { type };
	for (const f of flags) {
		const [k, v] = f.split(":");
		out[k] = v === undefined ? true : Number.isNaN(Number(v)) ? v : Number(v);
	}
	return out;
}

function nullable(schema: JsonSchema, rule: Record<string, any>): JsonSchema {
	if (!rule.nullable) return schema;
	if (typeof schema.type === "string") return { ...schema, type: [schema.type, "null"] };
	return { anyOf: [schema, { type: "null" }] };
}

/** One fastest-validator rule as JSON Schema 2020-12 (what OpenAPI 3.1 uses). */
export function ruleToJsonSchema(input: Rule): JsonSchema {
	if (Array.isArray(input)) return { anyOf: input.map(ruleToJsonSchema) };
	const rule = ruleObject(input);
	let s: JsonSchema;
	switch (rule.type) {
		case "string":
		case "email":
		case "url":
		case "uuid": {
			s = { type: "string" };
			if (rule.min !== undefined) s.minLength = rule.min;
			if (rule.max !== undefined) s.maxLength = rule.max;
			if (rule.length !== undefined) s.minLength = s.maxLength = rule.length;
			if (rule.pattern) s.pattern = rule.pattern instanceof RegExp ? rule.pattern.source : String(rule.pattern);
			if (rule.enum) s.enum = rule.enum;
			if (rule.type === "email") s.format = "email";
			if (rule.type === "url") s.format = "uri";
			if (rule.type === "uuid") s.format = "uuid";
			break;
		}
		case "number": {
			s = { type: rule.integer ? "integer" : "number" };
			if (rule.min !== undefined) s.minimum = rule.min;
			if (rule.max !== undefined) s.maximum = rule.max;
			if (rule.positive) s.exclusiveMinimum = 0;
			break;
		}
		case "boolean":
			s = { type: "boolean" };
			break;
		case "date":
			// Eve shows dates as HTTP-dates (RFC 1123) and accepts them so.
			s = { type: "string", description: "an HTTP-date, e.g. Tue, 02 Apr 2024 10:00:00 GMT" };
			break;
		case "enum":
			s = { enum: rule.values };
			break;
		case "equal":
			s = { const: rule.value };
			break;
		case "forbidden":
			s = { readOnly: true };
			break;
		case "array": {
			s = { type: "array" };
			if (rule.items !== undefined) s.items = ruleToJsonSchema(rule.items);
			if (rule.min !== undefined) s.minItems = rule.min;
			if (rule.max !== undefined) s.maxItems = rule.max;
			if (rule.length !== undefined) s.minItems = s.maxItems = rule.length;
			break;
		}
		case "object": {
			s = { type: "object" };
			if (rule.props) Object.assign(s, objectSchema(rule.props, rule.strict === true || rule.strict === "remove"));
			break;
		}
		case "record":
			s = { type: "object", additionalProperties: rule.value ? ruleToJsonSchema(rule.value) : true };
			break;
		case "multi":
			s = { anyOf: (rule.rules ?? []).map(ruleToJsonSchema) };
			break;
		default:
			s = {};
	}
	if (rule.default !== undefined && typeof rule.default !== "function") s.default = rule.default;
	return nullable(s, rule);
}

/** The properties of a fastest-validator object schema (`$$strict`, `$$root` and friends skipped). */
export function objectSchema(props: Record<string, Rule>, strict = false, requireFields = true): JsonSchema {
	const properties: Record<string, JsonSchema> = {};
	const required: string[] = [];
	for (const [name, rule] of Object.entries(props)) {
		if (name.startsWith("$$")) continue;
		properties[name] = ruleToJsonSchema(rule);
		const r = ruleObject(rule);
		if (requireFields && !r.optional && r.type !== "forbidden" && r.default === undefined) required.push(name);
	}
	return { properties, ...(required.length ? { required } : {}), ...(strict ? { additionalProperties: false } : {}) };
}

/** The description a collection service gives of itself, from its EveCollection options. */
export function describeCollection(opts: {
	resource: string;
	schema: Record<string, Rule>;
	patchSchema?: Record<string, Rule>;
	readOnlyFields?: string[];
	writes?: string[];
}): CollectionDescription {
	const writes = new Set(opts.writes ?? ["create", "patch", "remove"]);
	const shown = objectSchema(opts.schema, false, false);
	const meta: Record<string, JsonSchema> = {
		_id: { type: "string" },
		_created: { type: "string", description: "HTTP-date" },
		_updated: { type: "string", description: "HTTP-date" },
		_links: { type: "object" },
	};
	for (const f of opts.readOnlyFields ?? []) meta[f] = { readOnly: true };
	const item: JsonSchema = { type: "object", properties: { ...meta, ...(shown.properties as JsonSchema) } };
	const create = writes.has("create") ? { type: "object", ...objectSchema(opts.schema, true, true) } : null;
	const patch = writes.has("patch")
		? { type: "object", ...objectSchema(opts.patchSchema ?? opts.schema, true, false) }
		: null;
	return { resource: opts.resource, item, create, patch };
}

const LIST_PARAMS = [
	{ name: "where", description: 'Filter, MongoDB syntax as JSON: {"status": "up"}' },
	{ name: "sort", description: 'Sort: "-_updated,name" or [["name", 1]]' },
	{ name: "projection", description: 'Fields to show or hide: {"grain": 0}' },
	{ name: "embedded", description: 'References to embed: {"vpn_manager": 1}' },
	{ name: "page", description: "Page number, from 1", schema: { type: "integer", minimum: 1 } },
	{
		name: "max_results",
		description: "Page size (clamped to PAGE_SIZE_LIMIT)",
		schema: { type: "integer", minimum: 1 },
	},
];

const ERRORS: Record<string, string> = {
	"400": "Malformed request (query, JSON body, content type)",
	"401": "No valid API token",
	"403": "The token's role or scope does not allow it",
	"404": "No such record",
	"405": "Method not allowed on this path",
	"409": "Conflict",
	"413": "Body too large",
	"422": "The document does not validate (see _issues)",
	"429": "Rate limit exceeded",
	"502": "An upstream system answered badly",
	"503": "The service that handles this is not available",
	"504": "Upstream timeout",
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function schemaName(resource: string): string {
	return resource.replace(/(^|_)([a-z])/g, (_m, _u, c: string) => c.toUpperCase());
}

/** `/hosts/:id` → `/hosts/{id}`. */
export function openApiPath(path: string): string {
	return (
		"/" +
		path
			.split("/")
			.map(seg => (seg.startsWith(":") ? `{${seg.slice(1)}}` : seg))
			.join("/")
	);
}

/** A collection's name as people say one of its records: `approval_policies` → "approval policy", `vpn_managers` → "VPN manager". */
export function singular(resource: string): string {
	const words = resource.replace(/_/g, " ").replace(/\bvpn\b/, "VPN");
	if (words === "settings") return "settings record";
	return words.replace(/ies$/, "y").replace(/s$/, "");
}

/** What a generic write of a collection does, in words (routes with their own `summary` say theirs). */
function writeSummary(verb: string, path: string): string | undefined {
	const one = singular(path.split("/")[0]);
	const a = /^[aeiou]/i.test(one) ? "an" : "a";
	if (verb === "patch") return `Change ${a} ${one} (the fields given; If-Match to change only the version read)`;
	if (verb === "remove")
		return path.startsWith("tokens") ? "Revoke a token (its record stays, for the audit log)" : `Delete ${a} ${one}`;
	return undefined;
}

function operation(
	method: string,
	path: string,
	def: RouteMethod,
	collections: Map<string, CollectionDescription>,
): JsonSchema {
	const [service, verb] = def.action.split(".");
	const coll = collections.get(service);
	const params: JsonSchema[] = path
		.split("/")
		.filter(seg => seg.startsWith(":"))
		.map(seg => ({ name: seg.slice(1), in: "path", required: true, schema: { type: "string" } }));
	const responses: Record<string, JsonSchema> = {};
	const generic = { "application/json": { schema: { type: "object" } } };
	let summary = def.summary ?? writeSummary(verb, path) ?? `${def.action}`;
	if (verb === "list" && coll) {
		summary = def.summary ?? `List ${coll.resource}`;
		for (const p of LIST_PARAMS)
			params.push({
				name: p.name,
				in: "query",
				required: false,
				description: p.description,
				schema: p.schema ?? { type: "string" },
			});
		responses["200"] = {
			description: "A page of records",
			content: {
				"application/json": {
					schema: {
						type: "object",
						properties: {
							_items: { type: "array", items: ref(schemaName(coll.resource)) },
							_links: { type: "object" },
							_meta: ref("EveMeta"),
						},
					},
				},
			},
		};
	} else if (verb === "get" && coll) {
		summary = def.summary ?? `One record of ${coll.resource}`;
		for (const p of LIST_PARAMS.slice(2, 4))
			params.push({
				name: p.name,
				in: "query",
				required: false,
				description: p.description,
				schema: { type: "string" },
			});
		responses["200"] = {
			description: "The record",
			content: { "application/json": { schema: ref(schemaName(coll.resource)) } },
		};
	} else if (def.events) {
		params.push({
			name: "Last-Event-ID",
			in: "header",
			required: false,
			description: "The id of the last alert received: the alerts raised since then are sent first",
			schema: { type: "string" },
		});
		params.push({
			name: "timeout",
			in: "query",
			required: false,
			description: "Close the stream after this many seconds (default 3600)",
			schema: { type: "integer", minimum: 0 },
		});
		responses["200"] = {
			description:
				"text/event-stream: one `alert` event per new alert (data: the alert as JSON); comments keep the connection alive",
			content: { "text/event-stream": { schema: { type: "string" } } },
		};
	} else if (method === "DELETE") {
		responses["204"] = { description: "Deleted (or already absent)" };
	} else if (verb === "create") {
		summary = def.summary ?? `Create ${coll?.resource ?? service} record(s)`;
		responses["201"] = { description: "Created", content: generic };
	} else {
		responses["200"] = {
			description: "OK",
			content:
				def.action === "media.get"
					? { "application/octet-stream": { schema: { type: "string", contentEncoding: "binary" } } }
					: generic,
		};
	}
	for (const p of def.query ?? [])
		params.push({
			name: p.name,
			in: "query",
			required: p.required === true,
			description: p.description,
			schema: p.schema ?? { type: "string" },
		});
	for (const [code, description] of Object.entries(ERRORS)) {
		if (code === "405") continue;
		responses[code] = { $ref: `#/components/responses/E${code}` };
		void description;
	}
	const op: JsonSchema = {
		operationId: `${method.toLowerCase()}_${path.replace(/[^A-Za-z0-9]+/g, "_") || "root"}`,
		summary,
		tags: [path.split("/")[0] || "root"],
		"x-fleet-role": def.role,
		"x-fleet-action": def.action,
		description: `Least role: ${def.role}.${def.scope ? " The token's scope (groups, functions) must allow the run." : ""}${def.unavailable ? ` 503 when ${def.unavailable}.` : ""}`,
		parameters: params,
		responses,
	};
	if (def.body === "json") {
		const body = def.bodySchema
			? { type: "object", ...objectSchema(def.bodySchema as Record<string, Rule>, true) }
			: verb === "create"
				? coll?.create
				: verb === "patch"
					? coll?.patch
					: null;
		const schema = body
			? verb === "create"
				? { anyOf: [body, { type: "array", items: body }] }
				: body
			: { type: ["object", "array"] };
		op.requestBody = { required: true, content: { "application/json": { schema } } };
	} else if (def.body === "stream") {
		op.requestBody = {
			required: true,
			content: {
				"multipart/form-data": {
					schema: {
						type: "object",
						properties: { file: { type: "string", contentMediaType: "application/octet-stream" } },
					},
				},
			},
		};
	}
	return op;
}

/** The whole document. `collections` maps a service name to its description (missing: fields unknown). */
export function buildOpenApi(collections: Map<string, CollectionDescription>, version: string): JsonSchema {
	const paths: Record<string, Record<string, JsonSchema>> = {
		"/": {
			get: {
				operationId: "get_root",
				summary: "The collections (Eve's home endpoint)",
				tags: ["root"],
				"x-fleet-role": "viewer",
				"x-fleet-action": "api.root",
				responses: {
					"200": {
						description: "Links to every collection",
						content: { "application/json": { schema: { type: "object" } } },
					},
					"401": { $ref: "#/components/responses/E401" },
				},
			},
		},
	};
	const schemas: Record<string, JsonSchema> = {
		EveError: {
			type: "object",
			required: ["_status", "_error"],
			properties: {
				_status: { const: "ERR" },
				_error: {
					type: "object",
					required: ["code", "message"],
					properties: { code: { type: "integer" }, message: { type: "string" } },
				},
				_issues: { type: "object" },
			},
		},
		EveMeta: {
			type: "object",
			properties: { page: { type: "integer" }, max_results: { type: "integer" }, total: { type: "integer" } },
		},
	};
	for (const c of collections.values()) schemas[schemaName(c.resource)] = c.item;
	for (const route of ROUTES) {
		for (const def of Object.values(route.methods) as RouteMethod[]) {
			const [service, verb] = def.action.split(".");
			// A collection whose service is not running: its records, without their fields.
			if ((verb === "list" || verb === "get") && !collections.has(service)) {
				const resource = route.path.split("/")[0];
				schemas[schemaName(resource)] ??= {
					type: "object",
					description: `the ${service} service was not running when this document was made`,
				};
				collections.set(service, { resource, item: schemas[schemaName(resource)], create: null, patch: null });
			}
		}
	}
	for (const route of ROUTES) {
		const entry: Record<string, JsonSchema> = {};
		for (const [method, def] of Object.entries(route.methods) as Array<[string, RouteMethod]>)
			entry[method.toLowerCase()] = operation(method, route.path, def, collections);
		paths[openApiPath(route.path)] = entry;
	}
	const responses = Object.fromEntries(
		Object.entries(ERRORS).map(([code, description]) => [
			`E${code}`,
			{ description, content: { "application/json": { schema: ref("EveError") } } },
		]),
	);
	return {
		openapi: "3.1.0",
		info: {
			title: "fleet-ctl API",
			version,
			description: `Control plane for a SaltStack-managed fleet. Every route needs \`Authorization: Bearer <token>\`; roles: ${ROLES.join(" < ")}. Eve conventions: _items, _links, _meta, where/sort/projection/embedded/page/max_results, errors as {_status: "ERR", _error: {code, message}}.`,
		},
		servers: [{ url: "/api" }],
		security: [{ bearer: [] }],
		tags: [...new Set(ROUTES.map(r => r.path.split("/")[0]))].map(name => ({ name })),
		paths,
		components: {
			securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "An API token (fct_…)" } },
			schemas,
			responses,
		},
	};
}
