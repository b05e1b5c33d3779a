/**
 * The fleet-ctl dashboard: one page, views chosen by the URL's hash, everything read and done through
 * /api with the signed-in token. What the token's role may not do is not offered (GET /api/whoami).
 */
import { api, q, token, followAlerts, signInOptions, signOutSession, borrowToken, shareToken, ApiError, type Me } from "./client";
import { h, clear, pill, show, table, toast } from "./dom";
import { approvalsView } from "./approvals";
import { windowsView } from "./windows";
import { tokensView } from "./tokens";
import { auditView } from "./audit";
import { rolloutsView } from "./rollouts";
import { groupsView as groupsListView } from "./groups";
import { vpnView } from "./vpn";
import { hostsView as hostsListView } from "./hosts";
import { tasksView as tasksListView } from "./tasks";
import { hostView as hostPageView } from "./host";
import { historyView } from "./history";
import { statsView as statsPageView } from "./stats";
import { groupView as groupPageView } from "./group";
import { webhooksView as webhooksPageView } from "./webhooks";


const main = document.getElementById("main") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
const RANK = { viewer: 0, operator: 1, admin: 2 } as const;
let me: Me | null = null;
let unread = 0;
let stream: { stop(): void } | null = null;
/** Timers and charts of the view on screen, dropped when it changes. */
let disposers: Array<() => void> = [];

const can = (role: keyof typeof RANK) => !!me && RANK[me.role] >= RANK[role];

function problemText(err: unknown): string {
	const e = err as ApiError;
	return `${e.status ? `${e.status}: ` : ""}${e.message}`;
}

function problem(err: unknown): HTMLElement {
	return h("p", { class: "error", role: "alert" }, problemText(err));
}

function every(ms: number, fn: () => void | Promise<void>): void {
	const t = setInterval(() => void fn(), ms);
	disposers.push(() => clearInterval(t));
}

// ------------------------------------------------------------------ sign in

function signIn(message?: string): void {
	(document.getElementById("top") as HTMLElement).hidden = true;
	const input = h("input", { type: "password", id: "token", placeholder: "fct_…", autocomplete: "off", "aria-label": "API token" });
	const out = h("div", {});
	if (message) out.append(h("p", { class: "error", role: "alert" }, message));
	// Single sign-on, when the gateway offers it: a link (a navigation, not a form) to /auth/login.
	const sso = h("div", { id: "sso" });
	void signInOptions().then(o => {
		if (o.oidc) clear(sso, h("a", { class: "button", id: "sso-signin", href: "/auth/login" }, `Sign in with ${o.name ?? "single sign-on"}`), h("p", { class: "muted" }, "or paste an API token:"));
	});
	const form = h(
		"form",
		{
			class: "card login",
			id: "signin",
			onsubmit: async (ev: Event) => {
				ev.preventDefault();
				token.set(input.value.trim());
				try {
					await start();
				} catch (err) {
					token.clear();
					clear(out, problem(err));
				}
			},
		},
		h("h1", {}, "Sign in to fleet-ctl"),
		sso,
		h("p", { class: "muted" }, "Paste an API token. It is kept in this tab only (sessionStorage)."),
		input,
		h("button", { type: "submit" }, "Sign in"),
		out,
	);
	clear(main, form);
	input.focus();
}

/** While signed in with a token, this tab lends it to the dashboard's other tabs that ask (ui/client.ts). */
let lending: (() => void) | null = null;

async function start(): Promise<void> {
	me = await api<Me>("GET", "whoami");
	lending?.();
	lending = token.get() ? shareToken() : null;
	(document.getElementById("top") as HTMLElement).hidden = false;
	clear(document.getElementById("who") as HTMLElement, h("span", { class: "muted" }, `${me.name} · `), pill(me.role));
	buildNav();
	stream?.stop();
	stream = followAlerts(
		alert => {
			unread++;
			buildNav();
			toast(`${alert.level}: ${alert.type}${alert.payload?.hostname ? ` (${alert.payload.hostname})` : ""}`);
			window.dispatchEvent(new CustomEvent("fleet:alert", { detail: alert }));
		},
		connected => document.body.setAttribute("data-live", connected ? "on" : "off"),
	);
	try {
		unread = (await api("GET", q("alerts", { where: { read: false }, max_results: 1 })))._meta.total;
	} catch {
		unread = 0;
	}
	buildNav();
	if (!location.hash || location.hash === "#/") location.hash = "#/hosts";
	else void route();
}

