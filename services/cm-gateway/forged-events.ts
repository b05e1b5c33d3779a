/**
 * Events a minion forged on the master's bus. In Salt 3006 any minion (anyone who may run `event.fire_master` or
 * `event.send` on one host) can put any tag there, `salt/job/<jid>/ret/<other minion>` and `salt/presence/change`
 * included. This module says which events of the tags fleet-ctl acts on are not what the master itself fired,
 * by the shapes captured from a real master (test/simulators/captures/salt-3006.0-2026-11-29-forged-events).
 */

/**
 * How an event gave itself away:
 * - `minion_event`: the `_minion_event` wrapper (`{id: <sender>, cmd: "_minion_event", data: <payload>, tag}`) on a
 *   tag only the master fires, or a minion's start event sent by another minion;
 * - `return_spoof`: a job return carrying the `tok` of `event.fire_master`'s load (a `preload` that turned the load
 *   into a `_return`, which Salt 3006.0 takes without checking whose it is; real returns have no `tok`);
 * - `mismatch`: a job return whose `id` or `jid` is not the one its tag names, or a start event not in the wrapper.
 */
export type ForgeryKind = "minion_event" | "return_spoof" | "mismatch";

export interface Forgery {
	kind: ForgeryKind;
	/** Who sent it: the id the master checked (`minion_event`), else the id the event claims. */
	sender: string;
}

/** A job return's tag: its jid and the minion it names. */
export const RETURN_TAG = /^salt\/job\/(\d{20}(?:_\d+)?)\/ret\/(.+)$/;
const START = /^salt\/minion\/(.+)\/start$/;

/** The forgery an event is, or null for an event the master fired (or a tag fleet-ctl does not judge). */
export function forgeryOf(tag: string, data: Record<string, unknown>): Forgery | null {
	if (!tag.startsWith("salt/")) return null;
	const wrapped = data.cmd === "_minion_event";
	const id = typeof data.id === "string" ? data.id : "";
	// A minion announces its own start through the same wrapper: only its own id makes it real.
	const start = START.exec(tag);
	if (start) return wrapped && id === start[1] ? null : { kind: wrapped ? "minion_event" : "mismatch", sender: id };
	if (wrapped) return { kind: "minion_event", sender: id };
	const ret = RETURN_TAG.exec(tag);
	if (!ret) return null;
	if ("tok" in data) return { kind: "return_spoof", sender: id };
	if (id !== ret[2] || (data.jid !== undefined && data.jid !== ret[1])) return { kind: "mismatch", sender: id };
	return null;
}

/** The text of a log line about a forgery: the tag and sender, cut short and quoted (both are the minion's words). */
export function describeForgery(tag: string, f: Forgery): string {
	const quote = (s: string) => JSON.stringify(s.length > 200 ? `${s.slice(0, 200)}…` : s);
	// Only the wrapper's id was checked by the master; the others are what the event claims.
	return `${f.kind} on tag ${quote(tag)} ${f.kind === "minion_event" ? "from" : "claiming to come from"} ${quote(f.sender)}`;
}
