/**
 * A group's page, in Preact (docs/graph.md, docs/targeting.md): what it is (its kind in words, its rule, the hosts it
 * lists, its subgroups by name), the hosts it resolves to now, for admins a form to change it (the rule's hosts
 * previewed as it is typed), for operators the run panel, and the graph: the group, its subgroups all the way down
 * (GET /api/graph/{id}) and the hosts each lists or its rule selects, coloured by kind, with a legend that says which
 * colour is which.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, q, type Me } from "./client";
import { Problem } from "./parts";
import { GROUP_KINDS, GroupForm, type Group } from "./groups";
import { RunPanel } from "./run";

declare const echarts: {
	init(el: HTMLElement): { setOption(o: unknown): void; dispose(): void; on(e: string, f: (p: any) => void): void };
};

interface GraphNode {
	id: string;
	name: string;
	type?: number;
	value?: number;
	symbolSize: number;
	category?: string | number;
	itemStyle?: { color: string };
}

/** At most this many hosts are drawn; the rest are counted. */
const MAX_HOST_NODES = 300;
/** The graph's kinds of node, each with its colour (the legend shows them). */
const KINDS = [
	{ name: "static group", color: "#7cb342" },
	{ name: "automatic group (rule)", color: "#e57373" },
	{ name: "host", color: "#64748b" },
];

function ruleWords(info: Group["info"]): string {
	if (!info) return "–";
	const parts = [
		info.target ? `target ${info.target}` : "",
		info.regex ? `name matches ${info.regex}` : "",
		info.grain && Object.keys(info.grain).length
			? `grains ${Object.entries(info.grain)
					.map(([k, v]) => `${k}=${v}`)
					.join(", ")}`
			: "",
	].filter(Boolean);
	return parts.join("; ") || "–";
}

function Graph({ group, groups }: { group: Group; groups: Group[] }) {
	const box = useRef<HTMLDivElement>(null);
	const [note, setNote] = useState("");
	const [error, setError] = useState("");
	useEffect(() => {
		let chart: ReturnType<typeof echarts.init> | null = null;
		let current = true;
		(async () => {
			const graph = await api<{ nodes: GraphNode[]; edges: Array<{ source: string; target: string }> }>(
				"GET",
				`graph/${encodeURIComponent(group._id)}`,
			);
			// Each group of the graph with the hosts it brings itself: listed, or selected by its rule (never its subgroups').
			const byId = new Map(groups.map(g => [g._id, g]));
			const hostEdges: Array<{ source: string; target: string }> = [];
			const hostNodes = new Map<string, GraphNode>();
			let more = 0;
			for (const node of graph.nodes) {
				const g = byId.get(node.id);
				const own = new Set(g?.hosts ?? []);
				if (g && (g.type ?? 0) === 1)
					for (const h of await api<string[]>("GET", `groups/${encodeURIComponent(g._id)}/hostnames`)) own.add(h);
				for (const h of own) {
					if (!hostNodes.has(h) && hostNodes.size >= MAX_HOST_NODES) {
						more++;
						continue;
					}
					hostNodes.set(h, { id: `host:${h}`, name: h, symbolSize: 8, category: 2 });
					hostEdges.push({ source: node.id, target: `host:${h}` });
				}
			}
			if (!current) return;
			const el = box.current as HTMLDivElement;
			chart = echarts.init(el);
			const nodes = [
				...graph.nodes.map(n => ({
					...n,
					category: (n.type ?? 0) === 1 || n.value === 1 ? 1 : 0,
					itemStyle: undefined,
					symbolSize: Math.max(n.symbolSize, 16),
				})),
				...hostNodes.values(),
			];
			chart.setOption({
				tooltip: {},
				legend: [{ data: KINDS.map(k => k.name) }],
				color: KINDS.map(k => k.color),
				series: [
					{
						type: "graph",
						layout: "force",
						roam: true,
						draggable: true,
						categories: KINDS.map(k => ({ name: k.name, itemStyle: { color: k.color } })),
						label: { show: true, position: "right" },
						force: { repulsion: 220, edgeLength: 90 },
						edgeSymbol: ["none", "arrow"],
						data: nodes,
						links: [...graph.edges, ...hostEdges],
					},
				],
			});
			el.setAttribute("data-nodes", String(graph.nodes.length));
			el.setAttribute("data-edges", String(graph.edges.length));
			el.setAttribute("data-hosts", String(hostNodes.size));
			chart.on("finished", () => el.setAttribute("data-drawn", "1"));
			// A group's node opens its group, a host's its host.
			chart.on("click", (p: { dataType?: string; data?: { id?: string } }) => {
				const id = p.dataType === "node" ? p.data?.id : undefined;
				if (id)
					location.hash = id.startsWith("host:") ? `#/hosts/${encodeURIComponent(id.slice(5))}` : `#/groups/${id}`;
			});
			setNote(more ? `${hostNodes.size} hosts drawn; ${more} more are not (see the list above).` : "");
		})().catch(err => current && setError((err as Error).message));
		return () => {
			current = false;
			chart?.dispose();
		};
	}, [group, groups]);
	return (
		<section>
			<h2>Graph</h2>
			<Problem text={error} />
			<div
				class="chart"
				id="graph"
				ref={box}
				role="img"
				aria-label={`The group ${group.name}, its subgroups and their hosts`}
			/>
			{note && <p class="muted">{note}</p>}
		</section>
	);
}

