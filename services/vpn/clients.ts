/**
 * The vpn service's Pritunl clients, one kept per VPN manager (made again when the manager's record changes),
 * and the Pritunl reads and removals more than one part needs: the organizations, and removing one (an unknown
 * id is fine). Also what a Pritunl answer must look like to be believed.
 */
import { createHash } from "node:crypto";
import type { Context } from "moleculer";
import type { Config } from "../../lib/config";
import { DomainError, ErrorType, isError } from "../../lib/errors";
import { OBJECT_ID } from "../../lib/eve/ids";
import { outboundPolicy } from "../../lib/security/address-guard";
import type { Doc } from "../../lib/storage/store";
import { PritunlClient, PritunlError } from "./pritunl-client";
import { call } from "../../lib/contracts/call";

/** Pritunl's `Organization.dict()` keys the record keeps (later versions add more; they are kept too). */
export function isOrg(o: unknown): o is Doc {
	return (
		o !== null &&
		typeof o === "object" &&
		typeof (o as Doc).id === "string" &&
		OBJECT_ID.test((o as Doc).id) &&
		typeof (o as Doc).name === "string"
	);
}

export function isUser(u: unknown): u is Doc {
	return (
		u !== null && typeof u === "object" && typeof (u as Doc).id === "string" && typeof (u as Doc).name === "string"
	);
}

/** The manager a record names is gone (a record made before managers refused deletion, or a race). */
export class NoManager extends DomainError {
	constructor(id: string) {
		super("NoManager", ErrorType.Invalid, 422, `the VPN manager '${id}' does not exist`);
	}
}

export function malformed(what: string): PritunlError {
	return new PritunlError(502, "malformed", `Pritunl sent a malformed ${what}`);
}

export interface ManagerClient {
	key: string;
	client: PritunlClient;
	name: string;
}

export class ManagerClients {
	private readonly kept = new Map<string, ManagerClient>();

	constructor(private readonly config: Config) {}

	/** A client for these credentials (the caller closes it, unless it is kept). */
	newClient(m: Doc): PritunlClient {
		return new PritunlClient({
			url: String(m.server_address),
			username: m.username,
			password: m.password,
			apiToken: m.api_token,
			apiSecret: m.api_secret,
			ca: m.ca_certificate,
			timeoutMs: this.config.pritunlTimeoutMs,
			outbound: outboundPolicy("pritunl", this.config),
		});
	}

	/** The kept client of a manager, made again when its record changed. */
	async of(ctx: Context, managerId: string): Promise<ManagerClient> {
		let m: Doc;
		try {
			m = await call(ctx, "vpn-managers.credentials", { id: managerId });
		} catch (err) {
			if (isError(err, ErrorType.NotFound)) throw new NoManager(managerId);
			throw err;
		}
		const key = createHash("sha256")
			.update(JSON.stringify([m.server_address, m.username, m.password, m.api_token, m.api_secret, m.ca_certificate]))
			.digest("hex");
		const kept = this.kept.get(managerId);
		if (kept && kept.key === key) return kept;
		kept?.client.close();
		let client: PritunlClient;
		try {
			client = this.newClient(m);
		} catch (err) {
			throw new PritunlError(
				502,
				"unreachable",
				`the VPN manager '${m.name}' has an unusable server_address (${(err as Error).message})`,
			);
		}
		const entry = { key, client, name: m.name };
		this.kept.set(managerId, entry);
		return entry;
	}

	closeAll(): void {
		for (const { client } of this.kept.values()) client.close();
		this.kept.clear();
	}
}

export async function orgList(client: PritunlClient): Promise<Doc[]> {
	const { body } = await client.json<unknown>("GET", "/organization");
	if (!Array.isArray(body) || !body.every(isOrg)) throw malformed("list of organizations");
	return body;
}

/** Removes an organization from Pritunl; one that is not there (Pritunl: 500 for an unknown id) is fine. */
export async function deleteInPritunl(client: PritunlClient, pid: string): Promise<void> {
	try {
		await client.json("DELETE", `/organization/${pid}`);
	} catch (err) {
		if (!(err instanceof PritunlError) || err.status !== 500) throw err;
		const orgs = await orgList(client);
		if (orgs.some(o => o.id === pid)) throw err;
	}
}
