/**
 * The approvals page (docs/security.md, "Approvals"), the first page written with Preact (docs/dashboard.md): the
 * requests waiting for approvers — the exact call, its hosts, who asked, what each policy takes, the votes so far, a
 * dry run's predicted changes — with approve/reject and a comment for those who may decide, kept current by
 * /api/approvals/stream without a reload. Everything is rendered as text (Preact escapes), never as HTML.
 */
import { useEffect, useState } from "preact/hooks";
import { Head, Problem, RuleActions, Scroll, useGuard } from "./parts";
import { api, followStream, q, type Me } from "./client";

interface Policy {
	policy: string;
	name: string;
	count: number;
	roles: string[];
}
interface Vote {
	decision: string;
	name: string;
	role: string;
	comment: string;
	at: string;
}
export interface Approval {
	_id: string;
	status: string;
	origin: string;
	call: { cm_client: string; fun: string; arg?: unknown[]; kwarg?: Record<string, unknown> };
	hosts_count: number;
	target?: string;
	requester: { name: string; role: string; token: string };
	definition?: { kind: string; id: string };
	policies: Policy[];
	votes: Vote[];
	expires: string;
	dry_run?: {
		state: string;
		predicted?: Array<{ host: string; state_id: string }>;
		predicted_total?: number;
		predicted_failures?: number;
		error?: string;
	};
	run?: { status: string; jid?: string | null; message?: string };
	_created: string;
}

