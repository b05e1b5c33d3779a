/**
 * This machine's own host name and what the system's resolver makes of it, looked up once when a spec file is
 * loaded (synchronously, in a child process: tests are declared synchronously), so a test that needs the name
 * to resolve to a loopback or private address can be declared skipped, with the reason, where it does not.
 */
import { spawnSync } from "node:child_process";
import os from "node:os";
import { classify, parseIp } from "../../lib/security/address-guard";

export interface OwnName {
	name: string;
	/** The address dns.lookup gives for it (what the services' connections use), or null. */
	address: string | null;
	/** Its address classes (lib/security/address-guard.ts), e.g. ["loopback"]. */
	classes: string[];
}

let cached: OwnName | undefined;

export function ownName(): OwnName {
	if (cached) return cached;
	const name = os.hostname();
	const res = spawnSync(
		process.execPath,
		["-e", "require('dns').lookup(process.argv[1], (err, a) => process.stdout.write(err ? '' : a))", name],
		{ encoding: "utf8", timeout: 10_000 },
	);
	const address = res.status === 0 && res.stdout ? res.stdout.trim() : null;
	const ip = address ? parseIp(address) : null;
	cached = { name, address, classes: ip ? classify(ip).map(f => f.cls) : [] };
	return cached;
}

/** Why a test needing the own name to resolve to one of `classes` cannot check here, or "" if it can. */
export function ownNameUnlike(classes: string[]): string {
	const own = ownName();
	if (!own.address) return `this machine's name ${own.name} does not resolve`;
	return own.classes.some(c => classes.includes(c))
		? ""
		: `this machine's name ${own.name} resolves to ${own.address} (${own.classes.join(", ")}), not ${classes.join(" or ")}`;
}
