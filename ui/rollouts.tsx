/**
 * The rollouts page, in Preact (docs/rollouts.md): every rollout with its progress; one rollout's waves — the canary,
 * then each batch with its state, job, counts and a dry run's predicted changes — followed while it runs, with Pause,
 * Resume and Abort for operators; and a form to start one (the target resolved and authorized by the API).
 */
import { useEffect, useState } from "preact/hooks";
import { api, q, type ApiError, type Me } from "./client";
import { Head, Problem, Scroll } from "./parts";
import { parseRunArgs, splitWords } from "../lib/repl/words";

interface Batch {
	index: number;
	canary: boolean;
	from: number;
	to: number;
	state: string;
	jid?: string | null;
	succeeded?: number;
	failed?: number;
	timed_out?: number;
	unreached?: number;
	predicted_total?: number;
	predicted_failures?: number;
}
interface Rollout {
	_id: string;
	name: string;
	target: string;
	fun: string;
	status: string;
	reason?: string | null;
	total: number;
	done: number;
	failed: number;
	timed_out: number;
	unreached: number;
	budget: number;
	current: number;
	batches?: Batch[];
	waiting?: { for: string; window?: string; until?: string; approval?: string } | null;
	last_error?: string | null;
	_created: string;
}

/** How often a page that shows a running rollout reads it again. */
const FOLLOW_MS = 1500;
const CONTROLS: Record<string, string[]> = { running: ["pause", "abort"], paused: ["resume", "abort"] };

const progress = (r: Rollout) => `${r.done} of ${r.total}`;
const waitingText = (r: Rollout) =>
	r.waiting
		? r.waiting.for === "window"
			? `waits for the window '${r.waiting.window}' (${r.waiting.until})`
			: `waits for approval ${r.waiting.approval}`
		: "";

export function RolloutPage({ id, me }: { id: string; me: Me }) {
	const [r, setR] = useState<Rollout | null>(null);
	const [error, setError] = useState("");
	const load = async () => {
		try {
			setR(await api<Rollout>("GET", `rollouts/${encodeURIComponent(id)}`));
		} catch (err) {
			setError((err as Error).message);
		}
	};
	useEffect(() => {
		void load();
		const t = setInterval(() => void load(), FOLLOW_MS);
		return () => clearInterval(t);
	}, [id]);
	const control = async (action: string) => {
		try {
			setR(await api<Rollout>("PATCH", `rollouts/${encodeURIComponent(id)}/${action}`));
			setError("");
		} catch (err) {
			setError((err as Error).message);
		}
	};
	if (!r) return error ? <Problem text={error} /> : <p class="muted">Loading…</p>;
	return (
		<section id="rollout" data-status={r.status}>
			<p>
				<a href="#/rollouts">‹ Rollouts</a>
			</p>
			<h1>{r.name}</h1>
			<p>
				<span class="mono">{r.fun}</span> on <span class="mono">{r.target}</span>:{" "}
				<span class={`pill ${r.status}`}>{r.status}</span> {progress(r)} host(s) done,{" "}
				{r.failed + r.timed_out + r.unreached} failure(s) (budget {r.budget})
				{r.reason ? <span class="muted"> — {r.reason}</span> : null}
				{r.waiting ? <span class="muted"> — {waitingText(r)}</span> : null}
			</p>
			{me.role !== "viewer" &&
				(CONTROLS[r.status] ?? []).map(a => (
					<button key={a} type="button" class={a === "abort" ? "secondary" : ""} onClick={() => control(a)}>
						{a[0].toUpperCase() + a.slice(1)}
					</button>
				))}
			<Problem text={error || r.last_error || ""} />
			<Scroll>
				<table id="batches">
					<Head
						columns={[
							"Wave",
							"Hosts",
							"State",
							"Job",
							"Succeeded",
							"Failed",
							"Timed out",
							"Unreached",
							"Predicted changes",
						]}
					/>
					<tbody>
						{(r.batches ?? []).map(b => (
							<tr key={b.index} data-batch={b.index}>
								<td>{b.canary ? "canary" : `batch ${b.index}`}</td>
								<td>{b.to - b.from}</td>
								<td>
									<span class={`pill ${b.state}`}>{b.state}</span>
								</td>
								<td class="mono">{b.jid ? <a href={`#/jobs`}>{b.jid}</a> : "–"}</td>
								<td>{b.succeeded ?? "–"}</td>
								<td>{b.failed ?? "–"}</td>
								<td>{b.timed_out ?? "–"}</td>
								<td>{b.unreached ?? "–"}</td>
								<td>
									{b.predicted_total === undefined
										? "–"
										: `${b.predicted_total}${b.predicted_failures ? ` (${b.predicted_failures} failing)` : ""}`}
								</td>
							</tr>
						))}
					</tbody>
				</table>
			</Scroll>
		</section>
	);
}

