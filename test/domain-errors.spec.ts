/**
 * The rules of errors in services/ (docs/architecture.md, "Errors"), read from the source: a service throws the
 * domain errors of lib/errors.ts, never Eve's HTTP errors (only the gateway, services/api/, and the Eve layer do);
 * no code tells an error by its message, and outside the gateway none tells it by its status: it tests `type`.
 * Then what the rules protect: a domain error keeps its type and data across the transporter, and the gateway
 * answers it with the status and body Eve gives.
 */
import fs from "node:fs";
import path from "node:path";
import { ServiceBroker } from "moleculer";
import {
	ErrorType,
	Invalid,
	NotFound,
	OutsideWindow,
	RunRefused,
	TargetUnevaluable,
	Unauthenticated,
	isError,
	runRefused,
} from "../lib/errors";
import { DEFAULT_MESSAGES } from "../lib/eve/errors";
import { toEveError } from "../services/api/errors";

const ROOT = path.resolve(__dirname, "..");
/** The gateway: the one boundary that speaks HTTP, and may tell errors by their status. */
const BOUNDARY = "services/api/";

interface Finding {
	file: string;
	line: number;
	rule: "eve-error" | "message-match" | "status-branch";
	text: string;
}

const EVE_ERROR = /\bEveError\b|(?<![\w.])(badRequest|notFound|conflict|validationFailed|preconditionFailed)\(/;
const MESSAGE_MATCH = [
	/\.message\)?\s*\.(replace|match|matchAll|search|startsWith|endsWith|includes)\(/,
	/\.(test|exec)\([^)]*\.message\b/,
	/(?<!typeof\s+[\w$.()]*)\.message\s*(===|!==|==|!=)\s*["'`]/,
];
const STATUS_BRANCH = [
	/\.code\s*(===|!==|==|!=)\s*\d/,
	/\b\d{3}\s*(===|!==|==|!=)\s*[\w.()?]*\.code\b/,
	/\[\s*\d{3}(\s*,\s*\d{3})*\s*\]\.includes\([^)]*\.code\b/,
];

/** What breaks the rules in one file's source (comment lines are skipped). */
function findings(file: string, source: string): Finding[] {
	const out: Finding[] = [];
	const boundary = file.startsWith(BOUNDARY);
	source.split("\n").forEach((raw, i) => {
		const text = raw.trim();
		if (text.startsWith("//") || text.startsWith("*") || text.startsWith("/*")) return;
		const at = { file, line: i + 1, text };
		if (!boundary && EVE_ERROR.test(text) && !/^import type\b/.test(text)) out.push({ ...at, rule: "eve-error" });
		if (MESSAGE_MATCH.some(re => re.test(text))) out.push({ ...at, rule: "message-match" });
		if (!boundary && STATUS_BRANCH.some(re => re.test(text))) out.push({ ...at, rule: "status-branch" });
	});
	return out;
}

function sources(dir: string): string[] {
	return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap(e => {
		const rel = `${dir}/${e.name}`;
		if (e.isDirectory()) return sources(rel);
		return e.name.endsWith(".ts") ? [rel] : [];
	});
}

describe("the error rules, read from services/", () => {
	it("finds no EveError outside the gateway, no message matched, no status branched on", () => {
		const files = sources("services");
		expect(files.length).toBeGreaterThan(50);
		const found = files.flatMap(f => findings(f, fs.readFileSync(path.join(ROOT, f), "utf8")));
		expect(found).toEqual([]);
	});

	it("would report each kind of breach, and not what keeps the rules", () => {
		const bad = [
			'if (!doc) throw new EveError(404, "not found");',
			"if (!doc) throw notFound();",
			"throw validationFailed({ name: 'required' });",
			"return e.code === 503 || (e.code === 502 && /unreachable/.test(e.message));",
			'const reason = String(e.message).replace(/^the run is refused: /, "");',
			"if ((err as { code?: number }).code !== 422) throw err;",
			"if (e.message === 'gone') return;",
			"if (403 === err.code) return;",
		].join("\n");
		expect(findings("services/x/y.ts", bad).map(f => [f.line, f.rule])).toEqual([
			[1, "eve-error"],
			[2, "eve-error"],
			[3, "eve-error"],
			[4, "message-match"],
			[4, "status-branch"],
			[5, "message-match"],
			[6, "status-branch"],
			[7, "message-match"],
			[8, "status-branch"],
		]);
		const good = [
			'import type { Issues } from "../../lib/eve/errors";',
			'if (!doc) throw new NotFound("host not found");',
			"if (isError(err, ErrorType.OutsideWindow) && err.data?.window) return;",
			"// a comment may say e.code === 409",
			'logger.warn("failed:", err.message.slice(0, 200));',
			'if (typeof $set.message === "string") $set.message = String(e.message).slice(0, 9);',
		].join("\n");
		expect(findings("services/x/y.ts", good)).toEqual([]);
		// The gateway speaks HTTP: it keeps EveError and reads statuses, but never matches a message either.
		expect(
			findings(
				"services/api/z.ts",
				"throw new EveError(405);\nif (code === 429) retry();\nif (/x/.test(err.message)) y();",
			).map(f => f.rule),
		).toEqual(["message-match"]);
	});
});

describe("domain errors across the transporter", () => {
	const node = (nodeID: string) =>
		new ServiceBroker({ nodeID, logger: false, transporter: "Fake", serializer: "JSON" });
	const server = node("errors-server");
	const client = node("errors-client");
	server.createService({
		name: "thrower",
		actions: {
			outside: () => {
				throw new OutsideWindow("state.apply is outside the maintenance windows of web-01", {
					window: { name: "nightly", start: "2030-01-01T02:00:00.000Z" },
					refused: ["web-01"],
				});
			},
			refused: () => {
				throw runRefused("the token is revoked");
			},
			target: () => {
				throw new TargetUnevaluable("unbalanced parentheses", "target");
			},
		},
	});
	beforeAll(async () => {
		await Promise.all([server.start(), client.start()]);
		await client.waitForServices("thrower");
	});
	afterAll(() => Promise.all([client.stop(), server.stop()]));

	it("keeps type, code and data, not the class: callers test the type", async () => {
		const err = await client.call("thrower.outside").catch((e: unknown) => e);
		expect(err).not.toBeInstanceOf(OutsideWindow);
		expect(isError(err, ErrorType.OutsideWindow)).toBe(true);
		expect(err).toMatchObject({
			type: "OUTSIDE_WINDOW",
			code: 409,
			data: { window: { name: "nightly" }, refused: ["web-01"] },
		});
		const refused = await client.call("thrower.refused").catch((e: unknown) => e);
		expect(isError(refused, ErrorType.RunRefused) && refused.data?.reason).toBe("the token is revoked");
		expect(isError(refused, ErrorType.OutsideWindow)).toBe(false);
	});

	it("is answered by the gateway with Eve's status and body, as before the types", async () => {
		const outside = toEveError(await client.call("thrower.outside").catch((e: unknown) => e));
		expect(outside).toEqual({
			code: 409,
			internal: false,
			body: {
				_status: "ERR",
				_error: { code: 409, message: "state.apply is outside the maintenance windows of web-01" },
				_next_window: { name: "nightly", start: "2030-01-01T02:00:00.000Z" },
				_refused: ["web-01"],
			},
		});
		expect(toEveError(await client.call("thrower.refused").catch((e: unknown) => e)).body).toEqual({
			_status: "ERR",
			_error: { code: 403, message: "the run is refused: the token is revoked" },
		});
		expect(toEveError(await client.call("thrower.target").catch((e: unknown) => e)).body).toEqual({
			_status: "ERR",
			_error: { code: 422, message: "Insertion failure: 1 document(s) contain(s) error(s)" },
			_issues: { target: "unbalanced parentheses" },
		});
		// Local ones too, with Eve's default messages where none is given.
		expect(toEveError(new NotFound()).body._error).toEqual({ code: 404, message: DEFAULT_MESSAGES[404] });
		expect(toEveError(new Unauthenticated()).body._error).toEqual({ code: 401, message: DEFAULT_MESSAGES[401] });
		expect(toEveError(new Invalid({ name: "required field" })).body).toEqual({
			_status: "ERR",
			_error: { code: 422, message: "Insertion failure: 1 document(s) contain(s) error(s)" },
			_issues: { name: "required field" },
		});
		expect(new RunRefused("the check is refused: no token authorizes it", "no token authorizes it").data).toEqual({
			reason: "no token authorizes it",
		});
	});
});