function buildNav(): void {
	const items: Array<[string, string, keyof typeof RANK]> = [
		["#/hosts", "Hosts", "viewer"],
		["#/groups", "Groups", "viewer"],
		["#/stats", "Statistics", "viewer"],
		["#/alerts", "Alerts", "viewer"],
		["#/actions", "Actions", "viewer"],
		["#/tasks", "Tasks", "viewer"],
		["#/history", "Job history", "viewer"],
		["#/jobs", "Jobs", "viewer"],
		["#/rollouts", "Rollouts", "viewer"],
		["#/approvals", "Approvals", "operator"],
		["#/windows", "Windows", "viewer"],
		["#/vpn", "VPN", "viewer"],
		["#/tokens", "Tokens", "viewer"],
		["#/audit", "Audit", "admin"],
		["#/webhooks", "Webhooks", "admin"],
	];
	const here = location.hash.split("?")[0].split("/").slice(0, 2).join("/");
	clear(
		nav,
		items.filter(([, , role]) => can(role)).map(([href, label]) => h("a", { href, class: here === href ? "active" : "" }, label, href === "#/alerts" && unread > 0 ? h("span", { class: "badge", id: "unread" }, unread) : null)),
		h("a", { href: "docs.html" }, "API"),
	);
}

// ------------------------------------------------------------------ hosts


/** The hosts page is a Preact page (ui/hosts.tsx): filtered, sorted and paged by the server. */
function hostsView(): void {
	if (!me) return;
	main.replaceChildren();
	disposers.push(hostsListView(main, me));
}

/** A host's page is a Preact page (ui/host.tsx). */
function hostView(id: string): void {
	if (!me) return;
	main.replaceChildren();
	disposers.push(hostPageView(main, me, id));
}

// ------------------------------------------------------------------ groups and the graph

/** A group's page is a Preact page (ui/group.tsx). */
function groupView(id: string): void {
	if (!me) return;
	main.replaceChildren();
	disposers.push(groupPageView(main, me, id));
}

// ------------------------------------------------------------------ statistics

/** The statistics page is a Preact page (ui/stats.tsx). */
function statsView(): void {
	main.replaceChildren();
	disposers.push(statsPageView(main));
}

// ------------------------------------------------------------------ alerts

