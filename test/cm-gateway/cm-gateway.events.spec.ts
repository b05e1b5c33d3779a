/**
 * The cm-gateway following the master's event bus, against the salt-api simulator over real HTTP:
 * the inventory filled at start and kept current by events (presence, minion start, keys,
 * fingerprints), job returns from the event stream (no polling of /jobs), failed patches, alerts
 * (host down/up, vnc.connect, patch failed, bursts), the live status.all_status poll, and salt-api
 * going away mid-job and coming back.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, startSplit, uniqueMongoUri, type Harness } from "../support/harness";
import { request, expectEveError, eventually, withQuery } from "../support/http";
import type { SyncResult } from "../../services/cm-gateway/reconcile";

/**
 * Event-driven changes must show within this. Generous: other suites load the machine meanwhile (the
 * distributed scheduler test runs five processes); the benchmark measures the real figure (p99 ~14 ms).
 */
const SOON = 10_000;

/**
 * CM_PRESENCE_CONFIRM_MS of the event-stream harness: how much later a reading must come to confirm a held mass
 * loss (default 10 s). Short to keep the burst test fast, yet well above the milliseconds between the change and
 * present events of one master loop, so that those two never confirm each other even on a loaded machine.
 */
const CONFIRM_MS = 1000;

/**
 * Every store the suite runs on: NeDB, and the Mongo path when MONGO_URI is set (in CI, the wire-protocol emulator,
 * not MongoDB); without it the Mongo path is reported skipped, with the reason.
 */
const STORES: Array<[string, string | undefined, boolean]> = [
	["NeDB", undefined, true],
	[
		`MongoDB path${process.env.MONGO_URI ? "" : ", skipped: MONGO_URI is not set"}`,
		process.env.MONGO_URI,
		!!process.env.MONGO_URI,
	],
];

