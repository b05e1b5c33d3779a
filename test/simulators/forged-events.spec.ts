/**
 * The simulator's forged events against a real Salt 3006.0 master's: the same requests as the captures in
 * captures/salt-3006.0-2026-11-29-forged-events (README.md there), run on a simulated `real-m1`, `real-m2`; each
 * forged event's data must have the captured keys in the captured order (the payload's too), and a forged
 * `_return` whose `tok` is bytes must cut the stream right after its tag line, as rest_cherrypy does. Also the
 * other cut seen on that master (issue 43's real-Salt report, section 3): a `test.get_opts` return, whose
 * datetimes salt-api's JSON encoder refuses.
 */
import http from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SaltApiSimulator } from "./salt-api";
import { until } from "./sse-reader";

const CAPTURES = join(__dirname, "captures", "salt-3006.0-2026-11-29-forged-events");

interface Ev {
	tag: string;
	data: Record<string, any>;
}

const parse = (text: string): Ev[] =>
	[...text.matchAll(/tag: (.*)\ndata: (.*)\n\n/g)].map(m => ({ tag: m[1], data: JSON.parse(m[2]).data }));

/** An event's keys in order, its payload's (`data.data` when it is an object) after a "|" (jids written as JID). */
const keysOf = (e: Ev) => ({
	tag: e.tag.replace(/\d{20}/g, "JID"),
	keys: Object.keys(e.data),
	payload: e.data.data && typeof e.data.data === "object" ? Object.keys(e.data.data) : null,
});

/** A raw `GET /events` reader that also records how the stream ended. */
function follow(url: string): { text: () => string; ended: () => "open" | "cut" | "closed"; close: () => void } {
	let text = "";
	let ended: "open" | "cut" | "closed" = "open";
	const req = http.get(url, res => {
		res.setEncoding("utf8");
		res.on("data", (c: string) => (text += c));
		res.on("aborted", () => (ended = "cut"));
		res.on("error", () => (ended = "cut"));
		res.on("end", () => (ended = ended === "open" ? "closed" : ended));
	});
	req.on("error", () => (ended = "cut"));
	return { text: () => text, ended: () => ended, close: () => req.destroy() };
}