export function GroupPage({ id, me }: { id: string; me: Me }) {
	const [group, setGroup] = useState<Group | null>(null);
	const [groups, setGroups] = useState<Group[]>([]);
	const [resolved, setResolved] = useState<string[] | null>(null);
	const [error, setError] = useState("");
	const [tick, setTick] = useState(0);
	useEffect(() => {
		let current = true;
		Promise.all([
			api<Group>("GET", `groups/${encodeURIComponent(id)}`),
			api<{ _items: Group[] }>(
				"GET",
				q("groups", {
					sort: "name",
					max_results: 200,
					projection: { name: 1, type: 1, hosts: 1, subgroups: 1, info: 1 },
				}),
			),
			api<string[]>("GET", `groups/${encodeURIComponent(id)}/hostnames`),
		])
			.then(([g, all, names]) => {
				if (!current) return;
				setGroup(g);
				setGroups(all._items);
				setResolved(names);
				setError("");
			})
			.catch(err => current && setError((err as Error).message));
		return () => {
			current = false;
		};
	}, [id, tick]);
	const names = Object.fromEntries(groups.map(g => [g._id, g.name]));
	if (!group)
		return (
			<section>
				<p>
					<a href="#/groups">‹ Groups</a>
				</p>
				{error ? <Problem text={error} /> : <p class="muted">Loading…</p>}
			</section>
		);
	return (
		<section>
			<p>
				<a href="#/groups">‹ Groups</a>
			</p>
			<h1 id="group-title">{group.name}</h1>
			<Problem text={error} />
			<div class="grid2">
				<section class="card" id="group-facts">
					<h2>Group</h2>
					<dl class="kv">
						<dt>kind</dt>
						<dd data-key="type">{GROUP_KINDS[group.type ?? 0] ?? `type ${group.type}`}</dd>
						<dt>rule</dt>
						<dd class="mono" data-key="info">
							{ruleWords(group.info)}
						</dd>
						<dt>hosts listed</dt>
						<dd data-key="hosts">
							{(group.hosts ?? []).length
								? (group.hosts ?? []).map((h, i) => (
										<span key={h} class="nowrap">
											{i ? ", " : ""}
											<a href={`#/hosts/${encodeURIComponent(h)}`}>{h}</a>
										</span>
									))
								: "–"}
						</dd>
						<dt>subgroups</dt>
						<dd data-key="subgroups">
							{(group.subgroups ?? []).length
								? (group.subgroups ?? []).map((s, i) => (
										<span key={s}>
											{i ? ", " : ""}
											<a href={`#/groups/${s}`}>{names[s] ?? "(a group you cannot see)"}</a>
										</span>
									))
								: "–"}
						</dd>
						<dt>changed</dt>
						<dd data-key="_updated">{group._updated ?? "–"}</dd>
					</dl>
				</section>
				<section class="card" id="group-hosts">
					<h2>Hosts it resolves to ({resolved?.length ?? "…"})</h2>
					{resolved && resolved.length === 0 ? (
						<p class="muted">None now: list hosts, give it a rule, or add subgroups that have some.</p>
					) : (
						<ul class="chips">
							{(resolved ?? []).map(h => (
								<li key={h}>
									<a href={`#/hosts/${encodeURIComponent(h)}`}>{h}</a>
								</li>
							))}
						</ul>
					)}
				</section>
			</div>
			{me.role !== "viewer" && <RunPanel kind="groups" id={group._id} />}
			{me.role === "admin" && (
				<GroupForm
					key={group._updated}
					group={group}
					groups={groups}
					prefix="edit-group"
					onDone={() => setTick(t => t + 1)}
				/>
			)}
			<Graph group={group} groups={groups} />
		</section>
	);
}
