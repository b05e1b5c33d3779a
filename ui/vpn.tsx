/**
 * The VPN page, in Preact (docs/vpn.md): the Pritunl servers fleet-ctl manages (VPN managers; passwords never shown
 * back) and their organizations, by name; for operators Sync (an organization read again from its Pritunl), for
 * admins a form to add a manager, a form to create an organization in one, and Delete.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q, type Me } from "./client";
import { Button, Field, Head, Problem, Scroll, useGuard } from "./parts";

interface Manager {
	_id: string;
	name: string;
	server_address: string;
	dashboard_address: string;
	username: string;
}
interface Organization {
	_id: string;
	name: string;
	vpn_manager: string;
	type?: number;
	cipher_type?: string;
	_updated?: string;
}

const NEW_MANAGER = { name: "", server_address: "", dashboard_address: "", username: "", password: "" };

export function VpnPage({ me }: { me: Me }) {
	const [managers, setManagers] = useState<Manager[] | null>(null);
	const [orgs, setOrgs] = useState<Organization[]>([]);
	const [form, setForm] = useState({ ...NEW_MANAGER });
	const [org, setOrg] = useState({ name: "", vpn_manager: "" });
	const [note, setNote] = useState("");
	const [error, guard] = useGuard();
	const admin = me.role === "admin";
	const load = () =>
		guard(async () => {
			const [m, o] = await Promise.all([
				api<{ _items: Manager[] }>("GET", q("vpn_managers", { sort: "name", max_results: 50 })),
				api<{ _items: Organization[] }>("GET", q("vpn_organizations", { sort: "name", max_results: 50 })),
			]);
			setManagers(m._items);
			setOrgs(o._items);
		});
	useEffect(() => void load(), []);
	const names = Object.fromEntries((managers ?? []).map(m => [m._id, m.name]));
	const addManager = (ev: Event) => {
		ev.preventDefault();
		return guard(async () => {
			await api("POST", "vpn_managers", form);
			setForm({ ...NEW_MANAGER });
			await load();
		});
	};
	const addOrg = (ev: Event) => {
		ev.preventDefault();
		return guard(async () => {
			await api("POST", "vpn_organizations", { name: org.name, vpn_manager: org.vpn_manager || managers?.[0]?._id });
			setOrg({ name: "", vpn_manager: org.vpn_manager });
			await load();
		});
	};
	const sync = (o: Organization) =>
		guard(async () => {
			await api("POST", `vpn_organizations/${o._id}/sync`);
			setNote(`${o.name} read again from its Pritunl`);
			await load();
		});
	const remove = (path: string) =>
		guard(async () => {
			await api("DELETE", path);
			await load();
		});
	const input = (k: keyof typeof NEW_MANAGER, label: string, hint: string) => {
		const props = {
			id: `manager-${k}`,
			value: form[k],
			placeholder: hint,
			autoComplete: "off",
			onInput: (e: Event) => setForm({ ...form, [k]: (e.target as HTMLInputElement).value }),
		};
		return (
			<label class="field">
				<span>{label}</span>
				{k === "password" ? <input type="password" {...props} /> : <input type="text" {...props} />}
			</label>
		);
	};
	return (
		<section>
			<h1>VPN</h1>
			<Problem text={error} />
			{note && (
				<p class="muted" role="status">
					{note}
				</p>
			)}
			<h2>Managers (Pritunl servers)</h2>
			{managers === null ? (
				<p class="muted">Loading…</p>
			) : managers.length === 0 ? (
				<p class="empty">
					No VPN manager: hosts have no VPN identity until an admin adds the Pritunl server that keeps them.
				</p>
			) : (
				<Scroll>
					<table id="vpn-managers">
						<Head columns={["Name", "API", "Dashboard", "User", ...(admin ? [""] : [])]} />
						<tbody>
							{managers.map(m => (
								<tr key={m._id} data-id={m._id}>
									<td>{m.name}</td>
									<td class="mono">{m.server_address}</td>
									<td>
										<a href={m.dashboard_address} rel="noreferrer noopener" target="_blank">
											{m.dashboard_address}
										</a>
									</td>
									<td>{m.username}</td>
									{admin && (
										<td>
											<Button label="Delete" onClick={() => remove(`vpn_managers/${m._id}`)} />
										</td>
									)}
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			<h2>Organizations</h2>
			{orgs.length === 0 ? (
				<p class="empty">No organization yet.{admin ? " Create one in a manager below." : ""}</p>
			) : (
				<Scroll>
					<table id="vpn-organizations">
						<Head columns={["Name", "Manager", "Updated", ""]} />
						<tbody>
							{orgs.map(o => (
								<tr key={o._id} data-id={o._id}>
									<td>{o.name}</td>
									<td>{names[o.vpn_manager] ?? o.vpn_manager}</td>
									<td>{o._updated ?? "–"}</td>
									<td>
										{me.role !== "viewer" && <Button label="Sync" onClick={() => sync(o)} />}{" "}
										{admin && <Button label="Delete" onClick={() => remove(`vpn_organizations/${o._id}`)} />}
									</td>
								</tr>
							))}
						</tbody>
					</table>
				</Scroll>
			)}
			{admin && (
				<>
					<form class="card" id="new-manager" onSubmit={addManager}>
						<h3>Add a manager</h3>
						{input("name", "Name", "site-a")}
						{input("server_address", "API address", "https://vpn.example.org")}
						{input("dashboard_address", "Dashboard address", "https://vpn.example.org/")}
						{input("username", "User", "fleet")}
						{input("password", "Password", "")}
						<button type="submit">Add manager</button>
					</form>
					{managers?.length ? (
						<form class="card" id="new-organization" onSubmit={addOrg}>
							<h3>Create an organization</h3>
							<Field label="Name">
								<input
									id="organization-name"
									required
									value={org.name}
									onInput={e => setOrg({ ...org, name: (e.target as HTMLInputElement).value })}
								/>
							</Field>
							<Field label="In manager">
								<select
									id="organization-manager"
									value={org.vpn_manager}
									onChange={e => setOrg({ ...org, vpn_manager: (e.target as HTMLSelectElement).value })}
								>
									{managers.map(m => (
										<option key={m._id} value={m._id}>
											{m.name}
										</option>
									))}
								</select>
							</Field>
							<button type="submit">Create</button>
						</form>
					) : null}
				</>
			)}
		</section>
	);
}
