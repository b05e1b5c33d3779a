/** The VPN services' internal actions (vpn, vpn-managers, vpn-organizations) and the records they answer. */
import type { Issues } from "../eve/errors";

/** What fleet-ctl keeps of a Pritunl organization (its id, and its API credentials, secret at rest). */
export interface PritunlOrganization {
	id: string;
	name?: string;
	auth_api?: boolean;
	auth_token?: string;
	auth_secret?: string;
	[field: string]: unknown;
}

/** A `vpn_organizations` record. */
export interface VpnOrganizationRecord {
	_id: string;
	name: string;
	vpn_manager: string;
	vpn_representation?: PritunlOrganization;
	cipher_type?: string;
	type?: number;
	_created: Date;
	_updated: Date;
	_etag?: string;
}

/** A `vpn_managers` record with its secrets in clear (vpn-managers.credentials). */
export interface VpnManagerCredentials {
	_id: string;
	name: string;
	server_address: string;
	dashboard_address: string;
	username: string;
	password: string;
	ca_certificate?: string;
	api_token?: string;
	api_secret?: string;
}

/** A create of an organization under way (written before Pritunl is asked). */
export interface OrganizationCreate {
	_id: string;
	manager: string;
	name: string;
	/** The Pritunl organizations there were before it. */
	before: string[];
	at: Date;
}

/** An Eve write answer: the record's meta fields and `_status`. */
export type WriteAnswer = { _id: string; _status: "OK" } & Record<string, unknown>;

export const VPN_PARAMS = {
	"vpn-organizations.createStarted": { manager: "string", name: "string", before: { type: "array", items: "string" } },
	"vpn-organizations.createEnded": { id: "string" },
	"vpn-organizations.unfinishedCreates": { olderThanMs: { type: "number", min: 0 } },
	"vpn-organizations.checkRecord": { record: "any" },
	"vpn-organizations.insertRecord": { record: "object" },
	"vpn-organizations.claimForRemoval": { id: "string" },
	"vpn-organizations.records": {
		ids: { type: "array", items: "string", optional: true },
		managers: { type: "array", items: "string", optional: true },
	},
	"vpn-organizations.setRepresentation": { id: "string", vpn_representation: "object" },
	"vpn-organizations.removeRecord": { id: "string" },
	"vpn-organizations.countByManager": { ids: { type: "array", items: "string" } },
	"vpn-managers.credentials": { id: "string" },
	"vpn.checkManager": { manager: "object" },
} as const;

export interface VpnResults {
	/** The create entry's id. */
	"vpn-organizations.createStarted": string;
	/** How many entries were removed. */
	"vpn-organizations.createEnded": number;
	"vpn-organizations.unfinishedCreates": OrganizationCreate[];
	"vpn-organizations.checkRecord": Issues | null;
	"vpn-organizations.insertRecord": WriteAnswer;
	"vpn-organizations.claimForRemoval": null;
	"vpn-organizations.records": VpnOrganizationRecord[];
	/** Whether the record changed. */
	"vpn-organizations.setRepresentation": boolean;
	"vpn-organizations.removeRecord": number;
	"vpn-organizations.countByManager": number;
	"vpn-managers.credentials": VpnManagerCredentials;
	"vpn.checkManager": Issues | null;
}
