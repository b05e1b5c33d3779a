/**
 * Webhooks, in Preact (docs/webhooks.md; admins): every subscription with what it listens to (alert types, levels),
 * whether it is active and how its deliveries went; a form that subscribes one (its signing secret shown once) or
 * changes one (receiver, types, levels, description); Pause/Activate and Delete; a webhook's delivery log.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q } from "./client";
import { Field, Head, Pill, Problem, shown, refusal, useGuard } from "./parts";
import { LEVELS } from "./alerts";

interface Webhook {
	_id: string;
	url: string;
	types?: string[];
	levels?: string[];
	active?: boolean;
	description?: string;
}

/** Subscribes a webhook, or changes `hook`. */
function WebhookForm({ hook, onDone }: { hook: Webhook | null; onDone: (secret?: string) => void }) {
	const [url, setUrl] = useState(hook?.url ?? "");
	const [types, setTypes] = useState((hook?.types ?? ["*"]).join(" "));
	const [levels, setLevels] = useState<string[]>(hook?.levels ?? []);
	const [description, setDescription] = useState(hook?.description ?? "");
	const [error, setError] = useState("");
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setError("");
		try {
			// No level ticked: every level.
			const body = {
				url: url.trim(),
				types: types.split(/[\s,]+/).filter(Boolean),
				...(levels.length || hook ? { levels } : {}),
				...(description.trim() || hook ? { description: description.trim() } : {}),
			};
			if (hook) {
				await api("PATCH", `webhooks/${hook._id}`, body);
				onDone();
			} else onDone((await api<{ secret: string }>("POST", "webhooks", body)).secret);
		} catch (err) {
			setError(refusal(err));
		}
	};
	const toggle = (level: string) =>
		setLevels(ls =>
			ls.includes(level) ? ls.filter(l => l !== level) : LEVELS.filter(l => l === level || ls.includes(l)),
		);
	return (
		<form class="card" id={hook ? "wh-edit" : "wh-form"} onSubmit={submit}>
			<h2>{hook ? "Change the webhook" : "Subscribe a receiver"}</h2>
			<Field label="Receiver URL">
				<input
					id={hook ? "wh-edit-url" : "wh-url"}
					required
					value={url}
					placeholder="https://receiver.example/fleet"
					onInput={e => setUrl((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<Field label="Alert types">
				<input
					id={hook ? "wh-edit-types" : "wh-types"}
					value={types}
					placeholder="host.* patch.failed"
					onInput={e => setTypes((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<fieldset class="levels">
				<legend>Levels (none ticked: every level)</legend>
				{LEVELS.map(level => (
					<label key={level}>
						<input type="checkbox" data-level={level} checked={levels.includes(level)} onChange={() => toggle(level)} />{" "}
						{level}
					</label>
				))}
			</fieldset>
			<Field label="Description">
				<input
					id={hook ? "wh-edit-description" : "wh-description"}
					value={description}
					onInput={e => setDescription((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<div class="bar">
				<button type="submit">{hook ? "Save changes" : "Subscribe"}</button>
				{hook && (
					<button type="button" class="secondary" onClick={() => onDone()}>
						Cancel
					</button>
				)}
			</div>
			<Problem text={error} />
		</form>
	);
}

export function WebhooksPage() {
	const [hooks, setHooks] = useState<Webhook[] | null>(null);
	const [editing, setEditing] = useState<Webhook | null>(null);
	const [secret, setSecret] = useState("");
	const [error, guard] = useGuard();
	const load = () =>
		guard(async () => {
			setHooks((await api<{ _items: Webhook[] }>("GET", q("webhooks", { max_results: 200 })))._items);
		});
	useEffect(() => void load(), []);
	const act = (work: () => Promise<unknown>) =>
		guard(async () => {
			await work();
			await load();
		});
	return (
		<section>
			<h1>Webhooks</h1>
			<Problem text={error} />
			{editing === null && (
				<WebhookForm
					hook={null}
					onDone={s => {
						if (s) setSecret(s);
						void load();
					}}
				/>
			)}
			{secret && (
				<p id="wh-secret" role="status">
					Signing secret (shown once, keep it): <code class="mono">{secret}</code>
				</p>
			)}
			{editing && (
				<WebhookForm
					key={editing._id}
					hook={editing}
					onDone={() => {
						setEditing(null);
						void load();
					}}
				/>
			)}
			{hooks === null ? (
				<p class="muted">Loading…</p>
			) : hooks.length === 0 ? (
				<p class="empty">
					No webhook yet: subscribe a receiver above to have alerts posted to it as they are raised, signed with its
					secret.
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="webhooks">
						<Head columns={["Receiver", "Types", "Levels", "Active", "Deliveries", ""]} />
						<tbody>
							{hooks.map(w => (
								<tr key={w._id} data-id={w._id}>
									<td class="mono">
										{w.url}
										{w.description ? <div class="muted">{w.description}</div> : null}
									</td>
									<td class="mono">{(w.types ?? ["*"]).join(" ")}</td>
									<td>{w.levels?.length ? w.levels.join(", ") : "all"}</td>
									<td>{w.active === false ? "paused" : "yes"}</td>
									<td>
										<a href={`#/webhooks/${w._id}`}>log</a>
									</td>
									<td class="nowrap">
										<button type="button" class="secondary" onClick={() => setEditing(w)}>
											Edit
										</button>{" "}
										<button
											type="button"
											class="secondary"
											data-webhook={w._id}
											data-do="toggle"
											onClick={() => void act(() => api("PATCH", `webhooks/${w._id}`, { active: w.active === false }))}
										>
											{w.active === false ? "Activate" : "Pause"}
										</button>{" "}
										<button
											type="button"
											class="secondary"
											data-webhook={w._id}
											data-do="delete"
											onClick={() => void act(() => api("DELETE", `webhooks/${w._id}`))}
										>
											Delete
										</button>
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
		</section>
	);
}

export function DeliveriesPage({ id }: { id: string }) {
	const [rows, setRows] = useState<Array<Record<string, any>> | null>(null);
	const [hook, setHook] = useState<Webhook | null>(null);
	const [error, guard] = useGuard();
	useEffect(
		() =>
			void guard(async () => {
				const [w, d] = await Promise.all([
					api<Webhook>("GET", `webhooks/${encodeURIComponent(id)}`),
					api<{ _items: Array<Record<string, any>> }>(
						"GET",
						q(`webhooks/${encodeURIComponent(id)}/deliveries`, { max_results: 50 }),
					),
				]);
				setHook(w);
				setRows(d._items);
			}),
		[id],
	);
	return (
		<section>
			<p>
				<a href="#/webhooks">‹ Webhooks</a>
			</p>
			<h1>Deliveries{hook ? ` to ${hook.url}` : ""}</h1>
			<Problem text={error} />
			{rows === null ? (
				<p class="muted">{error ? "" : "Loading…"}</p>
			) : rows.length === 0 ? (
				<p class="empty">
					Nothing delivered yet: an alert of the types and levels it listens to is posted as soon as it is raised.
				</p>
			) : (
				<div class="table-scroll" tabIndex={0}>
					<table id="deliveries">
						<Head columns={["When", "Alert", "Status", "Attempts", "Last answer", "Next attempt"]} />
						<tbody>
							{rows.map(d => (
								<tr key={d._id}>
									<td class="nowrap">{shown(d._created)}</td>
									<td class="mono">{d.type}</td>
									<td>
										<Pill value={d.status} />
									</td>
									<td>{shown(d.attempts)}</td>
									<td class="mono">{shown(d.last_error ?? d.last_status)}</td>
									<td class="nowrap">{shown(d.next_attempt)}</td>
								</tr>
							))}
						</tbody>
					</table>
				</div>
			)}
		</section>
	);
}
