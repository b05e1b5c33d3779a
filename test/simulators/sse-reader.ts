/**
 * A raw reader of salt-api's `GET /events` for the simulator's own specs (salt-api.spec.ts, fidelity.spec.ts):
 * keeps the exact bytes and the parsed {tag, data} records, and waits for the one a predicate picks.
 */
import http from "node:http";

export interface SseEvent {
	tag: string;
	// The record's data as salt-api sent it: any JSON.
	data: any;
}

/** Resolves the first truthy value `fn` gives, polling; rejects after `ms`. */
export async function until<T>(
	fn: () => Promise<T | undefined | false> | T | undefined | false,
	ms = 5000,
	what = "condition",
): Promise<T> {
	const end = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v !== undefined && v !== false) return v as T;
		if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
		await new Promise(r => setTimeout(r, 10));
	}
}

export class EventStream {
	raw = "";
	events: SseEvent[] = [];
	status = 0;
	closed = false;
	private req!: http.ClientRequest;

	/** `unwrap`: each record's `data` is the event's own data (the JSON's `data`), not the whole `{tag, data}`. */
	private constructor(private readonly unwrap: boolean) {}

	static open(url: string, opts: { unwrap?: boolean } = {}): Promise<EventStream> {
		const s = new EventStream(opts.unwrap === true);
		return new Promise((resolve, reject) => {
			s.req = http.get(url, res => {
				s.status = res.statusCode ?? 0;
				res.setEncoding("utf8");
				res.on("data", (chunk: string) => {
					s.raw += chunk;
					s.parse();
				});
				res.on("close", () => (s.closed = true));
				resolve(s);
			});
			s.req.on("error", reject);
		});
	}

	/** Records are "tag: ...\ndata: ...\n\n" (data: {"tag", "data"}); the stream starts with "retry: 400\n". */
	private parse(): void {
		this.events = [];
		for (const m of this.raw.matchAll(/tag: (.*)\ndata: (.*)\n\n/g)) {
			const rec = JSON.parse(m[2]);
			this.events.push({ tag: m[1], data: this.unwrap ? rec.data : rec });
		}
	}

	find(pred: (e: SseEvent) => boolean): SseEvent | undefined {
		return this.events.find(pred);
	}

	count(pred: (e: SseEvent) => boolean): number {
		return this.events.filter(pred).length;
	}

	wait(pred: (e: SseEvent) => boolean, what = "event", ms = 10_000): Promise<SseEvent> {
		return until(() => this.find(pred), ms, what);
	}

	close(): void {
		this.req.destroy();
	}
}
