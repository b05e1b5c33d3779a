/**
 * The job history, in Preact (docs/jobs.md): every Salt job fleet-ctl started or saw on the master, newest first,
 * filtered by the server (function, origin, state), the filters and page kept in the URL (#/history?origin=task),
 * read again as returns are recorded (GET /api/actions/stream); a job's page shows what ran where, who asked, its
 * counts, and its hosts' returns as they arrive. A job's target is shown in names: its groups' ids (F@<id>, ids in an
 * L@ list) as the groups' names, linked (F@<name> linked too, when a group has that name), its L@ hosts by name (the
 * first few, then how many more); the expression as recorded stays in the title, and on the job's page in a details
 * element.
 */
import { useEffect, useState } from "preact/hooks";
import { api, followStream, q } from "./client";
import { Choice, Head, OBJECT_ID, Pager, Problem, startsWith, useNames, useUrlView } from "./parts";
import { JobReturns } from "./run";

interface SaltJob {
	_id: string;
	fun: string;
	args?: unknown[];
	target?: string;
	expected?: number;
	returned?: number;
	succeeded?: number;
	failed?: number;
	timed_out?: number;
	user?: string;
	origin?: string;
	task?: string;
	rollout?: string;
	batch?: number;
	started?: string;
	finished?: string | null;
	state?: string;
}

const ORIGINS = ["api", "task", "rollout", "approval", "external"];
const STATES = ["running", "finished"];
/** The hosts of an L@ list named before "and N more". */
const HOSTS_SHOWN = 3;
/** Several batches of returns in a burst make one read of the list. */
const RELIST_MS = 1000;

function Counts({ job }: { job: SaltJob }) {
	return (
		<>
			{job.returned ?? 0}/{job.expected ?? 0}
			{job.failed ? <span class="pill failed"> {job.failed} failed</span> : null}
			{job.timed_out ? <span class="pill timeout"> {job.timed_out} timed out</span> : null}
		</>
	);
}

/** The group ids a target names: F@<id> terms, and ids in L@ lists (a task's `tgt` lists hosts and groups). */
function targetGroups(target: string | undefined): string[] {
	const ids: string[] = [];
	for (const term of (target ?? "").split(/[\s()]+/)) {
		if (term.startsWith("F@")) ids.push(term.slice(2));
		else if (term.startsWith("L@")) ids.push(...term.slice(2).split(","));
	}
	return ids.filter(id => OBJECT_ID.test(id));
}

/** The group names a target's F@ terms give instead of ids (F@web). */
function targetGroupNames(target: string | undefined): string[] {
	const out: string[] = [];
	for (const term of (target ?? "").split(/[\s()]+/))
		if (term.startsWith("F@") && term.length > 2 && !OBJECT_ID.test(term.slice(2))) out.push(term.slice(2));
	return out;
}

/**
 * The names of the groups the targets name, as useNames gives them (`groups/<id>` → name), and the id of each
 * group an F@ term names by its name (`group-named/<name>` → id, null when no group has that name; at most 50).
 */
function useTargetNames(targets: Array<string | undefined>): Record<string, string | null> {
	const names = useNames({ groups: targets.flatMap(targetGroups) });
	const ids = useNames({ groups: targets.flatMap(targetGroupNames) }, "name");
	const byName = Object.fromEntries(
		Object.entries(ids).map(([k, id]) => [`group-named/${k.slice("groups/".length)}`, id]),
	);
	return { ...names, ...byName };
}

/**
 * A group a target names: its name linked to its page, or that it is no longer there (the id in the title). An
 * F@ term naming the group by its name links to it when a group has that name.
 */
function GroupRef({ id, names }: { id: string; names: Record<string, string | null> }) {
	if (!OBJECT_ID.test(id)) {
		const found = names[`group-named/${id}`];
		return found ? (
			<>
				group <a href={`#/groups/${found}`}>{id}</a>
			</>
		) : (
			<>group {id}</>
		);
	}
	const name = names[`groups/${id}`];
	if (name === null)
		return (
			<span class="muted" title={id}>
				a group no longer there
			</span>
		);
	return (
		<>
			group <a href={`#/groups/${id}`}>{name ?? "…"}</a>
		</>
	);
}

