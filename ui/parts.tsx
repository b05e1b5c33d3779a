/**
 * Small Preact pieces the pages share: the props every page gets, errors, table heads, pagers, form fields, pills,
 * target previews, records' names read by their ids (useNames), and a page's view kept in the URL (#/<page>?<view>:
 * filters and page, written only while the page is the one shown).
 */
import { useEffect, useState } from "preact/hooks";
import { api, type ApiError, q, type Me } from "./client";

/** An error said in words, announced to screen readers; nothing when there is none. */
export function Problem({ text }: { text: string }) {
	return text ? (
		<p class="error" role="alert">
			{text}
		</p>
	) : null;
}

/**
 * A table in a box that scrolls sideways when the table is wider than the screen (a phone's 390 px), instead of the
 * page; focusable, so that a keyboard can scroll it too.
 */
export function Scroll({ children }: { children: preact.ComponentChildren }) {
	return (
		<div class="table-scroll" tabIndex={0}>
			{children}
		</div>
	);
}

/** A table's head: one column heading per name ("" for a column without one). */
export function Head({ columns }: { columns: string[] }) {
	return (
		<thead>
			<tr>
				{columns.map((c, i) => (
					<th key={i}>{c}</th>
				))}
			</tr>
		</thead>
	);
}

/**
 * An error state and `guard`, which runs an action and keeps its failure's message (clearing it on success): what
 * every page does around its requests.
 */
export function useGuard(): [string, (action: () => Promise<unknown>) => Promise<void>] {
	const [error, setError] = useState("");
	const guard = async (action: () => Promise<unknown>) => {
		try {
			await action();
			setError("");
		} catch (err) {
			setError((err as Error).message);
		}
	};
	return [error, guard];
}

/** The admin's buttons of a rule that can be set aside: Enable or Disable, and Delete. */
export function RuleActions({
	enabled,
	onToggle,
	onDelete,
}: {
	enabled: boolean;
	onToggle: () => void;
	onDelete: () => void;
}) {
	return (
		<td>
			<button type="button" class="secondary" onClick={onToggle}>
				{enabled ? "Disable" : "Enable"}
			</button>{" "}
			<button type="button" class="secondary" onClick={onDelete}>
				Delete
			</button>
		</td>
	);
}

/** A secondary action's button (Delete, Sync, Revoke…). */
export function Button({ label, onClick }: { label: string; onClick: () => unknown }) {
	return (
		<button type="button" class="secondary" onClick={() => void onClick()}>
			{label}
		</button>
	);
}

/** A labelled form field: the label, then the control (and what is wrong with it) given as children. */
export function Field({ label, children }: { label: string; children: preact.ComponentChildren }) {
	return (
		<label class="field">
			<span>{label}</span>
			{children}
		</label>
	);
}

/** A list of groups to pick several of, by name (their ids are what `onChange` gets). */
export function GroupPicker({
	id,
	groups,
	chosen,
	onChange,
	rows = 6,
}: {
	id: string;
	groups: Array<{ _id: string; name: string }>;
	chosen: string[];
	onChange: (ids: string[]) => void;
	rows?: number;
}) {
	return (
		<select
			id={id}
			multiple
			size={Math.min(rows, Math.max(2, groups.length))}
			onChange={e => onChange([...(e.target as HTMLSelectElement).selectedOptions].map(o => o.value))}
		>
			{groups.map(g => (
				<option key={g._id} value={g._id} selected={chosen.includes(g._id)}>
					{g.name}
				</option>
			))}
		</select>
	);
}

/** A value as a cell shows it: "–" for nothing, JSON for a structure. */
export function shown(v: unknown): string {
	return v == null || v === "" ? "–" : typeof v === "object" ? JSON.stringify(v) : String(v);
}

/** A state as a coloured pill (its name is its class: up, down, running, finished, failed…); "–" for none. */
export function Pill({ value }: { value?: string | null }) {
	return value ? <span class={`pill ${value}`}>{value}</span> : <span class="muted">–</span>;
}

/** What POST /api/targets/preview answers: the live hosts a compound target selects now, and the names it gives that no host has. */
export type TargetPreviewAnswer = { count: number; hosts: string[]; missing: string[] } | { error: string };

