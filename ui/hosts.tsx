/**
 * The hosts page, in Preact: the fleet filtered, sorted and paged by the server (GET /api/hosts with `where`,
 * `sort`, `page`, `max_results` and a projection of the columns shown), so a page costs the same at 50,000 hosts
 * as at 50. Filters: name prefix, presence, key state, group (by name); columns chosen by the operator and kept
 * in this browser. The filter, sort and page live in the URL (#/hosts?status=down&page=2): back and forward
 * work, and a view can be shared.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api, q } from "./client";
import { hashQuery, Pill, Problem, writeHashQuery } from "./parts";

interface Host {
	_id: string;
	status?: string;
	ip?: string;
	version?: string;
	os?: string;
	key?: string;
	groups?: string[];
	vpn_organization?: string;
	_updated?: string;
}

type Column = { field: keyof Host; label: string; mono?: boolean };

/** Every column the page can show; `_id` (the host) always. */
export const HOST_COLUMNS: Column[] = [
	{ field: "_id", label: "Host" },
	{ field: "status", label: "Status" },
	{ field: "ip", label: "IP", mono: true },
	{ field: "version", label: "Salt" },
	{ field: "os", label: "OS" },
	{ field: "key", label: "Key" },
	{ field: "groups", label: "Groups" },
	{ field: "vpn_organization", label: "VPN organization" },
	{ field: "_updated", label: "Updated" },
];
const DEFAULT_SHOWN = ["status", "ip", "version", "key", "_updated"];
const COLUMNS_KEY = "fleet-ctl.hosts.columns";
const PAGE_SIZES = [25, 50, 100];
/** How long typing in the name filter pauses before the server is asked. */
const TYPING_MS = 250;

/** The view's state, as the URL's hash query holds it. */
interface View {
	prefix: string;
	status: string;
	key: string;
	group: string;
	sort: string;
	page: number;
	size: number;
}

function readView(): View {
	const query = hashQuery();
	const size = Number(query.get("size"));
	return {
		prefix: query.get("name") ?? "",
		status: query.get("status") ?? "",
		key: query.get("key") ?? "",
		group: query.get("group") ?? "",
		sort: query.get("sort") ?? "_id",
		page: Math.max(1, Number(query.get("page")) || 1),
		size: PAGE_SIZES.includes(size) ? size : PAGE_SIZES[0],
	};
}

function writeView(v: View): void {
	const query = new URLSearchParams();
	if (v.prefix) query.set("name", v.prefix);
	if (v.status) query.set("status", v.status);
	if (v.key) query.set("key", v.key);
	if (v.group) query.set("group", v.group);
	if (v.sort !== "_id") query.set("sort", v.sort);
	if (v.page > 1) query.set("page", String(v.page));
	if (v.size !== PAGE_SIZES[0]) query.set("size", String(v.size));
	writeHashQuery("hosts", query);
}

function shownColumns(): string[] {
	try {
		const kept = JSON.parse(localStorage.getItem(COLUMNS_KEY) ?? "null");
		if (Array.isArray(kept) && kept.every(c => typeof c === "string"))
			return kept.filter(c => HOST_COLUMNS.some(col => col.field === c));
	} catch {
		// a broken value: the default
	}
	return DEFAULT_SHOWN;
}

/** The server's filter for the view. */
function whereOf(v: View): Record<string, unknown> | undefined {
	const where: Record<string, unknown> = {};
	if (v.prefix) where._id = { $gte: v.prefix, $lt: `${v.prefix}\uffff` };
	if (v.status) where.status = v.status;
	if (v.key) where.key = v.key;
	if (v.group) where.groups = v.group;
	return Object.keys(where).length ? where : undefined;
}

