/**
 * Every setting fleet-ctl reads from the environment, in one place.
 * Defaults make `npm start` work on a fresh checkout: one process, NeDB files under ./data, HTTP on 3000.
 */
import path from "node:path";
import { parseCidr } from "./security/address-guard";
import { bearerToken, type Scope } from "./http/auth";
import { scopeIssues } from "./security/scopes";

/** An integer setting from the environment (unset or empty: `fallback`); anything else is a start-up error. */
export function envInt(name: string, fallback: number, min = 0): number {
	const raw = process.env[name];
	if (raw == null || raw === "") return fallback;
	const value = Number(raw);
	if (!Number.isInteger(value) || value < min) {
		throw new Error(`${name} must be an integer >= ${min}, got '${raw}'`);
	}
	return value;
}

function str(name: string, fallback = ""): string {
	const raw = process.env[name];
	return raw == null || raw === "" ? fallback : raw;
}

/** The broker's own settings (moleculer.config.ts); moleculer-runner may override each from its variable too. */
export interface BrokerSettings {
	/** NAMESPACE: environments sharing one NATS server stay apart. */
	namespace: string;
	/** NODEID; empty: moleculer.config.ts makes `<hostname>-<pid>`. */
	nodeID: string;
	/** LOGLEVEL as given; empty: each program's default (info for the services, warn for the REPL). */
	logLevel: string;
	/** LOG_FORMAT=json: one JSON object per line. */
	jsonLogs: boolean;
	/** TRANSPORTER; empty: one process, no broker traffic. */
	transporter: string;
	/** REQUEST_TIMEOUT_MS: every call's deadline. */
	requestTimeoutMs: number;
	/** SHUTDOWN_TIMEOUT_MS: in-flight requests a stopping process waits for (its termination grace must be longer: k8s/). */
	shutdownTimeoutMs: number;
	/** STOP_DELAY_MS: how long a stopping node waits for its peers to stop routing to it. */
	stopDelayMs: number;
	/** BULKHEAD_CONCURRENCY and BULKHEAD_QUEUE: calls to slow outside systems in flight and waiting (lib/runtime/resilience.ts). */
	bulkheadConcurrency: number;
	bulkheadQueue: number;
	/** SERVICEDIR; empty: the compiled services next to moleculer.config.js. */
	serviceDir: string;
	/** SERVICES: the comma list of services this process runs; empty: all. */
	services: string;
	/** Node's own warnings are not printed by Node (--no-warnings in its arguments or NODE_OPTIONS): they become log lines. */
	nodeWarningsSilenced: boolean;
}

