/**
 * Running a Salt function from a page (a host's, a group's), in Preact: the form (function, arguments as the REPL
 * reads them), then the job's hosts as their returns arrive — read again each time the gateway says returns of
 * the job were recorded (GET /api/actions/stream?jid=), and every few seconds in case the stream was lost. A run
 * held for approval says so, with a link to the request.
 */
import { useEffect, useState } from "preact/hooks";
import { api, followStream, q } from "./client";
import { Pill, Problem, shown } from "./parts";
// The REPL's own words: one source for both (bundled by Vite).
import { parseRunArgs, splitWords } from "../lib/repl/words";

interface ActionRecord {
	_id: string;
	host: string;
	state: string;
	return?: unknown;
}

/** A fallback read, should the stream be lost. */
const POLL_MS = 5000;
/** How long a page follows a job. */
const FOLLOW_MS = 120_000;

/** The hosts of job `jid`, as their returns arrive. */
export function JobReturns({ jid }: { jid: string }) {
	const [records, setRecords] = useState<{ items: ActionRecord[]; total: number } | null>(null);
	const [error, setError] = useState("");
	useEffect(() => {
		let finished = false;
		let reading = false;
		let again = false;
		const read = async (): Promise<void> => {
			if (finished) return;
			if (reading) {
				again = true;
				return;
			}
			reading = true;
			try {
				const res = await api<{ _items: ActionRecord[]; _meta: { total: number } }>(
					"GET",
					q("actions", { where: { jid }, sort: "host", max_results: 50, projection: { host: 1, state: 1, return: 1 } }),
				);
				setRecords({ items: res._items, total: res._meta.total });
				setError("");
				finished = res._meta.total > 0 && res._items.every(a => a.state !== "running");
			} catch (err) {
				setError((err as Error).message);
			} finally {
				reading = false;
			}
			if (finished) stop();
			else if (again) {
				again = false;
				void read();
			}
		};
		const live = followStream(
			`actions/stream?jid=${jid}`,
			"returns",
			() => void read(),
			() => void read(),
		);
		const poll = setInterval(() => void read(), POLL_MS);
		const deadline = setTimeout(() => stop(), FOLLOW_MS);
		function stop() {
			live.stop();
			clearInterval(poll);
			clearTimeout(deadline);
		}
		void read();
		return stop;
	}, [jid]);
	const running = records?.items.filter(a => a.state === "running").length ?? 0;
	return (
		<div>
			<Problem text={error} />
			{records && (
				<>
					<p id="run-summary">
						job <span class="mono nowrap">{jid}</span>: {records.total - running} of {records.total} host(s) answered
						{records.total > records.items.length
							? ` (the first ${records.items.length} shown: the job history has them all)`
							: ""}
					</p>
					<div class="table-scroll" tabIndex={0}>
						<table id="run-returns">
							<thead>
								<tr>
									<th>Host</th>
									<th>State</th>
									<th>Return</th>
								</tr>
							</thead>
							<tbody>
								{records.items.map(a => (
									<tr key={a._id}>
										<td class="nowrap">
											<a href={`#/hosts/${encodeURIComponent(a.host)}`}>{a.host}</a>
										</td>
										<td>
											<Pill value={a.state} />
										</td>
										<td class="mono">{shown(a.return)}</td>
									</tr>
								))}
							</tbody>
						</table>
					</div>
				</>
			)}
		</div>
	);
}

/** The form that runs a function on a host or a group, and what it started. */
export function RunPanel({ kind, id }: { kind: "hosts" | "groups"; id: string }) {
	const [fun, setFun] = useState("test.ping");
	const [args, setArgs] = useState("");
	const [started, setStarted] = useState<{ jid?: string; nothing?: boolean; held?: { id: string } } | null>(null);
	const [error, setError] = useState("");
	const [busy, setBusy] = useState(false);
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setError("");
		setStarted(null);
		setBusy(true);
		try {
			const { arg, kwarg } = parseRunArgs(splitWords(args));
			const res = await api<{ task_id?: string | null; status?: string; approval?: { _id: string } }>(
				"POST",
				`${kind}/${encodeURIComponent(id)}`,
				{ cm_client: "local_async", fun: fun.trim(), arg, kwarg },
			);
			if (res.status === "pending_approval") setStarted({ held: { id: res.approval?._id ?? "" } });
			else if (!res.task_id) setStarted({ nothing: true });
			else setStarted({ jid: res.task_id });
		} catch (err) {
			setError((err as Error).message);
		} finally {
			setBusy(false);
		}
	};
	return (
		<section class="card" id="run">
			<h2>Run a function</h2>
			<form class="bar" onSubmit={submit}>
				<input
					id="run-fun"
					aria-label="Salt function"
					size={18}
					value={fun}
					onInput={e => setFun((e.target as HTMLInputElement).value)}
				/>
				<input
					id="run-args"
					aria-label="Arguments"
					placeholder="args and k=v …"
					size={30}
					value={args}
					onInput={e => setArgs((e.target as HTMLInputElement).value)}
				/>
				<button type="submit" id="run-go" disabled={busy}>
					{`Run on ${kind === "hosts" ? "host" : "group"}`}
				</button>
			</form>
			<div id="run-result">
				<Problem text={error} />
				{started?.nothing && <p id="run-summary">No minion matched: nothing ran.</p>}
				{started?.held && (
					<p id="run-summary">
						Held for approval: nothing ran yet; it runs once the request is approved.{" "}
						<a href="#/approvals">See the request</a>.
					</p>
				)}
				{started?.jid && <JobReturns key={started.jid} jid={started.jid} />}
			</div>
		</section>
	);
}