/** One term of a target in words: an L@ list as its hosts (the first few) and groups, F@ as the group, others as written. */
function Term({ term, names, shown }: { term: string; names: Record<string, string | null>; shown: number }) {
	if (term.startsWith("F@")) return <GroupRef id={term.slice(2)} names={names} />;
	if (!term.startsWith("L@"))
		return /^[\s()]+$/.test(term) || /^(and|or|not)$/.test(term) ? term : <span class="mono">{term}</span>;
	const members = term.slice(2).split(",").filter(Boolean);
	const hosts = members.filter(m => !OBJECT_ID.test(m));
	const groups = members.filter(m => OBJECT_ID.test(m));
	// Groups first, then the hosts: "group web, web-01, web-02, web-03 and 9 more".
	const items = [
		...groups.map(g => <GroupRef key={g} id={g} names={names} />),
		...hosts.slice(0, shown).map(h => (
			<a key={h} class="nowrap" href={`#/hosts/${encodeURIComponent(h)}`}>
				{h}
			</a>
		)),
	];
	return (
		<>
			{items.map((item, i) => [i ? ", " : "", item])}
			{hosts.length > shown ? ` and ${hosts.length - shown} more` : ""}
		</>
	);
}

/** A job's target in names (the recorded expression in its title). */
function Target({
	target,
	names,
	shown = HOSTS_SHOWN,
}: {
	target?: string;
	names: Record<string, string | null>;
	shown?: number;
}) {
	if (!target) return <>–</>;
	return (
		<span class="target" title={target}>
			{target
				.split(/(\s+|[()])/)
				.filter(Boolean)
				.map((term, i) => (
					<Term key={i} term={term} names={names} shown={shown} />
				))}
		</span>
	);
}