for (const [store, mongoUri, canCheck] of STORES)
	(canCheck ? describe : describe.skip)(`cm-gateway: the event stream (${store})`, () => {
		let sim: SaltApiSimulator;
		let h: Harness;
		const url = (path: string) => `${h.api}/${path}`;
		const get = (path: string) => request("GET", url(path));
		const host = async (id: string) => (await get(withQuery(`hosts/${id}`, { show_soft_deleted: "true" }))).body;
		const hostWhen = (id: string, ok: (h: any) => boolean, what: string) =>
			eventually(
				async () => {
					const h = await host(id);
					return h && ok(h) ? h : undefined;
				},
				SOON,
				what,
			);
		const alerts = async (where: Record<string, unknown>) =>
			(await get(withQuery("alerts", { where, max_results: 50, sort: "-_created" }))).body._items as any[];
		const alertWhen = (where: Record<string, unknown>, what: string) =>
			eventually(
				async () => {
					const found = await alerts(where);
					return found.length ? found : undefined;
				},
				SOON,
				what,
			);
		const total = async (path: string, where: Record<string, unknown> = {}) =>
			(await get(withQuery(path, { where, max_results: 1 }))).body._meta.total as number;
		/**
		 * Everything the event stream brought before now has been applied: a host that is up sends a custom event (a
		 * salt-call, which proves its own host alive, hence a host that is up) and its vnc.connect alert shows. The
		 * inventory events are applied in one ordered lane, so every earlier event was applied before that alert.
		 */
		let markers = 0;
		const eventsApplied = async (from: string) => {
			const status = `marker-${++markers}`;
			sim.vncConnect(from, status);
			await alertWhen(
				{ type: "vnc.connect", "payload.hostname": from, "payload.status": status },
				`the marker event ${status}`,
			);
		};

		beforeAll(async () => {
			sim = new SaltApiSimulator({
				minions: 60,
				timeout: 1,
				gatherJobTimeout: 0,
				latencyMs: [2, 20],
				presenceIntervalMs: 3_600_000,
			});
			await sim.start();
			h = await startEmbedded({
				mongoUri: mongoUri ? uniqueMongoUri(mongoUri) : undefined,
				env: {
					CTL_SECRET_KEY: "cm-events-secret-key",
					...sim.cmApiEnv,
					CM_API_TIMEOUT_MS: "2000",
					// Returns must come from the event stream: the /jobs fallback runs only once a minute here.
					CM_JOB_POLL_MS: "60000",
					CM_JOB_TIMEOUT_MS: "120000",
					// Sync at start and after every reconnection; the timer itself stays out of the way.
					CM_SYNC_INTERVAL_MS: "3600000",
					CM_ALL_STATUS_INTERVAL_MS: "200",
					CM_ALERT_BURST: "5",
					// The presence guard keeps its default share (50 %); a held mass loss is confirmed this much later.
					CM_PRESENCE_CONFIRM_MS: String(CONFIRM_MS),
				},
			});
			await eventually(
				async () => ((await h.call("cm-gateway.eventStreamStatus")).connected ? true : undefined),
				SOON,
				"the event stream",
			);
		});
		afterAll(async () => {
			await h?.stop();
			await sim?.stop();
		});
		afterEach(() => sim.clearFaults());

		it("fills the inventory from the master at start: every minion with a key, once", async () => {
			const keys = sim.minionIds().length;
			await eventually(
				async () => ((await total("hosts")) === keys ? true : undefined),
				10_000,
				"every minion as a host",
			);
			const [id] = sim.upMinions();
			const rec = await host(id);
			expect(rec).toMatchObject({ _id: id, key: "accepted", status: "up", fingerprint: sim.minion(id)!.fingerprint });
			expect(rec.grain.id).toBe(id);
		});

		it("marks a host down and up again within seconds of the presence event, with host.down and host.up alerts", async () => {
			const id = sim.upMinions()[1];
			const before = await host(id);
			sim.setUp(id, false);
			// A minion that stops announces nothing: the master's next maintenance loop reports it lost.
			sim.firePresence();
			await hostWhen(id, x => x.status === "down", "the host to go down");
			const [down] = await alertWhen({ type: "host.down", "payload.hostname": id }, "a host.down alert");
			expect(down).toMatchObject({
				type: "host.down",
				level: "warning",
				read: false,
				payload: { hostname: id, status: "down" },
			});

			// A minion that starts announces itself at once (salt/auth, salt/minion/<id>/start), before the next loop.
			sim.setUp(id, true);
			const back = await hostWhen(id, x => x.status === "up", "the host to come back");
			expect(new Date(back.heartbeat).getTime()).toBeGreaterThanOrEqual(new Date(before.heartbeat).getTime());
			const [up] = await alertWhen({ type: "host.up", "payload.hostname": id }, "a host.up alert");
			expect(up).toMatchObject({ level: "info", payload: { hostname: id, status: "up" } });
		});

		it("turns many hosts going down at once into one summary alert (CM_ALERT_BURST)", async () => {
			// More than half of the hosts that are up (CM_PRESENCE_MAX_LOSS_PERCENT, default 50): a site losing its link.
			// The presence guard holds the master's first reading of it, and the next one, CM_PRESENCE_CONFIRM_MS later,
			// applies it: one summary alert, no alert per host.
			const up = sim.upMinions();
			const ids = up.slice(10, 10 + Math.floor(up.length / 2) + 1);
			const marker = up[0];
			expect(ids.length).toBeGreaterThan(5); // CM_ALERT_BURST
			const downAlerts = async () =>
				(
					await alerts({
						type: "host.down",
						$or: [{ "payload.hostname": { $in: ids } }, { "payload.count": ids.length }],
					})
				).length;
			const stillUp = async () => total("hosts", { _id: { $in: ids }, status: "up" });
			try {
				for (const id of ids) sim.setDown(id);
				sim.firePresence(); // the master's loop: salt/presence/change {lost: ids}, then salt/presence/present
				// Held: that reading alone could be a master that does not know its minions yet.
				await eventsApplied(marker);
				expect(await stillUp()).toBe(ids.length);
				expect(await downAlerts()).toBe(0);

				// The next loop, at least CM_PRESENCE_CONFIRM_MS later, still does not see them: the loss is applied.
				await new Promise(r => setTimeout(r, CONFIRM_MS + 200));
				sim.firePresence();
				for (const id of ids) await hostWhen(id, x => x.status === "down", `${id} to go down`);
				const [summary] = await alertWhen({ type: "host.down", "payload.count": ids.length }, "a summary alert");
				expect([...summary.payload.hostnames].sort()).toEqual([...ids].sort());
				expect(await alerts({ type: "host.down", "payload.hostname": { $in: ids } })).toHaveLength(0);
			} finally {
				for (const id of ids) sim.setUp(id, true);
				sim.firePresence(); // the master's loop sees them back too
			}
			for (const id of ids) await hostWhen(id, x => x.status === "up", `${id} to come back`);
		});

		it("creates a host for a new minion key, follows its acceptance and start, and fills its grains", async () => {
			const id = sim.addMinion({ id: "evt-new-01.site-z.example", key: "pending", up: true });
			const pending = await hostWhen(id, x => x.key === "pending", "the pending host");
			expect(pending.status).toBe("unknown");
			expect(pending.fingerprint).toBe(sim.minion(id)!.fingerprint);

			sim.setKeyState(id, "accepted");
			const accepted = await hostWhen(id, x => x.key === "accepted" && x.status === "up", "the accepted host to be up");
			expect(accepted.grain.id).toBe(id);
			expect(accepted.version).toBe(sim.minion(id)!.grains.cmversion);
		});

		it("follows key rejection and deletion (soft delete), and restores the host when its key comes back", async () => {
			const id = sim.addMinion({ id: "evt-key-01.site-z.example", key: "accepted", up: true });
			await hostWhen(id, x => x.key === "accepted", "the host");
			sim.setKeyState(id, "rejected");
			await hostWhen(id, x => x.key === "rejected" && x.status === "unknown", "the rejected key");

			sim.removeMinion(id);
			await hostWhen(id, x => x._soft_deleted === true, "the soft delete");
			expect((await get(`hosts/${id}`)).status).toBe(404);

			sim.addMinion({ id, key: "accepted", up: true });
			// The restore (key back) and the presence (minion connected) are two events, written one after the other.
			const back = await hostWhen(
				id,
				x => x._soft_deleted === false && x.key === "accepted" && x.status === "up",
				"the restored host to be up",
			);
			expect(back.fingerprint).toBe(sim.minion(id)!.fingerprint);
		});

		it("keeps a changed fingerprint in fingerprint_history and raises fingerprint.changed", async () => {
			const id = sim.upMinions()[2];
			const old = (await host(id)).fingerprint;
			const fresh = sim.changeFingerprint(id);
			const rec = await hostWhen(id, x => x.fingerprint === fresh, "the new fingerprint");
			expect(rec.fingerprint_history.map((e: any) => e.fingerprint)).toContain(old);
			const [alert] = await alertWhen({ type: "fingerprint.changed", "payload.hostname": id }, "a fingerprint alert");
			expect(alert).toMatchObject({ level: "warning", payload: { hostname: id, fingerprint: fresh, previous: old } });
		});

		it("raises vnc.connect from the hosts' custom event (tag ctl/vnc/connect)", async () => {
			const id = sim.upMinions()[3];
			sim.vncConnect(id, "connected");
			const [alert] = await alertWhen({ type: "vnc.connect", "payload.hostname": id }, "a vnc.connect alert");
			expect(alert).toMatchObject({
				type: "vnc.connect",
				level: "info",
				read: false,
				payload: { hostname: id, status: "connected" },
			});
			sim.vncConnect(id, "disconnected");
			await alertWhen(
				{ type: "vnc.connect", "payload.hostname": id, "payload.status": "disconnected" },
				"the disconnect alert",
			);
		});

		it("reads a host from the master again only when its key changed: a salt-call with its known key costs the master nothing", async () => {
			const id = sim.upMinions()[4];
			await hostWhen(id, x => x.fingerprint === sim.minion(id)!.fingerprint, "the host with its key");
			const lowstates = () => sim.requests().filter(r => r.method === "POST" && r.path === "/").length;
			// Each salt-call authenticates (salt/auth accept, the minion's own key) before its event.
			const quiet = lowstates();
			for (let i = 0; i < 5; i++) sim.vncConnect(id, `quiet-${i}`);
			await alertWhen(
				{ type: "vnc.connect", "payload.hostname": id, "payload.status": "quiet-4" },
				"the fifth salt-call's event",
			);
			expect(lowstates() - quiet).toBe(0);
			// Another key: the host is read again (key.finger and its grains) and the change recorded.
			const fresh = sim.changeFingerprint(id);
			sim.vncConnect(id, "after-new-key");
			await alertWhen(
				{ type: "vnc.connect", "payload.hostname": id, "payload.status": "after-new-key" },
				"the event after the new key",
			);
			expect((await host(id)).fingerprint).toBe(fresh);
		});

		it("records local_async returns from the event stream, without reading /jobs, slow hosts included", async () => {
			const [a, b, slow] = sim.upMinions().slice(20, 23);
			sim.setMinionDelay(slow, 1500);
			try {
				const g = await request("POST", url("groups"), { body: { name: "evt-async", type: 0, hosts: [a, b, slow] } });
				const res = await request("POST", url(`groups/${g.body._id}`), {
					body: { cm_client: "local_async", fun: "test.ping" },
				});
				expect(res.status).toBe(200);
				const jid = res.body.task_id;
				const state = async (id: string) => (await get(`actions/${jid}${id}`)).body?.state as string | undefined;
				for (const id of [a, b])
					await eventually(async () => ((await state(id)) === "finished" ? true : undefined), SOON, `${id}'s return`);
				expect(await state(slow)).toBe("running");
				await eventually(
					async () => ((await state(slow)) === "finished" ? true : undefined),
					SOON,
					"the slow host's return",
				);
				// The host's last_action is written right after its actions record.
				await hostWhen(slow, x => x.last_action === `${jid}${slow}`, "the slow host's last_action");
				expect(sim.requests().filter(r => r.path.startsWith("/jobs"))).toHaveLength(0);
			} finally {
				sim.setMinionDelay(slow, null);
			}
		});

		it("keeps at most CM_RETURN_MAX_BYTES of a return, saying how much was left out", async () => {
			const id = sim.upMinions()[45];
			const res = await request("POST", url(`hosts/${id}`), {
				body: { cm_client: "local", fun: "test.arg", arg: ["x".repeat(300_000)] },
			});
			expect(res.status).toBe(200);
			const rec = (await get(`actions/${res.body.task_id}${id}`)).body;
			expect(rec.state).toBe("finished");
			expect(Buffer.byteLength(rec.return)).toBeLessThan(256 * 1024 + 100);
			expect(rec.return).toMatch(/\[\d+ more bytes not kept\]$/);
		});

		describe("patches", () => {
			const patch = "patches.openssl-cve-2024-5535";
			afterEach(() => sim.clearPatchFailures());

			it("records a failed patch run (local) with every step in order, the derived cmd, and a patch.failed alert", async () => {
				const [ok, bad] = sim.upMinions().slice(30, 32);
				sim.failPatch(patch, [bad], { stepId: "restart_sshd", retcode: 3, stderr: "Job for ssh.service failed" });
				const g = await request("POST", url("groups"), { body: { name: "evt-patch", type: 0, hosts: [ok, bad] } });
				const res = await request("POST", url(`groups/${g.body._id}`), {
					body: { cm_client: "local", fun: "state.apply", kwarg: { mods: patch } },
				});
				expect(res.status).toBe(200);
				const jid = res.body.task_id;

				const rec = (await get(`failed_patches/${jid}${bad}`)).body;
				expect(rec).toMatchObject({
					_id: `${jid}${bad}`,
					jid,
					action: "state.apply",
					host: bad,
					state: "finished",
					patch,
				});
				expect(rec.return.map((s: any) => s.__id__)).toEqual(["upgrade_openssl", "restart_sshd"]);
				expect(rec.return.map((s: any) => s.__run_num__)).toEqual([0, 1]);
				const [first, failed] = rec.return;
				expect(first).toMatchObject({
					result: true,
					cmd: "apt-get install -y --only-upgrade openssl libssl3",
					__sls__: patch,
				});
				expect(failed).toMatchObject({
					result: false,
					cmd: "systemctl restart ssh",
					name: "systemctl restart ssh",
					changes: { retcode: 3, stderr: "Job for ssh.service failed" },
				});
				for (const f of ["comment", "start_time", "duration", "changes"]) expect(failed).toHaveProperty(f);
				expect((await get(`failed_patches/${jid}${ok}`)).status).toBe(404);
				expect((await get(`actions/${jid}${ok}`)).body.state).toBe("finished");

				const [alert] = await alertWhen({ type: "patch.failed", "payload.hostname": bad }, "a patch.failed alert");
				expect(alert).toMatchObject({ level: "error", payload: { hostname: bad, patch, jid } });
			});

			it("records a failed patch from a local_async run (positional mods) as its return arrives", async () => {
				const [bad] = sim.upMinions().slice(32, 33);
				sim.failPatch(patch, [bad]);
				const res = await request("POST", url(`hosts/${bad}`), {
					body: { cm_client: "local_async", fun: "state.apply", arg: [patch] },
				});
				expect(res.status).toBe(200);
				const rec = await eventually(
					async () => (await get(`failed_patches/${res.body.task_id}${bad}`)).body?.patch as string | undefined,
					SOON,
					"the failed patch",
				);
				expect((await get(`actions/${res.body.task_id}${bad}`)).body.state).toBe("finished");
				expect(rec).toBe(patch);
			});

			it("records a patch that cannot be rendered as failed, and nothing for a highstate, a clean run or a failing state outside the patches", async () => {
				const [id] = sim.upMinions().slice(33, 34);
				const missing = await request("POST", url(`hosts/${id}`), {
					body: { cm_client: "local", fun: "state.apply", kwarg: { mods: "patches.no-such-patch" } },
				});
				const rec = (await get(`failed_patches/${missing.body.task_id}${id}`)).body;
				expect(rec.patch).toBe("patches.no-such-patch");
				expect(rec.return).toEqual([
					expect.objectContaining({
						__id__: "render",
						result: false,
						comment: expect.stringContaining("No matching sls found for 'patches.no-such-patch'"),
					}),
				]);

				const before = await total("failed_patches");
				const clean = await request("POST", url(`hosts/${id}`), {
					body: { cm_client: "local", fun: "state.apply", kwarg: { mods: patch } },
				});
				expect(clean.status).toBe(200);
				const high = await request("POST", url(`hosts/${id}`), { body: { cm_client: "local", fun: "state.apply" } });
				expect(high.status).toBe(200);
				// States outside CM_PATCH_PREFIX ("patches/") are not patches, even when they fail (issue 46).
				for (const body of [
					{ kwarg: { mods: "webserver" } },
					{ arg: ["patchesnot.fix1"] },
					{ kwarg: { mods: ["base", "web.nginx"] } },
				]) {
					const other = await request("POST", url(`hosts/${id}`), {
						body: { cm_client: "local", fun: "state.apply", ...body },
					});
					expect(JSON.stringify(other.body.return)).toContain("No matching sls found");
				}
				expect(await total("failed_patches")).toBe(before);
			});
		});

		describe("POST /hosts/{id}/all_status", () => {
			const polls = async (id: string) => total("actions", { host: id, action: "status.all_status" });
			const isPoll = (j: { fun: string; tgt: unknown }, ids: string[]) =>
				j.fun === "status.all_status" && ids.some(id => JSON.stringify(j.tgt).includes(JSON.stringify(id)));
			/**
			 * "No more polls" of `stopped` without a fixed sleep: a marker poll on another host, started after the stop,
			 * makes three polls (one at once, two from its timer, every CM_ALL_STATUS_INTERVAL_MS). In salt-api's job log,
			 * after the marker's first poll from its timer (a poll of a stopped host still in flight at the stop is in
			 * by then) nothing of the stopped hosts; and their actions records do not grow meanwhile.
			 */
			const expectPollsStopped = async (stopped: string[], marker: string) => {
				const from = sim.jobs().length;
				const records = await Promise.all(stopped.map(polls));
				expect((await request("POST", url(`hosts/${marker}/all_status`), { body: { action: "start" } })).status).toBe(
					200,
				);
				const markerPolls = () =>
					sim
						.jobs()
						.slice(from)
						.flatMap((j, i) => (isPoll(j, [marker]) ? [from + i] : []));
				await eventually(
					async () => (markerPolls().length >= 3 ? true : undefined),
					SOON,
					"three polls of the marker host",
				);
				const afterTimer = markerPolls()[1];
				expect(
					sim
						.jobs()
						.slice(afterTimer)
						.filter(j => isPoll(j, stopped)),
				).toEqual([]);
				expect(
					(await request("POST", url(`hosts/${marker}/all_status`), { body: { action: "stop" } })).body,
				).toMatchObject({ stopped: 1 });
				// Every record of a poll made before the stop is written by the time the marker's polls are (returns are
				// written in order): none was added since, whatever it was at the stop.
				const late = await Promise.all(stopped.map(polls));
				for (let i = 0; i < stopped.length; i++) expect(late[i] - records[i]).toBeLessThanOrEqual(1);
				return late;
			};

			it("starts a live status.all_status poll whose returns are actions records, and stops it", async () => {
				const id = sim.upMinions()[40];
				const lastAction = (await host(id)).last_action;
				const res = await request("POST", url(`hosts/${id}/all_status`), { body: { action: "start" } });
				expect(res.status).toBe(200);
				expect(res.body).toMatchObject({ _status: "OK", action: "start", host: id, polling: true, interval: 0.2 });
				await eventually(async () => ((await polls(id)) >= 3 ? true : undefined), SOON, "three polls");
				const latest = (
					await get(
						withQuery("actions", {
							where: { host: id, action: "status.all_status" },
							sort: "-_created",
							max_results: 1,
						}),
					)
				).body._items[0];
				expect(latest.state).toBe("finished");
				expect(JSON.parse(latest.return)).toHaveProperty("loadavg");
				expect((await host(id)).last_action).toBe(lastAction);

				const stop = await request("POST", url(`hosts/${id}/all_status`), { body: { action: "stop" } });
				expect(stop.body).toMatchObject({ _status: "OK", polling: false, stopped: 1 });
				await expectPollsStopped([id], sim.upMinions()[47]);
			});

			it("stop_all stops every poll", async () => {
				const ids = sim.upMinions().slice(41, 43);
				for (const id of ids)
					expect((await request("POST", url(`hosts/${id}/all_status`), { body: {} })).status).toBe(200);
				const res = await request("POST", url(`hosts/${ids[0]}/all_status`), { body: { action: "stop_all" } });
				expect(res.body).toMatchObject({ _status: "OK", action: "stop_all", stopped: 2 });
				await expectPollsStopped(ids, sim.upMinions()[48]);
			});

			it("answers 422 for a bad action, 404 for an unknown host, 503 when the master does not answer", async () => {
				const id = sim.upMinions()[44];
				expectEveError(await request("POST", url(`hosts/${id}/all_status`), { body: { action: "restart" } }), 422);
				expectEveError(
					await request("POST", url(`hosts/${id}/all_status`), { body: { action: "start", extra: 1 } }),
					422,
				);
				expectEveError(
					await request("POST", url("hosts/no-such-host.example/all_status"), { body: { action: "start" } }),
					404,
				);
				sim.failNext(1, 500, { filter: { method: "POST", path: "/" } });
				expectEveError(await request("POST", url(`hosts/${id}/all_status`), { body: { action: "start" } }), 503);
			});
		});

		it("shows the hosts that have not answered as running, and a restart of fleet-ctl mid-job loses no return", async () => {
			const [slow, fast] = sim.upMinions().slice(52, 54);
			sim.setMinionDelay(slow, 2500);
			try {
				const g = await request("POST", url("groups"), { body: { name: "evt-restart", type: 0, hosts: [slow, fast] } });
				const res = await request("POST", url(`groups/${g.body._id}`), {
					body: { cm_client: "local_async", fun: "test.ping" },
				});
				const jid = res.body.task_id;
				const pending = (await get(`actions/${jid}${slow}`)).body;
				expect(pending).toMatchObject({ jid, host: slow, action: "test.ping", state: "running", return: "" });
				await eventually(
					async () => ((await get(`actions/${jid}${fast}`)).body?.state === "finished" ? true : undefined),
					SOON,
					"the fast host",
				);

				await h.restart(); // the slow host returns while fleet-ctl is away or just back
				const rec = await eventually(
					async () => {
						const r = (await get(`actions/${jid}${slow}`)).body;
						return r?.state === "finished" ? r : undefined;
					},
					10_000,
					"the slow host's return after the restart",
				);
				expect(rec).toMatchObject({ return: "true", _created: pending._created });
				expect(sim.executionCount(slow, "test.ping")).toBe(1);
			} finally {
				sim.setMinionDelay(slow, null);
			}
		});

		it("survives salt-api going away mid-job: the return made meanwhile is recorded, missed changes caught up, no host duplicated", async () => {
			const [id, flips] = sim.upMinions().slice(50, 52);
			const hosts = await total("hosts", {});
			sim.setMinionDelay(id, 600);
			try {
				const res = await request("POST", url(`hosts/${id}`), { body: { cm_client: "local_async", fun: "test.ping" } });
				const jid = res.body.task_id;
				await sim.goDown("refuse");
				sim.setUp(flips, false);
				sim.firePresence(); // the master's loop reports it lost: missed, the stream is down
				// The minion returns while salt-api is away (its return is in the master's job cache, not sent anywhere).
				await eventually(
					async () => (sim.job(jid)?.returned.includes(id) ? true : undefined),
					SOON,
					"the minion's return at the master",
				);
				expect((await get(`actions/${jid}${id}`)).body.state).toBe("running");
				await sim.comeBack();
				await eventually(
					async () => ((await get(`actions/${jid}${id}`)).body?.state === "finished" ? true : undefined),
					10_000,
					"the return made during the outage",
				);
				await hostWhen(flips, x => x.status === "down", "the missed presence change");
				expect(await total("hosts", {})).toBe(hosts);
				expect(sim.executionCount(id, "test.ping")).toBe(1);
			} finally {
				sim.setMinionDelay(id, null);
				sim.setUp(flips, true);
			}
		});
	});

