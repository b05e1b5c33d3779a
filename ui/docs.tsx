/**
 * The browsable API documentation, in Preact: GET /api/openapi.json (with the dashboard's token, or its single sign-on
 * session) rendered as one section per tag, one card per operation (method, path, least role, parameters, body and
 * answers), and "Try it" for reads: the request made as the signed-in caller, its answer shown (never a write).
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, borrowToken, token } from "./client";

interface Operation {
	summary?: string;
	description?: string;
	tags?: string[];
	parameters?: Array<{ name: string; in: string; description?: string }>;
	requestBody?: { content: unknown };
	responses: Record<string, { content?: Record<string, unknown> }>;
	"x-fleet-role"?: string;
}

interface OpenApi {
	openapi: string;
	info: { title: string; version: string; description?: string };
	servers?: Array<{ url: string }>;
	paths: Record<string, Record<string, Operation>>;
	components: { schemas: unknown };
}

const schemaText = (schema: unknown) => JSON.stringify(schema, null, 2);

function AskToken({ message, onToken }: { message: string; onToken: (t: string) => void }) {
	const [value, setValue] = useState("");
	return (
		<form
			class="card login"
			onSubmit={e => {
				e.preventDefault();
				onToken(value.trim());
			}}
		>
			<h1>API documentation</h1>
			<p class="muted">The document is served to signed-in callers: paste an API token.</p>
			{message && <p class="error">{message}</p>}
			<input
				type="password"
				id="token"
				placeholder="fct_…"
				aria-label="API token"
				value={value}
				onInput={e => setValue((e.target as HTMLInputElement).value)}
			/>
			<button type="submit">Show</button>
		</form>
	);
}

/** "Try it" for a read: its path parameters and query asked for, the request made, the answer shown. */
function TryIt({ path }: { path: string }) {
	const names = [...path.matchAll(/\{(\w+)\}/g)].map(m => m[1]);
	const [params, setParams] = useState<Record<string, string>>({});
	const [query, setQuery] = useState("");
	const [answer, setAnswer] = useState("");
	const run = async () => {
		let url = path.replace(/^\//, "");
		for (const n of names) url = url.replace(`{${n}}`, encodeURIComponent(params[n] ?? ""));
		const qs = query.trim();
		try {
			setAnswer(JSON.stringify(await api("GET", qs ? `${url}?${qs}` : url), null, 2).slice(0, 20_000));
		} catch (err) {
			setAnswer(`${(err as { status?: number }).status ?? ""} ${(err as Error).message}`);
		}
	};
	return (
		<div class="try">
			{names.map(n => (
				<input
					key={n}
					placeholder={n}
					aria-label={n}
					data-param={n}
					value={params[n] ?? ""}
					onInput={e => setParams({ ...params, [n]: (e.target as HTMLInputElement).value })}
				/>
			))}
			<input
				placeholder="query, e.g. max_results=5"
				aria-label="query"
				class="try-query"
				value={query}
				onInput={e => setQuery((e.target as HTMLInputElement).value)}
			/>
			<button type="button" onClick={() => void run()}>
				Try it
			</button>
			<pre class="mono try-answer">{answer}</pre>
		</div>
	);
}

function Op({ method, path, op }: { method: string; path: string; op: Operation }) {
	return (
		<details class="card op" data-op={`${method} ${path}`}>
			<summary>
				<span class="method">{method}</span>
				<code>{path}</code> — {op.summary} <span class="pill">{op["x-fleet-role"]}</span>
			</summary>
			<p>{op.description ?? ""}</p>
			{op.parameters?.length ? (
				<table>
					<tbody>
						{op.parameters.map(p => (
							<tr key={`${p.in} ${p.name}`}>
								<td>
									<code>{p.name}</code>
								</td>
								<td>{p.in}</td>
								<td>{p.description ?? ""}</td>
							</tr>
						))}
					</tbody>
				</table>
			) : null}
			{op.requestBody && (
				<details>
					<summary>Request body</summary>
					<pre class="mono">{schemaText(op.requestBody.content)}</pre>
				</details>
			)}
			<p class="muted">Answers: {Object.keys(op.responses).join(", ")}</p>
			{method === "GET" && !op.responses["200"]?.content?.["text/event-stream"] && <TryIt path={path} />}
		</details>
	);
}

function Docs() {
	const [doc, setDoc] = useState<OpenApi | null>(null);
	const [ask, setAsk] = useState<string | null>(null);
	const [tries, setTries] = useState(0);
	useEffect(() => {
		void (async () => {
			try {
				// Opened in a new tab: a signed-in dashboard tab lends its token (no single sign-on session needs it).
				if (!token.get()) {
					const lent = await borrowToken();
					if (lent) token.set(lent);
				}
				setDoc(await api<OpenApi>("GET", "openapi.json"));
				setAsk(null);
			} catch (err) {
				const had = token.get();
				token.clear();
				// No token in this tab and no single sign-on session: ask for one (a refused token says why).
				setAsk((err as { status?: number }).status === 401 && !had ? "" : (err as Error).message);
			}
		})();
	}, [tries]);
	// The header's "openapi.json" link saves the document as the page read it.
	useEffect(() => {
		const raw = document.getElementById("raw");
		if (!doc || !raw) return;
		const save = (ev: Event) => {
			ev.preventDefault();
			const url = URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2)], { type: "application/json" }));
			const a = document.createElement("a");
			a.href = url;
			a.download = "openapi.json";
			a.click();
			setTimeout(() => URL.revokeObjectURL(url), 1000);
		};
		raw.addEventListener("click", save);
		return () => raw.removeEventListener("click", save);
	}, [doc]);
	if (ask !== null)
		return (
			<AskToken
				message={ask}
				onToken={t => {
					token.set(t);
					setTries(n => n + 1);
				}}
			/>
		);
	if (!doc) return <p class="muted">Loading the OpenAPI document…</p>;
	const byTag = new Map<string, Array<[string, string, Operation]>>();
	for (const [path, ops] of Object.entries(doc.paths))
		for (const [method, op] of Object.entries(ops)) {
			const tag = op.tags?.[0] ?? "other";
			byTag.set(tag, [...(byTag.get(tag) ?? []), [method.toUpperCase(), path, op]]);
		}
	return (
		<>
			<h1>
				{doc.info.title} {doc.info.version}
			</h1>
			<p>{doc.info.description}</p>
			<p class="muted">
				OpenAPI {doc.openapi} · base {doc.servers?.[0]?.url ?? "/api"} · {Object.keys(doc.paths).length} paths
			</p>
			{[...byTag.entries()].map(([tag, ops]) => (
				<section key={tag} id={`tag-${tag}`}>
					<h2>{tag}</h2>
					{ops.map(([method, path, op]) => (
						<Op key={`${method} ${path}`} method={method} path={path} op={op} />
					))}
				</section>
			))}
			<details class="card">
				<summary>Schemas</summary>
				<pre class="mono">{schemaText(doc.components.schemas)}</pre>
			</details>
		</>
	);
}

const main = document.getElementById("main") as HTMLElement;
main.replaceChildren();
render(<Docs />, main);
