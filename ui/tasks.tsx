/**
 * The tasks page, in Preact (docs/scheduling.md): every task with what it runs, on what (host names, groups by
 * name, a compound target), its schedule in words, its next run and its last; for operators a form to make one or
 * change it — the schedule's next runs previewed by the server as it is typed (POST /tasks/preview), the compound
 * target's hosts too (POST /targets/preview) — Pause/Resume and Delete.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q, type Me } from "./client";
import {
	Button,
	Field,
	GroupPicker,
	Head,
	OBJECT_ID,
	Problem,
	TargetPreview,
	useGuard,
	refusal,
	useTargetPreview,
} from "./parts";
import { parseRunArgs, splitWords } from "../lib/repl/words";

interface Task {
	_id: string;
	name: string;
	fun: string;
	kwarg?: Record<string, unknown>;
	tgt?: string[];
	target?: string;
	start: string;
	end?: string;
	interval?: number;
	cron?: string | null;
	timezone?: string;
	status: string;
	next?: string | null;
	count_of_execution?: number;
	last_run?: { state?: string; at?: string; message?: string } | null;
	window_wait?: unknown;
}

/** How long typing pauses before the server is asked for a preview. */
const PREVIEW_DELAY_MS = 300;

/** "1 h 30 min": an interval in seconds, in words. */
export function duration(seconds: number): string {
	const parts: string[] = [];
	for (const [unit, size] of [
		["d", 86400],
		["h", 3600],
		["min", 60],
		["s", 1],
	] as const) {
		const n = Math.floor(seconds / size);
		if (n) parts.push(`${n} ${unit}`);
		seconds -= n * size;
	}
	return parts.join(" ") || "0 s";
}

function scheduleWords(t: Task): string {
	const zone = t.timezone ? ` (${t.timezone})` : "";
	if (t.cron) return `cron ${t.cron}${zone}, from ${t.start}`;
	if (t.interval) return `every ${duration(t.interval)} from ${t.start}${t.end ? ` until ${t.end}` : ""}`;
	return `once, at ${t.start}`;
}

/** "YYYY-MM-DD HH:MM" (UTC) of an HTTP-date, for the form's fields. */
function wallTime(httpDate: string | undefined): string {
	if (!httpDate) return "";
	const d = new Date(httpDate);
	return Number.isNaN(d.getTime()) ? "" : d.toISOString().slice(0, 16).replace("T", " ");
}

/** Asks `ask` once typing pauses (and again when `deps` change); its answer, or the reason it failed. */
function usePreview<T>(ask: (() => Promise<T>) | null, deps: unknown[]): { value?: T; error?: string } | null {
	const [out, setOut] = useState<{ value?: T; error?: string } | null>(null);
	useEffect(() => {
		if (!ask) return setOut(null);
		let current = true;
		const t = setTimeout(() => {
			ask()
				.then(value => current && setOut({ value }))
				.catch(err => current && setOut({ error: refusal(err) }));
		}, PREVIEW_DELAY_MS);
		return () => {
			current = false;
			clearTimeout(t);
		};
	}, deps);
	return out;
}

/**
 * A task's kwarg as the form's words, so that splitWords and parseRunArgs read back the same values: a value that is
 * not a plain string (or a string that would read as JSON) is written as JSON, and quoted when it holds spaces or
 * quotes (splitWords has no escapes: a value holding both kinds of quote cannot be written). Sent back as shown,
 * the masks in it keep the stored secrets (docs/security.md, "What is masked").
 */