describe("cm-gateway: 10,000 minions", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (path: string) => `${h.api}/${path}`;
	const total = async (path: string, where: Record<string, unknown> = {}) =>
		(await request("GET", url(withQuery(path, { where, max_results: 1 })))).body._meta.total as number;

	beforeAll(async () => {
		sim = new SaltApiSimulator({
			minions: 10_000,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 200],
			presenceIntervalMs: 3_600_000,
		});
		await sim.start();
		h = await startEmbedded({
			env: {
				...sim.cmApiEnv,
				CM_API_TIMEOUT_MS: "30000",
				CM_JOB_POLL_MS: "60000",
				CM_SYNC_INTERVAL_MS: "3600000",
			},
		});
	}, 120_000);
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("fills the inventory with every minion once, and keeps every host's key and presence as the master has them", async () => {
		const keys = sim.minionIds().length;
		await eventually(async () => ((await total("hosts")) === keys ? true : undefined), 90_000, "10,000 hosts");
		expect(await total("hosts", { key: "accepted" })).toBe(sim.minionIds({ key: "accepted" }).length);
		expect(await total("hosts", { status: "up" })).toBe(sim.upMinions().length);
		expect(await total("hosts", { key: "pending" })).toBe(sim.minionIds({ key: "pending" }).length);
		// The first reconciliation writes the hosts before it ends: a sync asked while it runs would join it.
		await eventually(
			async () => ((await request("GET", url("jobs/inventory_sync"))).body.status === "finished" ? true : undefined),
			60_000,
			"the first reconciliation to end",
		);
		const res: SyncResult = await h.call("cm-gateway.sync");
		expect(res).toMatchObject({ hosts: keys, created: 0, removed: 0, restored: 0, fingerprints_changed: 0 });
	}, 120_000);

	it("runs a function on 5,000 hosts of a group and records every return from the event stream", async () => {
		const targets = sim.upMinions().slice(0, 5000);
		const g = await request("POST", url("groups"), { body: { name: "big", type: 0, hosts: targets } });
		expect(g.status).toBe(201);
		const res = await request("POST", url(`groups/${g.body._id}`), {
			body: { cm_client: "local_async", fun: "test.ping" },
		});
		expect(res.status).toBe(200);
		expect(res.body.return.return[0].minions).toHaveLength(5000);
		const jid = res.body.task_id;
		await eventually(
			async () => ((await total("actions", { jid, state: "finished" })) === 5000 ? true : undefined),
			60_000,
			"5,000 returns",
		);
		expect(await total("actions", { jid })).toBe(5000);
		for (const id of [targets[0], targets[4999]]) expect(sim.executionCount(id, "test.ping")).toBe(1);
	}, 120_000);
});

