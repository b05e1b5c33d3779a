/**
 * Every setting fleet-ctl reads from the environment, in one place.
 * Defaults make `npm start` work on a fresh checkout: one process, NeDB files under ./data, HTTP on 3000.
 */
import path from "node:path";

function int(name: string, fallback: number, min = 0): number {
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

export interface Config {
	/** HTTP port of the API gateway. */
	port: number;
	/** Address the gateway listens on. */
	host: string;
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
	/** Requests per minute per API token (per gateway process); 0 turns the limit off. */
	rateLimitPerMinute: number;
}

export function loadConfig(): Config {
	const pageSizeDefault = int("PAGE_SIZE_DEFAULT", 25, 1);
	return {
		port: int("PORT", 3000),
		host: str("HOST", "0.0.0.0"),
		dataDir: str("DATA_DIR", "./data") === ":memory:" ? ":memory:" : path.resolve(str("DATA_DIR", "./data")),
		mongoUri: str("MONGO_URI"),
		pageSizeDefault,
		pageSizeLimit: Math.max(pageSizeDefault, int("PAGE_SIZE_LIMIT", 50, 1)),
		maxBodyBytes: int("MAX_BODY_BYTES", 1024 * 1024, 1024),
		maxUploadBytes: int("MAX_UPLOAD_BYTES", 16 * 1024 * 1024, 1024),
		secretKey: str("CTL_SECRET_KEY"),
		nodegroups: str("NODEGROUPS"),
		nodegroupsFile: str("NODEGROUPS_FILE"),
		corsOrigins: str("CORS_ORIGINS")
			.split(",")
			.map(s => s.trim())
			.filter(Boolean),
		rateLimitPerMinute: int("RATE_LIMIT_PER_MINUTE", 1200),
	};
}
