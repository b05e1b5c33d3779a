/**
 * The audit log page, in Preact (admins; docs/security.md, "Audit log"): every mutating request and every run,
 * newest first, filtered on the server by outcome, method, who and path, a page at a time; a record's call and
 * arguments (secrets masked by the API) shown when opened.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q } from "./client";
import { Head, Problem, Scroll } from "./parts";

interface Record {
	_id: string;
	_created: string;
	name: string | null;
	role: string | null;
	method: string;
	path: string;
	status: number;
	outcome: string;
	fun?: string | null;
	targets?: string[];
	args?: unknown;
	message?: string;
	jid?: string | null;
	break_glass?: string;
	approval?: string;
	agent?: string;
	source?: string;
}

const PAGE = 25;
const OUTCOMES = ["", "ok", "started", "held", "denied", "failed"];

export function AuditPage() {
	const [filter, setFilter] = useState({ outcome: "", method: "", name: "", path: "" });
	const [page, setPage] = useState(1);
	const [data, setData] = useState<{ items: Record[]; total: number } | null>(null);
	const [open, setOpen] = useState<string | null>(null);
	const [error, setError] = useState("");
	useEffect(() => {
		const where: { [k: string]: unknown } = {};
		if (filter.outcome) where.outcome = filter.outcome;
		if (filter.method) where.method = filter.method.toUpperCase();
		if (filter.name) where.name = filter.name;
		// A path prefix, as a range (the API takes no regular expression in `where`).
		if (filter.path) where.path = { $gte: filter.path, $lt: `${filter.path}\uffff` };
		api<{ _items: Record[]; _meta: { total: number } }>("GET", q("audit", { where, sort: "-_id", max_results: PAGE, page }))
			.then(res => {
				setData({ items: res._items, total: res._meta.total });
				setError("");
			})
			.catch(err => setError((err as Error).message));
	}, [filter, page]);
	const set = (k: keyof typeof filter) => (e: Event) => {
		setPage(1);
		setFilter({ ...filter, [k]: (e.target as HTMLInputElement).value });
	};
	const pages = data ? Math.max(1, Math.ceil(data.total / PAGE)) : 1;
	return (
		<section>
			<h1>Audit log</h1>
			<form class="filters" id="audit-filters" onSubmit={e => e.preventDefault()}>
				<label>
					Outcome{" "}
					<select id="audit-outcome" value={filter.outcome} onChange={set("outcome")}>
						{OUTCOMES.map(o => (
							<option key={o} value={o}>
								{o || "any"}
							</option>
						))}
					</select>
				</label>
				<label>
					Method <input id="audit-method" size={8} value={filter.method} placeholder="POST, TASK…" onChange={set("method")} />
				</label>
				<label>
					Who <input id="audit-name" value={filter.name} placeholder="token name" onChange={set("name")} />
				</label>
				<label>
					Path <input id="audit-path" value={filter.path} placeholder="/api/hosts" onChange={set("path")} />
				</label>
			</form>
			<Problem text={error} />
			{data === null ? (
				<p class="muted">Loading…</p>
			) : data.items.length === 0 ? (
				<p class="empty">No record matches these filters.</p>
			) : (
				<Scroll>
					<table id="audit">
						<Head columns={["When", "Who", "Request", "Run", "Status"]} />
						<tbody>
							{data.items.map(r => (
								<tr key={r._id} data-id={r._id} onClick={() => setOpen(open === r._id ? null : r._id)} class="clickable">
									<td>{r._created}</td>
									<td>
										{r.name ?? "–"} <span class="muted">{r.role ?? ""}</span>
									</td>
									<td class="mono">
										{r.method} {r.path}
									</td>
									<td>
										{r.fun ? `${r.fun} on ${r.targets?.length ?? 0} host(s)` : "–"}
										{r.break_glass ? <span class="pill warning"> break-glass</span> : null}
										{open === r._id && (
											<pre class="mono">{JSON.stringify({ args: r.args, targets: r.targets, jid: r.jid, message: r.message, break_glass: r.break_glass, approval: r.approval, agent: r.agent, source: r.source }, null, 2)}</pre>
										)}
									</td>
									<td>
										<span class={`pill ${r.outcome}`}>{r.outcome}</span> {r.status}
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			<p class="pager">
				<button type="button" class="secondary" disabled={page <= 1} onClick={() => setPage(page - 1)}>
					Newer
				</button>{" "}
				page {page} of {pages}{" "}
				<button type="button" class="secondary" disabled={page >= pages} onClick={() => setPage(page + 1)}>
					Older
				</button>
			</p>
		</section>
	);
}
