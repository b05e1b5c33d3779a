/**
 * Issue 43, what the server shows and what it trusts, through the HTTP API against the salt-api simulator
 * (docs/security.md): a run's origin is the server's fact, never the client's User-Agent; a run's secrets are
 * masked by one rule (kwargs and `key=value` arg strings alike) wherever a run is shown — job history, actions,
 * audit, approvals and their stream, jobs seen on the master's bus — and withheld from viewers, while the call that
 * runs stays whole; uploaded files are served as downloads; a session cookie cannot mark alerts read without the
 * CSRF header. The browser's side of uploads and of the dashboard's CSRF header is test/trust-surfaces-browser.spec.ts.
 */
import { SaltApiSimulator } from "./simulators/salt-api";
import { startEmbedded, type Harness } from "./support/harness";
import { request, expectEveError, eventually, withQuery, type Reply } from "./support/http";
import { FleetRepl } from "../lib/repl/commands";
import { csrfOf } from "../services/api/sessions";

/** What the runs below carry: secrets a kwarg, a `key=value` arg string, a nested dict and the bus each hold. */
const KW_SECRET = "hunter2-kwarg";
const ARG_SECRET = "hunter2-argstring";
const NESTED_SECRET = "k-123-nested";
const BUS_SECRET = "hunter2-from-the-bus";
const SECRETS = [KW_SECRET, ARG_SECRET, NESTED_SECRET, BUS_SECRET];