/** The hosts `target` selects, asked of the server once typing pauses; null while it is empty. */
export function useTargetPreview(target: string, delayMs = 300): TargetPreviewAnswer | null {
	const [preview, setPreview] = useState<TargetPreviewAnswer | null>(null);
	useEffect(() => {
		if (!target.trim()) return setPreview(null);
		let current = true;
		const t = setTimeout(() => {
			api<TargetPreviewAnswer>("POST", "targets/preview", { target })
				.then(p => current && setPreview(p))
				.catch(err => current && setPreview({ error: (err as Error).message }));
		}, delayMs);
		return () => {
			current = false;
			clearTimeout(t);
		};
	}, [target]);
	return preview;
}

/** A target preview in words: how many hosts, the first eight, the names no host has; or why it cannot be evaluated. */
export function TargetPreview({ id, preview }: { id: string; preview: TargetPreviewAnswer | null }) {
	if (!preview) return null;
	if ("error" in preview)
		return (
			<p id={id} class="error" aria-live="polite">
				{preview.error}
			</p>
		);
	const first = preview.hosts.slice(0, 8).join(", ");
	return (
		<p id={id} class="muted" aria-live="polite">
			selects {preview.count} host(s) now{first ? `: ${first}${preview.count > 8 ? ", …" : ""}` : ""}
			{preview.missing.length ? `; named but not in the fleet: ${preview.missing.join(", ")}` : ""}
		</p>
	);
}

/** What a refused write says, with its fields' issues in words (`field message; …`). */
export function refusal(err: unknown): string {
	const issues = (err as ApiError).issues as Record<string, unknown> | undefined;
	return `${(err as Error).message}${
		issues
			? `: ${Object.entries(issues)
					.map(([k, v]) => `${k} ${typeof v === "string" ? v : JSON.stringify(v)}`)
					.join("; ")}`
			: ""
	}`;
}

/** A record's id as the API makes it (a MongoDB ObjectId): what a page shows a name instead of. */
export const OBJECT_ID = /^[a-f0-9]{24}$/;

/**
 * Names of records, by collection and id (`groups/<id>` → its name; null when its collection has no such record, for
 * example one deleted since): one read per collection (`where` on `_id` `$in`, the names alone), asked again when the
 * ids change. A collection that cannot be read, or whose records have no name, gives none. With `by` "name", the other
 * way round: records' ids by their names (`groups/<name>` → its id; null when no record has that name).
 */
export function useNames(wanted: Record<string, string[]>, by: "_id" | "name" = "_id"): Record<string, string | null> {
	const [names, setNames] = useState<Record<string, string | null>>({});
	const usable = (v: string) => (by === "_id" ? OBJECT_ID.test(v) : v !== "");
	const asked = Object.entries(wanted)
		.map(([collection, values]) => [collection, [...new Set(values)].filter(usable).sort().slice(0, 50)] as const)
		.filter(([, values]) => values.length > 0);
	const key = JSON.stringify(asked);
	useEffect(() => {
		let current = true;
		// A lookup that failed (the gateway busy, a rate limit) is asked again a few times while the page shows these rows.
		const look = (collection: string, values: string[], tries: number): void =>
			void api<{ _items: Array<{ _id: string; name?: unknown }> }>(
				"GET",
				q(collection, { where: { [by]: { $in: values } }, projection: { name: 1 }, max_results: values.length }),
			)
				.then(res => {
					if (!current) return;
					const found: Record<string, string | null> = Object.fromEntries(
						values.map(v => [`${collection}/${v}`, null]),
					);
					if (by === "name") {
						for (const r of res._items) if (typeof r.name === "string") found[`${collection}/${r.name}`] = r._id;
					} else {
						for (const r of res._items) found[`${collection}/${r._id}`] = typeof r.name === "string" ? r.name : null;
						// Records without a name (a collection that has none) say nothing rather than "no longer there".
						if (res._items.length > 0 && res._items.every(r => typeof r.name !== "string")) return;
					}
					setNames(n => ({ ...n, ...found }));
				})
				.catch(() => {
					if (current && tries > 1) setTimeout(() => current && look(collection, values, tries - 1), 1000);
				});
		for (const [collection, values] of asked) look(collection, [...values], 5);
		return () => {
			current = false;
		};
	}, [key]);
	return names;
}

