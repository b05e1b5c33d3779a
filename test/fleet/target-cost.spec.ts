/**
 * What a compound target can cost, through the HTTP API (issue 43): the preview that took 23 s and stalled the
 * gateway answers at once, the worst a target within the limits can ask answers quickly while other requests are
 * answered, each limit is a 400 in Eve's shape naming itself at POST /api/targets/preview and POST /api/run (nothing
 * runs), the work a target may take on one host's grains too, and previews count against the caller's rate limit
 * as runs do.
 */
import { SaltApiSimulator } from "../simulators/salt-api";
import { startEmbedded, type Harness } from "../support/harness";
import { request, expectEveError, type Reply } from "../support/http";

const RATE_LIMIT = 40;
const HOSTS = 35;
/** How deep the hosts' grains nest `a` in `a`: the depth at which the old matcher needed ~0.5 s per host and term. */
const CHAIN = 14;
const chain = (depth: number): unknown => (depth === 0 ? "x" : { a: chain(depth - 1) });
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms));

describe("the cost of a compound target", () => {
	let sim: SaltApiSimulator;
	let h: Harness;
	const url = (path: string) => `${h.api}/${path}`;
	const tokenOf = async (name: string, role: string): Promise<string> => {
		const res = await request("POST", url("tokens"), { body: { name, role } });
		expect(res.status).toBe(201);
		return res.body.token;
	};
	const preview = (target: string, token: string) =>
		request("POST", url("targets/preview"), { body: { target }, token });
	/** A request and how long its answer took. */
	const timed = async (send: () => Promise<Reply>): Promise<{ res: Reply; ms: number }> => {
		const started = performance.now();
		const res = await send();
		return { res, ms: performance.now() - started };
	};

	beforeAll(async () => {
		sim = new SaltApiSimulator({ minions: 3, timeout: 1, gatherJobTimeout: 0, presenceEvents: false });
		await sim.start();
		h = await startEmbedded({
			env: { ...sim.cmApiEnv, CM_SYNC_INTERVAL_MS: "0", RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT) },
		});
		const hosts = Array.from({ length: HOSTS }, (_, i) => ({
			_id: `tc-${String(i).padStart(2, "0")}`,
			status: "up",
			key: "accepted",
			grain: { os: "Debian", a: chain(CHAIN), notes: "y".repeat(5000) },
		}));
		await h.call("hosts.upsertMany", {
			hosts: [...hosts, ...sim.upMinions().map(_id => ({ _id, status: "up", key: "accepted" }))],
		});
	});
	afterAll(async () => {
		await h?.stop();
		await sim?.stop();
	});

	it("refuses the preview that stalled the gateway (G@ + 'a:'×4998 + 'b') at once, naming the limit", async () => {
		const viewer = await tokenOf("tc-viewer-1", "viewer");
		const { res, ms } = await timed(() => preview(`G@${"a:".repeat(4998)}b`, viewer));
		expect(expectEveError(res, 400)._error.message).toMatch(
			/^target: 'G@a:a:.*…': a G@ term is longer than 1000 characters \(the limit of a grain term\)$/,
		);
		// It took 23 s on 35 hosts before.
		expect(ms).toBeLessThan(2000);
	});

	it("answers the costliest grain term within the limits quickly, and other requests meanwhile", async () => {
		const viewer = await tokenOf("tc-viewer-2", "viewer");
		// 32 parts, each one a split into the hosts' grains: the old matcher tried them in every combination.
		const miss = `G@${"a:".repeat(31)}b`;
		const hit = `G@${"a:".repeat(CHAIN + 1)}X and G@os:debian`;
		const [slow1, slow2, other] = await Promise.all([
			timed(() => preview(miss, viewer)),
			timed(() => preview(hit, viewer)),
			// Sent while the two are evaluated; answered from the same process.
			(async () => {
				await sleep(5);
				return timed(() => request("GET", url("hosts/tc-00"), { token: viewer }));
			})(),
		]);
		expect(slow1.res.status).toBe(200);
		expect(slow1.res.body).toMatchObject({ count: 0, hosts: [] });
		expect(slow2.res.status).toBe(200);
		expect(slow2.res.body.count).toBe(HOSTS);
		expect(other.res.status).toBe(200);
		expect(other.res.body._id).toBe("tc-00");
		// The old matcher needed about 0.5 s per host for the first: over 15 s, and the read waited as long.
		for (const { ms } of [slow1, slow2, other]) expect(ms).toBeLessThan(2000);
	});

	it("answers each limit with a 400 naming it, at POST /api/targets/preview and at POST /api/run, and runs nothing", async () => {
		const viewer = await tokenOf("tc-viewer-3", "viewer");
		const operator = await tokenOf("tc-operator", "operator");
		const [minion] = sim.upMinions();
		const terms = (n: number) => [minion, ...Array.from({ length: n - 1 }, (_, i) => `tc-none-${i}`)].join(" or ");
		const cases: Array<[string, string]> = [
			[terms(101), "target: the target has more than the limit of 100 terms (an L@ list is one term: L@a,b,c)"],
			[
				`${"( ".repeat(65)}${minion}${" )".repeat(65)}`,
				"target: the target nests parentheses and 'not' deeper than the limit of 64 levels",
			],
			[
				`${minion} or G@${"a:".repeat(32)}b`,
				`target: 'G@${"a:".repeat(29)}…': a G@ term has 33 parts separated by ':', more than the limit of 32`,
			],
			[
				`${minion} or P@os:${"x".repeat(996)}`,
				`target: 'P@os:${"x".repeat(55)}…': a P@ term is longer than 1000 characters (the limit of a grain term)`,
			],
		];
		sim.resetExecutions();
		for (const [target, message] of cases) {
			expect(expectEveError(await preview(target, viewer), 400)._error).toEqual({ code: 400, message });
			const run = await request("POST", url("run"), {
				body: { target, cm_client: "local", fun: "test.ping" },
				token: operator,
			});
			expect(expectEveError(run, 400)._error).toEqual({ code: 400, message });
		}
		// Within the limits the same shapes run (the simulator's log is the witness of what ran).
		const ok = await request("POST", url("run"), {
			body: { target: terms(100), cm_client: "local", fun: "test.ping" },
			token: operator,
		});
		expect(ok.status).toBe(200);
		expect(sim.executionCount(minion)).toBe(1);
	});

	it("refuses, at once, a target that would take more work than a host is allowed on its grains", async () => {
		const viewer = await tokenOf("tc-viewer-6", "viewer");
		const operator = await tokenOf("tc-operator-2", "operator");
		// RE2 takes time in proportion to the value times the pattern: a 5,000-character grain and a 980-character
		// regex took the old evaluator 0.3 s per host (10 s here).
		const target = `P@notes:${"(y|yy)*".repeat(140)}z or L@${sim.upMinions()[0]}`;
		const message =
			/^target: evaluating the target on 'tc-\d\d' takes more than the limit of 100000 steps per host \(.*\): use fewer or shorter patterns, or fewer '\*' parts in grain paths$/;
		const { res, ms } = await timed(() => preview(target, viewer));
		expect(expectEveError(res, 400)._error.message).toMatch(message);
		expect(ms).toBeLessThan(2000);
		sim.resetExecutions();
		const run = await request("POST", url("run"), {
			body: { target, cm_client: "local", fun: "test.ping" },
			token: operator,
		});
		expect(expectEveError(run, 400)._error.message).toMatch(message);
		expect(sim.executionCount(sim.upMinions()[0])).toBe(0);
		// The same regex, shorter, is evaluated on every host.
		expect((await preview(`P@notes:${"(y|yy)*".repeat(4)}z or tc-0*`, viewer)).body.count).toBe(10);
	});

	it("counts previews against the caller's rate limit, as it counts runs: 429 past it, other callers unaffected", async () => {
		const viewer = await tokenOf("tc-viewer-4", "viewer");
		const other = await tokenOf("tc-viewer-5", "viewer");
		// The limit counts in a fixed one-minute window per gateway (test/e2e/access-limits.spec.ts): a burst must
		// fall in one, so with less than half a minute left of this one, its end is waited for.
		const gateway = h.broker!.getLocalService("api") as unknown as { rateWindowStart: number };
		if (gateway.rateWindowStart + 60_000 - Date.now() < 30_000)
			await sleep(gateway.rateWindowStart + 60_000 - Date.now() + 10);
		for (let i = 1; i <= RATE_LIMIT; i++) expect([i, (await preview("tc-0*", viewer)).status]).toEqual([i, 200]);
		const limited = await preview("tc-0*", viewer);
		expect(expectEveError(limited, 429)._error.message).toBe("Rate limit exceeded");
		expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
		expect((await preview("tc-0*", other)).status).toBe(200);
	});
});