async function alertsView(): Promise<void> {
	const list = h("tbody", { id: "alerts-body" });
	const row = (a: any) =>
		h(
			"tr",
			{ class: a.read ? "" : "unread", "data-alert": a._id },
			h("td", { class: "muted" }, show(a._created)),
			h("td", {}, pill(a.level)),
			h("td", {}, a.type),
			h("td", { class: "mono" }, show(a.payload)),
			h(
				"td",
				{},
				a.read
					? "read"
					: h(
							"button",
							{
								class: "secondary",
								onclick: async () => {
									try {
										await api("GET", q(`alerts/${a._id}`, { mark_as_read: 1 }));
									} catch (err) {
										toast(problemText(err));
										return;
									}
									unread = Math.max(0, unread - 1);
									buildNav();
									void render();
								},
							},
							"Mark read",
						),
			),
		);
	// Alerts that came live while this page is open: a list read that started before one was raised (slow, or
	// answered from a cache) must not wipe its row when its answer lands after it.
	const live = new Map<string, any>();
	const render = async () => {
		try {
			const res = await api("GET", q("alerts", { sort: "-_created", max_results: 50 }));
			const listed = new Set(res._items.map((a: any) => a._id));
			const missing = [...live.values()].filter(a => !listed.has(a._id)).reverse();
			clear(list, [...missing, ...res._items].slice(0, 50).map(row));
		} catch (err) {
			clear(list, h("tr", {}, h("td", { colspan: 5 }, problem(err))));
		}
	};
	const markAll = h(
		"button",
		{
			id: "mark-all",
			onclick: async () => {
				// Each read with mark_as_read marks the page it returns; read unread pages until none is left.
				try {
					for (let i = 0; i < 100; i++) {
						const res = await api("GET", q("alerts", { where: { read: false }, max_results: 50, mark_as_read: 1 }));
						if (res._items.length === 0) break;
					}
				} catch (err) {
					toast(problemText(err));
				}
				unread = 0;
				buildNav();
				void render();
			},
		},
		"Mark all read",
	);
	const onAlert = (ev: Event) => {
		const alert = (ev as CustomEvent).detail;
		live.set(alert._id, alert);
		list.prepend(row(alert));
	};
	window.addEventListener("fleet:alert", onAlert);
	disposers.push(() => window.removeEventListener("fleet:alert", onAlert));
	clear(main, h("h1", {}, "Alerts"), h("div", { class: "bar" }, markAll, h("span", { class: "muted" }, "New alerts appear here as they are raised.")), h("table", { id: "alerts" }, h("thead", {}, h("tr", {}, ["When", "Level", "Type", "Details", ""].map(c => h("th", {}, c)))), list));
	await render();
}

// ------------------------------------------------------------------ actions, tasks, jobs, webhooks

async function actionsView(): Promise<void> {
	clear(main, h("h1", {}, "Actions"));
	try {
		const res = await api("GET", q("actions", { sort: "-_created", max_results: 50 }));
		main.append(table(["When", "Host", "Function", "State", "Job", "Return"], res._items.map((a: any) => [show(a._created), h("a", { href: `#/hosts/${encodeURIComponent(a.host)}` }, a.host), a.action, pill(a.state), h("span", { class: "mono" }, a.jid), h("span", { class: "mono" }, show(a.return))])));
	} catch (err) {
		main.append(problem(err));
	}
}

/** The tasks page is a Preact page (ui/tasks.tsx): the list, and the form that makes or changes one. */
function tasksView(): void {
	if (!me) return;
	main.replaceChildren();
	disposers.push(tasksListView(main, me));
}

async function jobsView(): Promise<void> {
	const body = h("div", {});
	const load = async () => {
		try {
			const res = await api("GET", q("jobs", { sort: "-started", max_results: 50 }));
			clear(
				body,
				res._items.length
					? table(
							["Work", "Status", "Progress", "Started", "Finished", "Result"],
							res._items.map((j: any) => [
								j._id,
								pill(j.status),
								h("span", {}, h("progress", { max: 100, value: j.percent ?? (j.status === "finished" ? 100 : 0) }), ` ${j.percent ?? "–"}% (${j.progress?.done ?? 0}/${j.progress?.total ?? 0})`),
								show(j.started),
								show(j.finished),
								h("span", { class: "mono" }, j.error ? j.error : show(j.result)),
							]),
							{ id: "jobs" },
						)
					: h("p", { class: "muted" }, "No long work has run yet."),
			);
		} catch (err) {
			clear(body, problem(err));
		}
	};
	const out = h("div", {});
	const start = (label: string, id: string, method: string, path: string, body?: unknown) =>
		h(
			"button",
			{
				class: "secondary",
				id,
				onclick: async () => {
					clear(out);
					try {
						await api(method, path, body);
					} catch (err) {
						clear(out, problem(err));
					}
					void load();
				},
			},
			label,
		);
	const actions = [can("operator") ? start("Load patches from the master", "job-load-updates", "POST", "updates") : null, can("admin") ? start("Build the graph", "job-build-graph", "POST", "graph", { action: "build_graph" }) : null, can("admin") ? start("Resolve IP addresses", "job-request-ips", "POST", "graph", { action: "request_ips" }) : null].filter(Boolean);
	clear(main, h("h1", {}, "Jobs"), h("p", { class: "muted" }, "Graph builds, IP resolution, patch loads and inventory syncs: their latest run each."), actions.length ? h("div", { class: "bar" }, actions) : null, out, body);
	await load();
	every(1000, load);
}