function NewRollout() {
	const [form, setForm] = useState({
		name: "",
		target: "",
		call: "",
		batch: "10%",
		canary: "1",
		failure_budget: "0",
		wait_s: "0",
		dry_run_first: false,
	});
	const [issues, setIssues] = useState<Record<string, string>>({});
	const [error, setError] = useState("");
	const set = (k: keyof typeof form) => (e: Event) =>
		setForm({
			...form,
			[k]:
				(e.target as HTMLInputElement).type === "checkbox"
					? (e.target as HTMLInputElement).checked
					: (e.target as HTMLInputElement).value,
		});
	const count = (v: string) => (/^\d+$/.test(v) ? Number(v) : v);
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setIssues({});
		setError("");
		try {
			const [fun, ...words] = splitWords(form.call);
			const { arg, kwarg } = parseRunArgs(words);
			const made = await api<{ _id: string }>("POST", "rollouts", {
				name: form.name,
				target: form.target,
				fun: fun ?? "",
				...(arg.length ? { arg } : {}),
				...(Object.keys(kwarg).length ? { kwarg } : {}),
				batch: count(form.batch),
				canary: Number(form.canary),
				failure_budget: count(form.failure_budget),
				wait_s: Number(form.wait_s),
				dry_run_first: form.dry_run_first,
			});
			location.hash = `#/rollouts/${made._id}`;
		} catch (err) {
			const found = Object.fromEntries(
				Object.entries(((err as ApiError).issues ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v)]),
			);
			setIssues(found);
			setError((err as Error).message);
		}
	};
	const field = (k: keyof typeof form, label: string, hint: string) => (
		<label class="field">
			<span>{label}</span>
			<input
				id={`rollout-${k}`}
				value={String(form[k])}
				placeholder={hint}
				aria-invalid={issues[k] ? "true" : undefined}
				onInput={set(k)}
			/>
			{issues[k] && <span class="error">{issues[k]}</span>}
		</label>
	);
	return (
		<form class="card" id="new-rollout" onSubmit={submit}>
			<h2>Start a rollout</h2>
			{field("name", "Name", "openssl update")}
			{field("target", "Hosts (compound target)", "G@os:Debian and web-*")}
			{field("call", "Function and arguments", "state.apply openssl")}
			{field("canary", "Canary hosts", "1")}
			{field("batch", "Batch (hosts or %)", "10%")}
			{field("failure_budget", "Failure budget (hosts or %)", "0")}
			{field("wait_s", "Wait between batches (s)", "0")}
			<label class="field">
				<span>Dry run first (states)</span>
				<input
					id="rollout-dry_run_first"
					type="checkbox"
					checked={form.dry_run_first}
					onChange={set("dry_run_first")}
				/>
			</label>
			<button type="submit">Start</button>
			<Problem text={error} />
		</form>
	);
}

export function RolloutsPage({ me }: { me: Me }) {
	const [items, setItems] = useState<Rollout[] | null>(null);
	const [error, setError] = useState("");
	useEffect(() => {
		const load = () =>
			api<{ _items: Rollout[] }>("GET", q("rollouts", { sort: "-_created", max_results: 50 }))
				.then(res => setItems(res._items))
				.catch(err => setError((err as Error).message));
		void load();
		const t = setInterval(() => void load(), FOLLOW_MS * 2);
		return () => clearInterval(t);
	}, []);
	return (
		<section>
			<h1>Rollouts</h1>
			<Problem text={error} />
			{items === null ? (
				<p class="muted">Loading…</p>
			) : items.length === 0 ? (
				<p class="empty">
					No rollout yet: a change in waves (a canary, then batches, paused past its failure budget).
					{me.role === "viewer" ? "" : " Start one below."}
				</p>
			) : (
				<Scroll>
					<table id="rollouts">
						<Head columns={["Name", "Call", "Target", "Status", "Progress", "Failures", "Started"]} />
						<tbody>
							{items.map(r => (
								<tr key={r._id} data-id={r._id}>
									<td>
										<a href={`#/rollouts/${r._id}`}>{r.name}</a>
									</td>
									<td class="mono">{r.fun}</td>
									<td class="mono">{r.target}</td>
									<td>
										<span class={`pill ${r.status}`}>{r.status}</span> <span class="muted">{waitingText(r)}</span>
									</td>
									<td>{progress(r)}</td>
									<td>
										{r.failed + r.timed_out + r.unreached} / {r.budget}
									</td>
									<td>{r._created}</td>
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			{me.role !== "viewer" && <NewRollout />}
		</section>
	);
}
