/**
 * No request can crash the service (issue 15): the production command (moleculer-runner on the build, one
 * process) gets JSON nested far deeper than anything walks safely — arrays, objects, inside `kwarg`,
 * inside `where` — on every JSON route of the route table, with a token of every role. Each answer is
 * the documented 4xx in Eve's shape; afterwards the process is alive and answers. Slow clients (headers
 * or a body that never finish) are cut off with 408.
 */
import net from "node:net";
import { ADMIN_TOKEN, apiOf, runServices, stopProc, tempDir, waitForApi, type Proc } from "../support/harness";
import { request, expectEveError, withQuery } from "../support/http";
import { ROUTES, type RouteMethod } from "../../lib/http/routes";

type Role = "viewer" | "operator" | "admin";
/** The deepest body accepted (docs/security.md: JSON nested deeper than 64 levels is a 400). */
const MAX_JSON_DEPTH = 64;
/**
 * Every route that takes a JSON body, with the least role it needs (docs/security.md, "Roles"), written out: the
 * route table is checked against it, so a new route is added here with its role, not trusted from the table.
 */
const JSON_ROUTES: Array<[method: string, path: string, least: Role]> = [
	["POST", "groups", "admin"],
	["POST", "groups/:id", "operator"],
	["PATCH", "groups/:id", "admin"],
	["POST", "graph", "admin"],
	["POST", "run", "operator"],
	["POST", "targets/preview", "viewer"],
	["POST", "hosts/:id/all_status", "operator"],
	["POST", "hosts/:id/conformity/fix", "operator"],
	["POST", "hosts/:id", "operator"],
	["PATCH", "hosts/:id", "admin"],
	["POST", "tasks", "operator"],
	["PUT", "tasks", "operator"],
	["POST", "tasks/preview", "viewer"],
	["POST", "conformity_checks", "operator"],
	["PATCH", "conformity_checks/:id", "operator"],
	["POST", "conformity_rules", "operator"],
	["PATCH", "conformity_rules/:id", "operator"],
	["POST", "conformity/fix", "operator"],
	["POST", "rollouts", "operator"],
	["PATCH", "updates/:id", "operator"],
	["PATCH", "settings/:id", "admin"],
	["POST", "vpn_managers", "admin"],
	["POST", "vpn_organizations", "admin"],
	["POST", "tokens", "admin"],
	["POST", "tokens/mine", "viewer"],
	["POST", "webhooks", "admin"],
	["PATCH", "webhooks/:id", "admin"],
	["POST", "maintenance_windows", "admin"],
	["PATCH", "maintenance_windows/:id", "admin"],
	["POST", "approval_policies", "admin"],
	["PATCH", "approval_policies/:id", "admin"],
	["POST", "approvals/:id/:decision", "operator"],
];
/** Roles from least to most: a role may what the roles before it may. */
const RANK: Role[] = ["viewer", "operator", "admin"];
/** The collections listed with `where` (GET …list routes), counted by hand. */
const LISTS = 26;

const UNKNOWN_ID = "0000000000000000000dee00";
const DEEP = 5000;
const deepArray = (n: number) => "[".repeat(n) + "]".repeat(n);
const deepObject = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);

