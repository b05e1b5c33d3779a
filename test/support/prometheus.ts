/** Prometheus' text format, as a scraper reads it: samples with their labels. */
export interface Sample {
	name: string;
	labels: Record<string, string>;
	value: number;
}

export function parsePrometheus(text: string): Sample[] {
	const samples: Sample[] = [];
	for (const line of text.split("\n")) {
		if (!line || line.startsWith("#")) continue;
		const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
		if (!m) throw new Error(`not Prometheus text: ${line}`);
		const labels: Record<string, string> = {};
		for (const [, k, v] of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
		samples.push({ name: m[1], labels, value: Number(m[3]) });
	}
	return samples;
}

/** The sum of a metric's samples whose labels include `labels`. */
export function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
	return samples
		.filter(s => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
		.reduce((n, s) => n + s.value, 0);
}
