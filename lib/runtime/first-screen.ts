/**
 * Owns what a start prints (issue 18, "the first hour"): the checks that refuse a start in one line before
 * Moleculer prints anything (Node.js version, configuration), the Console logger that keeps Moleculer's
 * start-up chatter at debug level, and the block that says where fleet-ctl runs, the one-time admin token
 * (first start only) and what to do next.
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { Loggers, type ServiceBroker } from "moleculer";
import { loadConfig, type Config } from "../config";

export const MIN_NODE_MAJOR = 22;

/** Why this Node.js cannot run fleet-ctl, or null. */
export function nodeProblem(version: string = process.version): string | null {
	const major = Number(/^v?(\d+)\./.exec(version)?.[1] ?? 0);
	if (major >= MIN_NODE_MAJOR) return null;
	return `fleet-ctl needs Node.js ${MIN_NODE_MAJOR} or newer (this is ${version.startsWith("v") ? version : `v${version}`}): install Node.js ${MIN_NODE_MAJOR} LTS or use the container image`;
}

/** This process's configuration, or why it must not start (Node.js too old, a setting loadConfig refuses). */
export function startProblem(
	version: string = process.version,
): { config: Config; problem: null } | { config: null; problem: string } {
	const node = nodeProblem(version);
	if (node) return { config: null, problem: node };
	try {
		return { config: loadConfig(), problem: null };
	} catch (err) {
		return { config: null, problem: `fleet-ctl cannot start: ${(err as Error).message}` };
	}
}

/**
 * The configuration, loaded once for the whole start (moleculer.config.ts, first); when the process must not
 * start, ends it with one line on stderr and exit code 1.
 */
export function refuseBadStart(): Config {
	const { config, problem } = startProblem();
	if (config) return config;
	process.stderr.write(`${problem}\n`);
	process.exit(1);
}

/**
 * Info lines every start repeats and nobody reads (one or two per service, the broker's parts): logged at
 * debug instead, so LOGLEVEL=debug still shows them. Warnings and errors are never touched.
 */
const CHATTER: readonly RegExp[] = [
	/^Service '[^']*' (started|stopped)\.$/,
	/^'[^']*' service is (registered|unregistered)\.$/,
	/^Waiting for service\(s\) /,
	/^Service\(s\) '[^']*' are available\.$/,
	/^(Metrics: |Metric reporter: |Strategy: |Discoverer: |Serializer: |Validator: )/,
	/^Registered \d+ middleware\(s\)\.$/,
	/^API Gateway server created\.$/,
];

export function isChatter(args: readonly unknown[]): boolean {
	const first = args[0];
	return typeof first === "string" && CHATTER.some(re => re.test(first));
}

/** Moleculer's Console logger with the start-up chatter demoted to debug. */
export class QuietConsoleLogger extends Loggers.Console {
	/** A logger given as an instance keeps its own level: it takes the broker's (logLevel, LOGLEVEL) as the built-in one does. */
	override init(loggerFactory: Parameters<Loggers.Console["init"]>[0]): void {
		super.init(loggerFactory);
		// The typings allow only a level name here; Moleculer takes a per-module map as well (logLevel: { "**": ... }).
		(this.opts as { level?: unknown }).level = loggerFactory.broker.options.logLevel || "info";
	}

	override getLogHandler(
		bindings: Parameters<Loggers.Console["getLogHandler"]>[0],
	): ReturnType<Loggers.Console["getLogHandler"]> {
		const handler = super.getLogHandler(bindings);
		if (!handler) return handler;
		return (level, args) => handler(level === "info" && isChatter(args) ? "debug" : level, args);
	}
}

let oneTimeToken: string | null = null;

/** The tokens service made the bootstrap admin token now: the start-up block shows it, once. */
export function announceAdminToken(secret: string): void {
	oneTimeToken = secret;
}

/** The address the local gateway listens on, as a person types it (http://localhost:3000), or null. */
export function gatewayUrl(broker: ServiceBroker): string | null {
	const api = broker.getLocalService("api") as { server?: Server } | undefined;
	const addr = api?.server?.address() as AddressInfo | string | null | undefined;
	if (!addr || typeof addr === "string") return null;
	const host =
		addr.address === "0.0.0.0" || addr.address === "::"
			? "localhost"
			: addr.family === "IPv6"
				? `[${addr.address}]`
				: addr.address;
	return `http://${host}:${addr.port}`;
}

/**
 * The block a start ends with: where the gateway runs (when it runs here), the admin token made on this
 * first start (when the tokens service runs here and made one) and the request to try next. Empty when
 * this process has neither (a pod of other services).
 */
export function startBlock(url: string | null, token: string | null): string[] {
	const lines: string[] = [];
	if (url) lines.push(`fleet-ctl is running: ${url}/ (API: ${url}/api)`);
	if (token) {
		lines.push(`admin token (shown once, keep it safe): ${token}`);
		lines.push(
			url
				? `next: curl -s ${url}/api/ -H "Authorization: Bearer ${token}"`
				: `next: send it as "Authorization: Bearer ${token}" to the API`,
		);
	}
	return lines;
}

/**
 * Prints the start-up block once the broker started (its `started` hook); the token is forgotten after.
 * With JSON logs (`json`) only the token lines are plain text, as they always were; the address is a log line.
 */
export function printStartBlock(broker: ServiceBroker, json = false): void {
	const url = gatewayUrl(broker);
	const lines = startBlock(url, oneTimeToken).slice(json && url ? 1 : 0);
	oneTimeToken = null;
	if (json && url) broker.logger.info(`fleet-ctl is running: ${url}/ (API: ${url}/api)`);
	if (!lines.length) return;
	// Outside the logger, on purpose: the token must not reach a log pipeline, and the block reads as one.
	process.stdout.write(`\n${lines.join("\n")}\n\n`);
}