export function HistoryList() {
	const { filters, page, setFilter, setPage } = useUrlView(
		"history",
		{ fun: "", origin: "", state: "" },
		{ origin: ORIGINS, state: STATES },
	);
	const { fun, origin, state } = filters;
	const [res, setRes] = useState<{ _items: SaltJob[]; _meta: { total: number; max_results: number } } | null>(null);
	const [error, setError] = useState("");
	const [tick, setTick] = useState(0);
	useEffect(() => {
		const where: Record<string, unknown> = {};
		if (fun.trim()) where.fun = startsWith(fun.trim());
		if (origin) where.origin = origin;
		if (state) where.state = state;
		let current = true;
		const t = setTimeout(
			() => {
				api(
					"GET",
					q("salt_jobs", {
						where: Object.keys(where).length ? where : undefined,
						sort: "-started",
						page,
						max_results: 25,
					}),
				)
					.then(r => current && (setRes(r), setError("")))
					.catch(err => current && setError((err as Error).message));
			},
			fun ? 250 : 0,
		);
		return () => {
			current = false;
			clearTimeout(t);
		};
	}, [fun, origin, state, page, tick]);
	// Returns recorded for any job: the counts on screen change (one read per burst).
	useEffect(() => {
		let pending: ReturnType<typeof setTimeout> | undefined;
		const live = followStream(
			"actions/stream",
			"returns",
			() => {
				pending ??= setTimeout(() => {
					pending = undefined;
					setTick(n => n + 1);
				}, RELIST_MS);
			},
			() => undefined,
		);
		return () => {
			live.stop();
			clearTimeout(pending);
		};
	}, []);
	const names = useTargetNames((res?._items ?? []).map(j => j.target));
	const set = (k: keyof typeof filters) => (e: Event) => setFilter(k, (e.target as HTMLInputElement).value);
	return (
		<section>
			<h1>Job history</h1>
			<div class="bar" role="search">
				<input
					type="search"
					id="history-fun"
					placeholder="Function starts with…"
					aria-label="Function"
					value={fun}
					onInput={set("fun")}
				/>
				<Choice
					id="history-origin"
					label="Origin"
					any="any origin"
					values={ORIGINS}
					value={origin}
					onChange={set("origin")}
				/>
				<Choice
					id="history-state"
					label="State"
					any="running or finished"
					values={STATES}
					value={state}
					onChange={set("state")}
				/>
			</div>
			<Problem text={error} />
			{res === null ? (
				<p class="muted">Loading…</p>
			) : res._items.length === 0 ? (
				<p class="empty" id="history-empty">
					{fun || origin || state
						? "No job matches these filters."
						: "No job yet: runs from a host's or a group's page, tasks, rollouts and jobs started on the master itself are recorded here."}
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="history">
						<Head columns={["Started", "Function", "Target", "Origin", "By", "Answered", "State"]} />
						<tbody>
							{res._items.map(j => (
								<tr key={j._id} data-jid={j._id}>
									<td class="nowrap">
										<a href={`#/history/${j._id}`}>{j.started ?? j._id}</a>
									</td>
									<td class="mono">{j.fun}</td>
									<td class="job-target">
										<Target target={j.target} names={names} />
									</td>
									<td>{j.origin ?? "–"}</td>
									<td>{j.user ?? "–"}</td>
									<td class="nowrap">
										<Counts job={j} />
									</td>
									<td>
										<span class={`pill ${j.state}`}>{j.state}</span>
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
			{res && res._items.length > 0 && (
				<Pager
					id="history-page"
					page={page}
					size={res._meta.max_results}
					total={res._meta.total}
					noun="jobs"
					onPage={setPage}
				/>
			)}
		</section>
	);
}

export function JobPage({ jid }: { jid: string }) {
	const [job, setJob] = useState<SaltJob | null>(null);
	const [error, setError] = useState("");
	const names = useTargetNames([job?.target]);
	useEffect(() => {
		const read = () =>
			api<SaltJob>("GET", `salt_jobs/${encodeURIComponent(jid)}`)
				.then(j => (setJob(j), setError("")))
				.catch(err => setError((err as Error).message));
		void read();
		// Its counts follow its returns.
		const live = followStream(
			`actions/stream?jid=${jid}`,
			"returns",
			() => void read(),
			() => undefined,
		);
		return () => live.stop();
	}, [jid]);
	return (
		<section>
			<p>
				<a href="#/history">‹ Job history</a>
			</p>
			<h1>
				Job <span class="mono nowrap">{jid}</span>
			</h1>
			<Problem text={error} />
			{job && (
				<section class="card" id="job">
					<dl class="kv">
						<dt>function</dt>
						<dd class="mono">{job.fun}</dd>
						<dt>arguments</dt>
						<dd class="mono">{job.args?.length ? JSON.stringify(job.args) : "–"}</dd>
						<dt>target</dt>
						<dd id="job-target">
							<Target target={job.target} names={names} shown={10} />
							{job.target && (
								<details>
									<summary>as recorded</summary>
									<code class="mono">{job.target}</code>
								</details>
							)}
						</dd>
						<dt>by</dt>
						<dd>
							{job.user ?? "–"} ({job.origin ?? "?"}
							{job.task ? (
								<>
									, <a href="#/tasks">a task</a>
								</>
							) : null}
							{job.rollout ? (
								<>
									, <a href={`#/rollouts/${job.rollout}`}>a rollout</a>
									{job.batch !== undefined ? ` batch ${job.batch}` : ""}
								</>
							) : null}
							)
						</dd>
						<dt>started</dt>
						<dd>{job.started ?? "–"}</dd>
						<dt>finished</dt>
						<dd>{job.finished ?? "not yet"}</dd>
						<dt>answered</dt>
						<dd id="job-counts">
							<Counts job={job} /> ({job.succeeded ?? 0} succeeded)
						</dd>
					</dl>
				</section>
			)}
			<section class="card">
				<h2>Returns</h2>
				<JobReturns jid={jid} />
			</section>
		</section>
	);
}
