/**
 * A self-signed certificate for 127.0.0.1, made with the machine's openssl, for the tests that check TLS
 * verification (salt-api and Pritunl clients). `available` is false where there is no openssl.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { tempDir } from "./harness";

export const opensslAvailable = spawnSync("openssl", ["version"]).status === 0;

export interface SelfSigned {
	key: Buffer;
	cert: Buffer;
	/** The certificate's file (a CA file that trusts it). */
	certFile: string;
}

export function selfSignedCert(prefix: string): SelfSigned {
	const dir = tempDir(prefix);
	const keyFile = path.join(dir, "key.pem");
	const certFile = path.join(dir, "cert.pem");
	const made = spawnSync("openssl", [
		"req",
		"-x509",
		"-newkey",
		"rsa:2048",
		"-nodes",
		"-keyout",
		keyFile,
		"-out",
		certFile,
		"-days",
		"1",
		"-subj",
		"/CN=127.0.0.1",
		"-addext",
		"subjectAltName=IP:127.0.0.1",
	]);
	if (made.status !== 0) throw new Error(`openssl could not make a certificate: ${made.stderr}`);
	return { key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile), certFile };
}
