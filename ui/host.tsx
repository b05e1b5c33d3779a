/**
 * A host's page, in Preact: what it is (presence, address, Salt version, groups by name), its key and
 * fingerprints, its VPN identity (and for operators the profile download), the maintenance windows that govern it,
 * how it compares with its declared state (and for operators the fix of what drifted), a form to run a function on
 * it, its recent actions and failed patches, and its grains, searchable by name or value.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api, download, q, type Me } from "./client";
import { Head, Pill, Problem, shown } from "./parts";
import { RunPanel } from "./run";

type Doc = Record<string, any>;

/** A definition list of the record's keys that are present, each `dd` marked with its key. */
function Facts({
	record,
	keys,
	render: custom = {},
}: {
	record: Doc;
	keys: string[];
	render?: Record<string, (v: any) => preact.ComponentChildren>;
}) {
	return (
		<dl class="kv">
			{keys
				.filter(k => k in record)
				.map(k => [
					<dt key={`t-${k}`}>{k}</dt>,
					<dd key={`d-${k}`} class={typeof record[k] === "object" && !custom[k] ? "mono" : ""} data-key={k}>
						{custom[k] ? custom[k](record[k]) : shown(record[k])}
					</dd>,
				])}
		</dl>
	);
}

/** Loads `path` once (and again when `deps` change); its answer, or why it failed. */
function useRead<T>(path: string | null, deps: unknown[] = []): { value?: T; error?: string; reload: () => void } {
	const [out, setOut] = useState<{ value?: T; error?: string }>({});
	const [tick, setTick] = useState(0);
	useEffect(() => {
		if (!path) return;
		let current = true;
		api<T>("GET", path)
			.then(value => current && setOut({ value }))
			.catch(err => current && setOut({ error: (err as Error).message }));
		return () => {
			current = false;
		};
	}, [path, tick, ...deps]);
	return { ...out, reload: () => setTick(t => t + 1) };
}

function VpnCard({ host, operator }: { host: Doc; operator: boolean }) {
	const [saved, setSaved] = useState("");
	const [busy, setBusy] = useState(false);
	const vpn = host.vpn_representation;
	if (!vpn || typeof vpn !== "object" || !Object.keys(vpn).length)
		return (
			<section class="card" id="host-vpn">
				<h2>VPN identity</h2>
				<p class="unavailable">No VPN identity for this host (not available).</p>
			</section>
		);
	// The archive holds the host's VPN keys: fetched with the Authorization header, never through a URL holding the token.
	const fetchProfile = async () => {
		setBusy(true);
		setSaved("Downloading…");
		try {
			const blob = await download(`hosts/${encodeURIComponent(host._id)}/vpn_profile`);
			const a = document.createElement("a");
			a.href = URL.createObjectURL(blob.data);
			a.download = blob.filename;
			a.click();
			setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
			setSaved(`Saved ${blob.filename} (${blob.data.size} bytes).`);
		} catch (err) {
			setSaved((err as Error).message);
		} finally {
			setBusy(false);
		}
	};
	return (
		<section class="card" id="host-vpn">
			<h2>VPN identity</h2>
			<Facts
				record={vpn}
				keys={[
					"name",
					"organization_name",
					"email",
					"type",
					"auth_type",
					"disabled",
					"hwtoken_id",
					"otp_secret",
					"pin",
					"groups",
					"dns_servers",
					"mac_addresses",
				]}
			/>
			{operator && (
				<div class="bar">
					<button type="button" id="vpn-profile" class="secondary" disabled={busy} onClick={() => void fetchProfile()}>
						Download VPN profile
					</button>
					<span id="vpn-profile-result" class="muted" role="status">
						{saved}
					</span>
				</div>
			)}
		</section>
	);
}

function WindowsCard({ id }: { id: string }) {
	const windows = useRead<{
		_items: Array<{
			_id: string;
			name: string;
			functions?: string[];
			timezone?: string;
			open: { end: string } | null;
			next: Array<{ start: string; end: string }>;
			error?: string;
		}>;
	}>(q(`hosts/${encodeURIComponent(id)}/maintenance_windows`, { count: 1 }));
	const when = (iso: string) => new Date(iso).toUTCString();
	return (
		<section class="card" id="host-windows">
			<h2>Maintenance windows</h2>
			<Problem text={windows.error ?? ""} />
			{windows.value &&
				(windows.value._items.length === 0 ? (
					<p class="muted">No maintenance window governs this host: runs may start at any time.</p>
				) : (
					<ul>
						{windows.value._items.map(w => (
							<li key={w._id}>
								<a href="#/windows">{w.name}</a>
								{w.functions?.length ? ` (${w.functions.join(", ")})` : ""}:{" "}
								{w.error ??
									(w.open
										? `open now, until ${when(w.open.end)}`
										: w.next[0]
											? `closed; next opens ${when(w.next[0].start)}`
											: "closed, with no opening ahead")}
							</li>
						))}
					</ul>
				))}
		</section>
	);
}