export interface Config {
	/** The broker's own settings. */
	broker: BrokerSettings;
	/** HTTP port of the API gateway. */
	port: number;
	/** Address the gateway listens on. */
	host: string;
	/**
	 * Port of this process's health and metrics listener (/live, /ready, /metrics), apart from the API so
	 * that probes and scrapes never go through /api; 0 picks a free port (the multi-process tests do).
	 */
	healthPort: number;
	/** HEALTH_PORT was given: a taken port is then an error, not a reason to take another one. */
	healthPortGiven: boolean;
	/** Address the health and metrics listener binds. */
	healthHost: string;
	/** How often the hosts service recounts hosts by presence for the `fleet_hosts` gauge, in ms. */
	fleetMetricsIntervalMs: number;
	/** HTTP keep-alive of the gateway, in ms: longer than the idle timeout of the load balancer in front. */
	httpKeepAliveMs: number;
	/** How long a client may take to send a whole request, headers and body (slow clients are cut off: 408). */
	httpRequestTimeoutMs: number;
	/** How long a client may take to send a request's headers. */
	httpHeadersTimeoutMs: number;
	/** Directory for NeDB files and other local state (embedded default). ":memory:" keeps nothing. */
	dataDir: string;
	/** When set, every collection lives in this MongoDB database instead of NeDB files. */
	mongoUri: string;
	/** Default and maximum page size of list responses (Eve's PAGINATION_DEFAULT / PAGINATION_LIMIT). */
	pageSizeDefault: number;
	pageSizeLimit: number;
	/** Largest accepted JSON request body, in bytes. */
	maxBodyBytes: number;
	/** Largest accepted file upload, in bytes. */
	maxUploadBytes: number;
	/** Key that encrypts secrets at rest (VPN manager passwords). */
	secretKey: string;
	/** Nodegroup definitions as JSON (name -> {regex?, grain?}) or a path to a JSON file. */
	nodegroups: string;
	nodegroupsFile: string;
	/** Comma-separated origins allowed by CORS; empty means CORS is off. */
	corsOrigins: string[];
	/** Requests per minute per principal (the tokens of one person or service account together; per gateway process); 0 turns the limit off. */
	rateLimitPerMinute: number;
	/**
	 * Server-sent event streams (alerts, approvals, job returns) one principal may hold open on one gateway process,
	 * all kinds together; more are refused with 429. The process's own cap (1,000 of each kind, 503) stays.
	 */
	streamsPerPrincipal: number;
	/** salt-api (rest_cherrypy) base URL, e.g. https://salt:8000; empty: no master (remote execution answers 503). */
	cmApiUrl: string;
	cmApiUser: string;
	cmApiPassword: string;
	/** eauth backend for POST /login (default "pam"). */
	cmApiEauth: string;
	/** Per-call timeout towards salt-api, in ms. */
	cmApiTimeoutMs: number;
	/** Calls to salt-api in flight at once (per process). */
	cmApiConcurrency: number;
	/** Verify salt-api's TLS certificate (default true; CM_API_TLS_VERIFY=false turns it off). */
	cmApiTlsVerify: boolean;
	/** Path of a PEM file with the CA(s) that signed salt-api's certificate. */
	cmApiCa: string;
	/** How long the returns of a local_async job are waited for before the silent hosts are marked "timeout", in ms. */
	cmJobTimeoutMs: number;
	/**
	 * Interval between reads of GET /jobs/<jid> for the local_async jobs still waiting, in ms: the fallback
	 * for returns the event stream did not bring (it was reconnecting, or CM_EVENTS is off).
	 */
	cmJobPollMs: number;
	/** Follow salt-api's event stream (GET /events) for returns, presence, keys and alerts (default true). */
	cmEvents: boolean;
	/** Interval of the live `status.all_status` poll started by POST /hosts/{id}/all_status, in ms. */
	cmAllStatusIntervalMs: number;
	/** A live poll stops by itself after this long, in ms (a panel that forgot to stop it). */
	cmAllStatusMaxMs: number;
	/** More host.down (or host.up) alerts than this from one batch of changes become one summary alert. */
	cmAlertBurst: number;
	/** Time zone of tasks' `start`/`end` wall times and cron expressions when a task names none (IANA). */
	taskTimezone: string;
	/** A run claimed by a process that stops renewing it is taken over after this long, in ms. */
	taskLeaseMs: number;
	/** A run found later than this after its due time is a misfire (the task's `misfire` policy decides), in ms. */
	taskMisfireGraceMs: number;
	/** Turn the scheduler off in this process (the tasks API keeps working); default on. */
	taskScheduler: boolean;
	/** Runs one tasks replica hands to the cm-gateway at once; due runs beyond it are left for a replica with room. */
	taskHandovers: number;
	/** How long one request to the IP resolver (POST /graph request_ips) may take, in ms. */
	ipResolverTimeoutMs: number;
	/** The most of one host's return an `actions` record keeps (and of each step's output in a failed patch), in bytes. */
	cmReturnMaxBytes: number;
	/**
	 * Where the patches live on the master's file server (saltenv base), as a path prefix relative to
	 * the file roots (default "patches/"): `POST /updates` loads every `.sls` file under it. A missing
	 * trailing "/" is added, so "patches" means the directory, not every file whose name starts so;
	 * "/" means the whole file server.
	 */
	cmPatchPrefix: string;
	/**
	 * Interval of the periodic inventory reconciliation (keys, fingerprints, presence, grains → hosts),
	 * in ms (default 300000, five minutes); 0 turns the periodic run off (`cm-gateway.sync` still works).
	 */
	cmSyncIntervalMs: number;
	/**
	 * After a reconciliation that failed (the master down or too slow), the next one comes this many ms later
	 * (default 5000), doubling after each further failure up to `cmSyncIntervalMs`; a success resets it.
	 */
	cmSyncRetryMs: number;
	/**
	 * The presence guard (services/cm-gateway/presence-guard.ts, docs/salt.md "Presence"): a reading of the master's presence
	 * that would take down more than this percentage of the hosts up (and at least two) is held until a
	 * reading at least `cmPresenceConfirmMs` later confirms it. 100 turns the share rule off.
	 */
	cmPresenceMaxLossPercent: number;
	cmPresenceConfirmMs: number;
	/** Webhook deliveries (services/webhooks/webhooks.service.ts): one attempt's timeout, in ms. */
	webhookTimeoutMs: number;
	/** Deliveries in flight at once to receivers in good standing (per webhooks replica; failing receivers go in a lane of their own, docs/webhooks.md); one receiver never has more than one. */
	webhookConcurrency: number;
	/** Deliveries waiting at most per webhook; beyond, new ones to that webhook are logged as `dropped`. */
	webhookQueueMax: number;
	/** Attempts of one delivery before it is `failed`. */
	webhookMaxAttempts: number;
	/** First retry delay, in ms; doubled each attempt (with jitter), at most five minutes. */
	webhookRetryBaseMs: number;
	/** Allow receivers on loopback, private, link-local addresses (off: the SSRF guard refuses them). */
	webhookAllowPrivate: boolean;
	/**
	 * OUTBOUND_ALLOW: addresses and CIDRs (`127.0.0.1/32,::1,10.9.0.0/16`) every integration an API user points
	 * somewhere (webhooks, the IP resolver, Pritunl servers) may reach whatever their class: the only way to
	 * allow link-local, unspecified, multicast or reserved addresses, and loopback outside WEBHOOK_ALLOW_PRIVATE
	 * (lib/security/address-guard.ts; docs/security.md, "Outbound addresses").
	 */
	outboundAllow: string[];
	/** CTL_ADMIN_TOKEN: the admin token the tokens service keeps (replacing an earlier one); empty: none set. */
	adminToken: string;
	/** The API token the REPL acts as (its role, scope and name in the audit log); empty: `login <token>` first. */
	replOperatorToken: string;
	/** CTL_API_URL: the API the REPL talks to (default this machine's PORT). */
	replApiUrl: string;
	/**
	 * Interval of the VPN sync (every organization's record and every host's Pritunl user, from each
	 * manager's Pritunl), in ms (default 60000); 0 turns the periodic run off (`vpn.sync` still works).
	 */
	vpnSyncIntervalMs: number;
	/**
	 * How long a read's serialized answer may be served again (the collections' and the gateway's read
	 * caches) before a change clears it, in ms (default 5000); 0 turns both caches off, so every read
	 * reaches the storage (the benchmark's cache-off scenarios).
	 */
	readCacheMs: number;
	/**
	 * Stored record versions whose rendering (JSON as clients see it) the embedded store's hosts keep, the least
	 * recently read dropped first (default 5000; 0: none). Keyed by the record's version, so never stale, and
	 * independent of READ_CACHE_MS (lib/eve/render-cache.ts, docs/storage.md).
	 */
	renderCacheRecords: number;
	/**
	 * A host's `heartbeat` moves only when it would move by at least this much, in ms (default 300000): presence
	 * readings and reconciliations of a fleet that did not change then write nothing (docs/storage.md).
	 */
	heartbeatResolutionMs: number;
	/** Timeout of one call to a Pritunl server, in ms. */
	pritunlTimeoutMs: number;
	/** Seconds between two host snapshots (`hosts_statistic`), taken once per interval across stats replicas. */
	statsSnapshotIntervalS: number;
	/** Snapshots older than this many days are dropped (whole keyframe periods; docs/statistics.md). */
	statsRetentionDays: number;
	/** Every this many snapshots one is stored whole (a keyframe); the others store what changed. */
	statsKeyframeEvery: number;
	/** Take snapshots in this process (default on; the statistics are served either way). */
	statsSnapshots: boolean;
	/** Jobs (`salt_jobs`) started more than this many days ago are dropped, with their hosts' `actions` records (docs/jobs.md). */
	jobsRetentionDays: number;
	/**
	 * Functions whose jobs started outside fleet-ctl are not recorded in the job history (default the master's own
	 * plumbing: `saltutil.find_job`, `saltutil.running`); fleet-ctl's own jobs are always recorded.
	 */
	cmJobsHidden: string[];
	/**
	 * How long a job seen on the event bus (`salt/job/<jid>/new`) waits before it is taken for one started
	 * outside fleet-ctl, in ms: salt-api's answer naming a job fleet-ctl started can come after the bus's event.
	 */
	cmExternalJobGraceMs: number;
	/** Drive rollouts in this process (default on; the rollouts API works either way). */
	rolloutDriver: boolean;
	/** How often the rollout driver looks for work besides the moments a job ends or a rollout changes, in ms. */
	rolloutTickMs: number;
	/** A rollout claimed by a replica that stops answering is taken over by another after this, in ms. */
	rolloutLeaseMs: number;
	/**
	 * A host whose conformity a check confirms unchanged gets its `checked` time moved only when it is older than
	 * this, in ms (default 600000): a pass that changes nothing writes next to nothing (docs/conformity.md).
	 */
	conformityCheckedResolutionMs: number;
	/** Single sign-on through an OpenID Connect provider (docs/security.md, "Single sign-on"); null without OIDC_ISSUER. */
	oidc: OidcConfig | null;
}

