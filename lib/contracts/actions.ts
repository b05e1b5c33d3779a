/**
 * The internal actions' contracts: each action's params schema (the one its service declares, so validation and
 * types are one declaration) and its result type, one file per service. Callers reach them through `call`
 * (./call.ts), services declare them through `action`: a wrong param, a missing one or a misread result fails `tsc`.
 * Adding an action: its schema in its service's file `as const`, its result beside it.
 */
import type { Caller } from "../http/auth";
import { FLEET_PARAMS, type FleetResults } from "./fleet";
import { HOSTS_PARAMS, type HostsResults } from "./hosts";
import { VPN_PARAMS, type VpnResults } from "./vpn";

const TOKENS_PARAMS = {
	/** tokens.authorizeRun: may this token run this complete call on these hosts, now. */
	"tokens.authorizeRun": {
		token: { type: "string" },
		client: { type: "string", max: 50 },
		fun: { type: "string", min: 1, max: 200 },
		arg: { type: "array", optional: true },
		kwarg: { type: "object", optional: true },
		targets: { type: "array", items: "string", max: 100_000 },
	},
} as const;

/** Every contracted action's params schema, by action name. */
export const PARAMS = { ...HOSTS_PARAMS, ...FLEET_PARAMS, ...VPN_PARAMS, ...TOKENS_PARAMS } as const;

/** Every contracted action's result, by action name. */
export interface Results extends HostsResults, FleetResults, VpnResults {
	"tokens.authorizeRun": Caller;
}
