/**
 * The fleet-ctl dashboard's shell, in Preact: signing in (a token, or single sign-on), the header with the menu of the
 * pages the role is offered (GET /api/whoami) and the unread alerts' badge, the live alert stream and its toasts, the
 * hash router (#/<page>/<id>?<view>) that shows one page at a time, and the keyboard shortcuts with their help
 * dialog. Every page is a Preact component of its own module; everything is read and done through /api.
 */
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import {
	api,
	q,
	token,
	followAlerts,
	signInOptions,
	signOutSession,
	borrowToken,
	shareToken,
	ApiError,
	type Me,
} from "./client";
import type { PageProps } from "./parts";
import { ActionsPage } from "./actions";
import { AlertsPage, ALERTS_READ, type Alert } from "./alerts";
import { ApprovalsPage } from "./approvals";
import { AuditPage } from "./audit";
import { GroupPage } from "./group";
import { GroupsPage } from "./groups";
import { HistoryList, JobPage } from "./history";
import { HostPage } from "./host";
import { HostsPage } from "./hosts";
import { JobsPage } from "./jobs";
import { RolloutPage, RolloutsPage } from "./rollouts";
import { StatsPage } from "./stats";
import { TasksPage } from "./tasks";
import { TokensPage } from "./tokens";
import { VpnPage } from "./vpn";
import { WebhooksPage, DeliveriesPage } from "./webhooks";
import { WindowsPage } from "./windows";
import { Shortcuts, useLandingFocus, useShortcuts } from "./keys";

