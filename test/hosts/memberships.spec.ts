/**
 * services/hosts/memberships.ts: recomputing memberships reads a host's grain only when a rule reads grains. A
 * host's grain is parsed from the file when first read (lib/storage/nedb-deferred.ts), and the recomputation at
 * every start would otherwise parse every host's grain before the fleet is served.
 */
import type { Context } from "moleculer";
import { membershipMethods } from "../../services/hosts/memberships";
import { GroupIndex, type GroupDef } from "../../lib/fleet/group-rules";
import type { HostsThis } from "../../services/hosts/types";

type Doc = Record<string, unknown> & { _id: string };

/** Hosts whose grain counts its reads, as a store's scan visits them, and what the recomputation wrote. */
function fleet(groups: GroupDef[]) {
	let grainReads = 0;
	const hosts: Doc[] = ["web-1", "web-2", "db-1"].map(id => {
		const host: Doc = { _id: id, groups: [], nodegroups: [] };
		Object.defineProperty(host, "grain", {
			enumerable: true,
			get() {
				grainReads++;
				return { os: id.startsWith("web") ? "ALT" : "Debian" };
			},
		});
		return host;
	});
	const written: Array<{ filter: unknown; update: unknown }> = [];
	const self = {
		groupIndex: async () => new GroupIndex(groups),
		store: {
			scan: async (_filter: unknown, _fields: string[], visit: (d: Doc) => void) => hosts.forEach(visit),
			updateMany: async (filter: unknown, update: unknown) => {
				written.push({ filter, update });
				return 1;
			},
		},
		notifyChanged: async () => undefined,
		logger: { warn: () => undefined },
	} as unknown as HostsThis;
	const recompute = () => membershipMethods.updateMembership.call(self, {} as Context);
	return { recompute, written, reads: () => grainReads };
}

describe("host memberships", () => {
	it("are recomputed without reading any host's grain when no rule reads grains", async () => {
		const f = fleet([
			{ _id: "webs", info: { regex: "^web-" } },
			{ _id: "db", hosts: ["db-1"] },
		]);
		expect(await f.recompute()).toBe(3);
		expect(f.reads()).toBe(0);
		expect(f.written.map(w => w.update)).toEqual(
			expect.arrayContaining([
				expect.objectContaining({ $set: expect.objectContaining({ groups: ["webs"] }) }),
				expect.objectContaining({ $set: expect.objectContaining({ groups: ["db"] }) }),
			]),
		);
	});

	it("read each host's grain when a rule does", async () => {
		const f = fleet([{ _id: "alt", info: { grain: { os: "ALT" } } }]);
		expect(await f.recompute()).toBe(2);
		expect(f.reads()).toBeGreaterThanOrEqual(3);
		expect(f.written).toEqual([
			{
				filter: { _id: { $in: ["web-1", "web-2"] } },
				update: { $set: expect.objectContaining({ groups: ["alt"], nodegroups: [] }) },
			},
		]);
	});
});