describe("deep JSON against the production command", () => {
	let proc: Proc;
	let api = "";
	const tokens: Partial<Record<Role, string>> = { admin: ADMIN_TOKEN };

	beforeAll(async () => {
		proc = runServices([], {
			DATA_DIR: tempDir("crash"),
			PORT: "0",
			HOST: "127.0.0.1",
			TRANSPORTER: "",
			RATE_LIMIT_PER_MINUTE: "0",
			HTTP_HEADERS_TIMEOUT_MS: "2000",
			HTTP_REQUEST_TIMEOUT_MS: "3000",
		});
		api = await apiOf(proc);
		await waitForApi(api, proc);
		for (const role of ["viewer", "operator"] as const) {
			const res = await request("POST", `${api}/tokens`, { body: { name: `crash-${role}`, role } });
			expect(res.status).toBe(201);
			tokens[role] = res.body.token;
		}
	}, 60_000);
	afterAll(() => (proc ? stopProc(proc) : undefined));

	const jsonRoutes = () =>
		JSON_ROUTES.map(([method, path, least]) => ({
			method,
			path: path.replace(/:id/g, UNKNOWN_ID).replace(/:decision/g, "approve"),
			least,
		}));

	it("knows every JSON route of the route table (a route added there is added to JSON_ROUTES with its role)", () => {
		const table = ROUTES.flatMap(r =>
			(Object.entries(r.methods) as Array<[string, RouteMethod]>)
				.filter(([, def]) => def.body === "json")
				.map(([method]) => `${method} ${r.path}`),
		);
		expect(table.sort()).toEqual(JSON_ROUTES.map(([method, path]) => `${method} ${path}`).sort());
	});

	it("answers 400 (or the role's 403) to bodies nested 5,000 deep on every JSON route, for every role, and stays up", async () => {
		const bodies = {
			array: deepArray(DEEP),
			object: deepObject(DEEP),
			kwarg: `{"fun":"test.ping","tgt":["h"],"name":"x","start":"2031-01-01 00:00","kwarg":${deepObject(DEEP)}}`,
			bulk: `[${deepObject(DEEP)}]`,
		};
		const wrong: string[] = [];
		for (const { method, path, least } of jsonRoutes()) {
			for (const [role, token] of Object.entries(tokens) as Array<[Role, string]>) {
				for (const [kind, raw] of Object.entries(bodies)) {
					const res = await request(method, `${api}/${path}`, {
						token,
						raw,
						headers: { "content-type": "application/json" },
					});
					const want = RANK.indexOf(role) >= RANK.indexOf(least) ? 400 : 403;
					if (res.status !== want || res.body?._status !== "ERR" || res.body?._error?.code !== want)
						wrong.push(`${role} ${method} /${path} (${kind}): ${res.status} ${res.text.slice(0, 120)}`);
					else if (want === 400 && !res.body._error.message.includes(`nested more than ${MAX_JSON_DEPTH}`))
						wrong.push(`${role} ${method} /${path} (${kind}): ${res.body._error.message}`);
				}
			}
		}
		expect(wrong).toEqual([]);
		expect(proc.child.exitCode).toBeNull();
		expect((await request("GET", `${api}/settings/0`)).status).toBe(200);
	});

	it("takes a body nested exactly 64 deep as any other, and refuses 65", async () => {
		const kwarg = (depth: number) => JSON.parse(deepObject(depth - 1)); // inside the body: one level more
		const ok = await request("POST", `${api}/tasks`, {
			body: {
				name: "crash-deep-ok",
				fun: "test.ping",
				tgt: ["h1"],
				start: "2031-01-01 00:00",
				kwarg: kwarg(MAX_JSON_DEPTH),
			},
		});
		expect(ok.status).toBe(201);
		const back = await request("GET", `${api}/tasks/${ok.body._id}`);
		expect(back.body.kwarg).toEqual(kwarg(MAX_JSON_DEPTH));
		expectEveError(
			await request("POST", `${api}/tasks`, {
				body: {
					name: "crash-deep-no",
					fun: "test.ping",
					tgt: ["h1"],
					start: "2031-01-01 00:00",
					kwarg: kwarg(MAX_JSON_DEPTH + 1),
				},
			}),
			400,
		);
		// The refused one is in the audit log like any refused write.
		const audit = await request("GET", withQuery(`${api}/audit`, { where: { path: "/api/tasks", status: 400 } }));
		expect(audit.body._meta.total).toBeGreaterThanOrEqual(1);
	});

	it("answers 400 to `where` nested 5,000 deep (JSON or Eve's Python form) on every list, and stays up", async () => {
		const lists = ROUTES.filter(r => r.methods.GET?.action.endsWith(".list")).map(r => r.path);
		expect(lists).toHaveLength(LISTS);
		const wheres = [
			deepArray(2000),
			`{"$and":${deepArray(2000)}}`,
			"(".repeat(3000) + 'name == "x"' + ")".repeat(3000),
		];
		const wrong: string[] = [];
		for (const path of lists) {
			for (const where of wheres) {
				const res = await request("GET", withQuery(`${api}/${path}`, { where }));
				if (res.status !== 400 || res.body?._status !== "ERR")
					wrong.push(`GET /${path}: ${res.status} ${res.text.slice(0, 120)}`);
			}
		}
		expect(wrong).toEqual([]);
		expect(proc.child.exitCode).toBeNull();
		expect((await request("GET", `${api}/groups`)).status).toBe(200);
	});

	it("cuts off slow clients: headers that never end and a body that never comes are answered 408 (Node looks every 30 s)", async () => {
		const { port } = new URL(api);
		const slow = (payload: string) =>
			new Promise<string>((resolve, reject) => {
				const socket = net.connect(Number(port), "127.0.0.1", () => socket.write(payload));
				let answer = "";
				socket.on("data", d => (answer += String(d)));
				socket.on("close", () => resolve(answer));
				socket.on("error", reject);
				socket.setTimeout(45_000, () => socket.destroy());
			});
		const [headers, body] = await Promise.all([
			slow(`GET /api/groups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nX-Slow: `),
			slow(
				`POST /api/groups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":`,
			),
		]);
		expect(headers).toMatch(/^HTTP\/1\.1 408 /);
		expect(body).toMatch(/^HTTP\/1\.1 408 /);
		expect(body).toContain('"_status":"ERR"');
		expect((await request("GET", `${api}/groups`)).status).toBe(200);
	}, 60_000);
});
