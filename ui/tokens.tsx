/**
 * The tokens page, in Preact (docs/security.md, "Tokens" and "Single sign-on"): everyone's own API tokens for
 * scripts (`/api/tokens/mine`: made with a role at most theirs, the secret shown once, revocable), and for admins
 * every token and session with who it is, its role, scope and expiry, and revocation. Tokens minted from a token
 * (`owner`) are shown under it, as a tree of its principal's tokens (docs/security.md, "Principals"): revoking one
 * revokes its branch.
 */
import { useEffect, useState } from "preact/hooks";
import { api, q, type Me } from "./client";
import { Button, Field, Head, Problem, Scroll, useGuard } from "./parts";

interface Token {
	_id: string;
	name: string;
	role: string;
	scope?: { groups?: string[]; functions?: string[] };
	expires?: string;
	revoked?: boolean;
	session?: boolean;
	subject?: string;
	principal?: string;
	owner?: string;
	prefix?: string;
	_created?: string;
	/** The tokens API's word on it: whether it can run arbitrary code, and the sentence that says so. */
	arbitrary_code?: boolean;
	warning?: string;
}

const ROLES = ["viewer", "operator", "admin"] as const;
const scopeText = (t: Token) =>
	t.scope
		? [
				t.scope.groups ? `groups ${t.scope.groups.join(", ")}` : "",
				t.scope.functions ? `functions ${t.scope.functions.join(", ")}` : "",
			]
				.filter(Boolean)
				.join("; ")
		: "–";
const state = (t: Token) =>
	t.revoked ? "revoked" : t.expires && new Date(t.expires).getTime() <= Date.now() ? "expired" : "active";
/** Indentation stops here: deeper tokens are drawn at this depth (their `data-depth` still says how deep). */
const DEPTH_SHOWN = 6;

/**
 * `items` in tree order: each token followed by those minted from it (its `owner`), depth first, in list order; a
 * token whose maker is not in the list is a root. Each once, so records that point in a circle end the walk.
 */
function asTree(items: Token[]): Array<{ token: Token; depth: number; maker?: Token }> {
	const byId = new Map(items.map(t => [t._id, t]));
	const children = new Map<string, Token[]>();
	for (const t of items) if (t.owner && byId.has(t.owner)) children.set(t.owner, [...(children.get(t.owner) ?? []), t]);
	const out: Array<{ token: Token; depth: number; maker?: Token }> = [];
	const seen = new Set<string>();
	const visit = (t: Token, depth: number) => {
		if (seen.has(t._id)) return;
		seen.add(t._id);
		out.push({ token: t, depth, maker: t.owner ? byId.get(t.owner) : undefined });
		for (const c of children.get(t._id) ?? []) visit(c, depth + 1);
	};
	for (const t of items) if (!t.owner || !byId.has(t.owner)) visit(t, 0);
	for (const t of items) visit(t, 0);
	return out;
}

/**
 * Tokens as a tree-ordered table: name (under its maker, indented), (kind, principal,) role, scope, expiry, state, and
 * Revoke for the active ones.
 */
function TokenTable({
	id,
	items,
	kinds,
	onRevoke,
}: {
	id: string;
	items: Token[];
	kinds: boolean;
	onRevoke: (t: Token) => void;
}) {
	return (
		<Scroll>
			<table id={id}>
				<Head columns={["Name", ...(kinds ? ["Kind", "Principal"] : []), "Role", "Scope", "Expires", "State", ""]} />
				<tbody>
					{asTree(items).map(({ token: t, depth, maker }) => (
						<tr key={t._id} data-id={t._id} data-depth={depth}>
							<td
								class={`token-name depth-${Math.min(depth, DEPTH_SHOWN)}`}
								title={maker ? `made by ${maker.name}` : undefined}
							>
								{depth > 0 && <span aria-hidden="true">↳ </span>}
								{t.name}
								{maker && <span class="sr-only"> (made by {maker.name})</span>}
							</td>
							{kinds && <td>{t.session ? "session" : t.subject ? "personal" : t.owner ? "minted" : "API token"}</td>}
							{kinds && <td class="mono">{t.principal ?? "–"}</td>}
							<td>{t.role}</td>
							<td>
								{scopeText(t)}
								{t.warning && <div class="pill warning">{t.warning}</div>}
							</td>
							<td>{t.expires ?? "never"}</td>
							<td>
								<span class={`pill ${state(t)}`}>{state(t)}</span>
							</td>
							<td>{state(t) === "active" && <Button label="Revoke" onClick={() => onRevoke(t)} />}</td>
						</tr>
					))}
				</tbody>
			</table>
		</Scroll>
	);
}