type Role = Me["role"];
const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** A page of the menu: its path (#/<path>), its name, the key that goes to it after `g`, the least role offered it. */
export interface PageDef {
	path: string;
	label: string;
	key: string;
	role: Role;
	page: (p: PageProps) => preact.JSX.Element;
}

export const PAGES: PageDef[] = [
	{
		path: "hosts",
		label: "Hosts",
		key: "h",
		role: "viewer",
		page: ({ me, id }) => (id ? <HostPage id={id} me={me} /> : <HostsPage />),
	},
	{
		path: "groups",
		label: "Groups",
		key: "g",
		role: "viewer",
		page: ({ me, id }) => (id ? <GroupPage id={id} me={me} /> : <GroupsPage me={me} />),
	},
	{ path: "stats", label: "Statistics", key: "s", role: "viewer", page: () => <StatsPage /> },
	{ path: "alerts", label: "Alerts", key: "a", role: "viewer", page: () => <AlertsPage /> },
	{ path: "actions", label: "Actions", key: "x", role: "viewer", page: () => <ActionsPage /> },
	{ path: "tasks", label: "Tasks", key: "t", role: "viewer", page: ({ me }) => <TasksPage me={me} /> },
	{
		path: "history",
		label: "Job history",
		key: "j",
		role: "viewer",
		page: ({ id }) => (id ? <JobPage jid={id} /> : <HistoryList />),
	},
	{ path: "jobs", label: "Jobs", key: "l", role: "viewer", page: ({ me }) => <JobsPage me={me} /> },
	{
		path: "rollouts",
		label: "Rollouts",
		key: "r",
		role: "viewer",
		page: ({ me, id }) => (id ? <RolloutPage id={id} me={me} /> : <RolloutsPage me={me} />),
	},
	{ path: "approvals", label: "Approvals", key: "p", role: "operator", page: ({ me }) => <ApprovalsPage me={me} /> },
	{ path: "windows", label: "Windows", key: "w", role: "viewer", page: ({ me }) => <WindowsPage me={me} /> },
	{ path: "vpn", label: "VPN", key: "v", role: "viewer", page: ({ me }) => <VpnPage me={me} /> },
	{ path: "tokens", label: "Tokens", key: "k", role: "viewer", page: ({ me }) => <TokensPage me={me} /> },
	{ path: "audit", label: "Audit", key: "u", role: "admin", page: () => <AuditPage /> },
	{
		path: "webhooks",
		label: "Webhooks",
		key: "b",
		role: "admin",
		page: ({ id }) => (id ? <DeliveriesPage id={id} /> : <WebhooksPage />),
	},
];

const offered = (me: Me) => PAGES.filter(p => RANK[me.role] >= RANK[p.role]);

/** The page and id the URL names (#/hosts/web-01?status=up → hosts, web-01); a view's own state may follow the "?". */
function where(hash: string): { path: string; id?: string } {
	const [, path = "", id] = hash.split("?")[0].split("/").map(decodeURIComponent);
	return { path, id: id || undefined };
}

function problemText(err: unknown): string {
	const e = err as ApiError;
	return `${e.status ? `${e.status}: ` : ""}${e.message}`;
}

/**
 * What the gateway offers for signing in (single sign-on or not), asked once as the dashboard loads: a sign-in form
 * shown later (a session that ended) shows it at once.
 */
let signInOffer: { oidc: boolean; name?: string } | null = null;
const signInOffered = signInOptions().then(o => (signInOffer = o));

function SignIn({ message, onToken }: { message: string; onToken: (t: string) => Promise<void> }) {
	const [value, setValue] = useState("");
	const [error, setError] = useState(message);
	const [sso, setSso] = useState(signInOffer);
	const input = useRef<HTMLInputElement>(null);
	useEffect(() => {
		input.current?.focus();
		// Single sign-on, when the gateway offers it: a link (a navigation, not a form) to /auth/login.
		void signInOffered.then(setSso);
	}, []);
	const submit = async (ev: Event) => {
		ev.preventDefault();
		try {
			await onToken(value.trim());
		} catch (err) {
			setError(problemText(err));
		}
	};
	return (
		<form class="card login" id="signin" onSubmit={submit}>
			<h1>Sign in to fleet-ctl</h1>
			<div id="sso">
				{sso?.oidc && (
					<>
						<a class="button" id="sso-signin" href="/auth/login">
							Sign in with {sso.name ?? "single sign-on"}
						</a>
						<p class="muted">or paste an API token:</p>
					</>
				)}
			</div>
			<p class="muted">Paste an API token. It is kept in this tab only (sessionStorage).</p>
			<input
				ref={input}
				type="password"
				id="token"
				placeholder="fct_…"
				autoComplete="off"
				aria-label="API token"
				value={value}
				onInput={e => setValue((e.target as HTMLInputElement).value)}
			/>
			<button type="submit">Sign in</button>
			{error && (
				<p class="error" role="alert">
					{error}
				</p>
			)}
		</form>
	);
}

function Header({
	me,
	here,
	unread,
	onHelp,
	onSignOut,
}: {
	me: Me;
	here: string;
	unread: number;
	onHelp: () => void;
	onSignOut: () => void;
}) {
	return (
		<header id="top">
			<strong class="brand">fleet-ctl</strong>
			<nav id="nav" aria-label="Pages">
				{offered(me).map(p => (
					<a
						key={p.path}
						href={`#/${p.path}`}
						class={here === p.path ? "active" : ""}
						aria-current={here === p.path ? "page" : undefined}
					>
						{p.label}
						{p.path === "alerts" && unread > 0 && (
							<span class="badge" id="unread">
								{unread}
								<span class="sr-only"> unread</span>
							</span>
						)}
					</a>
				))}
				<a href="docs.html">API</a>
			</nav>
			<span id="who">
				<span class="muted">{me.name} · </span>
				<span class={`pill ${me.role}`}>{me.role}</span>
			</span>
			<button
				type="button"
				id="shortcuts"
				class="secondary"
				aria-label="Keyboard shortcuts"
				aria-haspopup="dialog"
				onClick={onHelp}
			>
				?
			</button>
			<button type="button" id="signout" onClick={onSignOut}>
				Sign out
			</button>
		</header>
	);
}

/** How many toasts are shown at once. */
const MAX_TOASTS = 4;

interface Toast {
	id: number;
	text: string;
}

function App() {
	/** Signing in, the sign-in form (with why), or signed in as `me`. */
	const [me, setMe] = useState<Me | null>(null);
	const [signIn, setSignIn] = useState<string | null>(null);
	/** Why signing in with the kept token has not worked yet (it is tried again). */
	const [problem, setProblem] = useState("");
	const [unread, setUnread] = useState(0);
	const [toasts, setToasts] = useState<Toast[]>([]);
	const [hash, setHash] = useState({ value: location.hash, n: 0 });
	const [help, setHelp] = useState(false);
	const stream = useRef<{ stop(): void } | null>(null);
	/** While signed in with a token, this tab lends it to the dashboard's other tabs that ask (ui/client.ts). */
	const lending = useRef<(() => void) | null>(null);
	/** Who is signed in, for the listeners set once. */
	const meRef = useRef<Me | null>(null);
	meRef.current = me;

	const countUnread = () =>
		api<{ _meta: { total: number } }>("GET", q("alerts", { where: { read: false }, max_results: 1 }))
			.then(r => setUnread(r._meta.total))
			.catch(() => setUnread(0));
	const toast = (text: string) => {
		const id = Date.now() + Math.random();
		// A burst of alerts shows its newest few (the Alerts page lists them all).
		setToasts(ts => [...ts.slice(1 - MAX_TOASTS), { id, text }]);
		setTimeout(() => setToasts(ts => ts.filter(t => t.id !== id)), 6000);
	};
	const stopAll = () => {
		stream.current?.stop();
		stream.current = null;
		lending.current?.();
		lending.current = null;
	};

	const start = async () => {
		const who = await api<Me>("GET", "whoami");
		stopAll();
		lending.current = token.get() ? shareToken() : null;
		stream.current = followAlerts(
			(alert: Alert) => {
				setUnread(n => n + 1);
				toast(`${alert.level}: ${alert.type}${alert.payload?.hostname ? ` (${String(alert.payload.hostname)})` : ""}`);
				window.dispatchEvent(new CustomEvent("fleet:alert", { detail: alert }));
			},
			connected => document.body.setAttribute("data-live", connected ? "on" : "off"),
		);
		setMe(who);
		setSignIn(null);
		void countUnread();
		if (!location.hash || location.hash === "#/") location.hash = "#/hosts";
	};
	/**
	 * Signs in with the token this tab keeps. A refusal (401) signs out, with the reason (fleet:unauthorized); any other
	 * failure (the gateway starting, a rate limit, the network) keeps the token, says what failed and tries again.
	 */
	const boot = (attempt: number) =>
		start()
			.then(() => setProblem(""))
			.catch((err: unknown) => {
				if (err instanceof ApiError && err.status === 401) return;
				if (!token.get()) return;
				const wait = Math.min(15, 2 ** (attempt - 1));
				setProblem(
					`fleet-ctl did not answer (${err instanceof Error ? err.message : String(err)}): trying again in ${wait} s.`,
				);
				setTimeout(() => void boot(attempt + 1), wait * 1000);
			});
	const signedOut = (message = "") => {
		stopAll();
		setMe(null);
		token.clear();
		setSignIn(message);
	};

	useEffect(() => {
		const onHash = () => setHash(h => ({ value: location.hash, n: h.n + 1 }));
		const onRead = () => void countUnread();
		const onRefused = () => {
			const session = meRef.current?.session === true;
			// After the view that made the refused request has shown its error: the sign-in replaces it.
			setTimeout(
				() =>
					signedOut(
						session
							? "Your session ended (it expired or was revoked): sign in again."
							: "The token was refused (invalid, expired or revoked): sign in again.",
					),
				0,
			);
		};
		window.addEventListener("hashchange", onHash);
		window.addEventListener(ALERTS_READ, onRead);
		window.addEventListener("fleet:unauthorized", onRefused);
		// Back from a sign-in that failed: the reason, on the sign-in page.
		const failed = /^#signin-error=(.*)$/.exec(location.hash);
		if (failed) {
			history.replaceState(null, "", "/");
			setSignIn(`Sign-in failed: ${decodeURIComponent(failed[1])}`);
		} else if (token.get()) boot(1);
		// A token lent by another signed-in tab; else signed in through single sign-on (a session cookie), or not
		// signed in at all (then no "refused" message).
		else
			void borrowToken()
				.then(lent => {
					if (lent) {
						token.set(lent);
						return start();
					}
					return fetch("/api/whoami", { headers: { Accept: "application/json" } }).then(res =>
						res.ok ? start() : signedOut(),
					);
				})
				.catch(() => signedOut());
		return () => {
			window.removeEventListener("hashchange", onHash);
			window.removeEventListener(ALERTS_READ, onRead);
			window.removeEventListener("fleet:unauthorized", onRefused);
			stopAll();
		};
	}, []);
	const { path, id } = where(hash.value);
	const pages = me ? offered(me) : [];
	// A page the role is not offered (or none): the hosts.
	const page = pages.find(p => p.path === path) ?? PAGES[0];
	useEffect(() => {
		document.title = me ? `${page.label} · fleet-ctl` : "fleet-ctl";
	}, [me, page]);
	useShortcuts(!!me && !help, pages, () => setHelp(true));
	// Each page shown (signing in, then each change of the URL's hash) takes the focus to its heading.
	useLandingFocus(me ? `${me._id} ${hash.n}` : null);

	const signOut = () => {
		const session = me?.session === true;
		stopAll();
		setMe(null);
		token.clear();
		location.hash = "";
		// A single sign-on session ends at the gateway (revoked) and then at the provider.
		if (session) void signOutSession();
		else setSignIn("");
	};
	const Page = page.page;
	return (
		<>
			{me && <Header me={me} here={page.path} unread={unread} onHelp={() => setHelp(true)} onSignOut={signOut} />}
			<main id="main">
				{me ? (
					<Page key={`${me._id} ${hash.n}`} me={me} id={page.path === path ? id : undefined} />
				) : signIn !== null ? (
					<SignIn
						key={signIn}
						message={signIn}
						onToken={async t => {
							token.set(t);
							try {
								await start();
							} catch (err) {
								token.clear();
								throw err;
							}
						}}
					/>
				) : (
					<p class="muted" id="loading" role="status">
						{problem || "Loading…"}
					</p>
				)}
			</main>
			<div id="toasts" aria-live="polite">
				{toasts.map(t => (
					<div key={t.id} class="toast" role="status">
						{t.text}
					</div>
				))}
			</div>
			{help && <Shortcuts pages={pages} onClose={() => setHelp(false)} />}
		</>
	);
}

const root = document.getElementById("app") as HTMLElement;
root.replaceChildren();
render(<App />, root);
