/**
 * Configuration every leg gives the services it starts, so the suites can rely on it: the nodegroup
 * definitions (read from NODEGROUPS at service start) and a small upload limit.
 */

/** Nodegroups as configured for the suites (name -> info). */
export const NODEGROUPS: Record<string, { regex?: string; grain?: Record<string, string> }> = {
	"e2e-web": { regex: "^web-" },
	"e2e-alt": { grain: { osfullname: "ALT" } },
	"e2e.db_1": { regex: "^db-", grain: { virtual: "kvm" } },
};

/** MAX_UPLOAD_BYTES of the suites (the JSON body limit stays at its default). */
export const MAX_UPLOAD_BYTES = 1024 * 1024;

export const SUITE_ENV: Record<string, string> = {
	NODEGROUPS: JSON.stringify(NODEGROUPS),
	// The suites check task records as the API leaves them; the scheduler has suites of its own (test/tasks/tasks.scheduler.spec.ts).
	TASK_SCHEDULER: "false",
	// Likewise the snapshots: the statistics suite takes its own (stats.snapshot at chosen times); test/stats/stats.distributed.spec.ts the periodic ones.
	STATS_SNAPSHOTS: "false",
	// The IP resolver simulator's "slow" mode must time out quickly.
	IP_RESOLVER_TIMEOUT_MS: "1000",
	MAX_UPLOAD_BYTES: String(MAX_UPLOAD_BYTES),
	// The suites plant VPN identities of their own; the VPN suite runs the sync itself (vpn.sync).
	VPN_SYNC_INTERVAL_MS: "0",
	// A Pritunl simulator that is made to hang must time out quickly.
	PRITUNL_TIMEOUT_MS: "2000",
};
