/**
 * What the master's view costs the hosts collection: an inventory or a presence reading that finds the
 * fleet as it left it writes nothing (not a line to the NeDB file, not an `_updated`), one that finds a
 * host changed writes that host's changed fields, and a restart with nothing changed writes nothing (the
 * file is rewritten at a load only when it holds superseded records: lib/storage/nedb-file.ts).
 */
import fs from "node:fs";
import path from "node:path";
import { ADMIN_TOKEN, startEmbedded, type Harness } from "../support/harness";

const IDS = Array.from({ length: 40 }, (_, i) => `w-${String(i).padStart(2, "0")}.example.org`);
// Ten minutes ago, to the second (as stored): heartbeats up to T0 + 300 s are within the resolution of each other.
const T0 = new Date(Math.floor(Date.now() / 1000) * 1000 - 600_000);
const at = (s: number) => new Date(T0.getTime() + s * 1000);

function inventory(
	heartbeat: Date,
	grainOf: (id: string) => Record<string, unknown> = id => ({ id, os: "ALT", osrelease: "p11" }),
) {
	return IDS.map(_id => ({
		_id,
		key: "accepted",
		status: "up",
		heartbeat,
		fingerprint: `fp-${_id}`,
		version: "3006.9",
		grain: grainOf(_id),
	}));
}

describe("hosts written from the master's view", () => {
	let h: Harness;
	const file = () => path.join(h.dataDir as string, "hosts.db");
	const bytes = () => fs.statSync(file()).size;
	/** The hosts whose records were written to the file after its first `from` bytes (NeDB appends each written record). */
	const writtenSince = (from: number): string[] =>
		fs
			.readFileSync(file())
			.subarray(from)
			.toString("utf8")
			.split("\n")
			// Index definitions and the deferred field's marker (lib/storage/nedb-deferred.ts) are not records.
			.filter(l => l.startsWith('{"') && !l.includes('"$$index') && !l.startsWith('{"$$deferred"'))
			.map(l => (JSON.parse(l) as { _id: string })._id);
	const stored = async (): Promise<Map<string, { _updated: string; heartbeat: string }>> => {
		const res = await fetch(`${h.api}/hosts?max_results=100&projection={"grain":0}`, {
			headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
		});
		const body = (await res.json()) as { _items: Array<{ _id: string; _updated: string; heartbeat: string }> };
		return new Map(body._items.map(i => [i._id, i]));
	};

	beforeAll(async () => {
		h = await startEmbedded({ env: { HEARTBEAT_RESOLUTION_MS: "300000" } });
		await h.call("hosts.upsertMany", { hosts: inventory(T0) });
		await h.call("hosts.membershipSettled");
	});
	afterAll(() => h?.stop());

	it("writes nothing when the inventory finds every host as it was, its heartbeat within the resolution", async () => {
		const before = { bytes: bytes(), hosts: await stored() };
		expect(await h.call("hosts.upsertMany", { hosts: inventory(at(60)) })).toEqual({ created: 0, updated: 0 });
		await h.call("hosts.membershipSettled");
		expect(bytes()).toBe(before.bytes);
		expect(await stored()).toEqual(before.hosts);
	});

	it("writes only the hosts that changed, and a heartbeat once it is due", async () => {
		const before = bytes();
		const changedGrain = inventory(at(120), id => ({ id, os: "ALT", osrelease: id === IDS[3] ? "p12" : "p11" }));
		expect(await h.call("hosts.upsertMany", { hosts: changedGrain })).toEqual({ created: 0, updated: 1 });
		await h.call("hosts.membershipSettled");
		expect(writtenSince(before)).toEqual([IDS[3]]);
		// five minutes or more after the stored heartbeat: every host's heartbeat moves
		const due = bytes();
		expect(
			await h.call("hosts.upsertMany", {
				hosts: inventory(at(400), id => ({ id, os: "ALT", osrelease: id === IDS[3] ? "p12" : "p11" })),
			}),
		).toEqual({ created: 0, updated: IDS.length });
		expect(writtenSince(due).sort()).toEqual(IDS);
		expect((await stored()).get(IDS[0])?.heartbeat).toBe(at(400).toUTCString());
	});

	it("writes nothing for a presence reading that finds every host up already, with a recent heartbeat", async () => {
		const before = { bytes: bytes(), hosts: await stored() };
		expect(await h.call("hosts.setPresence", { up: IDS, complete: true })).toEqual({ wentUp: [], wentDown: [] });
		expect(bytes()).toBe(before.bytes);
		expect(await stored()).toEqual(before.hosts);
		// a host going down is written, and only it
		expect(await h.call("hosts.setPresence", { up: IDS.slice(1), complete: true })).toEqual({
			wentUp: [],
			wentDown: [IDS[0]],
		});
		expect(writtenSince(before.bytes)).toEqual([IDS[0]]);
	});

	it("writes nothing when it restarts with nothing changed", async () => {
		/**
		 * What the start does to the hosts is done: its recomputation of memberships settled, then the last inventory of
		 * the up hosts answered (found unchanged: written nothing). Its reads run in NeDB's queue after every write asked
		 * before.
		 */
		const startedUp = async () => {
			await h.call("hosts.membershipSettled");
			const up = inventory(at(400), id => ({ id, os: "ALT", osrelease: id === IDS[3] ? "p12" : "p11" })).filter(
				x => x._id !== IDS[0],
			);
			expect(await h.call("hosts.upsertMany", { hosts: up })).toEqual({ created: 0, updated: 0 });
		};
		await h.call("hosts.membershipSettled");
		const before = await stored();
		await h.restart();
		await startedUp();
		// The file held superseded records (the writes above): the load rewrote it compactly, every record once.
		expect(writtenSince(0).length).toBe(IDS.length);
		expect(await stored()).toEqual(before);
		// Compact now: the next restart leaves the file as it is — not rewritten (same inode and time), not appended to.
		const stat = () => {
			const st = fs.statSync(file());
			return { ino: st.ino, mtimeMs: st.mtimeMs, size: st.size };
		};
		const compact = stat();
		await h.restart();
		await startedUp();
		expect(stat()).toEqual(compact);
		expect(await stored()).toEqual(before);
		// The grains, left in the file at the load and read when needed (lib/storage/nedb-deferred.ts), are as inventoried:
		// an item shows its host's, and a filter on a grain finds the host whose grain changed.
		const get = async (url: string) =>
			(await fetch(`${h.api}${url}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json() as Promise<
				Record<string, unknown>
			>;
		expect((await get(`/hosts/${IDS[3]}`)).grain).toEqual({ id: IDS[3], os: "ALT", osrelease: "p12" });
		const where = encodeURIComponent(JSON.stringify({ "grain.osrelease": "p12" }));
		expect(
			((await get(`/hosts?where=${where}&projection={"grain":0}`))._items as Array<{ _id: string }>).map(i => i._id),
		).toEqual([IDS[3]]);
	});
});