const callText = (a: Approval) =>
	[
		a.call.fun,
		...(a.call.arg ?? []).map(x => (typeof x === "string" ? x : JSON.stringify(x))),
		...Object.entries(a.call.kwarg ?? {}).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`),
	].join(" ");

function DryRun({ a }: { a: Approval }) {
	const d = a.dry_run;
	if (!d) return <span class="muted">–</span>;
	if (d.state === "running") return <span class="muted">dry run under way…</span>;
	if (d.state === "failed") return <span class="error">dry run failed: {d.error}</span>;
	return (
		<span>
			{d.predicted_total ?? 0} change(s) predicted{d.predicted_failures ? `, ${d.predicted_failures} failure(s)` : ""}
		</span>
	);
}

function Decide({ a, me, onDone }: { a: Approval; me: Me; onDone: (a: Approval) => void }) {
	const [comment, setComment] = useState("");
	const [busy, setBusy] = useState(false);
	const [error, setError] = useState("");
	const mayDecide =
		a.status === "pending" &&
		a.requester.token !== me._id &&
		a.policies.some(p => p.roles.includes(me.role)) &&
		!a.votes.some(v => v.name === me.name);
	if (!mayDecide) return null;
	const vote = async (decision: "approve" | "reject") => {
		setBusy(true);
		setError("");
		try {
			onDone(await api<Approval>("POST", `approvals/${a._id}/${decision}`, comment ? { comment } : {}));
		} catch (err) {
			setError((err as Error).message);
		} finally {
			setBusy(false);
		}
	};
	return (
		<div class="decide">
			<input
				aria-label={`Comment on request ${a._id}`}
				placeholder="comment"
				value={comment}
				onInput={e => setComment((e.target as HTMLInputElement).value)}
			/>
			<button type="button" disabled={busy} onClick={() => vote("approve")}>
				Approve
			</button>
			<button type="button" class="secondary" disabled={busy} onClick={() => vote("reject")}>
				Reject
			</button>
			<Problem text={error} />
		</div>
	);
}

interface PolicyRecord {
	_id: string;
	name: string;
	functions: string[];
	targets?: { groups?: string[]; target?: string };
	more_than_hosts?: number;
	/** Seconds of one principal's asks a `more_than_hosts` threshold counts (the API's default: 3600). */
	window?: number;
	origins?: string[];
	approvers: { count: number; roles: string[] };
	expires_after?: number;
	enabled?: boolean;
}

/** How long a threshold counts a principal's asks: "this run" for 0, else the largest whole unit. */
function windowText(s: number): string {
	if (s === 0) return "this run";
	const [n, unit] =
		s % 86_400 === 0
			? [s / 86_400, "day"]
			: s % 3600 === 0
				? [s / 3600, "hour"]
				: s % 60 === 0
					? [s / 60, "minute"]
					: [s, "second"];
	return `${n} ${unit}${n === 1 ? "" : "s"}`;
}

/** The approval policies: which runs need approvers; admins add, disable and delete them. */
function Policies({ me }: { me: Me }) {
	const [items, setItems] = useState<PolicyRecord[] | null>(null);
	const [form, setForm] = useState({
		name: "",
		functions: "cmd.run",
		target: "",
		more_than_hosts: "0",
		window: "3600",
		count: "1",
		roles: "admin",
	});
	const [error, guard] = useGuard();
	const [refusal, setRefusal] = useState("");
	const admin = me.role === "admin";
	const load = () =>
		guard(async () =>
			setItems(
				(await api<{ _items: PolicyRecord[] }>("GET", q("approval_policies", { sort: "name", max_results: 50 })))
					._items,
			),
		);
	useEffect(() => void load(), []);
	const change = (p: PolicyRecord, what: "toggle" | "delete") =>
		guard(async () => {
			if (what === "delete") await api("DELETE", `approval_policies/${p._id}`);
			else await api("PATCH", `approval_policies/${p._id}`, { enabled: p.enabled === false });
			await load();
		});
	const add = async (ev: Event) => {
		ev.preventDefault();
		setRefusal("");
		try {
			const list = (v: string) =>
				v
					.split(",")
					.map(x => x.trim())
					.filter(Boolean);
			await api("POST", "approval_policies", {
				name: form.name,
				functions: list(form.functions),
				...(form.target ? { targets: { target: form.target } } : {}),
				more_than_hosts: Number(form.more_than_hosts),
				window: Number(form.window),
				approvers: { count: Number(form.count), roles: list(form.roles) },
			});
			setForm({ ...form, name: "" });
			await load();
		} catch (err) {
			const issues = (err as { issues?: unknown }).issues;
			setRefusal(`${(err as Error).message}${issues ? `: ${JSON.stringify(issues)}` : ""}`);
		}
	};
	const input = (k: keyof typeof form, label: string) => (
		<label class="field">
			<span>{label}</span>
			<input
				id={`policy-${k}`}
				value={form[k]}
				onInput={e => setForm({ ...form, [k]: (e.target as HTMLInputElement).value })}
			/>
		</label>
	);
	return (
		<section>
			<h2>Policies</h2>
			<Problem text={error} />
			{items === null ? null : items.length === 0 ? (
				<p class="empty">
					No approval policy: every run goes as its token allows.{admin ? " Add one below." : " Admins add them."}
				</p>
			) : (
				<Scroll>
					<table id="policies">
						<Head
							columns={[
								"Name",
								"Functions",
								"Hosts",
								"More than",
								"Within",
								"From",
								"Approvers",
								"State",
								...(admin ? [""] : []),
							]}
						/>
						<tbody>
							{items.map(p => (
								<tr key={p._id} data-id={p._id}>
									<td>{p.name}</td>
									<td class="mono">{p.functions.join(", ")}</td>
									<td class="mono">
										{p.targets?.target ?? (p.targets?.groups?.length ? `${p.targets.groups.length} group(s)` : "any")}
									</td>
									<td>{p.more_than_hosts ?? 0} host(s)</td>
									<td>{windowText(p.window ?? 3600)}</td>
									<td>{p.origins?.join(", ") ?? "anywhere"}</td>
									<td>
										{p.approvers.count} × {p.approvers.roles.join("/")}
									</td>
									<td>
										<span class={`pill ${p.enabled === false ? "paused" : "up"}`}>
											{p.enabled === false ? "disabled" : "enabled"}
										</span>
									</td>
									{admin && (
										<RuleActions
											enabled={p.enabled !== false}
											onToggle={() => void change(p, "toggle")}
											onDelete={() => void change(p, "delete")}
										/>
									)}
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			{admin && (
				<form class="card" id="new-policy" onSubmit={add}>
					<h3>New policy</h3>
					{input("name", "Name")}
					{input("functions", "Functions (globs, comma separated)")}
					{input("target", "Only on (compound target; empty: any host)")}
					{input("more_than_hosts", "When on more than … hosts")}
					{input("window", "Counting one person's asks of the same call within … seconds (0: this run alone)")}
					{input("count", "Approvers needed")}
					{input("roles", "Of the roles (operator, admin)")}
					<button type="submit">Add policy</button>
					<Problem text={refusal} />
				</form>
			)}
		</section>
	);
}

export function ApprovalsPage({ me }: { me: Me }) {
	const [all, setAll] = useState(false);
	const [items, setItems] = useState<Approval[] | null>(null);
	const [error, setError] = useState("");
	const load = async () => {
		try {
			const res = await api<{ _items: Approval[] }>(
				"GET",
				q("approvals", { ...(all ? {} : { where: { status: "pending" } }), max_results: 50 }),
			);
			setItems(res._items);
			setError("");
		} catch (err) {
			setError((err as Error).message);
		}
	};
	useEffect(() => {
		void load();
		// A request made, voted on, decided or carried out anywhere: shown at once.
		const stream = followStream(
			"approvals/stream",
			"approval",
			(changed: Approval) =>
				setItems(list => {
					const rest = (list ?? []).filter(x => x._id !== changed._id);
					if (!all && changed.status !== "pending") return rest;
					return [changed, ...rest].sort((x, y) => (x._id < y._id ? 1 : -1));
				}),
			() => void load(),
		);
		return () => stream.stop();
	}, [all]);
	const replace = (a: Approval) =>
		setItems(list => (list ?? []).map(x => (x._id === a._id ? a : x)).filter(x => all || x.status === "pending"));
	return (
		<section>
			<h1>Approvals</h1>
			<p>
				<label>
					<input type="checkbox" checked={all} onChange={e => setAll((e.target as HTMLInputElement).checked)} /> show
					decided requests too
				</label>
			</p>
			<Problem text={error} />
			{items === null ? (
				<p class="muted">Loading…</p>
			) : items.length === 0 ? (
				<p class="empty">
					{all ? "No approval request yet." : "No request waits for a decision."} Runs that an approval policy matches
					(admins write them: POST /api/approval_policies) appear here as they are asked for.
				</p>
			) : (
				<Scroll>
					<table id="approvals">
						<Head columns={["Requested", "Call", "Hosts", "By", "Needs", "Votes", "Dry run", "Status", ""]} />
						<tbody>
							{items.map(a => (
								<tr key={a._id} data-id={a._id}>
									<td>{a._created}</td>
									<td class="mono">{callText(a)}</td>
									<td>
										{a.hosts_count} {a.target ? <span class="muted mono">{a.target}</span> : null}
									</td>
									<td>
										{a.requester.name}{" "}
										<span class="muted">
											({a.origin}
											{a.definition ? ` ${a.definition.kind}` : ""})
										</span>
									</td>
									<td>{a.policies.map(p => `${p.name}: ${p.count} × ${p.roles.join("/")}`).join("; ")}</td>
									<td>
										{a.votes.length
											? a.votes.map(v => `${v.decision} by ${v.name}${v.comment ? ` (“${v.comment}”)` : ""}`).join("; ")
											: "–"}
									</td>
									<td>
										<DryRun a={a} />
									</td>
									<td>
										<span class={`pill ${a.status}`}>{a.status}</span>
										{a.run?.jid ? (
											<span class="mono"> job {a.run.jid}</span>
										) : a.run?.message ? (
											<span class="error"> {a.run.message}</span>
										) : null}
									</td>
									<td>
										<Decide a={a} me={me} onDone={replace} />
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			<Policies me={me} />
		</section>
	);
}
