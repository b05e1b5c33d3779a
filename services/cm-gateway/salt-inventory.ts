/**
 * How the master's view of a minion becomes a host record (protocols.md Part A §3): key state,
 * fingerprint, presence and the grains the host fields are read from. Shared by the full reconciliation
 * and the event-driven refresh of single hosts in the cm-gateway.
 */

import { createHash } from "node:crypto";

export type { KeyConflict, KeyState } from "../../lib/contracts/hosts";
import type { InventoryState, KeyConflict, KeyState } from "../../lib/contracts/hosts";

/**
 * The fingerprint key.finger shows for a PEM public key, computed as Salt does (salt.utils.crypt.pem_finger with
 * the master's default hash_type sha256: the lines between BEGIN and END, each with its newline, hashed; the hex
 * digest in colon-separated pairs). Checked against a real master's salt/auth `pub` and key.finger
 * (salt-3006/more-2026-11-29/events_key_conflict.txt, key_finger_conflict.json).
 */
export function pemFinger(pem: string): string {
	const lines = pem.replace(/\r/g, "").replace(/\n+$/, "").split("\n").slice(1, -1);
	const hex = createHash("sha256")
		.update(lines.map(l => `${l}\n`).join(""))
		.digest("hex");
	return hex.match(/../g)!.join(":");
}

/** `key.list_all` / `key.finger` key directories and the host `key` each one means. */
export const KEY_DIRS: Array<[string, KeyState]> = [
	["minions", "accepted"],
	["minions_pre", "pending"],
	["minions_rejected", "rejected"],
	["minions_denied", "denied"],
];

/** A second key the master holds for a minion id besides the one it goes by (the trusted one, if accepted). */
/** What the master says about one minion; undefined fields are not known from this read. */
export interface MasterView {
	key: KeyState;
	fingerprint?: string;
	status?: "up" | "down" | "unknown";
	grains?: Record<string, unknown>;
	/** null: the master holds one key for this id. */
	conflict?: KeyConflict | null;
}

/** What fleet-ctl holds about a host, as `hosts.inventoryState` answers it. */
export type KnownHost = InventoryState;

/** The `key.conflict` alert's payload: the id, the key it goes by and the other one. */
export interface KeyConflictAlert {
	hostname: string;
	key: KeyState;
	fingerprint?: string;
	conflict_key: KeyConflict["key"];
	conflict_fingerprint?: string;
}

/**
 * Each minion's key from `key.list_all` (ids per key directory) and/or `key.finger` (fingerprints per
 * directory), read together. A minion that presents a new key while the master still trusts its old one is
 * in two directories at once (its old key under `minions`, the new one under `minions_denied`;
 * ../shared/reference/salt-3006/events6.txt): it goes by the first of KEY_DIRS (accepted first) and the other
 * is its `conflict`. Ids not matching `valid` are left out.
 */
export function keyViews(
	lists: Record<string, unknown> | null,
	fingers: Record<string, unknown> | null,
	valid: (id: string) => boolean,
): Map<string, MasterView> {
	const views = new Map<string, MasterView>();
	const seen = (id: string, key: KeyState, fingerprint: string | undefined) => {
		if (!valid(id)) return;
		const view = views.get(id);
		if (!view) views.set(id, { key, fingerprint, conflict: null });
		else if (view.key === key) view.fingerprint ??= fingerprint;
		else if (key !== "accepted" && (!view.conflict || view.conflict.key === key)) {
			const fp = fingerprint ?? view.conflict?.fingerprint;
			view.conflict = fp ? { key, fingerprint: fp } : { key };
		}
	};
	for (const [dir, key] of KEY_DIRS) {
		const fps = fingers?.[dir];
		const listed = lists ? lists[dir] : fps && typeof fps === "object" ? Object.keys(fps as object) : [];
		for (const id of Array.isArray(listed) ? listed : []) {
			if (typeof id !== "string") continue;
			const fp = fps && typeof fps === "object" ? (fps as Record<string, unknown>)[id] : undefined;
			seen(id, key, typeof fp === "string" && fp ? fp : undefined);
		}
	}
	return views;
}

export interface FingerprintChange {
	hostname: string;
	fingerprint: string;
	previous: string;
}

/** Grains as MongoDB and NeDB store them: "." in keys becomes "_", so does a leading "$" (at any depth). */
export function sanitizeGrains(value: unknown): unknown {
	if (Array.isArray(value)) return value.map(sanitizeGrains);
	if (!value || typeof value !== "object") return value;
	const out: Record<string, unknown> = {};
	for (const [k, v] of Object.entries(value as Record<string, unknown>))
		out[k.replace(/\./g, "_").replace(/^\$/, "_")] = sanitizeGrains(v);
	return out;
}

