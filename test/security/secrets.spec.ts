/**
 * lib/security/secrets.ts: secrets at rest (VPN manager passwords, webhook signing secrets) are AES-256-GCM under
 * SHA-256(CTL_SECRET_KEY), stored as `enc:v1:<iv>:<tag>:<ciphertext>` in base64 (README, docs/api.md).
 * Where the key comes from: CTL_SECRET_KEY; else, on the embedded default, DATA_DIR/secret.key made once
 * (mode 0600); with MongoDB and no key, a 503. The vectors below were made with openssl-equivalent
 * parameters outside this code (node:crypto directly), not with encryptSecret.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createDecipheriv, createHash } from "node:crypto";
import { SecretsError, decryptSecret, encryptSecret } from "../../lib/security/secrets";
import { loadConfig } from "../../lib/config";

/** The configuration as a process started now would have it: each test sets the environment first. */
const from = () => loadConfig();

const ENV_KEYS = ["CTL_SECRET_KEY", "MONGO_URI", "DATA_DIR", "REQUIRE_MONGO_URI"];
let saved: Record<string, string | undefined>;
const tempDir = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), `fleet-ctl-${prefix}-`));

beforeEach(() => {
	saved = Object.fromEntries(ENV_KEYS.map(k => [k, process.env[k]]));
	for (const k of ENV_KEYS) delete process.env[k];
});
afterEach(() => {
	for (const k of ENV_KEYS) {
		if (saved[k] === undefined) delete process.env[k];
		else process.env[k] = saved[k];
	}
});

/** Known answers: AES-256-GCM, key SHA-256 of the passphrase, iv 000102…0b. */
const VECTOR = {
	key: "correct horse battery staple",
	plain: "hunter2 ✓",
	stored: "enc:v1:AAECAwQFBgcICQoL:iWevgwFuRhpUElCoHQsupQ==:f7iyJwnf0MopCCs=",
};
const VECTOR_ABC = { key: "abc", plain: "s3cret", stored: "enc:v1:AAECAwQFBgcICQoL:jvK7mNS5Ove5EU9+pSu5LQ==:JKoXGafY" };

/** Decrypts a stored secret by the documented format alone, as an independent reader would. */
function openWith(passphrase: string, stored: string): string {
	expect(stored.startsWith("enc:v1:")).toBe(true);
	const [iv, tag, body] = stored
		.slice("enc:v1:".length)
		.split(":")
		.map(s => Buffer.from(s, "base64"));
	const decipher = createDecipheriv("aes-256-gcm", createHash("sha256").update(passphrase).digest(), iv);
	decipher.setAuthTag(tag);
	return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
}

describe("with CTL_SECRET_KEY", () => {
	beforeEach(() => {
		process.env.CTL_SECRET_KEY = VECTOR.key;
		process.env.MONGO_URI = "mongodb://127.0.0.1:1/unused";
	});

	it("reads what was stored in the documented format", () => {
		expect(decryptSecret(from(), VECTOR.stored)).toBe("hunter2 ✓");
	});

	it("writes enc:v1:<12-byte iv>:<16-byte tag>:<ciphertext as long as the text>, readable by the format alone", () => {
		const stored = encryptSecret(from(), "pässword");
		expect(stored).toMatch(/^enc:v1:[A-Za-z0-9+/]{16}:[A-Za-z0-9+/]{22}==:[A-Za-z0-9+/]{12}$/);
		const [iv, tag, body] = stored
			.slice(7)
			.split(":")
			.map(s => Buffer.from(s, "base64"));
		expect([iv.length, tag.length, body.length]).toEqual([12, 16, 9]);
		expect(openWith(VECTOR.key, stored)).toBe("pässword");
		expect(decryptSecret(from(), stored)).toBe("pässword");
	});

	it("uses a fresh iv each time: the same secret is never stored twice the same", () => {
		const a = encryptSecret(from(), "same");
		const b = encryptSecret(from(), "same");
		expect(a).not.toBe(b);
		expect(a.split(":")[2]).not.toBe(b.split(":")[2]);
		expect([decryptSecret(from(), a), decryptSecret(from(), b)]).toEqual(["same", "same"]);
	});

	it("keeps an empty secret", () => {
		expect(decryptSecret(from(), encryptSecret(from(), ""))).toBe("");
	});

	it("refuses what is not an encrypted secret", () => {
		expect(() => decryptSecret(from(), "hunter2")).toThrow("not an encrypted secret");
		expect(() => decryptSecret(from(), "xenc:v1:AAECAwQFBgcICQoL:iWevgwFuRhpUElCoHQsupQ==:f7iyJwnf0MopCCs=")).toThrow(
			"not an encrypted secret",
		);
	});

	it("refuses a secret changed at rest (tag or ciphertext) and one made under another key", () => {
		const [iv, tag, body] = VECTOR.stored.slice(7).split(":");
		const flipped = (b64: string) => {
			const b = Buffer.from(b64, "base64");
			b[0] ^= 1;
			return b.toString("base64");
		};
		expect(() => decryptSecret(from(), `enc:v1:${iv}:${flipped(tag)}:${body}`)).toThrow(
			"Unsupported state or unable to authenticate data",
		);
		expect(() => decryptSecret(from(), `enc:v1:${iv}:${tag}:${flipped(body)}`)).toThrow(
			"Unsupported state or unable to authenticate data",
		);
		expect(() => decryptSecret(from(), VECTOR_ABC.stored)).toThrow("Unsupported state or unable to authenticate data");
	});
});

