/**
 * The hosts service's presence actions (services/hosts/presence.ts), as the cm-gateway calls them, in an
 * in-process broker on the in-memory NeDB store: which hosts a reading of the master puts up or down, which of
 * those are transitions (the alerts' source), which heartbeats move, what a reading would take down (the presence
 * guard), and a key leaving and coming back (soft delete, restore). Every expectation is a literal from the
 * actions' contracts; what a write did is read back through the service's own reads and the `hosts.updated`
 * events other services get.
 */
import { ServiceBroker, type Context } from "moleculer";
import HostsService from "../../services/hosts/hosts.service";
import { RawJson } from "../../lib/eve/render-cache";

/** The heartbeat resolution of these tests (HEARTBEAT_RESOLUTION_MS): five minutes. */
const RESOLUTION_MS = 300_000;
/** Seconds ago, to the second (as stored). */
const ago = (s: number) => new Date(Math.floor(Date.now() / 1000) * 1000 - s * 1000);

/**
 * The fleet each test starts from: accepted hosts up (heartbeat within the resolution, and one due), down and
 * unknown; a host whose key is pending, one up whose key was rejected since; a live host up that an operator
 * soft-deleted (its key still accepted).
 */
const FRESH = ago(60);
const STALE = ago(600);
const FLEET = [
	{ _id: "up-fresh", key: "accepted", status: "up", heartbeat: FRESH },
	{ _id: "up-stale", key: "accepted", status: "up", heartbeat: STALE },
	{ _id: "down-1", key: "accepted", status: "down", heartbeat: STALE },
	{ _id: "unknown-1", key: "accepted", status: "unknown" },
	{ _id: "pending-1", key: "pending", status: "unknown" },
	{ _id: "rejected-1", key: "rejected", status: "up" },
	{ _id: "deleted-1", key: "accepted", status: "up", heartbeat: FRESH },
];

interface HostState {
	key?: string;
	status?: string;
	heartbeat?: string;
	_updated: string;
	_soft_deleted: boolean;
}

