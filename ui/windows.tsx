/**
 * The maintenance windows page (docs/security.md, "Maintenance windows"), in Preact: every window with what it
 * governs (its groups by name, its compound target, its functions), when it recurs, whether it is open now and when
 * it opens next; for admins a form to add one (the API's refusals shown field by field), and enable, disable or
 * delete. Everyone may read it: operators need to know when their runs may go.
 */
import { useEffect, useState } from "preact/hooks";
import { Head, Problem, RuleActions, Scroll, useGuard } from "./parts";
import { api, q, type ApiError, type Me } from "./client";

interface Window {
	_id: string;
	name: string;
	targets: { groups?: string[]; target?: string };
	functions: string[];
	rrule: string;
	start: string;
	timezone: string;
	duration: string;
	enabled?: boolean;
}
interface Opening {
	start: string;
	end: string;
}
interface Preview {
	open: Opening | null;
	next: Opening[];
}

const EMPTY = {
	name: "",
	target: "",
	functions: "state.apply, pkg.*",
	rrule: "FREQ=WEEKLY;BYDAY=SA",
	start: "",
	timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
	duration: "PT4H",
};

/** Issues of a refused write, flattened to one line per field (`targets.target: …`). */
function issuesOf(err: unknown): Record<string, string> {
	const out: Record<string, string> = {};
	const walk = (v: unknown, at: string) => {
		if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, at ? `${at}.${k}` : k);
		else out[at] = String(v);
	};
	walk((err as ApiError).issues, "");
	return out;
}

function NewWindow({ onMade }: { onMade: () => void }) {
	const [form, setForm] = useState({ ...EMPTY });
	const [issues, setIssues] = useState<Record<string, string>>({});
	const [error, setError] = useState("");
	const field = (key: keyof typeof EMPTY, label: string, hint: string, issueKey: string = key) => (
		<label class="field">
			<span>{label}</span>
			<input
				id={`window-${key}`}
				value={form[key]}
				placeholder={hint}
				aria-invalid={issues[issueKey] ? "true" : undefined}
				onInput={e => setForm({ ...form, [key]: (e.target as HTMLInputElement).value })}
			/>
			{issues[issueKey] && <span class="error">{issues[issueKey]}</span>}
		</label>
	);
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setIssues({});
		setError("");
		try {
			const functions = form.functions
				.split(",")
				.map(s => s.trim())
				.filter(Boolean);
			await api("POST", "maintenance_windows", {
				name: form.name,
				targets: { target: form.target },
				functions,
				rrule: form.rrule,
				start: form.start,
				timezone: form.timezone,
				duration: form.duration,
			});
			setForm({ ...EMPTY });
			onMade();
		} catch (err) {
			const found = issuesOf(err);
			setIssues(found);
			setError(Object.keys(found).length ? "The window was not saved: see the fields." : (err as Error).message);
		}
	};
	return (
		<form class="card" id="new-window" onSubmit={submit}>
			<h2>New window</h2>
			{field("name", "Name", "Saturday nights")}
			{field("target", "Hosts (compound target)", "G@roles:web or F@databases", "targets.target")}
			{field("functions", "Functions it governs", "state.apply, pkg.*, system.reboot")}
			{field("rrule", "Recurs (RFC 5545 RRULE)", "FREQ=WEEKLY;BYDAY=SA")}
			{field("start", "First opening (wall time)", "2026-12-05T02:00")}
			{field("timezone", "Time zone", "Europe/Paris")}
			{field("duration", "Lasts (ISO 8601)", "PT4H")}
			<button type="submit">Add window</button>
			<Problem text={error} />
		</form>
	);
}

export function WindowsPage({ me }: { me: Me }) {
	const [windows, setWindows] = useState<Window[] | null>(null);
	const [previews, setPreviews] = useState<Record<string, Preview>>({});
	const [groups, setGroups] = useState<Record<string, string>>({});
	const [error, guard] = useGuard();
	const admin = me.role === "admin";
	const load = () =>
		guard(async () => {
			const res = await api<{ _items: Window[] }>("GET", q("maintenance_windows", { sort: "name", max_results: 50 }));
			setWindows(res._items);
			const ids = [...new Set(res._items.flatMap(w => w.targets.groups ?? []))];
			if (ids.length) {
				const g = await api<{ _items: Array<{ _id: string; name: string }> }>(
					"GET",
					q("groups", { where: { _id: { $in: ids } }, projection: { name: 1 }, max_results: 50 }),
				);
				setGroups(Object.fromEntries(g._items.map(x => [x._id, x.name])));
			}
			const shown: Record<string, Preview> = {};
			await Promise.all(
				res._items.map(
					async w =>
						(shown[w._id] = await api<Preview>("GET", q(`maintenance_windows/${w._id}/preview`, { count: 1 }))),
				),
			);
			setPreviews(shown);
		});
	useEffect(() => void load(), []);
	const act = (w: Window, what: "toggle" | "delete") =>
		guard(async () => {
			if (what === "delete") await api("DELETE", `maintenance_windows/${w._id}`);
			else await api("PATCH", `maintenance_windows/${w._id}`, { enabled: w.enabled === false });
			await load();
		});
	return (
		<section>
			<h1>Maintenance windows</h1>
			<p class="muted">
				Outside its windows, a function a window governs is refused on the hosts it governs (409, naming the next
				opening); tasks and rollouts wait for the window. Everything else runs at any time.
			</p>
			<Problem text={error} />
			{windows === null ? (
				<p class="muted">Loading…</p>
			) : windows.length === 0 ? (
				<p class="empty">
					No maintenance window: every function runs at any time.{admin ? " Add one below." : " Admins add them."}
				</p>
			) : (
				<Scroll>
					<table id="windows">
						<Head columns={["Name", "Hosts", "Functions", "Recurs", "Now", "Next opening", ...(admin ? [""] : [])]} />
						<tbody>
							{windows.map(w => {
								const p = previews[w._id];
								return (
									<tr key={w._id} data-id={w._id}>
										<td>{w.name}</td>
										<td>
											{[
												...(w.targets.groups ?? []).map(g => `group ${groups[g] ?? g}`),
												...(w.targets.target ? [w.targets.target] : []),
											].join(" or ")}
										</td>
										<td class="mono">{w.functions.join(", ")}</td>
										<td>
											<span class="mono">{w.rrule}</span> from {w.start} ({w.timezone}), {w.duration}
										</td>
										{/* Until its preview has come, a window's state and next opening are not known: not "closed", not "none". */}
										<td>
											{w.enabled === false ? (
												<span class="pill paused">disabled</span>
											) : !p ? (
												<span class="muted">…</span>
											) : p.open ? (
												<span class="pill up">open until {p.open.end}</span>
											) : (
												<span class="pill">closed</span>
											)}
										</td>
										<td>
											{!p ? (
												<span class="muted">…</span>
											) : p.next[0] ? (
												`${p.next[0].start} – ${p.next[0].end}`
											) : (
												"none within ten years"
											)}
										</td>
										{admin && (
											<RuleActions
												enabled={w.enabled !== false}
												onToggle={() => void act(w, "toggle")}
												onDelete={() => void act(w, "delete")}
											/>
										)}
									</tr>
								);
							})}
						</tbody>
					</table>
				</Scroll>
			)}
			{admin && <NewWindow onMade={() => void load()} />}
		</section>
	);
}