describe("without CTL_SECRET_KEY", () => {
	it("with MongoDB: 503, secrets cannot be stored (every replica must share the key)", () => {
		process.env.MONGO_URI = "mongodb://127.0.0.1:1/unused";
		let err: unknown;
		try {
			encryptSecret(from(), "x");
		} catch (e) {
			err = e;
		}
		// Its own error (this layer knows nothing of Eve); the gateway renders it as a 503 (test/api/api.spec.ts).
		expect(err).toBeInstanceOf(SecretsError);
		expect((err as SecretsError).code).toBe(503);
		expect((err as SecretsError).message).toBe("CTL_SECRET_KEY is not set: secrets cannot be stored");
		expect(() => decryptSecret(from(), VECTOR.stored)).toThrow("CTL_SECRET_KEY is not set: secrets cannot be stored");
	});

	it("DATA_DIR=:memory: (tests) takes the process's random key, with MONGO_URI too", () => {
		process.env.MONGO_URI = "mongodb://127.0.0.1:1/unused";
		process.env.DATA_DIR = ":memory:";
		expect(decryptSecret(from(), encryptSecret(from(), "x"))).toBe("x");
	});

	it("embedded: makes DATA_DIR (and its parents) and a random 256-bit key in DATA_DIR/secret.key, mode 0600, once", () => {
		const dir = path.join(tempDir("secrets"), "a", "b");
		process.env.DATA_DIR = dir;
		const stored = encryptSecret(from(), "pw");
		const file = path.join(dir, "secret.key");
		const text = fs.readFileSync(file, "utf8");
		expect(text).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
		expect(Buffer.from(text.trim(), "base64").length).toBe(32);
		expect(fs.statSync(file).mode & 0o777).toBe(0o600);
		expect(openWith(text.trim(), stored)).toBe("pw");
		// the second time, the same key is read back, not made again
		const again = encryptSecret(from(), "pw2");
		expect(fs.readFileSync(file, "utf8")).toBe(text);
		expect(openWith(text.trim(), again)).toBe("pw2");
		expect(decryptSecret(from(), stored)).toBe("pw");
	});

	it("embedded: uses the key already in DATA_DIR/secret.key, without its line end", () => {
		const dir = tempDir("secrets");
		fs.writeFileSync(path.join(dir, "secret.key"), "abc\n");
		process.env.DATA_DIR = dir;
		expect(decryptSecret(from(), VECTOR_ABC.stored)).toBe("s3cret");
		expect(openWith("abc", encryptSecret(from(), "x"))).toBe("x");
	});

	it("embedded: never overwrites a DATA_DIR/secret.key it cannot read", () => {
		const dir = tempDir("secrets");
		fs.mkdirSync(path.join(dir, "secret.key"));
		process.env.DATA_DIR = dir;
		expect(() => encryptSecret(from(), "x")).toThrow("EEXIST");
		expect(fs.statSync(path.join(dir, "secret.key")).isDirectory()).toBe(true);
	});

	it("DATA_DIR=:memory: (tests): one random key for the process, no file", () => {
		process.env.DATA_DIR = ":memory:";
		const a = encryptSecret(from(), "first");
		const b = encryptSecret(from(), "second");
		expect([decryptSecret(from(), a), decryptSecret(from(), b)]).toEqual(["first", "second"]);
		expect(fs.existsSync(path.resolve(":memory:"))).toBe(false);
		expect(() => decryptSecret(from(), VECTOR.stored)).toThrow("Unsupported state or unable to authenticate data");
	});

	it("CTL_SECRET_KEY wins over DATA_DIR/secret.key", () => {
		const dir = tempDir("secrets");
		fs.writeFileSync(path.join(dir, "secret.key"), "abc\n");
		process.env.DATA_DIR = dir;
		process.env.CTL_SECRET_KEY = VECTOR.key;
		expect(decryptSecret(from(), VECTOR.stored)).toBe("hunter2 ✓");
	});
});
