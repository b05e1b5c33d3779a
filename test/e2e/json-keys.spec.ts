/**
 * Any JSON key a client sends (`$x`, `a.b`, `__proto__`, `%41`, NUL, unicode) is stored exactly as sent
 * and shown back over HTTP: a task's kwarg, and a run's kwarg as salt-api gets it, in its actions record
 * and in its audit record. NeDB and MongoDB refuse such field names; lib/storage/store.ts encodes them. Runs on
 * the embedded default (NeDB), and on the MongoDB path too when MONGO_URI is set (in CI an emulator).
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, uniqueMongoUri, type Harness } from "../support/harness";
import { request, eventually } from "../support/http";
import type { Doc, Store } from "../../lib/storage/store";

/** As a client writes it: this text is what must come back, key order included. */
const KWARG_TEXT =
	'{"$x":1,"a.b":2,"__proto__":{"p":1},"%41":3,"ключ.$":{"$in":[{"a.b":null}]},"constructor":{"prototype":4},"nul\\u0000":5}';
const kwarg = (): Doc => JSON.parse(KWARG_TEXT);
/** Salt's fun_args for that kwarg. */
const FUN_ARGS_TEXT = `[{"__kwarg__":true,${KWARG_TEXT.slice(1)}]`;

/** NeDB, and MongoDB: reported skipped, with the reason, without MONGO_URI. */
function legs(): Array<[string, string | undefined]> {
	return [
		["NeDB", undefined],
		process.env.MONGO_URI
			? ["MongoDB (MONGO_URI)", uniqueMongoUri(process.env.MONGO_URI)]
			: ["MongoDB (skipped: MONGO_URI is not set)", undefined],
	];
}

/** Each key of `sent` but `__proto__`, as the response shows it: the same value, in the same order. */
function shownKeyByKey(shown: Doc, sent: Doc): Array<[string, string]> {
	return Object.keys(sent)
		.filter(k => k !== "__proto__")
		.map(k => [k, Object.hasOwn(shown, k) ? JSON.stringify(shown[k]) : "(missing)"]);
}

for (const [name, mongoUri] of legs())
	(name.includes("(skipped:") ? describe.skip : describe)(`any JSON key, over HTTP, on ${name}`, () => {
		let sim: SaltApiSimulator;
		let h: Harness;
		let host = "";
		const url = (path: string) => `${h.api}/${path}`;
		const postJson = (path: string, text: string) =>
			request("POST", url(path), { raw: text, headers: { "content-type": "application/json" } });
		/** The record as the service's store reads it back (what any service or response starts from). */
		const stored = (service: string, id: string) =>
			(h.broker!.getLocalService(service) as unknown as { store: Store }).store.findOne({ _id: id });

		beforeAll(async () => {
			sim = new SaltApiSimulator({
				minions: 3,
				timeout: 1,
				gatherJobTimeout: 0,
				latencyMs: [2, 10],
				presenceEvents: false,
			});
			await sim.start();
			h = await startEmbedded({
				mongoUri,
				env: {
					...sim.cmApiEnv,
					CM_API_TIMEOUT_MS: "2000",
					CM_JOB_POLL_MS: "100",
					CM_JOB_TIMEOUT_MS: "2000",
					CM_SYNC_INTERVAL_MS: "0",
					TASK_SCHEDULER: "false",
					...(mongoUri ? { CTL_SECRET_KEY: "json-keys-secret-key" } : {}),
				},
			});
			[host] = sim.upMinions();
			await h.call("hosts.upsertMany", { hosts: [{ _id: host, status: "up", key: "accepted" }] });
		});
		afterAll(async () => {
			await h?.stop();
			await sim?.stop();
		});

		const createTask = async (name: string): Promise<string> => {
			const created = await postJson(
				"tasks",
				`{"name":"${name}","fun":"test.arg","tgt":["${host}"],"start":"2030-01-02 03:04","kwarg":${KWARG_TEXT}}`,
			);
			expect(created.status).toBe(201);
			return created.body._id;
		};

		it("stores a task's kwarg exactly as it was created, and shows it back", async () => {
			const id = await createTask("keys-task");
			expect(JSON.stringify((await stored("tasks", id))?.kwarg)).toBe(KWARG_TEXT);
			const res = await request("GET", url(`tasks/${id}`));
			expect(res.status).toBe(200);
			expect(shownKeyByKey(res.body.kwarg, kwarg())).toEqual(shownKeyByKey(kwarg(), kwarg()));
		});

		// Fails today past the store: lib/eve/dates.ts renderDates copies with `out[k] = …`, which sets the
		// prototype for a key "__proto__" instead of keeping it. Once it makes own properties, drop `.failing`.
		it("shows a task's `__proto__` key back too", async () => {
			const id = await createTask("keys-task-proto");
			const res = await request("GET", url(`tasks/${id}`));
			expect(JSON.stringify(res.body.kwarg)).toBe(KWARG_TEXT);
		});

		it("runs with such a kwarg: salt-api gets it, and the actions and audit records keep it exactly", async () => {
			const res = await postJson(`hosts/${host}`, `{"cm_client":"local","fun":"test.arg","kwarg":${KWARG_TEXT}}`);
			expect(res.status).toBe(200);
			const jid = res.body.task_id as string;
			expect(JSON.stringify(sim.job(jid)?.arg)).toBe(FUN_ARGS_TEXT);

			const shown = await eventually(async () => {
				const r = await request("GET", url(`actions/${jid}${host}`));
				return r.status === 200 && r.body.state !== "running" ? r.body : undefined;
			});
			expect(JSON.stringify((await stored("actions", `${jid}${host}`))?.args)).toBe(FUN_ARGS_TEXT);
			expect(shownKeyByKey(shown.args[0], { __kwarg__: true, ...kwarg() })).toEqual(
				shownKeyByKey({ __kwarg__: true, ...kwarg() }, { __kwarg__: true, ...kwarg() }),
			);

			const audit = await request("GET", `${url("audit")}?where=${encodeURIComponent(JSON.stringify({ jid }))}`);
			expect(audit.status).toBe(200);
			expect(audit.body._items).toHaveLength(1);
			expect(JSON.stringify((await stored("audit", audit.body._items[0]._id))?.args.kwarg)).toBe(KWARG_TEXT);
			expect(shownKeyByKey(audit.body._items[0].args.kwarg, kwarg())).toEqual(shownKeyByKey(kwarg(), kwarg()));
		});

		it("polluted no prototype on the way", () => {
			expect(({} as Doc).p).toBeUndefined();
			expect(Object.keys(Object.prototype)).toEqual([]);
		});
	});