/** What the router gives every page: who is signed in, and the id the URL names after the page's own path (#/hosts/<id>). */
export interface PageProps {
	me: Me;
	id?: string;
}

/** The server's filter for "starts with `prefix`" (the API takes no regular expression in `where`). */
export function startsWith(prefix: string): { $gte: string; $lt: string } {
	return { $gte: prefix, $lt: `${prefix}\uffff` };
}

/** Newer/older buttons around "page N of M · T <noun>", for a list the server pages. */
export function Pager({
	id,
	page,
	size,
	total,
	noun,
	onPage,
}: {
	id: string;
	page: number;
	size: number;
	total: number;
	noun: string;
	onPage: (page: number) => void;
}) {
	const pages = Math.max(1, Math.ceil(total / size));
	return (
		<div class="bar pager">
			<button type="button" class="secondary" disabled={page <= 1} onClick={() => onPage(page - 1)}>
				‹ Newer
			</button>
			<span id={id}>
				page {page} of {pages} · {total} {noun}
			</span>
			<button type="button" class="secondary" disabled={page >= pages} onClick={() => onPage(page + 1)}>
				Older ›
			</button>
		</div>
	);
}

/** A filter's list to choose from: "any …" (the empty value), then each value as itself. */
export function Choice({
	id,
	label,
	any,
	values,
	value,
	onChange,
}: {
	id: string;
	label: string;
	any: string;
	values: string[];
	value: string;
	onChange: (e: Event) => void;
}) {
	return (
		<select id={id} aria-label={label} value={value} onChange={onChange}>
			<option value="">{any}</option>
			{values.map(v => (
				<option key={v} value={v}>
					{v}
				</option>
			))}
		</select>
	);
}

/** The view the URL's hash holds after its page (#/<page>?<view>). */
export function hashQuery(): URLSearchParams {
	return new URLSearchParams(location.hash.split("?")[1] ?? "");
}

/**
 * Writes a page's view into the URL (#/<path>?<query>), without a new history entry (typing would make one per key):
 * back, forward and a shared link come back to it. Only while `path` is what the URL shows: a page being left must not
 * take the URL back (its last request may end after the next page's navigation began).
 */
export function writeHashQuery(path: string, query: URLSearchParams): void {
	const hash = `#/${path}${query.size ? `?${query}` : ""}`;
	if (location.hash.split("?")[0] !== `#/${path}`) return;
	if (location.hash !== hash) history.replaceState(null, "", hash);
}

/**
 * A list page's filters (each a string, "" for none; those with `choices` only one of them) and its page number,
 * read from the URL when the page is shown and written back at every change (writeHashQuery). Changing a filter goes
 * back to the first page.
 */
export function useUrlView<F extends Record<string, string>>(
	path: string,
	blank: F,
	choices: Partial<Record<keyof F, string[]>> = {},
): { filters: F; page: number; setFilter: (k: keyof F, value: string) => void; setPage: (page: number) => void } {
	const [view, setView] = useState(() => {
		const query = hashQuery();
		const filters = { ...blank };
		for (const k of Object.keys(blank) as Array<keyof F & string>) {
			const v = query.get(k);
			if (v !== null && (choices[k]?.includes(v) ?? true)) filters[k] = v as F[typeof k];
		}
		return { filters, page: Math.max(1, Math.floor(Number(query.get("page"))) || 1) };
	});
	useEffect(() => {
		const query = new URLSearchParams();
		for (const [k, v] of Object.entries(view.filters)) if (v) query.set(k, v);
		if (view.page > 1) query.set("page", String(view.page));
		writeHashQuery(path, query);
	}, [view]);
	return {
		filters: view.filters,
		page: view.page,
		setFilter: (k, value) => setView(v => ({ filters: { ...v.filters, [k]: value }, page: 1 })),
		setPage: page => setView(v => ({ ...v, page })),
	};
}
