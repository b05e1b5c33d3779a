/**
 * What the scheduler takes as proof that a run's hand-over ran nothing, so that it may try again
 * (services/tasks/scheduler.ts nothingRan, docs/scheduling.md "Failures"): told by the error's type as it arrives
 * from the cm-gateway's node, never by its message or its status alone.
 */
import { Errors } from "moleculer";
import { Conflict, NothingRan, RunRefused, UpstreamFailed, type DomainError } from "../../lib/errors";
import { SaltApiError } from "../../services/cm-gateway/salt-client";
import { nothingRan } from "../../services/tasks/scheduler";

/** An error as Moleculer restores it on the calling node: a plain Error with name, type, code and data. */
const remote = (err: Errors.MoleculerError | DomainError) =>
	Object.assign(new Error(err.message), { name: err.name, type: err.type, code: err.code, data: err.data });

describe("nothingRan", () => {
	it("retries what was refused before anything ran", () => {
		const proofs = [
			new NothingRan("the audit log could not be written, so nothing was run"),
			new SaltApiError(502, "unreachable", "salt-api at salt:8000 is unreachable (ECONNREFUSED)"),
			// The message names no "unreachable": the kind says it all.
			new SaltApiError(502, "unreachable", "salt-api's TLS certificate was not accepted (self-signed); set CM_API_CA"),
			new SaltApiError(503, "master", "the Salt master is not answering (salt-api answered 503)"),
			new Errors.ServiceNotFoundError({ action: "cm-gateway.runTask" }),
			new Errors.ServiceNotAvailableError({ action: "cm-gateway.runTask" }),
			new Errors.QueueIsFullError({ action: "cm-gateway.runTask", nodeID: "n1", size: 10, limit: 10 }),
		];
		expect(proofs.map(e => nothingRan(remote(e)))).toEqual(proofs.map(() => true));
	});

	it("does not retry what may have run or was refused for good, whatever its status or message says", () => {
		const others = [
			new SaltApiError(504, "timeout", "salt-api did not answer within 30000 ms"),
			new SaltApiError(502, "malformed", "salt-api sent a malformed answer to local_async"),
			new RunRefused("the run is refused: the token is revoked"),
			new Conflict("unreachable"),
			new UpstreamFailed("Pritunl at vpn is unreachable", undefined, 502),
		];
		expect(others.map(e => nothingRan(remote(e)))).toEqual(others.map(() => false));
		// A status alone proves nothing: a 503 of no known type is not retried.
		expect(nothingRan(Object.assign(new Error("salt-api is unreachable"), { code: 503, type: undefined }))).toBe(false);
	});
});