function ConformityCard({ id, operator }: { id: string; operator: boolean }) {
	const view = useRead<Doc>(`hosts/${encodeURIComponent(id)}/conformity`);
	const [fixing, setFixing] = useState("");
	const c = view.value;
	const fix = async () => {
		setFixing("Applying the drifted states…");
		try {
			const res = await api<Doc>("POST", `hosts/${encodeURIComponent(id)}/conformity/fix`);
			setFixing(
				res.status === "pending_approval"
					? "Held for approval: nothing ran yet."
					: `Fix started${res.task_id ? ` (job ${res.task_id})` : ""}; the host is checked again after.`,
			);
			view.reload();
		} catch (err) {
			setFixing((err as Error).message);
		}
	};
	return (
		<section class="card" id="host-conformity">
			<h2>Conformity</h2>
			<Problem text={view.error ?? ""} />
			{c &&
				(c.state === "unknown" ? (
					<p class="muted">
						Never checked: a conformity check (Conformity checks, or POST /api/conformity_checks) compares the host with
						its declared state.
					</p>
				) : (
					<>
						<p>
							<span class={`pill ${c.state === "conformant" ? "up" : "down"}`}>{c.state}</span> since {shown(c.since)},
							checked {shown(c.checked)}: {c.drifted} state(s) would change, {c.failing} failing
							{c.suppressed ? `, ${c.suppressed} suppressed` : ""}.
						</p>
						{c.states?.length > 0 && (
							<div class="table-scroll" tabIndex={0}>
								<table id="conformity-states">
									<Head columns={["State", "Function", "Result", "Would change"]} />
									<tbody>
										{c.states.slice(0, 50).map((s: Doc) => (
											<tr key={`${s.sls}/${s.state_id}`}>
												<td class="mono">
													{s.sls}: {s.state_id}
												</td>
												<td class="mono">{s.fun}</td>
												<td>
													{s.result === false ? (
														<span class="pill failed">failing</span>
													) : (
														<span class="pill pending">drifted</span>
													)}
												</td>
												<td class="mono">{shown(s.changes ?? s.comment)}</td>
											</tr>
										))}
									</tbody>
								</table>
							</div>
						)}
						{operator && c.drifted > 0 && (
							<div class="bar">
								<button type="button" id="conformity-fix" class="secondary" onClick={() => void fix()}>
									Fix what drifted
								</button>
								<span class="muted" role="status">
									{fixing}
								</span>
							</div>
						)}
					</>
				))}
		</section>
	);
}