/** One entry of OIDC_ROLES: the role (and scope) a group of the provider's grants; `"*"` matches every signed-in user. */
export interface OidcRoleRule {
	group: string;
	role: "viewer" | "operator" | "admin";
	scope?: Scope;
}

export interface OidcConfig {
	/** OIDC_ISSUER: the provider's issuer URL, exactly as its discovery document names it. */
	issuer: string;
	clientId: string;
	/** OIDC_CLIENT_SECRET; empty: a public client (PKCE alone). */
	clientSecret: string;
	/** CTL_PUBLIC_URL: where browsers reach fleet-ctl; the redirect URI is `<it>/auth/callback`. */
	publicUrl: string;
	scopes: string;
	/** The claim that lists the user's groups (default `groups`). */
	groupsClaim: string;
	/** OIDC_ROLES, in order: the first rule one of the user's groups matches gives the role; none matches: no sign-in. */
	roles: OidcRoleRule[];
	/** How long a signed-in session lasts, in seconds (default 3600). */
	sessionTtlS: number;
	/** What the sign-in button says (default "single sign-on"). */
	name: string;
	/** OIDC_ALLOW_HTTP: accept an http:// issuer (a provider on this machine, the tests); never in production. */
	allowHttp: boolean;
}

/** OIDC_* and CTL_PUBLIC_URL, checked at start: a half-configured sign-in stops the start, saying what is missing. */
function oidcConfig(): OidcConfig | null {
	const issuer = str("OIDC_ISSUER").replace(/\/+$/, "");
	if (!issuer) return null;
	const clientId = str("OIDC_CLIENT_ID");
	const publicUrl = str("CTL_PUBLIC_URL").replace(/\/+$/, "");
	if (!clientId)
		throw new Error(
			"OIDC_ISSUER is set but OIDC_CLIENT_ID is not: the client fleet-ctl is registered as at the provider",
		);
	if (!/^https?:\/\/[^/]+/.test(publicUrl))
		throw new Error(
			"OIDC_ISSUER is set but CTL_PUBLIC_URL is not an http(s) URL: where browsers reach fleet-ctl (the redirect URI is <CTL_PUBLIC_URL>/auth/callback)",
		);
	let roles: unknown;
	try {
		roles = JSON.parse(str("OIDC_ROLES", "[]"));
	} catch {
		throw new Error(
			'OIDC_ROLES must be JSON: [{"group": "fleet-admins", "role": "admin"}, {"group": "*", "role": "viewer"}]',
		);
	}
	const valid = (r: unknown): r is OidcRoleRule => {
		const rule = r as OidcRoleRule;
		return (
			!!rule &&
			typeof rule.group === "string" &&
			rule.group.length > 0 &&
			["viewer", "operator", "admin"].includes(rule.role) &&
			(rule.scope === undefined || (typeof rule.scope === "object" && rule.scope !== null))
		);
	};
	if (!Array.isArray(roles) || !roles.length || !roles.every(valid))
		throw new Error(
			'OIDC_ROLES must list at least one {"group", "role": viewer|operator|admin, "scope"?}: without it no one could sign in',
		);
	for (const rule of roles) {
		// A scope is checked as a token's is: a pattern RE2 cannot compile would otherwise refuse runs at run time.
		const issues = rule.scope === undefined ? null : scopeIssues(rule.scope);
		if (issues) throw new Error(`OIDC_ROLES: the scope of group '${rule.group}' is not valid: ${issues}`);
	}
	return {
		issuer,
		clientId,
		clientSecret: str("OIDC_CLIENT_SECRET"),
		publicUrl,
		scopes: str("OIDC_SCOPES", "openid email profile groups"),
		groupsClaim: str("OIDC_GROUPS_CLAIM", "groups"),
		roles,
		sessionTtlS: envInt("OIDC_SESSION_TTL_S", 3600, 60),
		name: str("OIDC_NAME", "single sign-on"),
		allowHttp: bool("OIDC_ALLOW_HTTP", false),
	};
}