function kwargWords(kwarg: Record<string, unknown>): string {
	const word = (v: unknown): string => {
		let text = JSON.stringify(v);
		if (typeof v === "string") {
			try {
				JSON.parse(v);
			} catch {
				text = v;
			}
		}
		if (!/[\s'"]/.test(text)) return text;
		return text.includes("'") ? `"${text}"` : `'${text}'`;
	};
	return Object.entries(kwarg)
		.map(([k, v]) => `${k}=${word(v)}`)
		.join(" ");
}

function TaskForm({
	task,
	groups,
	onDone,
}: {
	task: Task | null;
	groups: Array<{ _id: string; name: string }>;
	onDone: () => void;
}) {
	const [name, setName] = useState(task?.name ?? "");
	const [fun, setFun] = useState(task?.fun ?? "test.ping");
	const [kwargs, setKwargs] = useState(task?.kwarg ? kwargWords(task.kwarg) : "");
	const [hosts, setHosts] = useState((task?.tgt ?? []).filter(t => !OBJECT_ID.test(t)).join(", "));
	const [chosen, setChosen] = useState<string[]>((task?.tgt ?? []).filter(t => OBJECT_ID.test(t)));
	const [target, setTarget] = useState(task?.target ?? "");
	const [start, setStart] = useState(wallTime(task?.start) || wallTime(new Date(Date.now() + 3600_000).toUTCString()));
	const [every, setEvery] = useState(task?.cron ? "cron" : task?.interval ? "interval" : "once");
	const [interval, setInterval_] = useState(String(task?.interval || 3600));
	const [cron, setCron] = useState(task?.cron ?? "0 3 * * *");
	const [timezone, setTimezone] = useState(task?.timezone ?? "");
	const [error, setError] = useState("");
	const schedule = {
		start,
		...(every === "interval" ? { interval: Number(interval) } : {}),
		...(every === "cron" ? { cron } : {}),
		...(timezone.trim() ? { timezone: timezone.trim() } : {}),
	};
	const runs = usePreview(
		() => api<{ next: string[] }>("POST", q("tasks/preview", { count: 5 }), schedule),
		[start, every, interval, cron, timezone],
	);
	const selects = useTargetPreview(target);

	const submit = async (ev: Event) => {
		ev.preventDefault();
		setError("");
		try {
			const { arg, kwarg } = parseRunArgs(splitWords(kwargs));
			if (arg.length) throw new Error(`a task takes keyword arguments only (k=v): ${arg.map(String).join(" ")}`);
			const tgt = [...hosts.split(/[\s,]+/).filter(Boolean), ...chosen];
			const body = {
				name,
				fun: fun.trim(),
				kwarg,
				...(tgt.length ? { tgt } : {}),
				...(target.trim() ? { target: target.trim() } : {}),
				...schedule,
			};
			// A change says what the task no longer has too: no listed targets, no compound target, no repetition.
			if (task)
				await api("PUT", "tasks", {
					_id: task._id,
					...body,
					tgt: tgt.length ? tgt : null,
					target: target.trim() || null,
					interval: every === "interval" ? Number(interval) : 0,
					cron: every === "cron" ? cron : null,
				});
			else await api("POST", "tasks", body);
			onDone();
		} catch (err) {
			setError(refusal(err));
		}
	};
	const value = (set: (v: string) => void) => (e: Event) => set((e.target as HTMLInputElement).value);
	return (
		<form class="card" id="task-form" onSubmit={submit}>
			<h2>{task ? `Change “${task.name}”` : "New task"}</h2>
			<Field label="Name">
				<input id="task-name" required value={name} onInput={value(setName)} />
			</Field>
			<Field label="Salt function">
				<input id="task-fun" required value={fun} onInput={value(setFun)} placeholder="state.apply" />
			</Field>
			<Field label="Keyword arguments">
				<input
					id="task-kwarg"
					value={kwargs}
					onInput={value(setKwargs)}
					placeholder='mods=patches pillar={"reboot":false}'
				/>
			</Field>
			<Field label="Hosts">
				<input id="task-hosts" value={hosts} onInput={value(setHosts)} placeholder="web-01, web-02" />
			</Field>
			<Field label="Groups">
				<GroupPicker id="task-groups" groups={groups} chosen={chosen} onChange={setChosen} rows={5} />
			</Field>
			<Field label="Compound target">
				<input id="task-target" value={target} onInput={value(setTarget)} placeholder="G@os:Debian and not web-9*" />
			</Field>
			<TargetPreview id="task-target-preview" preview={selects} />
			<Field label="Start (YYYY-MM-DD HH:MM)">
				<input id="task-start" required value={start} onInput={value(setStart)} />
			</Field>
			<Field label="Repeats">
				<select id="task-every" value={every} onChange={value(setEvery)}>
					<option value="once">once</option>
					<option value="interval">every …</option>
					<option value="cron">on a cron schedule</option>
				</select>
			</Field>
			{every === "interval" && (
				<Field label="Every (seconds)">
					<input id="task-interval" type="number" min={1} value={interval} onInput={value(setInterval_)} />
				</Field>
			)}
			{every === "cron" && (
				<Field label="Cron (min hour day month weekday)">
					<input id="task-cron" value={cron} onInput={value(setCron)} />
				</Field>
			)}
			<Field label="Time zone">
				<input id="task-timezone" value={timezone} onInput={value(setTimezone)} placeholder="UTC (e.g. Europe/Paris)" />
			</Field>
			<div id="task-next" aria-live="polite">
				{runs?.error ? (
					<p class="error">{runs.error}</p>
				) : runs?.value ? (
					<p class="muted">
						Next runs: {runs.value.next.length ? runs.value.next.join(" · ") : "none (the schedule has ended)"}
						{every === "interval" && Number(interval) > 0 ? ` (every ${duration(Number(interval))})` : ""}
					</p>
				) : null}
			</div>
			<div class="bar">
				<button type="submit">{task ? "Save changes" : "Add task"}</button>
				<button type="button" class="secondary" onClick={onDone}>
					Cancel
				</button>
			</div>
			<Problem text={error} />
		</form>
	);
}

export function TasksPage({ me }: { me: Me }) {
	const [tasks, setTasks] = useState<Task[] | null>(null);
	const [groups, setGroups] = useState<Array<{ _id: string; name: string }>>([]);
	const [editing, setEditing] = useState<Task | "new" | null>(null);
	const [error, guard] = useGuard();
	const operator = me.role !== "viewer";
	const load = () =>
		guard(async () => {
			const [res, g] = await Promise.all([
				api<{ _items: Task[] }>("GET", q("tasks", { sort: "name", max_results: 200 })),
				api<{ _items: Array<{ _id: string; name: string }> }>(
					"GET",
					q("groups", { sort: "name", max_results: 200, projection: { name: 1 } }),
				),
			]);
			setTasks(res._items);
			setGroups(g._items);
		});
	useEffect(() => void load(), []);
	const names = Object.fromEntries(groups.map(g => [g._id, g.name]));
	const act = (action: () => Promise<unknown>) =>
		guard(async () => {
			await action();
			await load();
		});
	const targets = (t: Task) =>
		[
			...(t.tgt ?? []).map(x => (OBJECT_ID.test(x) ? `group ${names[x] ?? "(a group you cannot see)"}` : x)),
			...(t.target ? [t.target] : []),
		].join(", ");
	return (
		<section>
			<h1>Tasks</h1>
			<Problem text={error} />
			{tasks === null ? (
				<p class="muted">Loading…</p>
			) : tasks.length === 0 ? (
				<p class="empty" id="tasks-empty">
					No task yet: a task runs a Salt function on hosts or groups at the times it says (once, every so often, or on
					a cron schedule).{operator ? " Add one below." : ""}
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="tasks" class="fits">
						<Head
							columns={[
								"Name",
								"Function",
								"Targets",
								"Schedule",
								"Status",
								"Next run",
								"Runs",
								"Last run",
								...(operator ? [""] : []),
							]}
						/>
						<tbody>
							{tasks.map(t => (
								<tr key={t._id} data-id={t._id}>
									<td>{t.name}</td>
									<td class="mono nowrap">{t.fun}</td>
									<td class="wrap">{targets(t) || "–"}</td>
									<td>{scheduleWords(t)}</td>
									<td>
										<span class={`pill ${t.status}`}>{t.status}</span>
									</td>
									<td>{t.next ?? "–"}</td>
									<td>{t.count_of_execution ?? 0}</td>
									<td>
										{t.last_run?.state ? <span class={`pill ${t.last_run.state}`}>{t.last_run.state}</span> : "–"}
									</td>
									{operator && (
										<td class="nowrap">
											{(t.status === "scheduled" || t.status === "paused") && (
												<button
													type="button"
													class="secondary"
													data-task={t._id}
													onClick={() =>
														void act(() =>
															api("PATCH", `tasks/${t._id}/${t.status === "scheduled" ? "paused" : "scheduled"}`),
														)
													}
												>
													{t.status === "scheduled" ? "Pause" : "Resume"}
												</button>
											)}{" "}
											<Button label="Edit" onClick={() => setEditing(t)} />{" "}
											<Button label="Delete" onClick={() => act(() => api("DELETE", `tasks/${t._id}`))} />
										</td>
									)}
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
			{operator && tasks !== null && editing === null && (
				<p>
					<button type="button" id="task-new" onClick={() => setEditing("new")}>
						New task
					</button>
				</p>
			)}
			{operator && editing !== null && (
				<TaskForm
					key={editing === "new" ? "new" : editing._id}
					task={editing === "new" ? null : editing}
					groups={groups}
					onDone={() => {
						setEditing(null);
						void load();
					}}
				/>
			)}
		</section>
	);
}