function Grains({ grains }: { grains: Doc }) {
	const [find, setFind] = useState("");
	const keys = useMemo(() => Object.keys(grains).sort(), [grains]);
	const needle = find.trim().toLowerCase();
	const matching = needle
		? keys.filter(k => k.toLowerCase().includes(needle) || shown(grains[k]).toLowerCase().includes(needle))
		: keys;
	return (
		<section class="card" id="host-grains">
			<h2>Grains ({needle ? `${matching.length} of ${keys.length}` : keys.length})</h2>
			<input
				type="search"
				id="grain-filter"
				placeholder="Find a grain by name or value…"
				aria-label="Find a grain"
				value={find}
				onInput={e => setFind((e.target as HTMLInputElement).value)}
			/>
			{matching.length === 0 ? (
				<p class="muted">
					{keys.length ? "No grain matches." : "No grains known yet (the inventory sync brings them)."}
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table>
						<Head columns={["Grain", "Value"]} />
						<tbody>
							{matching.map(k => (
								<tr key={k}>
									<td class="nowrap">{k}</td>
									<td class="mono">{shown(grains[k])}</td>
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
		</section>
	);
}

/** Each record's `return` holds one entry per state step; the failed ones say why. */
function failedSteps(p: Doc): string {
	const steps = (Array.isArray(p.return) ? p.return : []).filter((step: Doc) => step && step.result === false);
	return (
		steps
			.map(
				(step: Doc) =>
					`${step.__id__ ?? step.name ?? "step"}: ${step.comment ?? ""}${step.changes?.stderr ? ` — ${String(step.changes.stderr).slice(0, 200)}` : ""}`,
			)
			.join("\n") || "–"
	);
}

export function HostPage({ id, me }: { id: string; me: Me }) {
	const host = useRead<Doc>(`hosts/${encodeURIComponent(id)}`, [id]);
	const h = host.value;
	const groupIds: string[] = Array.isArray(h?.groups) ? h.groups.slice(0, 50) : [];
	const groups = useRead<{ _items: Array<{ _id: string; name: string }> }>(
		groupIds.length
			? q("groups", { where: { _id: { $in: groupIds } }, projection: { name: 1 }, max_results: 50 })
			: null,
		[groupIds.join(",")],
	);
	const actions = useRead<{ _items: Doc[] }>(
		q("actions", {
			where: { host: id },
			sort: "-_created",
			max_results: 10,
			projection: { action: 1, state: 1, return: 1, jid: 1 },
		}),
		[id],
	);
	const failed = useRead<{ _items: Doc[] }>(
		q("failed_patches", { where: { host: id }, sort: "-_created", max_results: 10 }),
		[id],
	);
	const operator = me.role !== "viewer";
	const names = Object.fromEntries((groups.value?._items ?? []).map(g => [g._id, g.name]));
	if (host.error)
		return (
			<section>
				<p>
					<a href="#/hosts">‹ Hosts</a>
				</p>
				<h1>{id}</h1>
				<Problem text={host.error} />
			</section>
		);
	if (!h)
		return (
			<section>
				<h1>{id}</h1>
				<p class="muted">Loading…</p>
			</section>
		);
	return (
		<section>
			<p>
				<a href="#/hosts">‹ Hosts</a>
			</p>
			<h1 id="host-title">
				{h._id} <Pill value={h.status} />
			</h1>
			<div class="grid2">
				<section class="card" id="host-identity">
					<h2>Host</h2>
					<Facts
						record={h}
						keys={[
							"status",
							"ip",
							"version",
							"os",
							"heartbeat",
							"groups",
							"nodegroups",
							"identification_number",
							"last_action",
							"_updated",
						]}
						render={{
							groups: (ids: string[]) =>
								ids.length
									? ids.map((g, i) => (
											<span key={g}>
												{i ? ", " : ""}
												<a href={`#/groups/${g}`}>{names[g] ?? (groups.value ? "(a group you cannot see)" : "…")}</a>
											</span>
										))
									: "–",
							nodegroups: (n: string[]) => (n.length ? n.join(", ") : "–"),
						}}
					/>
				</section>
				<section class="card" id="host-keys">
					<h2>Keys</h2>
					<Facts record={h} keys={["key", "fingerprint", "fingerprint_history"]} />
				</section>
				<VpnCard host={h} operator={operator} />
				<WindowsCard id={h._id} />
			</div>
			<ConformityCard id={h._id} operator={operator} />
			{operator && <RunPanel kind="hosts" id={h._id} />}
			<section class="card">
				<h2>Recent actions</h2>
				<Problem text={actions.error ?? ""} />
				{actions.value &&
					(actions.value._items.length ? (
						<div class="table-scroll" tabIndex={0}>
							<table id="host-actions">
								<Head columns={["When", "Function", "State", "Return"]} />
								<tbody>
									{actions.value._items.map(a => (
										<tr key={a._id}>
											<td class="nowrap">{shown(a._created)}</td>
											<td class="mono">{a.action}</td>
											<td>
												<Pill value={a.state} />
											</td>
											<td class="mono">{shown(a.return)}</td>
										</tr>
									))}
								</tbody>
							</table>
						</div>
					) : (
						<p class="muted">
							No actions yet: runs on this host (here, on its groups, by tasks and rollouts) are listed here.
						</p>
					))}
			</section>
			<section class="card">
				<h2>Failed patches</h2>
				<Problem text={failed.error ?? ""} />
				{failed.value &&
					(failed.value._items.length ? (
						<div class="table-scroll" tabIndex={0}>
							<table id="failed-patches">
								<Head columns={["When", "Patch", "Failed steps"]} />
								<tbody>
									{failed.value._items.map(p => (
										<tr key={p._id}>
											<td class="nowrap">{shown(p._created)}</td>
											<td class="mono">{shown(p.patch ?? p.action)}</td>
											<td class="mono pre">{failedSteps(p)}</td>
										</tr>
									))}
								</tbody>
							</table>
						</div>
					) : (
						<p class="muted">No failed patches.</p>
					))}
			</section>
			<Grains grains={h.grain && typeof h.grain === "object" ? h.grain : {}} />
		</section>
	);
}
