/**
 * The job history, in Preact (docs/jobs.md): every Salt job fleet-ctl started or saw on the master, newest first,
 * filtered by the server (function, origin, state, who), read again as returns are recorded
 * (GET /api/actions/stream); a job's page shows what ran where, who asked, its counts, and its hosts' returns as
 * they arrive.
 */
import { useEffect, useState } from "preact/hooks";
import { api, followStream, q } from "./client";
import { Choice, Head, Pager, Problem, startsWith } from "./parts";
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

const ORIGINS = ["api", "repl", "task", "rollout", "external"];
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

export function HistoryList() {
	const [fun, setFun] = useState("");
	const [origin, setOrigin] = useState("");
	const [state, setState] = useState("");
	const [page, setPage] = useState(1);
	const [res, setRes] = useState<{ _items: SaltJob[]; _meta: { total: number; max_results: number } } | null>(null);
	const [error, setError] = useState("");
	const [tick, setTick] = useState(0);
	useEffect(() => {
		const where: Record<string, unknown> = {};
		if (fun.trim()) where.fun = startsWith(fun.trim());
		if (origin) where.origin = origin;
		if (state) where.state = state;
		let current = true;
		const t = setTimeout(() => {
			api("GET", q("salt_jobs", { where: Object.keys(where).length ? where : undefined, sort: "-started", page, max_results: 25 }))
				.then(r => current && (setRes(r), setError("")))
				.catch(err => current && setError((err as Error).message));
		}, fun ? 250 : 0);
		return () => {
			current = false;
			clearTimeout(t);
		};
	}, [fun, origin, state, page, tick]);
	// Returns recorded for any job: the counts on screen change (one read per burst).
	useEffect(() => {
		let pending: ReturnType<typeof setTimeout> | undefined;
		const live = followStream("actions/stream", "returns", () => {
			pending ??= setTimeout(() => {
				pending = undefined;
				setTick(n => n + 1);
			}, RELIST_MS);
		}, () => undefined);
		return () => {
			live.stop();
			clearTimeout(pending);
		};
	}, []);
	return (
		<section>
			<h1>Job history</h1>
			<div class="bar" role="search">
				<input type="search" id="history-fun" placeholder="Function starts with…" aria-label="Function" value={fun} onInput={e => (setFun((e.target as HTMLInputElement).value), setPage(1))} />
				<Choice id="history-origin" label="Origin" any="any origin" values={ORIGINS} value={origin} onChange={e => (setOrigin((e.target as HTMLSelectElement).value), setPage(1))} />
				<select id="history-state" aria-label="State" value={state} onChange={e => (setState((e.target as HTMLSelectElement).value), setPage(1))}>
					<option value="">running or finished</option>
					<option value="running">running</option>
					<option value="finished">finished</option>
				</select>
			</div>
			<Problem text={error} />
			{res === null ? (
				<p class="muted">Loading…</p>
			) : res._items.length === 0 ? (
				<p class="empty" id="history-empty">
					{fun || origin || state ? "No job matches these filters." : "No job yet: runs from a host's or a group's page, tasks, rollouts and jobs started on the master itself are recorded here."}
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
									<td class="mono">{j.target ?? "–"}</td>
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
			{res && res._items.length > 0 && <Pager id="history-page" page={page} size={res._meta.max_results} total={res._meta.total} noun="jobs" onPage={setPage} />}
		</section>
	);
}

export function JobPage({ jid }: { jid: string }) {
	const [job, setJob] = useState<SaltJob | null>(null);
	const [error, setError] = useState("");
	useEffect(() => {
		const read = () =>
			api<SaltJob>("GET", `salt_jobs/${encodeURIComponent(jid)}`)
				.then(j => (setJob(j), setError("")))
				.catch(err => setError((err as Error).message));
		void read();
		// Its counts follow its returns.
		const live = followStream(`actions/stream?jid=${jid}`, "returns", () => void read(), () => undefined);
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
						<dd class="mono">{job.target ?? "–"}</dd>
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
