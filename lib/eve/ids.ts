import { createHash, randomBytes } from "node:crypto";

/**
 * Ids shaped like Mongo ObjectIds (24 hex: seconds, a per-process random part, a counter), stored as
 * strings on every backend so the same `where` finds the same records on NeDB and MongoDB.
 */
const processPart = randomBytes(5).toString("hex");
let counter = randomBytes(3).readUIntBE(0, 3);

export const OBJECT_ID = /^[a-f0-9]{24}$/;
/** A Salt minion id as fleet-ctl accepts it: a host name. */
export const HOSTNAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;
/** Action and failed-patch ids: a 20-digit jid (optionally with Salt's _<pid> suffix) then the hostname. */
export const JOB_RETURN_ID = /^\d{20}(_\d+)?[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;

/** A stable id for a record whose identity is a name (nodegroups): every replica derives the same one. */
export function idFromName(name: string): string {
	return createHash("sha1").update(name).digest("hex").slice(0, 24);
}

export function newObjectId(): string {
	counter = (counter + 1) % 0xffffff;
	const seconds = Math.floor(Date.now() / 1000)
		.toString(16)
		.padStart(8, "0");
	return seconds + processPart + counter.toString(16).padStart(6, "0");
}
