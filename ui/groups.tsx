/**
 * The groups list, in Preact (docs/graph.md, docs/targeting.md): every group with what it is (static, automatic by
 * rule, a graph's root), the hosts it resolves to now (its subgroups' and rules' too, not only the hosts listed) and
 * its subgroups by name; for admins a form to make one — listed hosts, a compound target rule, subgroups — with the
 * hosts it would select previewed as it is typed (POST /targets/preview), and Delete.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q, type ApiError, type Me } from "./client";
import { Button, Field, GroupPicker, Head, Problem, Scroll, TargetPreview, useGuard, useTargetPreview } from "./parts";

export interface Group {
	_id: string;
	name: string;
	type?: number;
	hosts?: string[];
	subgroups?: string[];
	info?: { regex?: string; grain?: Record<string, string>; target?: string | null };
	_updated?: string;
}

/** What a group's `type` means (docs/graph.md). */
export const GROUP_KINDS: Record<number, string> = {
	0: "static",
	1: "automatic (rule)",
	2: "graph root",
	3: "type 3",
	4: "type 4",
};

/**
 * The form that makes a group (`group` absent) or changes one: name, listed hosts, a compound target rule (previewed
 * as it is typed; emptied on a change, the rule is dropped) and subgroups. `prefix` names its elements.
 */
export function GroupForm({
	group,
	groups,
	prefix,
	onDone,
}: {
	group?: Group;
	groups: Group[];
	prefix: string;
	onDone: () => void;
}) {
	const [name, setName] = useState(group?.name ?? "");
	const [hosts, setHosts] = useState((group?.hosts ?? []).join(", "));
	const [target, setTarget] = useState(group?.info?.target ?? "");
	const [subgroups, setSubgroups] = useState<string[]>(group?.subgroups ?? []);
	const preview = useTargetPreview(target);
	const [error, setError] = useState("");
	// A rule the form does not edit (a nodegroup's regex or grains) keeps the group automatic.
	const otherRule = !!(group?.info?.regex || (group?.info?.grain && Object.keys(group.info.grain).length));
	const submit = async (ev: Event) => {
		ev.preventDefault();
		setError("");
		try {
			const listed = hosts.split(/[\s,]+/).filter(Boolean);
			const rule = target.trim();
			if (group)
				await api("PATCH", `groups/${group._id}`, {
					name,
					hosts: listed,
					subgroups,
					info: { target: rule || null },
					type: rule || otherRule ? 1 : 0,
				});
			else {
				await api("POST", "groups", {
					name,
					type: target ? 1 : 0,
					...(listed.length ? { hosts: listed } : {}),
					...(subgroups.length ? { subgroups } : {}),
					...(target ? { info: { target } } : {}),
				});
				setName("");
				setHosts("");
				setTarget("");
				setSubgroups([]);
			}
			onDone();
		} catch (err) {
			const issues = (err as ApiError).issues;
			setError(`${(err as Error).message}${issues ? `: ${JSON.stringify(issues)}` : ""}`);
		}
	};
	return (
		<form class="card" id={group ? "edit-group" : "new-group"} onSubmit={submit}>
			<h2>{group ? "Change the group" : "New group"}</h2>
			<Field label="Name">
				<input
					id={`${prefix}-name`}
					required
					value={name}
					onInput={e => setName((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<Field label="Hosts (listed)">
				<input
					id={`${prefix}-hosts`}
					value={hosts}
					placeholder="web-01, web-02"
					onInput={e => setHosts((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<Field label="Rule (compound target)">
				<input
					id={`${prefix}-target`}
					value={target}
					placeholder="G@roles:web and not web-9*"
					onInput={e => setTarget((e.target as HTMLInputElement).value)}
				/>
			</Field>
			<TargetPreview id={`${prefix}-preview`} preview={preview} />
			<Field label="Subgroups">
				<GroupPicker
					id={`${prefix}-subgroups`}
					groups={group ? groups.filter(g => g._id !== group._id) : groups}
					chosen={subgroups}
					onChange={setSubgroups}
				/>
			</Field>
			<button type="submit">{group ? "Save changes" : "Add group"}</button>
			<Problem text={error} />
		</form>
	);
}

export function GroupsPage({ me }: { me: Me }) {
	const [groups, setGroups] = useState<Group[] | null>(null);
	const [counts, setCounts] = useState<Record<string, number>>({});
	const [error, guard] = useGuard();
	const admin = me.role === "admin";
	const load = () =>
		guard(async () => {
			const res = await api<{ _items: Group[] }>("GET", q("groups", { sort: "name", max_results: 50 }));
			setGroups(res._items);
			// What each group resolves to now: its listed hosts, its subgroups' and its rule's.
			const resolved: Record<string, number> = {};
			await Promise.all(
				res._items.map(async g => (resolved[g._id] = (await api<string[]>("GET", `groups/${g._id}/hostnames`)).length)),
			);
			setCounts(resolved);
		});
	useEffect(() => void load(), []);
	const names = Object.fromEntries((groups ?? []).map(g => [g._id, g.name]));
	const remove = (g: Group) =>
		guard(async () => {
			await api("DELETE", `groups/${g._id}`);
			await load();
		});
	return (
		<section>
			<h1>Groups</h1>
			<Problem text={error} />
			{groups === null ? (
				<p class="muted">Loading…</p>
			) : groups.length === 0 ? (
				<p class="empty">
					No group yet: a group names hosts (listed, by a rule, or through its subgroups) to run on together.
					{admin ? " Add one below." : ""}
				</p>
			) : (
				<Scroll>
					<table id="groups">
						<Head columns={["Name", "Kind", "Hosts", "Rule", "Subgroups", ...(admin ? [""] : [])]} />
						<tbody>
							{groups.map(g => (
								<tr key={g._id} data-id={g._id}>
									<td>
										<a href={`#/groups/${g._id}`}>{g.name}</a>
									</td>
									<td>{GROUP_KINDS[g.type ?? 0] ?? `type ${g.type}`}</td>
									<td>{counts[g._id] ?? "…"}</td>
									<td class="mono">
										{g.info?.target ??
											g.info?.regex ??
											(g.info?.grain
												? Object.entries(g.info.grain)
														.map(([k, v]) => `${k}=${v}`)
														.join(", ")
												: "–")}
									</td>
									<td>{(g.subgroups ?? []).map(s => names[s] ?? s).join(", ") || "–"}</td>
									{admin && (
										<td>
											<Button label="Delete" onClick={() => remove(g)} />
										</td>
									)}
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			{admin && groups !== null && <GroupForm groups={groups} prefix="group" onDone={() => void load()} />}
		</section>
	);
}