/**
 * MONGO_URI, refused when empty where REQUIRE_MONGO_URI says storage must be shared (Kubernetes): a Secret
 * without it would otherwise give every replica its own NeDB files, silently splitting the data.
 */
function requiredMongoUri(): string {
	const uri = str("MONGO_URI");
	if (!uri && bool("REQUIRE_MONGO_URI", false))
		throw new Error(
			"MONGO_URI is empty but REQUIRE_MONGO_URI is set: every replica would keep its own data. Set MONGO_URI (the Secret fleet-ctl-secrets).",
		);
	return uri;
}

function bool(name: string, fallback: boolean): boolean {
	const raw = process.env[name];
	if (raw == null || raw === "") return fallback;
	const v = raw.trim().toLowerCase();
	if (["1", "true", "yes", "on"].includes(v)) return true;
	if (["0", "false", "no", "off"].includes(v)) return false;
	throw new Error(`${name} must be true or false, got '${raw}'`);
}

/** A comma list of addresses and CIDRs; an entry that is neither is a start-up error. */
function addressList(name: string): string[] {
	const entries = str(name)
		.split(",")
		.map(s => s.trim())
		.filter(Boolean);
	for (const entry of entries) {
		try {
			parseCidr(entry);
		} catch (err) {
			throw new Error(`${name}: ${(err as Error).message}`);
		}
	}
	return entries;
}

