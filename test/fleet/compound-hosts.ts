/**
 * The inventory the compound target specs evaluate on (test/fleet/compound.spec.ts, compound-fleet.spec.ts): five
 * hosts with the grains Salt's matchers read, and fleet-ctl groups by name and id.
 */
import type { TargetHost } from "../../lib/fleet/compound";

export const HOSTS: TargetHost[] = [
	{
		_id: "web-01",
		nodegroups: ["web"],
		grain: {
			os: "Debian",
			osrelease: "12",
			roles: ["web", "cache"],
			ipv4: ["10.0.1.5", "127.0.0.1"],
			ipv6: ["fd00::5"],
			ip_interfaces: { eth0: ["10.0.1.5"] },
			pkg: { nginx: "1.22" },
			num_cpus: 4,
			selinux: { enabled: false },
			disks: [{ name: "vda", size: 20 }],
		},
	},
	{
		_id: "web-02",
		nodegroups: ["web"],
		grain: {
			os: "Ubuntu",
			osrelease: "24.04",
			roles: ["web"],
			ipv4: ["10.0.1.6"],
			num_cpus: 2,
			selinux: { enabled: true },
		},
	},
	{
		_id: "db-01",
		nodegroups: ["db"],
		grain: { os: "Debian", osrelease: "11", roles: ["db"], ipv4: ["10.0.2.7"], num_cpus: 8 },
	},
	{ _id: "old-web-01", nodegroups: [], grain: { os: "CentOS", roles: "web", ipv4: ["192.168.0.9"] } },
	{
		_id: "mail.example.com",
		nodegroups: [],
		grain: { os: "Debian", "os:family": "weird", ipv4: [], ipv6: ["fe80::1%eth0"] },
	},
];
/** What the groups resolve to (by name and by id), as groups.hostnames answers. */
const FRONT = new Set(["web-01", "db-01"]);
const DATA = new Set(["db-01"]);
const GROUPS: Record<string, Set<string>> = { front: FRONT, "g-front": FRONT, data: DATA, "g-data": DATA };
export const ctx = { group: (ref: string) => GROUPS[ref] ?? null };
