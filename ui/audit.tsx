/**
 * The audit log page, in Preact (admins; docs/security.md, "Audit log"): every mutating request and every run,
 * newest first, filtered on the server by outcome, method, who and path, a page at a time; a record's call and
 * arguments (secrets masked by the API) shown when opened. A path naming a record by its id (/api/tasks/<id>/paused)
 * says what it names too (the task's, group's, webhook's… name, read from its collection), the exact path kept.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q } from "./client";
import { Head, OBJECT_ID, Problem, Scroll, useNames } from "./parts";

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
/** What a record of each collection is called in words (only these collections are asked for names). */
const NOUNS: { [collection: string]: string } = {
	tasks: "task",
	groups: "group",
	webhooks: "webhook",
	rollouts: "rollout",
	tokens: "token",
	vpn_managers: "VPN manager",
	vpn_organizations: "VPN organization",
	maintenance_windows: "maintenance window",
	approval_policies: "approval policy",
	conformity_rules: "conformity rule",
};

/** The record a path names by its id (/api/<collection>/<id>…), if it does. */
function named(path: string): { collection: string; id: string } | null {
	const [, api, collection, id] = path.split("?")[0].split("/");
	return api === "api" && collection && id && OBJECT_ID.test(id) ? { collection, id } : null;
}

/** Where the dashboard shows a record of each collection: its own page, else the page that lists it. */
const PAGES: { [collection: string]: (id: string) => string } = {
	groups: id => `#/groups/${id}`,
	rollouts: id => `#/rollouts/${id}`,
	webhooks: id => `#/webhooks/${id}`,
	tasks: () => "#/tasks",
	tokens: () => "#/tokens",
	vpn_managers: () => "#/vpn",
	vpn_organizations: () => "#/vpn",
	maintenance_windows: () => "#/windows",
	approval_policies: () => "#/approvals",
};

/**
 * The name of the record a path names, in words ("task “nightly ping”"), linked to where the dashboard shows it;
 * nothing when unknown.
 */
function PathName({ path, names }: { path: string; names: { [key: string]: string | null } }) {
	const ref = named(path);
	if (!ref || !NOUNS[ref.collection]) return null;
	const name = names[`${ref.collection}/${ref.id}`];
	if (name === undefined) return null;
	const noun = NOUNS[ref.collection];
	if (name === null) return <div class="path-name">{`a ${noun} no longer there`}</div>;
	const page = PAGES[ref.collection];
	return (
		<div class="path-name">
			{noun} {page ? <a href={page(ref.id)} onClick={e => e.stopPropagation()}>{`“${name}”`}</a> : `“${name}”`}
		</div>
	);
}
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
		// Only the answer to the filters now shown: a slower answer to earlier ones must not replace it.
		let current = true;
		api<{ _items: Record[]; _meta: { total: number } }>(
			"GET",
			q("audit", { where, sort: "-_id", max_results: PAGE, page }),
		)
			.then(res => {
				if (!current) return;
				setData({ items: res._items, total: res._meta.total });
				setError("");
			})
			.catch(err => current && setError((err as Error).message));
		return () => {
			current = false;
		};
	}, [filter, page]);
	// What is typed is kept apart from the filters applied (on Enter or on leaving the field): an answer arriving
	// while one types re-renders the page, and must not put the applied value back into the field.
	const [draft, setDraft] = useState({ method: "", name: "", path: "" });
	const set = (k: keyof typeof filter) => (e: Event) => {
		const value = (e.target as HTMLInputElement).value;
		setPage(1);
		setFilter(f => (f[k] === value ? f : { ...f, [k]: value }));
	};
	const type = (k: keyof typeof draft) => (e: Event) => {
		const value = (e.target as HTMLInputElement).value;
		setDraft(d => ({ ...d, [k]: value }));
	};
	const wanted: { [collection: string]: string[] } = {};
	for (const r of data?.items ?? []) {
		const ref = named(r.path);
		if (ref && NOUNS[ref.collection]) (wanted[ref.collection] ??= []).push(ref.id);
	}
	const names = useNames(wanted);
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
					Method{" "}
					<input
						id="audit-method"
						size={8}
						value={draft.method}
						placeholder="POST, TASK…"
						onInput={type("method")}
						onChange={set("method")}
					/>
				</label>
				<label>
					Who{" "}
					<input
						id="audit-name"
						value={draft.name}
						placeholder="token name"
						onInput={type("name")}
						onChange={set("name")}
					/>
				</label>
				<label>
					Path{" "}
					<input
						id="audit-path"
						value={draft.path}
						placeholder="/api/hosts"
						onInput={type("path")}
						onChange={set("path")}
					/>
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
								<tr
									key={r._id}
									data-id={r._id}
									onClick={() => setOpen(open === r._id ? null : r._id)}
									class="clickable"
								>
									<td>{r._created}</td>
									<td>
										{r.name ?? "–"} <span class="muted">{r.role ?? ""}</span>
									</td>
									<td>
										<PathName path={r.path} names={names} />
										<span class="mono">
											{r.method} {r.path}
										</span>
									</td>
									<td>
										{r.fun ? `${r.fun} on ${r.targets?.length ?? 0} host(s)` : "–"}
										{r.break_glass ? <span class="pill warning"> break-glass</span> : null}
										{open === r._id && (
											<pre class="mono">
												{JSON.stringify(
													{
														args: r.args,
														targets: r.targets,
														jid: r.jid,
														message: r.message,
														break_glass: r.break_glass,
														approval: r.approval,
														agent: r.agent,
														source: r.source,
													},
													null,
													2,
												)}
											</pre>
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