describe("trust surfaces: origins, masking, uploads, CSRF (issue 43)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	let A = "";
	const tokens: Record<string, { id: string; secret: string }> = {};

	const url = (path: string, query: Record<string, unknown> = {}) => withQuery(`${h.api}/${path}`, query);
	/** A request as `who` (admin: the harness's admin token). */
	const as = (who: string, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
		request(method, url(path), { token: who === "admin" ? undefined : tokens[who].secret, body, headers });
	/** A GET as `who`, with query parameters. */
	const read = (who: string, path: string, query: Record<string, unknown> = {}) =>
		request("GET", url(path, query), { token: who === "admin" ? undefined : tokens[who].secret });
	const created = async (path: string, body: unknown): Promise<string> => {
		const res = await request("POST", url(path), { body });
		if (res.status !== 201) throw new Error(`${path}: ${res.status} ${res.text}`);
		return res.body._id;
	};
	const finished = (jid: string) =>
		eventually(
			async () => {
				const res = await request("GET", url(`salt_jobs/${jid}`));
				return res.status === 200 && res.body.state === "finished" ? res.body : undefined;
			},
			10_000,
			`job ${jid} finished`,
		);
	const noSecretIn = (reply: Reply) => {
		for (const s of SECRETS) expect(reply.text).not.toContain(s);
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 3,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [1, 5],
			presenceEvents: false,
		});
		await sim.start();
		h = await startEmbedded({
			captureLogs: true,
			env: {
				...sim.cmApiEnv,
				CM_SYNC_INTERVAL_MS: "3600000",
				CM_JOB_POLL_MS: "100",
				CM_JOB_TIMEOUT_MS: "3000",
				CM_EXTERNAL_JOB_GRACE_MS: "150",
			},
		});
		await eventually(
			async () =>
				(await request("GET", url("hosts", { max_results: 1 }))).body._meta?.total === sim.minionIds().length
					? true
					: undefined,
			10_000,
			"the inventory",
		);
		[A] = sim.upMinions();
		await eventually(
			async () => ((await h.call<{ connected: boolean }>("cm-gateway.eventStreamStatus")).connected ? true : undefined),
			5000,
			"the event stream",
		);
		for (const [name, role] of [
			["op", "operator"],
			["viewer", "viewer"],
		]) {
			const res = await request("POST", url("tokens"), { body: { name, role } });
			tokens[name] = { id: res.body._id, secret: res.body.token };
		}
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	describe("a run's origin is where it came from on the server", () => {
		it("holds an API run under an `api` policy whatever User-Agent it sends, and records an approved run as `approval`", async () => {
			const policy = await created("approval_policies", {
				name: "api test.ping",
				functions: ["test.ping"],
				origins: ["api"],
				approvers: { count: 1, roles: ["admin"] },
			});
			try {
				const from = sim.jobs().length;
				// The REPL's User-Agent, sent by a plain HTTP client: it proves nothing.
				const claimed = await as(
					"op",
					"POST",
					`hosts/${A}`,
					{ fun: "test.ping" },
					{ "User-Agent": "fleet-ctl-repl (attacker)" },
				);
				expect(claimed.status).toBe(202);
				expect(claimed.body).toMatchObject({
					status: "pending_approval",
					approval: { origin: "api", status: "pending" },
				});
				// The REPL itself is an API client like any other: held by the same policy, as `api`.
				const repl = new FleetRepl({ url: h.api, token: tokens.op.secret, pollMs: 50, execWaitMs: 5000 });
				const replHeld = /held for approval ([0-9a-f]{24})/.exec(await repl.run(`exec ${A} test.ping`))?.[1];
				expect((await read("admin", `approvals/${replHeld}`)).body).toMatchObject({ origin: "api", status: "pending" });
				// An approved request runs as `approval` in the job history (a fact of the server, like `task` and `rollout`).
				const approved = await as("admin", "POST", `approvals/${claimed.body.approval._id}/approve`, { comment: "ok" });
				expect(approved.status).toBe(200);
				const jid = await eventually(
					async () =>
						(await read("admin", `approvals/${claimed.body.approval._id}`)).body.run?.jid as string | undefined,
					10_000,
					"the approved run",
				);
				const job = await finished(jid);
				expect(job).toMatchObject({ fun: "test.ping", origin: "approval", user: "op" });
				// Exactly one test.ping reached Salt: the approved one (the REPL's is still held).
				expect(
					sim
						.jobs()
						.slice(from)
						.map(j => j.fun),
				).toEqual(["test.ping"]);
				// The User-Agent is recorded, not trusted: the audit record of the held request keeps it.
				const audit = await read("admin", "audit", { where: { outcome: "held", agent: "fleet-ctl-repl (attacker)" } });
				expect(audit.body._meta.total).toBe(1);
			} finally {
				await as("admin", "DELETE", `approval_policies/${policy}`);
			}
		});

		it("keeps policies that name `repl` valid, covering interactive runs (the REPL's are API runs)", async () => {
			const policy = await created("approval_policies", {
				name: "repl test.ping",
				functions: ["test.ping"],
				origins: ["repl"],
				approvers: { count: 1, roles: ["admin"] },
			});
			try {
				expect((await read("admin", `approval_policies/${policy}`)).body.origins).toEqual(["repl"]);
				const plain = await as("op", "POST", `hosts/${A}`, { fun: "test.ping" });
				expect(plain.status).toBe(202);
				expect(plain.body.approval.origin).toBe("api");
				// A task's run is not interactive: the policy does not hold it.
				const ran = await h.call<{ task_id: string | null; status: string }>("cm-gateway.runTask", {
					task: "65f000000000000000000043",
					owner: tokens.op.id,
					cm_client: "local_async",
					fun: "test.ping",
					tgt: [A],
				});
				expect(ran.status).toBe("scheduled");
				expect((await finished(ran.task_id!)).origin).toBe("task");
			} finally {
				await as("admin", "DELETE", `approval_policies/${policy}`);
			}
		});
	});

	describe("a run's secrets are masked by one rule wherever the run is shown", () => {
		/** cmd.run as Windows' runas takes it: a password kwarg, the same as a `key=value` word, and a nested secret. */
		const call = {
			cm_client: "local",
			fun: "cmd.run",
			arg: ["whoami", `password=${ARG_SECRET}`],
			kwarg: { runas: "svc", password: KW_SECRET, env: { DB: { api_key: NESTED_SECRET, host: "db-01" } } },
		};
		const maskedArgs = [
			"whoami",
			"password=********",
			{ __kwarg__: true, runas: "svc", password: "********", env: { DB: { api_key: "********", host: "db-01" } } },
		];
		let jid = "";

		beforeAll(async () => {
			const from = sim.jobs().length;
			const res = await as("admin", "POST", `hosts/${A}`, call);
			expect(res.status).toBe(200);
			jid = res.body.task_id;
			// Salt got the call whole.
			const [job] = sim.jobs().slice(from);
			expect(JSON.stringify(job.arg)).toContain(KW_SECRET);
			expect(JSON.stringify(job.arg)).toContain(ARG_SECRET);
			await finished(jid);
		});

		it("masks kwargs and `key=value` arg strings alike in the job history and the hosts' records, for operators", async () => {
			const job = await read("op", `salt_jobs/${jid}`);
			noSecretIn(job);
			expect(job.body.args).toEqual(maskedArgs);
			const actions = await read("op", "actions", { where: { jid } });
			noSecretIn(actions);
			expect(actions.body._items.map((a: { args: unknown }) => a.args)).toEqual([maskedArgs]);
			// Stored masked: a filter on the secret finds nothing.
			expect(
				(await read("admin", "salt_jobs", { where: { _id: jid, args: `password=${ARG_SECRET}` } })).body._meta.total,
			).toBe(0);
		});

		it("withholds a run's arguments from viewers, keeping their shape, and refuses a viewer's filter on them", async () => {
			const job = await read("viewer", `salt_jobs/${jid}`);
			expect(job.body).toMatchObject({ fun: "cmd.run", minions: [A] });
			expect(job.body.args).toEqual([
				"********",
				"password=********",
				{ __kwarg__: true, runas: "********", password: "********", env: "********" },
			]);
			const listed = await read("viewer", "actions", { where: { jid } });
			expect(listed.body._items[0].args).toEqual(job.body.args);
			expect(listed.text).not.toContain("whoami");
			// A filter would reveal them a comparison at a time.
			expect(
				expectEveError(await read("viewer", "salt_jobs", { where: { args: "whoami" } }), 403)._error.message,
			).toMatch(/'args' is a run's arguments/);
			expectEveError(await read("viewer", "actions", { sort: "args" }), 403);
			// An operator sees the non-secret arguments.
			expect((await read("op", "salt_jobs", { where: { _id: jid, args: "whoami" } })).body._meta.total).toBe(1);
		});

		it("masks the audit record's `key=value` strings as its kwargs, and writes no secret to the logs", async () => {
			const audit = await read("admin", "audit", { where: { jid }, max_results: 1 });
			noSecretIn(audit);
			expect(audit.body._items[0].args).toEqual({
				cm_client: "local",
				arg: ["whoami", "password=********"],
				kwarg: { runas: "svc", password: "********", env: { DB: { api_key: "********", host: "db-01" } } },
			});
			for (const s of SECRETS) expect(h.logs!()).not.toContain(s);
		});

		it("masks a job seen on the master's bus, started outside fleet-ctl", async () => {
			const cli = sim.cliJob([A], "cmd.run", ["id", `password=${BUS_SECRET}`, { __kwarg__: true, token: BUS_SECRET }], {
				tgtType: "list",
				user: "root",
			});
			const job = await finished(cli!.jid);
			expect(job).toMatchObject({
				origin: "external",
				args: ["id", "password=********", { __kwarg__: true, token: "********" }],
			});
			noSecretIn(await read("op", "actions", { where: { jid: cli!.jid } }));
		});

		it("shows an approval request and its stream masked, and runs the exact call once approved", async () => {
			const policy = await created("approval_policies", {
				name: "cmd.run needs an admin",
				functions: ["cmd.run"],
				approvers: { count: 1, roles: ["admin"] },
			});
			const controller = new AbortController();
			try {
				const stream = await fetch(url("approvals/stream", { timeout: 20 }), {
					headers: { authorization: `Bearer ${tokens.op.secret}` },
					signal: controller.signal,
				});
				expect(stream.status).toBe(200);
				const from = sim.jobs().length;
				const held = await as("op", "POST", `hosts/${A}`, { ...call, cm_client: "local_async" });
				expect(held.status).toBe(202);
				noSecretIn(held);
				const id = held.body.approval._id;
				const shown = await read("op", `approvals/${id}`);
				noSecretIn(shown);
				expect(shown.body.call).toEqual({
					cm_client: "local_async",
					fun: "cmd.run",
					arg: ["whoami", "password=********"],
					kwarg: { runas: "svc", password: "********", env: { DB: { api_key: "********", host: "db-01" } } },
				});
				// The stream pushes the request as GET shows it.
				const reader = stream.body!.getReader();
				let text = "";
				const deadline = Date.now() + 10_000;
				while (!text.includes(`"_id":"${id}"`) && Date.now() < deadline)
					text += new TextDecoder().decode((await reader.read()).value);
				expect(text).toContain(`"_id":"${id}"`);
				for (const s of SECRETS) expect(text).not.toContain(s);
				// Approved, the exact call runs: the secrets reach Salt, and only Salt.
				expect((await as("admin", "POST", `approvals/${id}/approve`, { comment: "ok" })).status).toBe(200);
				const ran = await eventually(
					async () =>
						sim
							.jobs()
							.slice(from)
							.find(j => j.fun === "cmd.run"),
					10_000,
					"the approved run",
				);
				expect(JSON.stringify(ran.arg)).toContain(KW_SECRET);
				expect(JSON.stringify(ran.arg)).toContain(ARG_SECRET);
				expect(JSON.stringify(ran.arg)).toContain(NESTED_SECRET);
				noSecretIn(await read("admin", `salt_jobs/${ran.jid}`));
			} finally {
				controller.abort();
				await as("admin", "DELETE", `approval_policies/${policy}`);
			}
		});
	});

	describe("uploaded files are downloads", () => {
		const upload = async (filename: string, type: string, content: string): Promise<string> => {
			const form = new FormData();
			form.append("name", filename);
			form.append("data", new Blob([content], { type }), filename);
			const res = await request("POST", url("files"), { raw: form });
			expect(res.status).toBe(201);
			return (await request("GET", url(`files/${res.body._id}`))).body.data;
		};

		it("serves an uploaded page as an attachment, sandboxed, never sniffed, with its exact bytes", async () => {
			const page = "<!doctype html><title>upload</title><script>document.title=document.cookie</script>";
			const media = await upload("report.html", "text/html", page);
			const res = await request("GET", new URL(media, h.api).href);
			expect(res.status).toBe(200);
			expect(res.text).toBe(page);
			expect(res.headers.get("content-type")).toMatch(/^text\/html/);
			expect(res.headers.get("content-disposition")).toBe(
				`attachment; filename="report.html"; filename*=UTF-8''report.html`,
			);
			expect(res.headers.get("x-content-type-options")).toBe("nosniff");
			// No `allow-*`: whatever renders it anyway has an opaque origin, no script, no cookie.
			expect(res.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
		});

		it("gives a download a safe filename whatever the upload was called", async () => {
			const media = await upload('..\\x/evil "name";\r\nété.html', "text/plain", "x");
			const disposition = (await request("GET", new URL(media, h.api).href)).headers.get("content-disposition") ?? "";
			// Nothing but safe characters in the quoted name, the rest percent-encoded: no quote, no separator, no line break, no path.
			expect(disposition).toMatch(
				/^attachment; filename="[A-Za-z0-9._-]+\.html"; filename\*=UTF-8''[A-Za-z0-9%._~!$&+^`|-]+$/,
			);
			expect(disposition).not.toMatch(/[\\/]|\.\./);
			expect(decodeURIComponent(disposition.split("''")[1])).toMatch(/été\.html$/);
		});
	});

	describe("no state change from a cookie-authenticated GET", () => {
		let session = "";
		let alert = "";
		const cookie = () => ({ Cookie: `fleet_session=${session}; fleet_csrf=${csrfOf(session)}` });
		const isRead = async () => (await request("GET", url(`alerts/${alert}`))).body.read as boolean;

		beforeEach(async () => {
			// A signed-in person's session, as the sign-in opens it (services/api/sessions.ts).
			session = (
				await h.call<{ secret: string }>("tokens.openSession", {
					subject: "oidc:alice",
					name: "alice",
					role: "viewer",
					ttlS: 600,
				})
			).secret;
			alert = (
				await h.call<{ _id: string }>("alerts.raise", { type: "test.csrf", level: "info", payload: { hostname: A } })
			)._id;
		});

		it("refuses mark_as_read from a session cookie without the CSRF header (403), item and list alike", async () => {
			const item = await request("GET", url(`alerts/${alert}`, { mark_as_read: 1 }), {
				token: null,
				headers: cookie(),
			});
			expect(expectEveError(item, 403)._error.message).toMatch(/CSRF token/);
			expectEveError(
				await request("GET", url("alerts", { mark_as_read: "true", where: { read: false } }), {
					token: null,
					headers: cookie(),
				}),
				403,
			);
			expect(
				(await request("HEAD", url(`alerts/${alert}`, { mark_as_read: 1 }), { token: null, headers: cookie() })).status,
			).toBe(403);
			expect(await isRead()).toBe(false);
			// Reading without marking needs no header.
			const plain = await request("GET", url(`alerts/${alert}`), { token: null, headers: cookie() });
			expect(plain.status).toBe(200);
			expect(plain.body.read).toBe(false);
		});

		it("marks read from a session cookie with the CSRF header, and from a token without one (the spec's behaviour)", async () => {
			const withHeader = await request("GET", url(`alerts/${alert}`, { mark_as_read: 1 }), {
				token: null,
				headers: { ...cookie(), "X-CSRF-Token": csrfOf(session) },
			});
			expect(withHeader.status).toBe(200);
			expect(withHeader.body.read).toBe(true);
			const other = (
				await h.call<{ _id: string }>("alerts.raise", { type: "test.csrf", level: "info", payload: { hostname: A } })
			)._id;
			const byToken = await request("GET", url(`alerts/${other}`, { mark_as_read: 1 }), {
				token: tokens.viewer.secret,
			});
			expect(byToken.status).toBe(200);
			expect(byToken.body.read).toBe(true);
			await h.call("alerts.raise", { type: "test.csrf", level: "info", payload: { hostname: A } });
			const list = await request("GET", url("alerts", { mark_as_read: 1, where: { read: false, type: "test.csrf" } }), {
				token: tokens.viewer.secret,
			});
			expect(list.status).toBe(200);
			expect(list.body._items.length).toBeGreaterThan(0);
			expect(
				(await request("GET", url("alerts", { where: { read: false, type: "test.csrf" } }))).body._meta.total,
			).toBe(0);
		});
	});
});
