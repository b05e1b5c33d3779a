/**
 * The gateway renders every failure in Eve's shape; errors it does not recognise become a 500 that
 * reveals nothing of what happened.
 */
import { Errors } from "moleculer";
import { toEveError } from "../../services/api/errors";
import { EveError } from "../../lib/eve/errors";
import { SaltApiError } from "../../services/cm-gateway/salt-client";
import { PritunlError } from "../../services/vpn/pritunl-client";
import { SecretsError } from "../../lib/security/secrets";
import { endpointFailure } from "../../lib/runtime/resilience";

describe("api error rendering", () => {
	it("keeps Eve errors with their code, message and issues", () => {
		const { code, body } = toEveError(new EveError(422, "Insertion failure", { issues: { name: "required field" } }));
		expect(code).toBe(422);
		expect(body).toEqual({
			_status: "ERR",
			_error: { code: 422, message: "Insertion failure" },
			_issues: { name: "required field" },
		});
	});

	it("renders the errors other layers throw (salt-api, Pritunl, secrets) with their code and message, as they come and as they arrive over NATS", () => {
		const thrown = [
			new SaltApiError(503, "master", "the Salt master is not answering"),
			new PritunlError(504, "timeout", "Pritunl did not answer within 15000 ms"),
			new SecretsError("CTL_SECRET_KEY is not set: secrets cannot be stored"),
		];
		for (const err of thrown) {
			expect(err).not.toBeInstanceOf(EveError);
			// Over a transporter an error arrives as a MoleculerError with its name, code, type and data.
			const received = Object.assign(new Errors.MoleculerError(err.message, err.code, err.type, err.data), {
				name: err.name,
			});
			for (const e of [err, received]) {
				const { code, body, internal } = toEveError(e);
				expect({ code, body, internal }).toEqual({
					code: err.code,
					body: { _status: "ERR", _error: { code: err.code, message: err.message } },
					internal: false,
				});
				// An answer about an outside system, not a failure of the service's endpoint.
				expect(endpointFailure(e)).toBe(false);
			}
		}
		expect(endpointFailure(new Errors.MoleculerServerError("db down", 500, "X"))).toBe(true);
	});

	it("turns unexpected errors into a generic 500 without their message or stack", () => {
		const secret = new Error("connect ECONNREFUSED mongodb://admin:hunter2@db:27017");
		const { code, body, internal } = toEveError(secret);
		expect(code).toBe(500);
		expect(internal).toBe(true);
		expect(JSON.stringify(body)).not.toContain("hunter2");
		expect(body._error.message).toBe(
			"The server encountered an internal error and was unable to complete your request.",
		);
		expect(toEveError(new Errors.MoleculerServerError("db down", 500, "X")).code).toBe(500);
		expect(toEveError(undefined).code).toBe(500);
		expect(toEveError("a string").code).toBe(500);
	});

	it("maps broker and gateway failures to the status a client can act on", () => {
		expect(toEveError(new Errors.ServiceNotFoundError({ action: "cm-gateway.runOnHost" })).code).toBe(503);
		// No such action: the route's own reason (no master configured); an action whose endpoints are all
		// refusing calls (open breaker, nodes going): not that reason, which would mislead.
		expect(
			toEveError(new Errors.ServiceNotFoundError({ action: "cm-gateway.runOnHost" }), "no master is configured").body
				._error.message,
		).toBe("no master is configured");
		const noEndpoint = toEveError(
			new Errors.ServiceNotAvailableError({ action: "cm-gateway.runOnHost" }),
			"no master is configured",
		);
		expect(noEndpoint.code).toBe(503);
		expect(noEndpoint.body._error.message).toMatch(/not answering at the moment/);
		expect(toEveError(new Errors.RequestTimeoutError({ action: "hosts.list", nodeID: "n1" })).code).toBe(504);
		const parse = Object.assign(
			new Errors.MoleculerError("Unexpected end of JSON input", 400, "entity.parse.failed"),
			{},
		);
		expect(toEveError(parse).body._error).toEqual({ code: 400, message: "malformed JSON in the request body" });
		expect(toEveError(new Errors.MoleculerError("too large", 413, "entity.too.large")).code).toBe(413);
		const invalid = new Errors.ValidationError("Parameters validation error!", "VALIDATION_ERROR", [
			{ type: "required", field: "id", message: "x" },
		]);
		expect(toEveError(invalid).body).toEqual({
			_status: "ERR",
			_error: { code: 422, message: "invalid request parameters" },
			_issues: { id: "required field" },
		});
		expect(toEveError(new Errors.MoleculerClientError("Bad thing", 409, "CONFLICT")).body._error).toEqual({
			code: 409,
			message: "Bad thing",
		});
	});
});