describe("presence of the hosts (hosts.setPresence, presenceLoss, setPresent)", () => {
	const saved = { ...process.env };
	let broker: ServiceBroker;
	/** The ids of every `hosts.updated` event, in order. */
	let updated: string[][] = [];

	const call = <T>(action: string, params: unknown) => broker.call<T, unknown>(`hosts.${action}`, params);
	/** A host as the API shows it (through the service's read, which a write must not leave stale). */
	const host = async (id: string): Promise<HostState> => {
		// The record's rendering as the gateway sends it (the hosts service keeps renderings: lib/eve/render-cache.ts).
		const read = await call<Buffer | RawJson>("get", { id, query: { show_soft_deleted: "true" } });
		const { key, status, heartbeat, _updated, _soft_deleted } = JSON.parse(
			String(read instanceof RawJson ? read.body : read),
		) as HostState;
		return { key, status, heartbeat, _updated, _soft_deleted };
	};
	const statuses = async () =>
		Object.fromEntries(await Promise.all(FLEET.map(async h => [h._id, (await host(h._id)).status])));
	/** A change nobody else makes, so that the events before it are known complete once its own has arrived. */
	const marker = async () => {
		const seen = updated.length;
		await call("setPresent", { ids: ["marker"], present: false });
		expect(updated.slice(seen)).toEqual([["marker"]]);
		return updated.slice(0, seen);
	};
	const fleetUp = () => broker.metrics.getMetric("fleet.hosts")?.get({ status: "up" })?.value;

	beforeAll(async () => {
		Object.assign(process.env, {
			DATA_DIR: ":memory:",
			MONGO_URI: "",
			HEARTBEAT_RESOLUTION_MS: String(RESOLUTION_MS),
			FLEET_METRICS_INTERVAL_MS: "3600000",
		});
		broker = new ServiceBroker({ logger: false, transporter: null, metrics: { enabled: true, reporter: [] } });
		broker.createService(HostsService);
		broker.createService({
			name: "watcher",
			events: {
				"hosts.updated"(ctx: Context<{ ids: string[] }>) {
					updated.push(ctx.params.ids);
				},
			},
		});
		await broker.start();
	});
	afterAll(async () => {
		await broker?.stop();
		process.env = saved;
	});
	beforeEach(async () => {
		const store = (broker.getLocalService("hosts") as unknown as { store: { removeMany(f: object): Promise<number> } })
			.store;
		await store.removeMany({});
		await call("upsertMany", {
			hosts: [...FLEET.map(h => ({ ...h })), { _id: "marker", key: "accepted", status: "down" }],
		});
		await call("remove", { id: "deleted-1" });
		updated = [];
	});

	// First: the gauge has counted nothing but the fleet above when the test starts.
	it("recounts the fleet_hosts gauge after a reading that takes hosts down", async () => {
		/** The gauge of live hosts up once it shows `n` (a count runs a second after a change): waited for, ten seconds at most. */
		const gaugeShows = async (n: number) => {
			const deadline = Date.now() + 10_000;
			while (fleetUp() !== n && Date.now() < deadline) await new Promise(r => setTimeout(r, 50));
			return fleetUp();
		};
		// up-fresh, up-stale and rejected-1 (deleted-1 is soft-deleted): the count after the fleet was written, none
		// due after it. Then a count showing a number of hosts up that no earlier one did.
		expect(await gaugeShows(3)).toBe(3);
		await call("setPresence", { up: [], complete: true });
		expect(await gaugeShows(1)).toBe(1);
	});

	it("puts the accepted hosts a reading sees up, answering those that came back, and moves due heartbeats only", async () => {
		const before = await host("up-fresh");
		const result = await call("setPresence", { up: FLEET.map(h => h._id), down: [] });
		// down-1 came back; unknown-1 was not placed before (no transition); the soft-deleted host's changes are silent.
		expect(result).toEqual({ wentUp: ["down-1"], wentDown: [] });
		expect(await statuses()).toEqual({
			"up-fresh": "up",
			"up-stale": "up",
			"down-1": "up",
			"unknown-1": "up",
			"pending-1": "unknown",
			"rejected-1": "up",
			"deleted-1": "up",
		});
		// A heartbeat within the resolution stays as it was, record and all; a due one moves to now.
		expect(await host("up-fresh")).toEqual(before);
		const now = Date.now();
		for (const id of ["up-stale", "down-1", "unknown-1"]) {
			const { heartbeat, _updated } = await host(id);
			expect([id, now - Date.parse(heartbeat!) < 5000, heartbeat === _updated]).toEqual([id, true, true]);
		}
		expect(await host("pending-1")).toMatchObject({ key: "pending", status: "unknown", heartbeat: undefined });
		expect(await host("rejected-1")).toMatchObject({ key: "rejected", status: "up", heartbeat: undefined });
		expect((await marker()).map(ids => [...ids].sort())).toEqual([["down-1", "unknown-1", "up-stale"]]);
	});

	it("takes down the hosts a reading says are down, answering the live ones that were up", async () => {
		const result = await call("setPresence", {
			up: [],
			down: ["up-fresh", "down-1", "unknown-1", "pending-1", "rejected-1", "deleted-1", "ghost"],
		});
		expect(result).toEqual({ wentUp: [], wentDown: ["up-fresh"] });
		// up-stale is not named: a reading that is not complete leaves it.
		expect(await statuses()).toEqual({
			"up-fresh": "down",
			"up-stale": "up",
			"down-1": "down",
			"unknown-1": "down",
			"pending-1": "unknown",
			"rejected-1": "up",
			"deleted-1": "down",
		});
		// A host taken down keeps its heartbeat (when it was last seen).
		expect(Date.parse((await host("up-fresh")).heartbeat!)).toBe(FRESH.getTime());
		// down-1 was down already: not rewritten.
		expect((await marker()).map(ids => [...ids].sort())).toEqual([["deleted-1", "unknown-1", "up-fresh"]]);
	});

	it("with `complete`, takes down every accepted host up that the reading leaves out; a host in both lists is up", async () => {
		const result = await call("setPresence", {
			up: ["up-stale", "down-1"],
			down: ["down-1", "up-fresh"],
			complete: true,
		});
		expect(result).toEqual({ wentUp: ["down-1"], wentDown: ["up-fresh"] });
		// unknown-1 was not up (the master never placed it): a complete reading leaves it; rejected-1 is not accepted.
		expect(await statuses()).toEqual({
			"up-fresh": "down",
			"up-stale": "up",
			"down-1": "up",
			"unknown-1": "unknown",
			"pending-1": "unknown",
			"rejected-1": "up",
			"deleted-1": "down",
		});
		// Each host written once.
		expect((await marker()).map(ids => [...ids].sort())).toEqual([["deleted-1", "down-1", "up-fresh", "up-stale"]]);
		// Without `complete` a reading takes down only whom it names.
		await call("setPresence", { up: ["up-fresh"], down: ["up-fresh", "down-1"] });
		expect(await statuses()).toMatchObject({ "up-fresh": "up", "up-stale": "up", "down-1": "down" });
	});

	it("takes nobody down with an empty reading, and writes nothing when nothing changes", async () => {
		expect(await call("setPresence", {})).toEqual({ wentUp: [], wentDown: [] });
		expect(await call("setPresence", { up: ["up-fresh", "deleted-1"], down: ["down-1"] })).toEqual({
			wentUp: [],
			wentDown: [],
		});
		expect(await statuses()).toEqual({
			"up-fresh": "up",
			"up-stale": "up",
			"down-1": "down",
			"unknown-1": "unknown",
			"pending-1": "unknown",
			"rejected-1": "up",
			"deleted-1": "up",
		});
		expect(await marker()).toEqual([]);
	});

	it("with `changesOnly` (a job's returns), leaves hosts already up as they are, due heartbeat or not", async () => {
		const stale = await host("up-stale");
		expect(await call("setPresence", { up: ["up-stale", "down-1"], changesOnly: true })).toEqual({
			wentUp: ["down-1"],
			wentDown: [],
		});
		expect(await host("up-stale")).toEqual(stale);
		expect(await marker()).toEqual([["down-1"]]);
	});

	it("says what a reading would take down: the live accepted hosts up it leaves out, and how many are up", async () => {
		expect(await call("presenceLoss", { up: ["up-fresh"], down: [], complete: true })).toEqual({ up: 2, losing: 1 });
		expect(
			await call("presenceLoss", { up: [], down: ["up-fresh", "up-stale", "deleted-1", "pending-1", "rejected-1"] }),
		).toEqual({ up: 2, losing: 2 });
		// A host named down and left out of a complete reading is counted once.
		expect(await call("presenceLoss", { up: [], down: ["up-fresh"], complete: true })).toEqual({ up: 2, losing: 2 });
		expect(await call("presenceLoss", { up: ["up-fresh", "up-stale"], down: ["down-1"], complete: true })).toEqual({
			up: 2,
			losing: 0,
		});
		expect(await call("presenceLoss", { up: ["up-fresh"], down: ["up-fresh"] })).toEqual({ up: 2, losing: 0 });
		expect(await call("presenceLoss", {})).toEqual({ up: 2, losing: 0 });
		expect(await call("presenceLoss", { complete: true })).toEqual({ up: 2, losing: 2 });
	});

	it("soft-deletes the hosts whose key left, forgetting the key, and restores them; answers the ids it changed", async () => {
		expect(await call("setPresent", { ids: [], present: false })).toEqual([]);
		expect(await call("setPresent", { ids: ["up-fresh", "deleted-1", "ghost"], present: false })).toEqual(["up-fresh"]);
		expect(await host("up-fresh")).toMatchObject({ key: undefined, status: "up", _soft_deleted: true });
		// The soft-deleted host keeps its key (an operator deleted it; the master still has it).
		expect(await host("deleted-1")).toMatchObject({ key: "accepted", _soft_deleted: true });
		expect(
			(await call<string[]>("setPresent", { ids: ["up-fresh", "deleted-1", "up-stale"], present: true })).sort(),
		).toEqual(["deleted-1", "up-fresh"]);
		expect(await host("up-fresh")).toMatchObject({ key: undefined, _soft_deleted: false });
		expect(await host("deleted-1")).toMatchObject({ key: "accepted", _soft_deleted: false });
		expect(await call("setPresent", { ids: ["up-fresh"], present: true })).toEqual([]);
		expect((await marker()).map(ids => [...ids].sort())).toEqual([["up-fresh"], ["deleted-1", "up-fresh"]]);
	});
});
