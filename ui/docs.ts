/**
 * The browsable API documentation: GET /api/openapi.json (with the dashboard's token, or its single sign-on session)
 * rendered as one section per tag, one card per operation (method, path, least role, parameters, body and answers),
 * and "Try it" for reads: the request made as the signed-in caller, its answer shown (never a write).
 */
import { api, borrowToken, token } from "./client";
import { h, clear } from "./dom";

const main = document.getElementById("main") as HTMLElement;

function schemaText(schema: unknown): string {
	return JSON.stringify(schema, null, 2);
}

function askToken(message?: string): void {
	const input = h("input", { type: "password", id: "token", placeholder: "fct_…", "aria-label": "API token" });
	clear(
		main,
		h(
			"form",
			{
				class: "card login",
				onsubmit: (ev: Event) => {
					ev.preventDefault();
					token.set(input.value.trim());
					void load();
				},
			},
			h("h1", {}, "API documentation"),
			h("p", { class: "muted" }, "The document is served to signed-in callers: paste an API token."),
			message ? h("p", { class: "error" }, message) : null,
			input,
			h("button", { type: "submit" }, "Show"),
		),
	);
}

/** "Try it" for a read: its path parameters and query asked for, the request made, the answer shown. */
function tryIt(path: string): HTMLElement {
	const names = [...path.matchAll(/\{(\w+)\}/g)].map(m => m[1]);
	const inputs = names.map(n => h("input", { placeholder: n, "aria-label": n, "data-param": n }));
	const query = h("input", { placeholder: "query, e.g. max_results=5", "aria-label": "query", class: "try-query" });
	const out = h("pre", { class: "mono try-answer" });
	const run = async () => {
		let url = path.replace(/^\//, "");
		names.forEach((n, i) => (url = url.replace(`{${n}}`, encodeURIComponent((inputs[i] as HTMLInputElement).value))));
		const q = (query as HTMLInputElement).value.trim();
		try {
			out.textContent = JSON.stringify(await api("GET", q ? `${url}?${q}` : url), null, 2).slice(0, 20_000);
		} catch (err) {
			out.textContent = `${(err as { status?: number }).status ?? ""} ${(err as Error).message}`;
		}
	};
	return h("div", { class: "try" }, inputs, query, h("button", { type: "button", onclick: () => void run() }, "Try it"), out);
}

async function load(): Promise<void> {
	let doc: any;
	try {
		// Opened in a new tab: a signed-in dashboard tab lends its token (no single sign-on session needs it).
		if (!token.get()) {
			const lent = await borrowToken();
			if (lent) token.set(lent);
		}
		doc = await api("GET", "openapi.json");
	} catch (err) {
		const had = token.get();
		token.clear();
		// No token in this tab and no single sign-on session: ask for one (a refused token says why).
		return askToken((err as { status?: number }).status === 401 && !had ? undefined : (err as Error).message);
	}
	(document.getElementById("raw") as HTMLElement).addEventListener("click", ev => {
		ev.preventDefault();
		const url = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2)], { type: "application/json" }));
		const a = h("a", { href: url, download: "openapi.json" });
		a.click();
		setTimeout(() => URL.revokeObjectURL(url), 1000);
	});
	const byTag = new Map<string, Array<[string, string, any]>>();
	for (const [path, ops] of Object.entries<any>(doc.paths)) {
		for (const [method, op] of Object.entries<any>(ops)) {
			const tag = op.tags?.[0] ?? "other";
			if (!byTag.has(tag)) byTag.set(tag, []);
			byTag.get(tag)!.push([method.toUpperCase(), path, op]);
		}
	}
	clear(
		main,
		h("h1", {}, `${doc.info.title} ${doc.info.version}`),
		h("p", {}, doc.info.description),
		h("p", { class: "muted" }, `OpenAPI ${doc.openapi} · base ${doc.servers?.[0]?.url ?? "/api"} · ${Object.keys(doc.paths).length} paths`),
		[...byTag.entries()].map(([tag, ops]) =>
			h(
				"section",
				{ id: `tag-${tag}` },
				h("h2", {}, tag),
				ops.map(([method, path, op]) =>
					h(
						"details",
						{ class: "card op", "data-op": `${method} ${path}` },
						h("summary", {}, h("span", { class: "method" }, method), h("code", {}, path), " — ", op.summary, " ", h("span", { class: "pill" }, op["x-fleet-role"])),
						h("p", {}, op.description ?? ""),
						op.parameters?.length ? h("table", {}, h("tbody", {}, op.parameters.map((p: any) => h("tr", {}, h("td", {}, h("code", {}, p.name)), h("td", {}, p.in), h("td", {}, p.description ?? ""))))) : null,
						op.requestBody ? h("details", {}, h("summary", {}, "Request body"), h("pre", { class: "mono" }, schemaText(op.requestBody.content))) : null,
						h("p", { class: "muted" }, "Answers: ", Object.keys(op.responses).join(", ")),
						method === "GET" && !op.responses["200"]?.content?.["text/event-stream"] ? tryIt(path) : null,
					),
				),
			),
		),
		h("details", { class: "card" }, h("summary", {}, "Schemas"), h("pre", { class: "mono" }, schemaText(doc.components.schemas))),
	);
}

void load();