/**
 * CTL_ADMIN_TOKEN, refused unless a request could carry it (lib/http/auth.ts bearerToken: 16 to 512 of
 * A-Z a-z 0-9 . _ ~ + / = -): else it is accepted here and every request made with it is a 401.
 */
function adminToken(): string {
	const raw = str("CTL_ADMIN_TOKEN");
	if (!raw || bearerToken(`Bearer ${raw}`) === raw) return raw;
	if (raw.length < MIN_TOKEN_LENGTH)
		throw new Error(
			`CTL_ADMIN_TOKEN is too short (${raw.length} characters): a token needs at least ${MIN_TOKEN_LENGTH}, or every request with it is refused (401)`,
		);
	throw new Error(
		`CTL_ADMIN_TOKEN must be at most 512 characters of A-Z a-z 0-9 . _ ~ + / = - (no spaces), or every request with it is refused (401)`,
	);
}

/** The shortest token a request may carry (lib/http/auth.ts bearerToken). */
const MIN_TOKEN_LENGTH = 16;

/** CM_PATCH_PREFIX as a directory relative to the file roots: no leading "/", one trailing "/". */
function patchPrefix(raw: string): string {
	const trimmed = raw.trim().replace(/^\/+/, "").replace(/\/+$/, "");
	if (trimmed.split("/").some(part => part === "." || part === ".."))
		throw new Error(`CM_PATCH_PREFIX must be a plain directory path, got '${raw}'`);
	return trimmed ? `${trimmed}/` : "";
}

function brokerSettings(): BrokerSettings {
	return {
		namespace: str("NAMESPACE", "fleet-ctl"),
		nodeID: str("NODEID"),
		logLevel: str("LOGLEVEL"),
		jsonLogs: str("LOG_FORMAT") === "json",
		transporter: str("TRANSPORTER"),
		requestTimeoutMs: envInt("REQUEST_TIMEOUT_MS", 30_000),
		shutdownTimeoutMs: envInt("SHUTDOWN_TIMEOUT_MS", 10_000),
		stopDelayMs: envInt("STOP_DELAY_MS", 500),
		bulkheadConcurrency: envInt("BULKHEAD_CONCURRENCY", 32),
		bulkheadQueue: envInt("BULKHEAD_QUEUE", 256),
		serviceDir: str("SERVICEDIR"),
		services: str("SERVICES"),
		nodeWarningsSilenced:
			process.execArgv.includes("--no-warnings") || /(^|\s)--no-warnings(\s|$)/.test(str("NODE_OPTIONS")),
	};
}

