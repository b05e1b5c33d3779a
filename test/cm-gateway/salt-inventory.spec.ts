/**
 * services/cm-gateway/salt-inventory.ts: keys and key conflicts as a real Salt 3006 master reports them
 * (../shared/reference/salt-3006/: key_list_all.json, key_finger.json, events6.txt).
 */
import fs from "node:fs";
import path from "node:path";
import { hostUpdate, keyViews, pemFinger, type KnownHost } from "../../services/cm-gateway/salt-inventory";
import { referenceDir } from "../support/reference";

const REFERENCE = referenceDir("salt-3006");
const capture = (file: string) => JSON.parse(fs.readFileSync(path.join(REFERENCE!, file), "utf8"));
const wheelReturn = (file: string) => capture(file).return[0].data.return;
const all = () => true;

const OLD = "b3:a5:30:91:12:e6:e4:73:b8:50:dd:c2:d4:33:7a:6c:90:75:f9:ce:68:01:39:0a:9e:f2:c3:6c:7b:1f:da:05";
const NEW = "0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0:0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0";

const known = (over: Partial<KnownHost> = {}): KnownHost => ({
	_id: "web-01",
	key: "accepted",
	status: "up",
	fingerprint: OLD,
	fingerprint_history: [],
	_soft_deleted: false,
	...over,
});

describe("key views", () => {
	(REFERENCE ? it : it.skip)(
		`${REFERENCE ? "" : "(skipped: the salt-3006 captures are not found) "}reads the captured key.list_all and key.finger of a real master: three accepted keys, no conflict`,
		() => {
			const views = keyViews(wheelReturn("key_list_all.json"), wheelReturn("key_finger.json"), all);
			expect([...views.keys()].sort()).toEqual(["db-01", "web-01", "web-02"]);
			expect(views.get("web-01")).toEqual({ key: "accepted", fingerprint: OLD, conflict: null });
			expect(views.has("master.pem")).toBe(false);
		},
	);

	it("an id under minions and minions_denied goes by its accepted key; the denied one is its conflict", () => {
		const lists = {
			minions: ["db-01", "web-01"],
			minions_pre: [],
			minions_rejected: [],
			minions_denied: ["web-01"],
			local: ["master.pem"],
		};
		const fingers = {
			minions: { "db-01": "aa", "web-01": OLD },
			minions_denied: { "web-01": NEW },
			local: { "master.pem": "cc" },
		};
		const views = keyViews(lists, fingers, all);
		expect(views.get("web-01")).toEqual({
			key: "accepted",
			fingerprint: OLD,
			conflict: { key: "denied", fingerprint: NEW },
		});
		expect(views.get("db-01")).toEqual({ key: "accepted", fingerprint: "aa", conflict: null });
		// key.finger alone (the event-driven refresh) says the same.
		expect(keyViews(null, fingers, id => id === "web-01").get("web-01")).toEqual({
			key: "accepted",
			fingerprint: OLD,
			conflict: { key: "denied", fingerprint: NEW },
		});
	});

	it("a pending key alone is the key the id goes by, not a conflict", () => {
		expect(keyViews({ minions_pre: ["new-01"] }, { minions_pre: { "new-01": NEW } }, all).get("new-01")).toEqual({
			key: "pending",
			fingerprint: NEW,
			conflict: null,
		});
	});

	it("leaves out ids the caller refuses, and list entries that are not strings", () => {
		const views = keyViews({ minions: ["ok-01", "bad id", 7] }, null, id => /^[a-z0-9-]+$/.test(id));
		expect([...views.keys()]).toEqual(["ok-01"]);
	});
});

describe("host update with a key conflict", () => {
	const now = new Date("2026-11-24T10:00:00Z");

	it("keeps the trusted key and fingerprint, records the conflict and raises it once", () => {
		const view = { key: "accepted" as const, fingerprint: OLD, conflict: { key: "denied" as const, fingerprint: NEW } };
		const first = hostUpdate("web-01", view, known(), now);
		expect(first.doc).toEqual({
			_id: "web-01",
			key: "accepted",
			fingerprint: OLD,
			key_conflict: { key: "denied", fingerprint: NEW },
		});
		expect(first.fingerprintChange).toBeUndefined();
		expect(first.keyConflict).toEqual({
			hostname: "web-01",
			key: "accepted",
			fingerprint: OLD,
			conflict_key: "denied",
			conflict_fingerprint: NEW,
		});
		// Seen again: no second alert.
		const again = hostUpdate("web-01", view, known({ key_conflict: { key: "denied", fingerprint: NEW } }), now);
		expect(again.keyConflict).toBeUndefined();
		// Another new key: a new conflict, a new alert.
		const other = hostUpdate(
			"web-01",
			{ ...view, conflict: { key: "denied", fingerprint: "11" } },
			known({ key_conflict: { key: "denied", fingerprint: NEW } }),
			now,
		);
		expect(other.keyConflict).toMatchObject({ conflict_fingerprint: "11" });
	});

	it("clears a conflict that is gone (null), and says nothing of a host that never had one", () => {
		const cleared = hostUpdate(
			"web-01",
			{ key: "accepted", fingerprint: OLD, conflict: null },
			known({ key_conflict: { key: "denied", fingerprint: NEW } }),
			now,
		);
		expect(cleared.doc).toEqual({ _id: "web-01", key: "accepted", fingerprint: OLD, key_conflict: null });
		expect(cleared.fingerprintChange).toBeUndefined();
		expect(cleared.keyConflict).toBeUndefined();
		expect(hostUpdate("web-01", { key: "accepted", fingerprint: OLD, conflict: null }, known(), now).doc).toEqual({
			_id: "web-01",
			key: "accepted",
			fingerprint: OLD,
		});
	});
});

describe("pemFinger", () => {
	(REFERENCE ? it : it.skip)(
		"gives the fingerprint key.finger shows for the key a minion presented in salt/auth (real master)",
		() => {
			const text = fs.readFileSync(path.join(REFERENCE!, "more-2026-11-29/events_key_conflict.txt"), "utf8");
			const auths = text
				.split("\n")
				.filter(l => l.startsWith("data: "))
				.map(l => JSON.parse(l.slice("data: ".length)).data)
				.filter(d => typeof d.pub === "string");
			const fingers = wheelReturn("more-2026-11-29/key_finger_conflict.json");
			const denied = auths.find(d => d.act === "denied");
			const accepted = auths.find(d => d.act === "accept" && d.id === "web-02");
			expect(pemFinger(denied.pub)).toBe(fingers.minions_denied["web-02"]);
			expect(pemFinger(accepted.pub)).toBe(fingers.minions["web-02"]);
			expect(pemFinger(`${accepted.pub}\n`)).toBe(fingers.minions["web-02"]);
			expect(pemFinger(accepted.pub.replace(/\n/g, "\r\n"))).toBe(fingers.minions["web-02"]);
		},
	);
});