/** A grain date "YYYY-MM-DD HH:MM:SS+00:00" (or any ISO-like form) as a Date; undefined if not one. */
export function grainDate(value: unknown): Date | undefined {
	if (typeof value !== "string") return undefined;
	const m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(Z|[+-]\d{2}:?\d{2})?$/.exec(value.trim());
	if (!m) return undefined;
	const d = new Date(
		`${m[1]}T${m[2]}${m[3] ? (m[3] === "Z" ? "Z" : m[3].includes(":") ? m[3] : `${m[3].slice(0, 3)}:${m[3].slice(3)}`) : "Z"}`,
	);
	return Number.isNaN(d.getTime()) ? undefined : d;
}

/** The host's address from its grains: `ip`, else the first non-loopback address of `ip_interfaces` (IPv4 first). */
export function grainIp(grains: Record<string, unknown>): string | undefined {
	if (typeof grains.ip === "string" && grains.ip) return grains.ip;
	const ifaces = grains.ip_interfaces;
	if (!ifaces || typeof ifaces !== "object") return undefined;
	const all = Object.values(ifaces as Record<string, unknown>).flatMap(a =>
		Array.isArray(a) ? a.filter((x): x is string => typeof x === "string") : [],
	);
	const usable = all.filter(a => !/^127\./.test(a) && a !== "::1" && !/^fe80:/i.test(a));
	return usable.find(a => a.includes(".")) ?? usable[0];
}

/** The host fields read from grains: `grain`, `version`, `ip`, `last_distupgrade`, `last_stateapply`. */
export function grainFields(grains: Record<string, unknown>): Record<string, unknown> {
	const doc: Record<string, unknown> = { grain: sanitizeGrains(grains) };
	const version =
		typeof grains.cmversion === "string"
			? grains.cmversion
			: typeof grains.saltversion === "string"
				? grains.saltversion
				: undefined;
	if (version) doc.version = version;
	const ip = grainIp(grains);
	if (ip) doc.ip = ip;
	const ctl = grains.ctl && typeof grains.ctl === "object" ? (grains.ctl as Record<string, unknown>) : {};
	const dist = grainDate(ctl.last_distupgrade);
	if (dist) doc.last_distupgrade = dist;
	const apply = grainDate(ctl.last_stateapply);
	if (apply) doc.last_stateapply = apply;
	return doc;
}

/**
 * The host update for one minion: `key`; `status` (minions without an accepted key are "unknown": the
 * master does not track their presence) and `heartbeat` when up; `fingerprint`, with a changed one's
 * predecessor pushed to `fingerprint_history`; and the grain fields.
 */
export function hostUpdate(
	id: string,
	view: MasterView,
	known: KnownHost | undefined,
	now: Date,
): {
	doc: { _id: string } & Record<string, unknown>;
	fingerprintChange?: FingerprintChange;
	keyConflict?: KeyConflictAlert;
} {
	const doc: { _id: string } & Record<string, unknown> = { _id: id, key: view.key };
	const status = view.key !== "accepted" ? "unknown" : view.status;
	if (status) doc.status = status;
	else if (!known) doc.status = "unknown";
	if (status === "up") doc.heartbeat = now;
	let fingerprintChange: FingerprintChange | undefined;
	if (view.fingerprint) {
		doc.fingerprint = view.fingerprint;
		if (known?.fingerprint && known.fingerprint !== view.fingerprint) {
			doc.fingerprint_history = [...known.fingerprint_history, { added: now, fingerprint: known.fingerprint }];
			fingerprintChange = { hostname: id, fingerprint: view.fingerprint, previous: known.fingerprint };
		}
	}
	if (view.grains) Object.assign(doc, grainFields(view.grains));
	// A conflict is raised once, when it appears (or its key changes); it clears without an alert.
	let keyConflict: KeyConflictAlert | undefined;
	if (view.conflict) {
		doc.key_conflict = view.conflict;
		const was = known?.key_conflict;
		if (!was || was.key !== view.conflict.key || was.fingerprint !== view.conflict.fingerprint) {
			keyConflict = {
				hostname: id,
				key: view.key,
				...(view.fingerprint ? { fingerprint: view.fingerprint } : {}),
				conflict_key: view.conflict.key,
				...(view.conflict.fingerprint ? { conflict_fingerprint: view.conflict.fingerprint } : {}),
			};
		}
	} else if (view.conflict === null && known?.key_conflict) doc.key_conflict = null;
	return { doc, fingerprintChange, keyConflict };
}
