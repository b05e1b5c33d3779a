/**
 * GET /api/openapi.json: an OpenAPI 3.1 document generated from lib/http/routes.ts and the collections'
 * validator schemas. It validates against the OpenAPI 3.1 schema (@seriousme/openapi-schema-validator,
 * offline), documents every route of the table and nothing else, and what it documents answers.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { startEmbedded, tempDir, ROOT, type Harness } from "../support/harness";
import { request, expectEveError } from "../support/http";
import { ROUTES } from "../../lib/http/routes";
import { openApiPath, ruleToJsonSchema } from "../../lib/http/openapi";
import Ajv2020 from "ajv/dist/2020";

const run = promisify(execFile);

describe("OpenAPI document", () => {
	let h: Harness;
	let doc: any;
	beforeAll(async () => {
		h = await startEmbedded();
		const res = await request("GET", `${h.api}/openapi.json`);
		expect(res.status).toBe(200);
		doc = res.body;
	});
	afterAll(() => h?.stop());

	it("is valid OpenAPI 3.1 (checked against the specification's JSON schema, offline)", async () => {
		expect(doc.openapi).toBe("3.1.0");
		const file = path.join(tempDir("openapi"), "openapi.json");
		fs.writeFileSync(file, JSON.stringify(doc));
		// The validator is an ES module: run its CLI rather than load it into jest's CommonJS world.
		const cli = path.join(ROOT, "node_modules/@seriousme/openapi-schema-validator/bin/validate-api-cli.js");
		const { stdout } = await run(process.execPath, [cli, file]).catch((err: { stdout: string }) => ({
			stdout: err.stdout,
		}));
		const result = JSON.parse(stdout);
		expect(result.errors).toBeUndefined();
		expect(result.valid).toBe(true);
		// And a broken document is refused by the same check (the test can fail).
		const broken = { ...doc, paths: { "/x": { get: { responses: { "200": { content: 5 } } } } } };
		fs.writeFileSync(file, JSON.stringify(broken));
		const bad = await run(process.execPath, [cli, file]).catch((err: { stdout: string }) => ({ stdout: err.stdout }));
		expect(JSON.parse(bad.stdout).valid).toBe(false);
	});

	it("documents every route and method of lib/http/routes.ts, and no other", () => {
		const routed = new Set([
			"GET /",
			...ROUTES.flatMap(r => Object.keys(r.methods).map(m => `${m} ${openApiPath(r.path)}`)),
		]);
		const documented = new Set(
			Object.entries<any>(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map(m => `${m.toUpperCase()} ${p}`)),
		);
		expect([...routed].filter(k => !documented.has(k))).toEqual([]);
		expect([...documented].filter(k => !routed.has(k))).toEqual([]);
		for (const r of ROUTES)
			for (const [m, def] of Object.entries(r.methods))
				expect(doc.paths[openApiPath(r.path)][m.toLowerCase()]["x-fleet-role"]).toBe(def!.role);
	});

	it("says what every operation does in words, never by the internal action behind it", () => {
		const internal: string[] = [];
		for (const [p, ops] of Object.entries<any>(doc.paths)) {
			for (const [m, op] of Object.entries<any>(ops)) {
				if (op.summary === op["x-fleet-action"] || /^[\w-]+\.\w+$/.test(op.summary))
					internal.push(`${m.toUpperCase()} ${p}: ${op.summary}`);
			}
		}
		expect(internal).toEqual([]);
		expect(doc.paths["/approval_policies/{id}"].patch.summary).toBe(
			"Change a approval policy (the fields given; If-Match to change only the version read)".replace(
				"a approval",
				"an approval",
			),
		);
		expect(doc.paths["/vpn_managers/{id}"].delete.summary).toBe("Delete a VPN manager");
		expect(doc.paths["/tokens/{id}"].delete.summary).toMatch(/^Revoke a token/);
	});

	it("every documented path and method exists on the gateway (OPTIONS lists exactly the documented methods)", async () => {
		const wrong: string[] = [];
		for (const [p, ops] of Object.entries<any>(doc.paths)) {
			if (p === "/") continue;
			const concrete = p.replace(/\{id\}/g, "x0").replace(/\{status\}/g, "paused");
			const res = await request("OPTIONS", `${h.api}${concrete}`);
			const allow = new Set((res.headers.get("allow") ?? "").split(",").map(s => s.trim().toLowerCase()));
			for (const m of Object.keys(ops))
				if (!allow.has(m)) wrong.push(`${m.toUpperCase()} ${p}: not allowed (${res.status} ${[...allow].join(",")})`);
			for (const m of allow)
				if (!["head", "options"].includes(m) && !(m in ops))
					wrong.push(`${m.toUpperCase()} ${p}: served but not documented`);
		}
		expect(wrong).toEqual([]);
	});

	it("describes collections from their validator schemas: fields, types, required, enums, read-only fields", () => {
		const s = doc.components.schemas;
		expect(s.Groups.properties.name).toMatchObject({ type: "string" });
		expect(s.Tokens.properties.role).toEqual({ enum: ["viewer", "operator", "admin"] });
		expect(s.Alerts.properties.level.enum).toContain("critical");
		expect(s.Webhooks.properties.secret).toEqual({ readOnly: true });
		const createTokens = doc.paths["/tokens"].post.requestBody.content["application/json"].schema.anyOf[0];
		expect(createTokens.required).toEqual(expect.arrayContaining(["name", "role"]));
		expect(createTokens.additionalProperties).toBe(false);
		const patchGroup = doc.paths["/groups/{id}"].patch.requestBody.content["application/json"].schema;
		expect(patchGroup.required).toBeUndefined();
		expect(doc.paths["/hosts"].get.parameters.map((p: any) => p.name)).toEqual(
			expect.arrayContaining(["where", "sort", "projection", "embedded", "page", "max_results"]),
		);
		expect(doc.paths["/alerts/stream"].get.responses["200"].content["text/event-stream"]).toBeDefined();
	});

	it("documents the bodies of the routes that are not CRUD as their services validate them", async () => {
		const schemaOf = (p: string) => doc.paths[p].post.requestBody.content["application/json"].schema;
		expect(schemaOf("/hosts/{id}")).toMatchObject({
			type: "object",
			required: ["fun"],
			additionalProperties: false,
			properties: { cm_client: { enum: ["local", "local_async"], default: "local_async" } },
		});
		expect(schemaOf("/groups/{id}")).toEqual(schemaOf("/hosts/{id}"));
		expect(schemaOf("/hosts/{id}/all_status").properties.action.enum).toEqual(["start", "stop", "stop_all"]);
		// POST /graph: what the document accepts is what the graph service accepts (422 for the rest).
		const ajv = new Ajv2020({ strict: false });
		const accepts = ajv.compile(schemaOf("/graph"));
		const bodies = [
			{ action: "build_graph", master: "oa-master" },
			{ action: "request_ips", ip_resolver: "" },
			{ action: "nope" },
			{},
			{ action: "build_graph", extra: 1 },
			{ action: "build_graph", master: 5 },
		];
		for (const body of bodies) {
			const res = await request("POST", `${h.api}/graph`, { body });
			expect({ body, documented: accepts(body) }).toEqual({ body, documented: res.status !== 422 });
		}
		// Parameters beyond a collection's: the statistics', a task's preview count, mark_as_read, the stream's Last-Event-ID.
		const names = (p: string, m = "get") =>
			doc.paths[p][m].parameters.map((x: any) => `${x.in}:${x.name}${x.required ? "!" : ""}`);
		expect(names("/hosts/statistics/online")).toEqual(
			expect.arrayContaining(["query:range[]!", "query:where", "query:interval!"]),
		);
		expect(names("/hosts/statistics/new_hosts")).toEqual(expect.arrayContaining(["query:range[]!", "query:where"]));
		expect(names("/tasks/{id}/preview")).toContain("query:count");
		expect(names("/alerts")).toContain("query:mark_as_read");
		expect(names("/alerts/stream")).toContain("header:Last-Event-ID");
	});

	it("turns fastest-validator rules into JSON Schema", () => {
		expect(ruleToJsonSchema({ type: "string", min: 1, max: 5, pattern: /^a+$/ })).toEqual({
			type: "string",
			minLength: 1,
			maxLength: 5,
			pattern: "^a+$",
		});
		expect(ruleToJsonSchema({ type: "number", integer: true, min: 0, nullable: true })).toEqual({
			type: ["integer", "null"],
			minimum: 0,
		});
		expect(ruleToJsonSchema("string|optional")).toEqual({ type: "string" });
		expect(ruleToJsonSchema({ type: "array", items: "string", max: 3 })).toEqual({
			type: "array",
			items: { type: "string" },
			maxItems: 3,
		});
		expect(
			ruleToJsonSchema({
				type: "object",
				strict: true,
				props: { a: "number", b: { type: "boolean", optional: true } },
			}),
		).toEqual({
			type: "object",
			properties: { a: { type: "number" }, b: { type: "boolean" } },
			required: ["a"],
			additionalProperties: false,
		});
	});

	it("describes the records the API actually returns: every list item validates against its schema", async () => {
		// Records in every collection that can have some without a master or a VPN server.
		const group = (
			await request("POST", `${h.api}/groups`, { body: { name: "oa-web", type: 0, info: { regex: "^web-" } } })
		).body._id;
		await request("POST", `${h.api}/tasks`, {
			body: { name: "oa-task", fun: "test.ping", tgt: ["oa-web-1"], start: "2030-01-01 00:00", interval: 60 },
		});
		await request("POST", `${h.api}/tokens`, {
			body: { name: "oa-token", role: "operator", scope: { groups: [group], functions: ["test.*"] } },
		});
		await request("POST", `${h.api}/webhooks`, {
			body: { url: "https://hooks.example.com/x", types: ["host.*"], levels: ["error"], active: false },
		});
		await h.call("hosts.upsertMany", {
			hosts: [{ _id: "oa-web-1", status: "up", key: "accepted", ip: "10.0.0.1", grain: { os: "Debian" } }],
		});
		await h.call("alerts.raise", { type: "oa.alert", level: "warning", payload: { hostname: "oa-web-1" } });
		await h.call("stats.snapshot", {});
		await h.call("jobs.claim", { kind: "build_graph", params: { master: "m" } });
		await request("POST", `${h.api}/vpn_managers`, {
			body: {
				name: "oa-vpn",
				server_address: "vpn:443",
				dashboard_address: "https://vpn/",
				username: "u",
				password: "p",
			},
		});

		const ajv = new Ajv2020({ strict: false, allErrors: true });
		for (const [name, schema] of Object.entries<any>(doc.components.schemas))
			ajv.addSchema(schema, `#/components/schemas/${name}`);
		const wrong: string[] = [];
		let checked = 0;
		for (const [p, ops] of Object.entries<any>(doc.paths)) {
			const ref = ops.get?.responses?.["200"]?.content?.["application/json"]?.schema?.properties?._items?.items?.$ref;
			if (!ref || p.includes("{")) continue;
			const list = await request("GET", `${h.api}${p}?max_results=50`);
			expect(list.status).toBe(200);
			const validate = ajv.getSchema(ref)!;
			for (const item of list.body._items) {
				checked++;
				if (!validate(item)) wrong.push(`${p} ${item._id}: ${ajv.errorsText(validate.errors)}`);
			}
		}
		expect(wrong).toEqual([]);
		expect(checked).toBeGreaterThanOrEqual(10);
	});

	it("needs a token like every /api route", async () => {
		expectEveError(await request("GET", `${h.api}/openapi.json`, { token: null }), 401);
	});
});