/** Alert levels, as the webhooks service takes them. */
/** Webhooks and their deliveries are Preact pages (ui/webhooks.tsx). */
function webhooksView(id?: string): void {
	main.replaceChildren();
	disposers.push(webhooksPageView(main, id));
}

// ------------------------------------------------------------------ routing

async function route(): Promise<void> {
	for (const d of disposers) d();
	disposers = [];
	if (!me) return;
	buildNav();
	// A view's own state may follow its path (#/hosts?status=down).
	const [, view, id] = location.hash.split("?")[0].split("/").map(decodeURIComponent);
	switch (view) {
		case "hosts":
			return id ? hostView(id) : hostsView();
		case "groups":
			if (id) return groupView(id);
			// The list is a Preact page (ui/groups.tsx).
			main.replaceChildren();
			disposers.push(groupsListView(main, me));
			return;
		case "stats":
			return statsView();
		case "alerts":
			return alertsView();
		case "actions":
			return actionsView();
		case "tasks":
			return tasksView();
		case "jobs":
			return jobsView();
		case "history":
			main.replaceChildren();
			disposers.push(historyView(main, me, id));
			return;
		case "webhooks":
			return can("admin") ? webhooksView(id) : hostsView();
		case "approvals":
			if (!can("operator")) return hostsView();
			// A Preact page (ui/approvals.tsx), taken down when the view changes.
			main.replaceChildren();
			disposers.push(approvalsView(main, me));
			return;
		case "rollouts":
			main.replaceChildren();
			disposers.push(rolloutsView(main, me, id));
			return;
		case "vpn":
			main.replaceChildren();
			disposers.push(vpnView(main, me));
			return;
		case "windows":
			main.replaceChildren();
			disposers.push(windowsView(main, me));
			return;
		case "tokens":
			main.replaceChildren();
			disposers.push(tokensView(main, me));
			return;
		case "audit":
			if (!can("admin")) return hostsView();
			main.replaceChildren();
			disposers.push(auditView(main));
			return;
		default:
			return hostsView();
	}
}

window.addEventListener("hashchange", () => void route());
window.addEventListener("fleet:unauthorized", () => {
	const session = me?.session === true;
	stream?.stop();
	me = null;
	token.clear();
	lending?.();
	lending = null;
	// After the view that made the refused request has shown its error: the sign-in replaces it.
	setTimeout(() => signIn(session ? "Your session ended (it expired or was revoked): sign in again." : "The token was refused (invalid, expired or revoked): sign in again."), 0);
});
(document.getElementById("signout") as HTMLElement).addEventListener("click", () => {
	stream?.stop();
	const session = me?.session === true;
	me = null;
	token.clear();
	lending?.();
	lending = null;
	location.hash = "";
	// A single sign-on session ends at the gateway (revoked) and then at the provider.
	if (session) void signOutSession();
	else signIn();
});

// Back from a sign-in that failed: the reason, on the sign-in page.
const failed = /^#signin-error=(.*)$/.exec(location.hash);
if (failed) {
	history.replaceState(null, "", "/");
	signIn(`Sign-in failed: ${decodeURIComponent(failed[1])}`);
} else if (token.get()) start().catch(() => signIn());
// A token lent by another signed-in tab; else signed in through single sign-on (a session cookie), or not signed in
// at all (then no "refused" message).
else
	void borrowToken()
		.then(lent => {
			if (lent) {
				token.set(lent);
				return start();
			}
			return fetch("/api/whoami", { headers: { Accept: "application/json" } }).then(res => (res.ok ? start() : signIn()));
		})
		.catch(() => signIn());
