/**
 * The jobs page, in Preact (docs/dashboard.md, "Jobs"): long work — inventory syncs, patch loads, graph builds, IP
 * resolution — each kind's latest run with its progress, read again every second while one runs (every five
 * otherwise); the buttons that start one for the roles that may: loading the patches (operators), building the graph
 * from a master and resolving the hosts' IP addresses (admins), a refusal said next to them.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q } from "./client";
import { Field, Head, Pill, Problem, refusal, shown, type PageProps } from "./parts";

interface Job {
	_id: string;
	status: string;
	params?: Record<string, unknown> | null;
	progress?: { done: number; total: number };
	percent?: number | null;
	started?: string;
	finished?: string | null;
	result?: unknown;
	error?: string | null;
}

/** Each kind of long work in words. */
const KINDS: Record<string, string> = {
	inventory_sync: "Inventory sync with the master",
	load_updates: "Patch load from the master",
	build_graph: "Group graph build",
	request_ips: "IP address resolution",
};

const RUNNING_MS = 1000;
const IDLE_MS = 5000;

/** A form that starts one kind of work: its fields (optional), its button. */
function Start({
	id,
	label,
	onStart,
	children,
}: {
	id: string;
	label: string;
	onStart: () => Promise<unknown>;
	children?: preact.ComponentChildren;
}) {
	const [error, setError] = useState("");
	const [busy, setBusy] = useState(false);
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setBusy(true);
		try {
			await onStart();
			setError("");
		} catch (err) {
			setError(refusal(err));
		} finally {
			setBusy(false);
		}
	};
	return (
		<form class="card" id={`${id}-form`} onSubmit={submit}>
			{children}
			<button type="submit" id={id} disabled={busy}>
				{label}
			</button>
			<Problem text={error} />
		</form>
	);
}

export function JobsPage({ me }: PageProps) {
	const [jobs, setJobs] = useState<Job[] | null>(null);
	const [error, setError] = useState("");
	const [tick, setTick] = useState(0);
	const [master, setMaster] = useState("");
	const [resolver, setResolver] = useState("");
	const running = !!jobs?.some(j => j.status === "running");
	useEffect(() => {
		let current = true;
		api<{ _items: Job[] }>("GET", q("jobs", { sort: "-started", max_results: 50 }))
			.then(r => current && (setJobs(r._items), setError("")))
			.catch(err => current && setError((err as Error).message));
		return () => {
			current = false;
		};
	}, [tick]);
	// Progress moves on its own: read again, often while something runs.
	useEffect(() => {
		const t = setTimeout(() => setTick(n => n + 1), running ? RUNNING_MS : IDLE_MS);
		return () => clearTimeout(t);
	}, [tick, running]);
	const start = (path: string, body?: unknown) => async () => {
		await api("POST", path, body);
		setTick(n => n + 1);
	};
	const operator = me.role !== "viewer";
	const admin = me.role === "admin";
	return (
		<section>
			<h1>Jobs</h1>
			<p class="muted">
				Long work fleet-ctl does in the background: the latest run of each kind, its progress and its result.
			</p>
			{operator && (
				<div class="grid2">
					<Start id="job-load-updates" label="Load patches from the master" onStart={start("updates")}>
						<p class="muted">Reads the patches on the master's file server.</p>
					</Start>
					{admin && (
						<Start
							id="job-build-graph"
							label="Build the graph"
							onStart={start("graph", { action: "build_graph", ...(master.trim() ? { master: master.trim() } : {}) })}
						>
							<Field label="Master (empty: the settings' address)">
								<input
									id="job-master"
									value={master}
									placeholder="salt-master-1"
									onInput={e => setMaster((e.target as HTMLInputElement).value)}
								/>
							</Field>
						</Start>
					)}
					{admin && (
						<Start
							id="job-request-ips"
							label="Resolve IP addresses"
							onStart={start("graph", {
								action: "request_ips",
								...(resolver.trim() ? { ip_resolver: resolver.trim() } : {}),
							})}
						>
							<Field label="IP resolver URL (empty: the settings' address)">
								<input
									id="job-resolver"
									value={resolver}
									placeholder="https://resolver.example/ips"
									onInput={e => setResolver((e.target as HTMLInputElement).value)}
								/>
							</Field>
						</Start>
					)}
				</div>
			)}
			<Problem text={error} />
			{jobs === null ? (
				<p class="muted">{error ? "" : "Loading…"}</p>
			) : jobs.length === 0 ? (
				<p class="empty" id="jobs-empty">
					No long work has run yet: the inventory sync runs on its own{operator ? "; start a patch load above" : ""}
					{admin ? ", or build the graph or resolve the IP addresses" : ""}.
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="jobs">
						<Head columns={["Work", "Status", "Progress", "Started", "Finished", "Result"]} />
						<tbody>
							{jobs.map(j => {
								const percent = j.percent ?? (j.status === "finished" ? 100 : null);
								return (
									<tr key={j._id} data-job={j._id}>
										<td>
											{KINDS[j._id] ?? j._id} <span class="mono muted">{j._id}</span>
										</td>
										<td>
											<Pill value={j.status} />
										</td>
										<td class="nowrap">
											<progress max={100} value={percent ?? 0} aria-label={`${KINDS[j._id] ?? j._id}: progress`} />{" "}
											{percent === null ? "–" : `${percent}%`} ({j.progress?.done ?? 0}/{j.progress?.total ?? 0})
										</td>
										<td class="nowrap">{j.started ?? "–"}</td>
										<td class="nowrap">{j.finished ?? (j.status === "running" ? "not yet" : "–")}</td>
										<td class="mono">{j.error ? <span class="error">{j.error}</span> : shown(j.result)}</td>
									</tr>
								);
							})}
						</tbody>
					</table>
				</div>
			)}
		</section>
	);
}
