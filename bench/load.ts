/**
 * The load generator, run as a child process of bench/run.ts so it never shares an event loop (or a
 * core's worth of scheduling) with the server it measures. Takes one JSON argument, warms up, measures,
 * and prints one JSON line with the result on stdout.
 *
 *   node dist/bench/load.js '{"url":"http://127.0.0.1:1234/api/hosts/x","connections":10,"duration":10,"warmup":3,"expectBody":"..."}'
 *
 * expectBody may also be given as expectBodyFile (a path), to keep the command line short.
 */
import fs from "node:fs";

// autocannon ships no types; the little used here is typed below.
const autocannon = require("autocannon") as (opts: Record<string, unknown>) => AutocannonInstance;

interface AutocannonResult {
	duration: number;
	requests: { total: number; average: number; sent: number };
	latency: { p50: number; p99: number; average: number };
	throughput: { average: number };
	errors: number;
	timeouts: number;
	mismatches: number;
	non2xx: number;
	resets: number;
	"2xx": number;
	statusCodeStats: Record<string, { count: number }>;
}

interface AutocannonInstance extends PromiseLike<AutocannonResult> {
	on(
		event: "response",
		fn: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void,
	): void;
	on(event: "reqError", fn: (err: Error) => void): void;
	on(event: "mismatch", fn: (body: string) => void): void;
}

export interface LoadOptions {
	url: string;
	connections: number;
	/** Seconds measured. */
	duration: number;
	/** Seconds of load before measuring (not recorded). */
	warmup: number;
	expectBody?: string;
	expectBodyFile?: string;
	/**
	 * A placeholder in `url` and the expected body: each request gets a value of its own there (eight digits, never
	 * the same twice in a run), and its answer is checked against the expected body with the same value.
	 */
	vary?: string;
}

export interface LoadResult {
	url: string;
	durationS: number;
	requests: number;
	rps: number;
	p50: number;
	p90: number;
	p99: number;
	mean: number;
	bytesPerSec: number;
	ok2xx: number;
	non2xx: number;
	errors: number;
	timeouts: number;
	mismatches: number;
	statusCodes: Record<string, number>;
	firstError?: string;
	firstMismatch?: string;
	/** Epoch ms of the start and end of the measured phase (after the warm-up). */
	measuredFrom: number;
	measuredTo: number;
}

/** Latencies in ms with sub-millisecond precision (autocannon's own histogram rounds to whole ms). */
class Samples {
	private buf = new Float64Array(1 << 16);
	private n = 0;
	add(v: number) {
		if (this.n === this.buf.length) {
			const next = new Float64Array(this.buf.length * 2);
			next.set(this.buf);
			this.buf = next;
		}
		this.buf[this.n++] = v;
	}
	summary() {
		const a = this.buf.subarray(0, this.n).sort();
		const at = (p: number) => (this.n ? a[Math.min(this.n - 1, Math.floor((p / 100) * this.n))] : NaN);
		let sum = 0;
		for (let i = 0; i < this.n; i++) sum += a[i];
		return { p50: at(50), p90: at(90), p99: at(99), mean: this.n ? sum / this.n : NaN };
	}
}

/** The next value of a `vary` placeholder: from a random start, so that no run repeats another's. */
let nextValue = Math.floor(Math.random() * 5e7);

/** Requests that each put a new value in the URL, and check each answer against the expected body with it. */
function varying(
	opts: LoadOptions,
	expectBody: string | undefined,
	mismatch: (body: string) => void,
): Array<Record<string, unknown>> {
	const placeholder = opts.vary as string;
	const url = new URL(opts.url);
	const pathParts = (url.pathname + url.search).split(placeholder);
	const bodyParts = expectBody?.split(placeholder);
	return [
		{
			method: "GET",
			setupRequest(req: Record<string, unknown>, context: { value?: string }) {
				const value = String(nextValue++).padStart(8, "0");
				context.value = value;
				return { ...req, path: pathParts.join(value) };
			},
			onResponse(status: number, body: string, context: { value?: string }) {
				if (status === 200 && bodyParts && body !== bodyParts.join(context.value)) mismatch(body);
			},
		},
	];
}

async function fire(opts: LoadOptions, duration: number, expectBody: string | undefined, samples?: Samples) {
	let firstError: string | undefined;
	let firstMismatch: string | undefined;
	let ownMismatches = 0;
	const instance = autocannon({
		url: opts.url,
		...(opts.vary
			? {
					requests: varying(opts, expectBody, body => {
						ownMismatches++;
						firstMismatch ??= body.slice(0, 300);
					}),
				}
			: {}),
		connections: opts.connections,
		duration,
		pipelining: 1,
		timeout: 10,
		expectBody: opts.vary ? undefined : expectBody,
		// Both servers get the API token (the bare one ignores it), so both read the same request bytes.
		headers: process.env.BENCH_TOKEN ? { authorization: `Bearer ${process.env.BENCH_TOKEN}` } : undefined,
	});
	instance.on("reqError", err => {
		firstError ??= String(err?.message ?? err);
	});
	instance.on("mismatch", body => {
		firstMismatch ??= String(body).slice(0, 300);
	});
	if (samples) instance.on("response", (_c, _s, _b, responseTime) => samples.add(responseTime));
	const result = await instance;
	result.mismatches += ownMismatches;
	return { result, firstError, firstMismatch };
}

async function main() {
	const opts = JSON.parse(process.argv[2]) as LoadOptions;
	const expectBody = opts.expectBodyFile ? fs.readFileSync(opts.expectBodyFile, "utf8") : opts.expectBody;
	if (opts.warmup > 0) {
		const warm = await fire(opts, opts.warmup, expectBody);
		const w = warm.result;
		if (w.errors || w.non2xx || w.mismatches) {
			process.stderr.write(
				`warm-up saw failures: errors=${w.errors} non2xx=${w.non2xx} mismatches=${w.mismatches} ${warm.firstError ?? ""} ${warm.firstMismatch ?? ""}\n`,
			);
		}
	}
	const samples = new Samples();
	// Wall-clock bounds of the measured phase, for matching CPU profiles of the server (bench/run.ts).
	// Markers on stdout let the parent sample the CPU time of the processes under load over exactly this phase.
	process.stdout.write("MEASURE_START\n");
	const measuredFrom = Date.now();
	const { result: r, firstError, firstMismatch } = await fire(opts, opts.duration, expectBody, samples);
	const measuredTo = Date.now();
	process.stdout.write("MEASURE_END\n");
	const lat = samples.summary();
	const statusCodes: Record<string, number> = {};
	for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = s.count;
	const out: LoadResult = {
		url: opts.url,
		durationS: r.duration,
		requests: r.requests.total,
		rps: r.requests.total / r.duration,
		p50: lat.p50,
		p90: lat.p90,
		p99: lat.p99,
		mean: lat.mean,
		bytesPerSec: r.throughput.average,
		ok2xx: r["2xx"],
		non2xx: r.non2xx,
		errors: r.errors,
		timeouts: r.timeouts,
		mismatches: r.mismatches,
		statusCodes,
		firstError,
		firstMismatch,
		measuredFrom,
		measuredTo,
	};
	process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch(err => {
	process.stderr.write(String(err?.stack ?? err) + "\n");
	process.exit(1);
});