describe("cm-gateway split over NATS (the API gateway, the cm-gateway and the data services in separate processes)", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (path: string) => `${h.api}/${path}`;

	beforeAll(async () => {
		// 600 minions: a reconciliation batch of their hosts with grains is well over NATS's 1 MiB max_payload.
		sim = new SaltApiSimulator({
			minions: 600,
			timeout: 1,
			gatherJobTimeout: 0,
			latencyMs: [2, 20],
			presenceIntervalMs: 3_600_000,
		});
		await sim.start();
		h = await startSplit({
			own: ["cm-gateway"],
			env: { ...sim.cmApiEnv, CM_API_TIMEOUT_MS: "5000", CM_JOB_POLL_MS: "60000", CM_SYNC_INTERVAL_MS: "3600000" },
		});
	}, 90_000);
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("fills the inventory, follows presence with an alert, and records returns, as seen through the gateway", async () => {
		const keys = sim.minionIds().length;
		await eventually(
			async () => ((await request("GET", url("hosts?max_results=1"))).body._meta.total === keys ? true : undefined),
			20_000,
			"every minion as a host",
		);
		const [id, other] = sim.upMinions();
		sim.setUp(id, false);
		sim.firePresence(); // the master's maintenance loop reports it lost
		await eventually(
			async () => ((await request("GET", url(`hosts/${id}`))).body.status === "down" ? true : undefined),
			SOON,
			"the host to go down",
		);
		const alerts = await request(
			"GET",
			url(withQuery("alerts", { where: { type: "host.down", "payload.hostname": id } })),
		);
		expect(alerts.body._items).toHaveLength(1);

		const res = await request("POST", url(`hosts/${other}`), { body: { cm_client: "local_async", fun: "test.ping" } });
		expect(res.status).toBe(200);
		const rec = await eventually(
			async () => {
				const r = (await request("GET", url(`actions/${res.body.task_id}${other}`))).body;
				return r?.state === "finished" ? r : undefined;
			},
			SOON,
			"the return",
		);
		expect(rec.return).toBe("true");
	});
});