function Cell({ host, column, groupNames }: { host: Host; column: Column; groupNames: Record<string, string> }) {
	const value = host[column.field];
	if (column.field === "_id")
		return (
			<td class="host-name">
				<a href={`#/hosts/${encodeURIComponent(host._id)}`}>{host._id}</a>
			</td>
		);
	if (column.field === "status" || column.field === "key")
		return (
			<td>
				<Pill value={value as string | undefined} />
			</td>
		);
	if (column.field === "groups") {
		const groups = (value as string[] | undefined) ?? [];
		return (
			<td>
				{groups.length
					? groups.map((g, i) => (
							<span key={g}>
								{i ? ", " : ""}
								<a href={`#/groups/${g}`}>{groupNames[g] ?? "(a group you cannot see)"}</a>
							</span>
						))
					: "–"}
			</td>
		);
	}
	return (
		<td class={column.mono ? "mono" : column.field === "_updated" ? "muted" : ""}>
			{value == null || value === "" ? "–" : String(value)}
		</td>
	);
}

export function HostsPage() {
	const [view, setView] = useState<View>(readView);
	const [prefix, setPrefix] = useState(view.prefix);
	const [shown, setShown] = useState<string[]>(shownColumns);
	// The page shown, with the view it answers (the headings' arrows say how the rows on screen are sorted).
	const [res, setRes] = useState<{
		_items: Host[];
		_meta: { total: number; page: number; max_results: number };
		view: View;
	} | null>(null);
	const [groups, setGroups] = useState<Array<{ _id: string; name: string }>>([]);
	const [error, setError] = useState("");
	const [loading, setLoading] = useState(false);
	const columns = useMemo(() => HOST_COLUMNS.filter(c => c.field === "_id" || shown.includes(c.field)), [shown]);
	const change = (patch: Partial<View>) => setView(v => ({ ...v, page: 1, ...patch }));

	// The groups, for the filter and to name each host's groups.
	useEffect(() => {
		api<{ _items: Array<{ _id: string; name: string }> }>(
			"GET",
			q("groups", { sort: "name", max_results: 200, projection: { name: 1 } }),
		)
			.then(r => setGroups(r._items))
			.catch(() => setGroups([]));
	}, []);
	// Typing pauses before the server is asked.
	useEffect(() => {
		if (prefix.trim() === view.prefix) return;
		const t = setTimeout(() => change({ prefix: prefix.trim() }), TYPING_MS);
		return () => clearTimeout(t);
	}, [prefix]);
	// The page: only the columns shown are asked for (a host's grains are never sent to a list).
	useEffect(() => {
		writeView(view);
		let current = true;
		setLoading(true);
		const projection = Object.fromEntries(columns.filter(c => c.field !== "_id").map(c => [c.field, 1]));
		api(
			"GET",
			q("hosts", {
				where: whereOf(view),
				sort: view.sort,
				page: view.page,
				max_results: view.size,
				projection: Object.keys(projection).length ? projection : { status: 1 },
			}),
		)
			.then(r => {
				if (!current) return;
				setRes({ ...r, view });
				setError("");
			})
			.catch(err => current && setError((err as Error).message))
			.finally(() => current && setLoading(false));
		return () => {
			current = false;
		};
	}, [view, columns]);

	const groupNames = useMemo(() => Object.fromEntries(groups.map(g => [g._id, g.name])), [groups]);
	const pages = res ? Math.max(1, Math.ceil(res._meta.total / res._meta.max_results)) : 1;
	const toggleColumn = (field: string) => {
		const next = shown.includes(field) ? shown.filter(f => f !== field) : [...shown, field];
		localStorage.setItem(COLUMNS_KEY, JSON.stringify(next));
		setShown(next);
	};
	const sortBy = (field: string) => change({ sort: view.sort === field ? `-${field}` : field, page: view.page });
	const filtered = !!whereOf(view);

	return (
		<section>
			<h1>Hosts</h1>
			<div class="bar" role="search">
				<input
					type="search"
					id="host-filter"
					placeholder="Host name starts with…"
					aria-label="Filter hosts by name"
					value={prefix}
					onInput={e => setPrefix((e.target as HTMLInputElement).value)}
				/>
				<select
					id="host-status"
					aria-label="Status"
					value={view.status}
					onChange={e => change({ status: (e.target as HTMLSelectElement).value })}
				>
					<option value="">any status</option>
					<option value="up">up</option>
					<option value="down">down</option>
				</select>
				<select
					id="host-key"
					aria-label="Key state"
					value={view.key}
					onChange={e => change({ key: (e.target as HTMLSelectElement).value })}
				>
					<option value="">any key state</option>
					{["accepted", "pending", "rejected", "denied"].map(k => (
						<option key={k} value={k}>
							key {k}
						</option>
					))}
				</select>
				<select
					id="host-group"
					aria-label="Group"
					value={view.group}
					onChange={e => change({ group: (e.target as HTMLSelectElement).value })}
				>
					<option value="">any group</option>
					{groups.map(g => (
						<option key={g._id} value={g._id}>
							{g.name}
						</option>
					))}
				</select>
				<details class="columns">
					<summary>Columns</summary>
					<fieldset id="host-columns">
						<legend class="sr-only">Columns shown</legend>
						{HOST_COLUMNS.filter(c => c.field !== "_id").map(c => (
							<label key={c.field}>
								<input type="checkbox" checked={shown.includes(c.field)} onChange={() => toggleColumn(c.field)} />{" "}
								{c.label}
							</label>
						))}
					</fieldset>
				</details>
			</div>
			<Problem text={error} />
			{res === null ? (
				<p class="muted">Loading…</p>
			) : res._items.length === 0 ? (
				<p class="empty" id="hosts-empty">
					{filtered
						? "No host matches these filters: clear one to see more."
						: "No host yet: hosts appear here once the Salt master knows their minions (the inventory syncs every few minutes)."}
				</p>
			) : (
				<div class="table-scroll" tabIndex={0} aria-busy={loading}>
					<table id="hosts">
						<thead>
							<tr>
								{columns.map(c => {
									const dir =
										res.view.sort === c.field
											? "ascending"
											: res.view.sort === `-${c.field}`
												? "descending"
												: undefined;
									return (
										// The whole heading sorts; its button is how a keyboard reaches it (its click comes up to the heading).
										<th
											key={c.field}
											class="sortable"
											data-field={c.field}
											aria-sort={dir ?? "none"}
											onClick={() => sortBy(c.field)}
										>
											<button type="button" class="link" title={`Sort by ${c.label.toLowerCase()}`}>
												{c.label}
												{dir === "ascending" ? " ▲" : dir === "descending" ? " ▼" : ""}
											</button>
										</th>
									);
								})}
							</tr>
						</thead>
						<tbody>
							{res._items.map(host => (
								<tr key={host._id} data-host={host._id}>
									{columns.map(c => (
										<Cell key={c.field} host={host} column={c} groupNames={groupNames} />
									))}
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
			{res !== null && (
				<div class="bar pager">
					<button
						type="button"
						class="secondary"
						disabled={view.page <= 1}
						onClick={() => setView(v => ({ ...v, page: v.page - 1 }))}
					>
						‹ Previous
					</button>
					<span id="host-page" aria-live="polite">
						page {res._meta.page} of {pages} · {res._meta.total} hosts
					</span>
					<button
						type="button"
						class="secondary"
						disabled={view.page >= pages}
						onClick={() => setView(v => ({ ...v, page: v.page + 1 }))}
					>
						Next ›
					</button>
					<select
						id="host-size"
						aria-label="Hosts per page"
						value={String(view.size)}
						onChange={e => change({ size: Number((e.target as HTMLSelectElement).value) })}
					>
						{PAGE_SIZES.map(s => (
							<option key={s} value={String(s)}>
								{s} per page
							</option>
						))}
					</select>
				</div>
			)}
		</section>
	);
}