describe("salt-api simulator: events a minion forges, as Salt 3006.0 fires them (captured 2026-11-29)", () => {
	let sim: SaltApiSimulator;
	let token = "";
	/** The forged events of a capture: the wrappers, and what carries a "forged…" return (the real ones say "hi", true). */
	const isForgedReturn = (e: Ev) =>
		e.data.cmd === "_minion_event" || (typeof e.data.return === "string" && e.data.return.startsWith("forged"));
	const forged = (events: Ev[], ...jids: string[]) =>
		events.filter(
			e =>
				(jids.some(j => e.tag === `salt/job/${j}/ret/real-m2`) && isForgedReturn(e)) ||
				e.tag === "salt/presence/change",
		);

	beforeAll(async () => {
		sim = new SaltApiSimulator({ ids: ["real-m1", "real-m2"], latencyMs: [2, 5], presenceIntervalMs: 3_600_000 });
		await sim.start();
		const r = await fetch(`${sim.url}/login`, {
			method: "POST",
			headers: { "Content-Type": "application/json", Accept: "application/json" },
			body: JSON.stringify({ username: "saltapi", password: "saltapi", eauth: "pam" }),
		});
		token = ((await r.json()) as { return: [{ token: string }] }).return[0].token;
	});
	afterAll(async () => {
		await sim?.stop();
	});

	it("wrapper (fire_master, event.send), raw preload events and a _return in another minion's name, each like events1/events2", async () => {
		const captured1 = parse(readFileSync(join(CAPTURES, "events1.txt"), "utf8"));
		const captured2 = parse(readFileSync(join(CAPTURES, "events2.txt"), "utf8"));
		const realJid1 = /JID=(\d{20})/.exec(readFileSync(join(CAPTURES, "steps1.txt"), "utf8"))![1];
		const realJid2 = /JID=(\d{20})/.exec(readFileSync(join(CAPTURES, "steps2.txt"), "utf8"))![1];
		// events1: B, C, D, D2, E (F, which cut the stream, is the next test); events2: G, F2.
		const want = [...forged(captured1, realJid1), ...forged(captured2, realJid2)].map(keysOf);
		expect(want).toHaveLength(7);

		const stream = follow(`${sim.url}/events?token=${token}`);
		try {
			await until(() => stream.text().startsWith("retry: 400\n") || undefined, 5000, "the stream");
			const job = sim.cliJob(["real-m1", "real-m2"], "test.echo", ["hi"], { tgtType: "list" })!;
			const J = job.jid;
			const ret = {
				id: "real-m2",
				jid: J,
				fun: "test.echo",
				fun_args: ["hi"],
				return: "forged",
				retcode: 0,
				success: true,
				cmd: "_return",
			};
			const on = (fun: string, arg: unknown[]) =>
				sim.cliJob(["real-m1"], fun, arg, { tgtType: "list", user: "fleetctl" });
			on("event.fire_master", [ret, `salt/job/${J}/ret/real-m2`]);
			on("event.fire_master", [{ new: [], lost: ["real-m2"] }, "salt/presence/change"]);
			on("event.send", [`salt/job/${J}/ret/real-m2`, { __kwarg__: true, data: ret }]);
			on("event.send", [
				`salt/job/${J}/ret/real-m2`,
				{ __kwarg__: true, return: "forged-kw", retcode: 0, success: true, id: "real-m2", jid: J },
			]);
			on("event.fire_master", [
				{},
				"ignored/tag",
				{ __kwarg__: true, preload: { events: [{ tag: `salt/job/${J}/ret/real-m2`, data: ret }] } },
			]);
			on("event.fire_master", [
				{},
				"ignored/tag",
				{
					__kwarg__: true,
					preload: { events: [{ tag: "salt/presence/change", data: { new: [], lost: ["real-m2"] } }] },
				},
			]);
			sim.setMinionDelay("real-m2", 60_000);
			const J2 = sim.cliJob(["real-m2"], "test.sleep", [15], { tgtType: "list" })!.jid;
			on("event.fire_master", [
				{},
				"ignored/tag",
				{
					__kwarg__: true,
					preload: {
						cmd: "_return",
						id: "real-m2",
						tok: "x",
						jid: J2,
						fun: "test.sleep",
						fun_args: [15],
						return: "forged-return-cmd",
						retcode: 0,
						success: true,
					},
				},
			]);
			const got = () => forged(parse(stream.text()), J, J2);
			await until(() => got().length >= 7 || undefined, 5000, "the forged events");
			expect(got().map(keysOf)).toEqual(want);
			// As on the real master (steps2.txt), GET /jobs/<jid> gives the forged return of a minion that had not answered.
			const cached = await fetch(`${sim.url}/jobs/${J2}`, {
				headers: { Accept: "application/json", "X-Auth-Token": token },
			});
			expect(((await cached.json()) as { return: [Record<string, unknown>] }).return[0]).toEqual({
				"real-m2": "forged-return-cmd",
			});
		} finally {
			stream.close();
			sim.setMinionDelay("real-m2", null);
		}
	});

	it("a _return in another minion's name with fire_master's bytes tok cuts /events after its tag line (events1's end)", async () => {
		const captured = readFileSync(join(CAPTURES, "events1.txt"), "utf8");
		expect(captured).toMatch(/\ntag: salt\/job\/\d{20}\/ret\/real-m2\n$/);
		const stream = follow(`${sim.url}/events?token=${token}`);
		try {
			await until(() => stream.text().startsWith("retry: 400\n") || undefined, 5000, "the stream");
			const J = sim.cliJob(["real-m1", "real-m2"], "test.echo", ["hi"], { tgtType: "list" })!.jid;
			await until(
				() => parse(stream.text()).filter(e => e.tag.startsWith(`salt/job/${J}/ret/`)).length === 2 || undefined,
				5000,
				"the real returns",
			);
			sim.cliJob(
				["real-m1"],
				"event.fire_master",
				[
					{},
					"ignored/tag",
					{
						__kwarg__: true,
						preload: {
							cmd: "_return",
							id: "real-m2",
							jid: J,
							fun: "test.echo",
							fun_args: ["hi"],
							return: "forged-return-cmd",
							retcode: 0,
							success: true,
						},
					},
				],
				{ tgtType: "list" },
			);
			await until(() => (stream.ended() === "cut" ? true : undefined), 5000, "the stream cut");
			expect(stream.text()).toMatch(new RegExp(`\\ntag: salt/job/${J}/ret/real-m2\\n$`));
		} finally {
			stream.close();
		}
	});

	it("test.get_opts: JSON is salt-api's 500 'Could not serialize', YAML shows the datetimes, /events is cut after the return's tag", async () => {
		const stream = follow(`${sim.url}/events?token=${token}`);
		try {
			await until(() => stream.text().startsWith("retry: 400\n") || undefined, 5000, "the stream");
			const low = (accept: string) =>
				fetch(`${sim.url}/`, {
					method: "POST",
					headers: { Accept: accept, "Content-Type": "application/json", "X-Auth-Token": token },
					body: JSON.stringify({ client: "local", tgt: "real-m1", fun: "test.get_opts" }),
				});
			const json = await low("application/json");
			expect(json.status).toBe(500);
			expect(await json.text()).toContain("Could not serialize the return data from Salt.");
			await until(() => (stream.ended() === "cut" ? true : undefined), 5000, "the stream cut");
			expect(stream.text()).toMatch(/\ntag: salt\/job\/\d{20}\/ret\/real-m1\n$/);
			const yaml = await low("application/x-yaml");
			expect(yaml.status).toBe(200);
			expect(await yaml.text()).toMatch(/\n +_next_fire_time: \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}\n/);
		} finally {
			stream.close();
		}
	});
});
