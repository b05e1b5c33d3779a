/**
 * Secrets at rest (VPN manager passwords): AES-256-GCM under a key derived from CTL_SECRET_KEY.
 * On the embedded default without CTL_SECRET_KEY, a random key is made once and kept in
 * DATA_DIR/secret.key (mode 0600); with MongoDB the key must come from the environment, so that every
 * replica shares it.
 */
import fs from "node:fs";
import path from "node:path";
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import type { Config } from "../config";
import { Errors } from "moleculer";

/** Secrets cannot be kept (no key): 503, rendered by the gateway like any error of its own type. */
export class SecretsError extends Errors.MoleculerError {
	constructor(message: string) {
		super(message, 503, "SECRETS");
		this.name = "SecretsError";
	}
}

const PREFIX = "enc:v1:";

/** Where the key comes from: CTL_SECRET_KEY, MONGO_URI and DATA_DIR of the caller's configuration (lib/config.ts). */
export type SecretsSource = Pick<Config, "secretKey" | "mongoUri" | "dataDir">;

function keyMaterial(config: SecretsSource): string {
	if (config.secretKey) return config.secretKey;
	if (config.mongoUri || config.dataDir === ":memory:") {
		if (config.dataDir === ":memory:") return (memoryKey ??= randomBytes(32).toString("base64"));
		throw new SecretsError("CTL_SECRET_KEY is not set: secrets cannot be stored");
	}
	const file = path.join(config.dataDir, "secret.key");
	try {
		return fs.readFileSync(file, "utf8").trim();
	} catch {
		fs.mkdirSync(config.dataDir, { recursive: true });
		const key = randomBytes(32).toString("base64");
		fs.writeFileSync(file, key + "\n", { mode: 0o600, flag: "wx" });
		return key;
	}
}
let memoryKey: string | undefined;

function key(config: SecretsSource): Buffer {
	return createHash("sha256").update(keyMaterial(config)).digest();
}

export function encryptSecret(config: SecretsSource, plain: string): string {
	const iv = randomBytes(12);
	const cipher = createCipheriv("aes-256-gcm", key(config), iv);
	const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
	return PREFIX + [iv, cipher.getAuthTag(), body].map(b => b.toString("base64")).join(":");
}

export function decryptSecret(config: SecretsSource, stored: string): string {
	if (!stored.startsWith(PREFIX)) throw new Error("not an encrypted secret");
	const [iv, tag, body] = stored
		.slice(PREFIX.length)
		.split(":")
		.map(s => Buffer.from(s, "base64"));
	const decipher = createDecipheriv("aes-256-gcm", key(config), iv);
	decipher.setAuthTag(tag);
	return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
}
