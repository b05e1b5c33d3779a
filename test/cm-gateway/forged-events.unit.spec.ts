/**
 * forgeryOf (services/cm-gateway/forged-events.ts) against real Salt 3006.0 captures: every event the master
 * itself fired in the shared reference captures (../shared/reference/salt-3006, when present) and in this
 * repository's forged-event captures is believed; every forgery the captures show is caught, except the two
 * forms nothing in the event gives away (a `preload` with `events`), which this test pins as such.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { forgeryOf } from "../../services/cm-gateway/forged-events";
import { referenceDir } from "../support/reference";

const OURS = join(__dirname, "..", "simulators", "captures", "salt-3006.0-2026-11-29-forged-events");

const events = (text: string) =>
	[...text.matchAll(/tag: (.*)\ndata: (.*)\n\n/g)].map(m => ({
		tag: m[1],
		data: JSON.parse(m[2]).data as Record<string, unknown>,
	}));

const REF = referenceDir("salt-3006");

describe("forgeryOf against real Salt 3006.0 captures", () => {
	(REF ? it : it.skip)(
		`believes every event of the shared reference captures (returns, /new, presence, key, auth, starts, custom tags)${REF ? "" : " (skipped: the salt-3006 captures are not found; set SHARED_DIR)"}`,
		() => {
			const ref = REF!;
			const files = [
				...readdirSync(ref).map(f => join(ref, f)),
				...readdirSync(join(ref, "more-2026-11-29")).map(f => join(ref, "more-2026-11-29", f)),
			].filter(f => f.endsWith(".txt"));
			const all = files.flatMap(f => events(readFileSync(f, "utf8")));
			expect(all.length).toBeGreaterThan(200);
			expect(all.filter(e => forgeryOf(e.tag, e.data)).map(e => e.tag)).toEqual([]);
		},
	);

	it("tells each forgery of the 2026-11-29 captures apart, and believes the real events around them", () => {
		const judged = ["events1.txt", "events2.txt"]
			.flatMap(f => events(readFileSync(join(OURS, f), "utf8")))
			.map(e => {
				// What the forger wrote: the wrapper's payload, else the event's own data.
				const payload = (e.data.cmd === "_minion_event" ? e.data.data : e.data) as Record<string, unknown>;
				const said =
					typeof payload.return === "string" && payload.return.startsWith("forged")
						? "forged"
						: e.tag === "salt/presence/change"
							? "forged"
							: "real";
				return { tag: e.tag.replace(/\d{20}/g, "JID"), said, kind: forgeryOf(e.tag, e.data)?.kind ?? null };
			});
		// The real events (returns, /new, presence/present, runner) are all believed.
		expect(judged.filter(j => j.said === "real" && j.kind !== null)).toEqual([]);
		// B, C, D, D2 (wrappers), F2 (spoofed _return) caught; E and G (preload events) cannot be.
		expect(judged.filter(j => j.said === "forged").map(j => [j.tag, j.kind])).toEqual([
			["salt/job/JID/ret/real-m2", "minion_event"],
			["salt/presence/change", "minion_event"],
			["salt/job/JID/ret/real-m2", "minion_event"],
			["salt/job/JID/ret/real-m2", "minion_event"],
			["salt/job/JID/ret/real-m2", null],
			["salt/presence/change", null],
			["salt/job/JID/ret/real-m2", "return_spoof"],
		]);
	});
});
