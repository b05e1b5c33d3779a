/**
 * The alerts page, in Preact (docs/dashboard.md, "Alerts"): alerts newest first, filtered by level and read state and
 * paged by the server, the filters and page kept in the URL (#/alerts?level=critical&page=2); those raised while the page is open arrive live (the shell's `fleet:alert` window event, from
 * GET /api/alerts/stream) at the top of the first page; Mark read one by one, or Mark all read. After a change it tells
 * the shell (`fleet:alerts-read`), which counts the unread alerts again for the menu's badge.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, q } from "./client";
import { Choice, Head, Pager, Pill, Problem, useGuard, useUrlView } from "./parts";

export interface Alert {
	_id: string;
	type: string;
	level: string;
	payload?: Record<string, unknown> | null;
	read?: boolean;
	_created?: string;
}

/** Alert levels, least to most severe (the alerts service's; webhooks listen to some of them). */
export const LEVELS = ["debug", "info", "warning", "error", "critical"];
const PAGE = 50;
const READ = ["unread", "read"];

/** Tells the shell that alerts were marked read (its unread badge is counted again). */
export const ALERTS_READ = "fleet:alerts-read";

/** What the server is asked for, as the filters say. */
type Filters = {
	level: string;
	read: string;
};

function whereOf(f: Filters): Record<string, unknown> | undefined {
	const where: Record<string, unknown> = {};
	if (f.level) where.level = f.level;
	if (f.read) where.read = f.read === "read";
	return Object.keys(where).length ? where : undefined;
}

/** Whether a new alert belongs to the list the filters select. */
const matches = (a: Alert, f: Filters) =>
	(!f.level || a.level === f.level) && (!f.read || (f.read === "read") === !!a.read);

/** An alert's payload in words: its host linked by name, then its other fields as `key: value`. */
function Details({ payload }: { payload?: Record<string, unknown> | null }) {
	const { hostname, ...rest } = payload ?? {};
	const others = Object.entries(rest).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`);
	return (
		<>
			{typeof hostname === "string" && (
				<a class="nowrap" href={`#/hosts/${encodeURIComponent(hostname)}`}>
					{hostname}
				</a>
			)}
			{others.length > 0 && <div class="mono pre">{others.join("\n")}</div>}
			{typeof hostname !== "string" && others.length === 0 && <span class="muted">–</span>}
		</>
	);
}

export function AlertsPage() {
	const { filters, page, setFilter, setPage } = useUrlView<Filters>(
		"alerts",
		{ level: "", read: "" },
		{ level: LEVELS, read: READ },
	);
	const [res, setRes] = useState<{ items: Alert[]; total: number; page: number } | null>(null);
	const [tick, setTick] = useState(0);
	const [error, guard] = useGuard();
	/**
	 * Alerts that came live, with the number of the list read that was last started when each came: a read that
	 * started before an alert was raised (slow, or answered from a cache) must not wipe its row when it lands after it.
	 */
	const live = useRef(new Map<string, { alert: Alert; seen: number }>());
	const reads = useRef(0);
	const [, setLiveCount] = useState(0);
	useEffect(() => {
		const n = ++reads.current;
		let current = true;
		void guard(async () => {
			const r = await api<{ _items: Alert[]; _meta: { total: number } }>(
				"GET",
				q("alerts", { where: whereOf(filters), sort: "-_created", page, max_results: PAGE }),
			);
			if (!current) return;
			// What came before this read started, it has: no longer kept aside.
			for (const [id, l] of live.current) if (l.seen < n) live.current.delete(id);
			setRes({ items: r._items, total: r._meta.total, page });
		});
		return () => {
			current = false;
		};
	}, [filters, page, tick]);
	useEffect(() => {
		const onAlert = (ev: Event) => {
			const alert = (ev as CustomEvent<Alert>).detail;
			live.current.set(alert._id, { alert, seen: reads.current });
			setLiveCount(c => c + 1);
		};
		window.addEventListener("fleet:alert", onAlert);
		return () => window.removeEventListener("fleet:alert", onAlert);
	}, []);
	const reread = () => {
		window.dispatchEvent(new CustomEvent(ALERTS_READ));
		setTick(t => t + 1);
	};
	const markRead = (a: Alert) =>
		guard(async () => {
			await api("GET", q(`alerts/${a._id}`, { mark_as_read: 1 }));
			const kept = live.current.get(a._id);
			if (kept) kept.alert = { ...kept.alert, read: true };
			reread();
		});
	const markAll = () =>
		guard(async () => {
			// Each read with mark_as_read marks the page it returns: unread pages are read until none is left.
			for (let i = 0; i < 100; i++)
				if (
					(
						await api<{ _items: Alert[] }>(
							"GET",
							q("alerts", { where: { read: false }, max_results: 50, mark_as_read: 1 }),
						)
					)._items.length === 0
				)
					break;
			for (const l of live.current.values()) l.alert = { ...l.alert, read: true };
			reread();
		});
	const listed = new Set(res?.items.map(a => a._id));
	const arrived =
		page === 1
			? [...live.current.values()]
					.map(l => l.alert)
					.filter(a => !listed.has(a._id) && matches(a, filters))
					.reverse()
			: [];
	const rows = [...arrived, ...(res?.items ?? [])].slice(0, PAGE);
	const set = (k: keyof Filters) => (e: Event) => setFilter(k, (e.target as HTMLSelectElement).value);
	const filtered = !!whereOf(filters);
	return (
		<section>
			<h1>Alerts</h1>
			<div class="bar" role="search">
				<Choice
					id="alerts-level"
					label="Level"
					any="any level"
					values={LEVELS}
					value={filters.level}
					onChange={set("level")}
				/>
				<Choice
					id="alerts-read"
					label="Read or not"
					any="read or not"
					values={READ}
					value={filters.read}
					onChange={set("read")}
				/>
				<button type="button" id="mark-all" onClick={() => void markAll()}>
					Mark all read
				</button>
				<span class="muted">New alerts appear here as they are raised.</span>
			</div>
			<Problem text={error} />
			<div id="alerts">
				{rows.length > 0 ? (
					<div class="table-scroll" tabIndex={0}>
						<table>
							<Head columns={["When", "Level", "Type", "Details", ""]} />
							<tbody id="alerts-body">
								{rows.map(a => (
									<tr key={a._id} class={a.read ? "" : "unread"} data-alert={a._id}>
										<td class="nowrap muted">{a._created ?? "–"}</td>
										<td>
											<Pill value={a.level} />
										</td>
										<td class="mono">{a.type}</td>
										<td>
											<Details payload={a.payload} />
										</td>
										<td>
											{a.read ? (
												<span class="muted">read</span>
											) : (
												<button type="button" class="secondary" onClick={() => void markRead(a)}>
													Mark read
												</button>
											)}
										</td>
									</tr>
								))}
							</tbody>
						</table>
					</div>
				) : res === null ? (
					<p class="muted">{error ? "" : "Loading…"}</p>
				) : (
					<p class="empty" id="alerts-empty">
						{filtered
							? "No alert matches these filters: choose another level, or read or not."
							: "No alert yet: hosts going down, keys waiting for acceptance, failed patches and drifted states raise alerts, and they appear here as they are raised."}
					</p>
				)}
			</div>
			{res && res.total > 0 && (
				<Pager id="alerts-page" page={res.page} size={PAGE} total={res.total} noun="alerts" onPage={setPage} />
			)}
		</section>
	);
}
