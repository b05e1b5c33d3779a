/**
 * The actions page, in Preact (docs/dashboard.md, "Actions"): one row per host of every job fleet-ctl started, newest
 * first, filtered by the server (host name and function as prefixes, state) and paged by it, the filters and page kept
 * in the URL (#/actions?host=web&state=finished&page=2); each host links to its page, each job id to the job's page
 * (#/history/<jid>), a long return folded.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q } from "./client";
import { Choice, Head, Pager, Pill, Problem, startsWith, useUrlView } from "./parts";

interface Action {
	_id: string;
	host: string;
	action: string;
	state?: string;
	jid: string;
	return?: string | null;
	_created?: string;
}

const PAGE = 25;
const STATES = ["running", "finished", "timeout"];
/** How long typing in a text filter pauses before the server is asked. */
const TYPING_MS = 250;
/** Returns longer than this are folded behind their first characters. */
const SHORT = 120;

function Return({ text }: { text?: string | null }) {
	if (!text) return <span class="muted">–</span>;
	if (text.length <= SHORT) return <span class="mono">{text}</span>;
	return (
		<details>
			<summary class="mono">{text.slice(0, SHORT)}…</summary>
			<pre class="mono pre">{text}</pre>
		</details>
	);
}

export function ActionsPage() {
	const { filters, page, setFilter, setPage } = useUrlView(
		"actions",
		{ host: "", fun: "", state: "" },
		{ state: STATES },
	);
	const [res, setRes] = useState<{ items: Action[]; total: number; page: number } | null>(null);
	const [error, setError] = useState("");
	useEffect(() => {
		const where: Record<string, unknown> = {};
		if (filters.host.trim()) where.host = startsWith(filters.host.trim());
		if (filters.fun.trim()) where.action = startsWith(filters.fun.trim());
		if (filters.state) where.state = filters.state;
		let current = true;
		const t = setTimeout(
			() =>
				api<{ _items: Action[]; _meta: { total: number } }>(
					"GET",
					q("actions", {
						where: Object.keys(where).length ? where : undefined,
						sort: "-_created",
						page,
						max_results: PAGE,
					}),
				)
					.then(r => current && (setRes({ items: r._items, total: r._meta.total, page }), setError("")))
					.catch(err => current && setError((err as Error).message)),
			filters.host || filters.fun ? TYPING_MS : 0,
		);
		return () => {
			current = false;
			clearTimeout(t);
		};
	}, [filters, page]);
	const set = (k: keyof typeof filters) => (e: Event) => setFilter(k, (e.target as HTMLInputElement).value);
	const filtered = !!(filters.host.trim() || filters.fun.trim() || filters.state);
	return (
		<section>
			<h1>Actions</h1>
			<p class="muted">Each host of each job fleet-ctl started: what it ran, how it went, what it returned.</p>
			<div class="bar" role="search">
				<input
					type="search"
					id="actions-host"
					placeholder="Host name starts with…"
					aria-label="Host name starts with"
					value={filters.host}
					onInput={set("host")}
				/>
				<input
					type="search"
					id="actions-fun"
					placeholder="Function starts with…"
					aria-label="Function starts with"
					value={filters.fun}
					onInput={set("fun")}
				/>
				<Choice
					id="actions-state"
					label="State"
					any="any state"
					values={STATES}
					value={filters.state}
					onChange={set("state")}
				/>
			</div>
			<Problem text={error} />
			{res === null ? (
				<p class="muted">{error ? "" : "Loading…"}</p>
			) : res.items.length === 0 ? (
				<p class="empty" id="actions-empty">
					{filtered
						? "No action matches these filters: a host or function prefix matches from the start of the name."
						: "No action yet: run a function from a host's or a group's page (operators), or let a task or a rollout run; each host's part is listed here."}
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="actions">
						<Head columns={["When", "Host", "Function", "State", "Job", "Return"]} />
						<tbody>
							{res.items.map(a => (
								<tr key={a._id} data-id={a._id}>
									<td class="nowrap">{a._created ?? "–"}</td>
									<td class="host-name">
										<a href={`#/hosts/${encodeURIComponent(a.host)}`}>{a.host}</a>
									</td>
									<td class="mono">{a.action}</td>
									<td>
										<Pill value={a.state} />
									</td>
									<td class="nowrap">
										<a class="mono nowrap" href={`#/history/${encodeURIComponent(a.jid)}`}>
											{a.jid}
										</a>
									</td>
									<td>
										<Return text={a.return} />
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
			{res && res.total > 0 && (
				<Pager id="actions-page" page={res.page} size={PAGE} total={res.total} noun="actions" onPage={setPage} />
			)}
		</section>
	);
}