function MyTokens({ me }: { me: Me }) {
	const [items, setItems] = useState<Token[] | null>(null);
	const [name, setName] = useState("");
	const [role, setRole] = useState<string>(me.role);
	const [made, setMade] = useState<{ name: string; token: string } | null>(null);
	const [error, guard] = useGuard();
	const load = () => guard(async () => setItems((await api<{ _items: Token[] }>("GET", "tokens/mine"))._items));
	useEffect(() => void load(), []);
	const create = (ev: Event) => {
		ev.preventDefault();
		return guard(async () => {
			const res = await api<Token & { token: string }>("POST", "tokens/mine", { name, role });
			setMade({ name: res.name, token: res.token });
			setName("");
			await load();
		});
	};
	const revoke = (t: Token) =>
		guard(async () => {
			await api("DELETE", `tokens/mine/${t._id}`);
			await load();
		});
	const allowed = ROLES.slice(0, ROLES.indexOf(me.role) + 1);
	return (
		<section>
			<h2>Your API tokens</h2>
			<p class="muted">
				For scripts and the REPL: a role at most yours ({me.role}){me.scope ? ", within your scope" : ""}, for 90 days.
				Sent as <code>Authorization: Bearer …</code>.
			</p>
			<Problem text={error} />
			{made && (
				<div class="card" id="new-token" role="status">
					<p>
						The secret of <strong>{made.name}</strong>, shown this once:
					</p>
					<input
						class="mono"
						readOnly
						value={made.token}
						aria-label="The new token's secret"
						onFocus={e => (e.target as HTMLInputElement).select()}
					/>
				</div>
			)}
			{items === null ? (
				<p class="muted">Loading…</p>
			) : items.length === 0 ? (
				<p class="empty">You have no API token. Make one below for a script.</p>
			) : (
				<TokenTable id="my-tokens" items={items} kinds={false} onRevoke={revoke} />
			)}
			<form class="card" id="new-my-token" onSubmit={create}>
				<Field label="Name">
					<input
						id="my-token-name"
						required
						value={name}
						placeholder="backup script"
						onInput={e => setName((e.target as HTMLInputElement).value)}
					/>
				</Field>
				<Field label="Role">
					<select id="my-token-role" value={role} onChange={e => setRole((e.target as HTMLSelectElement).value)}>
						{allowed.map(r => (
							<option key={r} value={r}>
								{r}
							</option>
						))}
					</select>
				</Field>
				<button type="submit">Make a token</button>
			</form>
		</section>
	);
}

function AllTokens() {
	const [items, setItems] = useState<Token[] | null>(null);
	const [error, guard] = useGuard();
	const load = () =>
		guard(async () =>
			setItems((await api<{ _items: Token[] }>("GET", q("tokens", { sort: "-_created", max_results: 50 })))._items),
		);
	useEffect(() => void load(), []);
	const revoke = (t: Token) =>
		guard(async () => {
			await api("DELETE", `tokens/${t._id}`);
			await load();
		});
	return (
		<section>
			<h2>All tokens and sessions</h2>
			<Problem text={error} />
			{items === null ? (
				<p class="muted">Loading…</p>
			) : (
				<TokenTable id="all-tokens" items={items} kinds={true} onRevoke={revoke} />
			)}
		</section>
	);
}

export function TokensPage({ me }: { me: Me }) {
	return (
		<section>
			<h1>Tokens</h1>
			<MyTokens me={me} />
			{me.role === "admin" && <AllTokens />}
		</section>
	);
}
