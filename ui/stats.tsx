/**
 * Hosts online over time, in Preact (docs/statistics.md): for the range picked, the stats service's points
 * (GET /api/hosts/statistics/online, one per bucket holding a snapshot: the last snapshot's counts) drawn by ECharts
 * on a time axis that is exactly the range. Each point is drawn at its bucket's end (capped at now): it is the state
 * at the end of the bucket. The service counts `up` and the rest; the page asks once more with
 * `where={"status":"down"}` so that hosts down and hosts never seen up (`unknown`: a key not accepted yet, a minion
 * never answering) are told apart.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, q, type ApiError } from "./client";

declare const echarts: {
	init(el: HTMLElement): { setOption(o: unknown): void; dispose(): void; on(e: string, f: () => void): void };
};

interface Point {
	timestamp: string;
	hostnames: { up: number; down: number };
}

export const RANGES: Array<[string, number]> = [
	["last hour", 3600],
	["last 24 hours", 86400],
	["last 7 days", 7 * 86400],
	["last 30 days", 30 * 86400],
];

/**
 * `interval` (seconds, required by the stats service, at most 100,000 points a range): the smallest of
 * these steps giving at most 200 points, so that a chart stays readable (a minute over an hour, a
 * quarter of an hour over a day, an hour over a week, four hours over a month).
 */
const STEPS = [60, 300, 900, 3600, 4 * 3600, 86400];
export function pointInterval(seconds: number): number {
	return STEPS.find(s => seconds / s <= 200) ?? Math.ceil(seconds / 200);
}

interface Drawn {
	label: string;
	interval: number;
	begin: number;
	end: number;
	/** Per point: the bucket's start, where it is drawn (its end, at most now), and the three counts. */
	points: Array<{ from: string; at: number; up: number; down: number; unknown: number }>;
}

const when = (ms: number) => new Date(ms).toUTCString();

function Chart({ drawn }: { drawn: Drawn }) {
	const box = useRef<HTMLDivElement>(null);
	useEffect(() => {
		const el = box.current as HTMLDivElement;
		el.removeAttribute("data-drawn");
		const chart = echarts.init(el);
		const series = (name: "up" | "down" | "unknown", color: string) => ({
			name,
			type: "line",
			color,
			showSymbol: drawn.points.length < 3,
			...(name === "up" ? { areaStyle: { opacity: 0.15 } } : {}),
			data: drawn.points.map(p => [p.at, p[name]]),
		});
		chart.setOption({
			tooltip: { trigger: "axis" },
			legend: { data: ["up", "down", "unknown"] },
			xAxis: { type: "time", min: drawn.begin, max: drawn.end },
			yAxis: { type: "value", minInterval: 1 },
			series: [series("up", "#2e7d32"), series("down", "#c62828"), series("unknown", "#7c4a03")],
		});
		chart.on("finished", () => el.setAttribute("data-drawn", "1"));
		return () => chart.dispose();
	}, [drawn]);
	return (
		<div
			class="chart"
			id="online-chart"
			ref={box}
			data-points={String(drawn.points.length)}
			data-interval={String(drawn.interval)}
			role="img"
			aria-label={`Hosts up, down and unknown, ${drawn.label}`}
		/>
	);
}

export function StatsPage() {
	const [range, setRange] = useState(1);
	const [drawn, setDrawn] = useState<Drawn | null>(null);
	const [error, setError] = useState<{ text: string; unavailable: boolean } | null>(null);
	useEffect(() => {
		let current = true;
		const [label, seconds] = RANGES[range];
		// HTTP-dates have whole seconds: the end is rounded up so that a snapshot taken this second is in.
		const end = Math.ceil(Date.now() / 1000) * 1000;
		const begin = end - seconds * 1000;
		const interval = pointInterval(seconds);
		const ask = (where?: Record<string, unknown>) =>
			api<Point[]>(
				"GET",
				q("hosts/statistics/online", { "range[]": [when(begin), when(end)], interval, ...(where ? { where } : {}) }),
			);
		Promise.all([ask(), ask({ status: "down" })])
			.then(([all, down]) => {
				if (!current) return;
				const downAt = new Map(down.map(p => [p.timestamp, p.hostnames.down]));
				const points = all.map(p => {
					const d = downAt.get(p.timestamp) ?? 0;
					return {
						from: p.timestamp,
						at: Math.min(Date.parse(p.timestamp) + interval * 1000, end),
						up: p.hostnames.up,
						down: d,
						unknown: p.hostnames.down - d,
					};
				});
				setDrawn({ label, interval, begin, end, points });
				setError(null);
			})
			.catch(
				err => current && setError({ text: (err as Error).message, unavailable: (err as ApiError).status === 503 }),
			);
		return () => {
			current = false;
		};
	}, [range]);
	const step = drawn ? (drawn.interval >= 3600 ? `${drawn.interval / 3600} h` : `${drawn.interval / 60} min`) : "";
	const last = drawn?.points[drawn.points.length - 1];
	return (
		<section>
			<h1>Hosts online</h1>
			<div class="bar">
				<label>
					Range{" "}
					<select
						id="range"
						value={String(range)}
						onChange={e => setRange(Number((e.target as HTMLSelectElement).value))}
					>
						{RANGES.map(([label], i) => (
							<option key={label} value={String(i)}>
								{label}
							</option>
						))}
					</select>
				</label>
			</div>
			{error ? (
				<div class="unavailable" id="online-unavailable" role="alert">
					{error.unavailable
						? `Statistics are not available: ${error.text}`
						: `Could not load the statistics: ${error.text}`}
				</div>
			) : drawn === null ? (
				<p class="muted">Loading…</p>
			) : (
				<>
					<p id="online-summary">
						{last
							? `${drawn.label}: ${drawn.points.length} point(s), one per ${step} (the last snapshot in each). Latest, as of ${when(last.at)}: ${last.up} up, ${last.down} down, ${last.unknown} unknown (never seen up: a key not accepted yet, or a minion that never answered).`
							: `${drawn.label}: no snapshots in this range.`}
					</p>
					{/* A new element per drawing: the one it replaces may already say data-drawn. */}
					<Chart key={`${drawn.interval}:${drawn.end}`} drawn={drawn} />
					<details>
						<summary>The points</summary>
						<div class="table-scroll" tabIndex={0}>
							<table id="online-points">
								<thead>
									<tr>
										<th>From</th>
										<th>As of</th>
										<th>Up</th>
										<th>Down</th>
										<th>Unknown</th>
									</tr>
								</thead>
								<tbody>
									{drawn.points.map(p => (
										<tr key={p.from}>
											<td class="nowrap">{p.from}</td>
											<td class="nowrap">{when(p.at)}</td>
											<td>{p.up}</td>
											<td>{p.down}</td>
											<td>{p.unknown}</td>
										</tr>
									))}
								</tbody>
							</table>
						</div>
					</details>
				</>
			)}
		</section>
	);
}