/**
 * moleculer-runner reads which services to load from SERVICEDIR and SERVICES once it has loaded
 * moleculer.config.js: the one place this program writes its environment, for the runner.
 */
export function tellRunner(serviceDir: string, services: string): void {
	process.env.SERVICEDIR = serviceDir;
	if (services) process.env.SERVICES = services;
}

/** Every setting, read from the environment now. Called once per broker: by moleculer.config.ts, or by configOf. */
export function loadConfig(): Config {
	const pageSizeDefault = envInt("PAGE_SIZE_DEFAULT", 25, 1);
	return {
		broker: brokerSettings(),
		port: envInt("PORT", 3000),
		host: str("HOST", "0.0.0.0"),
		healthPort: envInt("HEALTH_PORT", 3001),
		healthPortGiven: str("HEALTH_PORT") !== "",
		healthHost: str("HEALTH_HOST", "0.0.0.0"),
		fleetMetricsIntervalMs: envInt("FLEET_METRICS_INTERVAL_MS", 60_000, 100),
		httpKeepAliveMs: envInt("HTTP_KEEPALIVE_MS", 65_000, 1000),
		httpRequestTimeoutMs: envInt("HTTP_REQUEST_TIMEOUT_MS", 120_000, 1000),
		httpHeadersTimeoutMs: envInt("HTTP_HEADERS_TIMEOUT_MS", 20_000, 1000),
		dataDir: str("DATA_DIR", "./data") === ":memory:" ? ":memory:" : path.resolve(str("DATA_DIR", "./data")),
		mongoUri: requiredMongoUri(),
		pageSizeDefault,
		pageSizeLimit: Math.max(pageSizeDefault, envInt("PAGE_SIZE_LIMIT", 50, 1)),
		maxBodyBytes: envInt("MAX_BODY_BYTES", 1024 * 1024, 1024),
		maxUploadBytes: envInt("MAX_UPLOAD_BYTES", 16 * 1024 * 1024, 1024),
		secretKey: str("CTL_SECRET_KEY"),
		nodegroups: str("NODEGROUPS"),
		nodegroupsFile: str("NODEGROUPS_FILE"),
		corsOrigins: str("CORS_ORIGINS")
			.split(",")
			.map(s => s.trim())
			.filter(Boolean),
		rateLimitPerMinute: envInt("RATE_LIMIT_PER_MINUTE", 1200),
		streamsPerPrincipal: envInt("STREAMS_PER_PRINCIPAL", 32, 1),
		cmApiUrl: str("CM_API_URL").replace(/\/+$/, ""),
		cmApiUser: str("CM_API_USER"),
		cmApiPassword: str("CM_API_PASSWORD"),
		cmApiEauth: str("CM_API_EAUTH", "pam"),
		cmApiTimeoutMs: envInt("CM_API_TIMEOUT_MS", 25_000, 1),
		cmApiConcurrency: envInt("CM_API_CONCURRENCY", 8, 1),
		cmApiTlsVerify: bool("CM_API_TLS_VERIFY", true),
		cmApiCa: str("CM_API_CA"),
		cmJobTimeoutMs: envInt("CM_JOB_TIMEOUT_MS", 600_000, 1),
		cmJobPollMs: envInt("CM_JOB_POLL_MS", 5000, 10),
		cmEvents: bool("CM_EVENTS", true),
		cmAllStatusIntervalMs: envInt("CM_ALL_STATUS_INTERVAL_MS", 10_000, 100),
		cmAllStatusMaxMs: envInt("CM_ALL_STATUS_MAX_MS", 3_600_000, 1000),
		cmAlertBurst: envInt("CM_ALERT_BURST", 20, 1),
		cmReturnMaxBytes: envInt("CM_RETURN_MAX_BYTES", 256 * 1024, 1024),
		ipResolverTimeoutMs: envInt("IP_RESOLVER_TIMEOUT_MS", 10_000, 10),
		taskTimezone: str("TASK_TIMEZONE", "UTC"),
		taskLeaseMs: envInt("TASK_LEASE_MS", 30_000, 100),
		taskMisfireGraceMs: envInt("TASK_MISFIRE_GRACE_MS", 60_000, 0),
		taskScheduler: bool("TASK_SCHEDULER", true),
		taskHandovers: envInt("TASK_HANDOVERS", 32, 1),
		cmPatchPrefix: patchPrefix(str("CM_PATCH_PREFIX", "patches/")),
		cmSyncIntervalMs: envInt("CM_SYNC_INTERVAL_MS", 300_000),
		cmSyncRetryMs: envInt("CM_SYNC_RETRY_MS", 5000, 1),
		cmPresenceMaxLossPercent: Math.min(envInt("CM_PRESENCE_MAX_LOSS_PERCENT", 50, 0), 100),
		cmPresenceConfirmMs: envInt("CM_PRESENCE_CONFIRM_MS", 10_000, 0),
		webhookTimeoutMs: envInt("WEBHOOK_TIMEOUT_MS", 5000, 100),
		webhookConcurrency: envInt("WEBHOOK_CONCURRENCY", 4, 1),
		webhookQueueMax: envInt("WEBHOOK_QUEUE_MAX", 1000, 1),
		webhookMaxAttempts: envInt("WEBHOOK_MAX_ATTEMPTS", 5, 1),
		webhookRetryBaseMs: envInt("WEBHOOK_RETRY_BASE_MS", 1000, 10),
		webhookAllowPrivate: bool("WEBHOOK_ALLOW_PRIVATE", false),
		outboundAllow: addressList("OUTBOUND_ALLOW"),
		adminToken: adminToken(),
		replOperatorToken: str("REPL_OPERATOR_TOKEN"),
		replApiUrl: str("CTL_API_URL", `http://127.0.0.1:${envInt("PORT", 3000)}/api`).replace(/\/+$/, ""),
		vpnSyncIntervalMs: envInt("VPN_SYNC_INTERVAL_MS", 60_000),
		pritunlTimeoutMs: envInt("PRITUNL_TIMEOUT_MS", 15_000, 1),
		readCacheMs: envInt("READ_CACHE_MS", 5000, 0),
		renderCacheRecords: envInt("RENDER_CACHE_RECORDS", 5000, 0),
		heartbeatResolutionMs: envInt("HEARTBEAT_RESOLUTION_MS", 300_000, 0),
		statsSnapshotIntervalS: envInt("STATS_SNAPSHOT_INTERVAL", 60, 1),
		statsRetentionDays: envInt("STATS_RETENTION_DAYS", 90, 1),
		statsKeyframeEvery: envInt("STATS_KEYFRAME_EVERY", 1440, 1),
		statsSnapshots: bool("STATS_SNAPSHOTS", true),
		jobsRetentionDays: envInt("JOBS_RETENTION_DAYS", 90, 1),
		cmJobsHidden: str("CM_JOBS_HIDDEN", "saltutil.find_job,saltutil.running")
			.split(",")
			.map(s => s.trim())
			.filter(Boolean),
		cmExternalJobGraceMs: envInt("CM_EXTERNAL_JOB_GRACE_MS", 2000, 0),
		rolloutDriver: bool("ROLLOUT_DRIVER", true),
		rolloutTickMs: envInt("ROLLOUT_TICK_MS", 1000, 10),
		rolloutLeaseMs: envInt("ROLLOUT_LEASE_MS", 30_000, 100),
		conformityCheckedResolutionMs: envInt("CONFORMITY_CHECKED_RESOLUTION_MS", 600_000, 0),
		oidc: oidcConfig(),
	};
}

const byBroker = new WeakMap<object, Config>();

/** Gives `broker` the configuration loaded at its start (moleculer.config.ts, before any service is created). */
export function useConfig(broker: object, config: Config): void {
	byBroker.set(broker, config);
}

/**
 * The configuration of `broker`, which services read in `created` (docs/architecture.md, "Configuration"): the one
 * moleculer.config.ts loaded, or for a broker made without it (the tests') the environment read on the first ask,
 * once. A new broker reads the environment anew; nothing reloads it while a broker runs.
 */
export function configOf(broker: object): Config {
	let config = byBroker.get(broker);
	if (!config) byBroker.set(broker, (config = loadConfig()));
	return config;
}
