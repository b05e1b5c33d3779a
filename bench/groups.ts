/**
 * The groups part of `npm run bench`: BENCH_HOSTS (default 10,000) hosts, 500 groups five levels deep
 * (1 root, 4, 20, 100, then 375 leaves: 275 with explicit hosts, 100 automatic: 50 by regex, 50 by grain,
 * and 25 leaves shared by two parents), 10 nodegroups. fleet-ctl runs every service in one child process
 * (the production command) on NATS so that the bench can seed hosts and wait for memberships.
 *
 *   resolve    GET /api/groups/{root}/hostnames (every host), and the largest automatic leaf
 *   grain      one host's grains change (hosts.upsertMany): until its groups and nodegroups are right
 *   new auto   POST /api/groups of an automatic group: until every host's memberships are right
 *   graph      GET /api/graph/{root} (500 nodes)
 *   preview    POST /api/targets/preview of compound targets (docs/targeting.md): globs, grains, regexes, lists,
 *              nodegroups and groups; next to it the same answer computed in memory, once with the expression
 *              compiled once and once compiled again for every host (as Salt's matcher parses it per minion)
 *
 * Next to each, the floor: the same resolution computed in the bench process by lib/fleet/group-rules.ts over
 * host records already in memory (no storage, no services, no HTTP).
 */
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { batchesBySize } from "../lib/fleet/batches";
import { GroupIndex, compileRule, type GroupDef, type HostFacts, type Rule } from "../lib/fleet/group-rules";
import { compileTarget, type TargetHost } from "../lib/fleet/compound";
import { hostId, makeHost } from "./hosts";
import {
	apiJson,
	benchCluster,
	envInt,
	fmt,
	withProcLogs,
	quantile,
	runProductionCommand,
	serviceNames,
	stopProc,
	waitForHttp200,
} from "./support";

const HOSTS = envInt("BENCH_HOSTS", 10_000);
const RUNS = 20;

const NODEGROUPS: Record<string, Rule> = {
	workstations: { regex: "ws-" },
	kiosks: { regex: "kiosk-" },
	"pos-terminals": { regex: "pos-" },
	servers: { regex: "srv-" },
	labs: { regex: "lab-" },
	alt10: { grain: { osmajorrelease: "10" } },
	"alt10-2": { grain: { osrelease: "10.2" } },
	intel: { grain: { cpu_model: "Intel*" } },
	amd: { grain: { cpu_model: "AMD*" } },
	nvidia: { grain: { "gpus:0:vendor": "nvidia" } },
};

const now = () => performance.now();

/** Times `fn` RUNS times: median and p99 in ms. */
async function measure(fn: () => Promise<unknown>, runs = RUNS): Promise<{ p50: number; p99: number }> {
	const times: number[] = [];
	await fn(); // warm-up
	for (let i = 0; i < runs; i++) {
		const t = now();
		await fn();
		times.push(now() - t);
	}
	return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) };
}

export async function benchGroups(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const { nats, namespace, base, env } = await benchCluster("groups", dataDir, {
		NODEGROUPS: JSON.stringify(NODEGROUPS),
	});
	const proc = runProductionCommand("groups-all", serviceNames(), env);
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-groups-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	let valid = true;
	const lines: string[] = [];
	try {
		await broker.start();
		await broker.waitForServices(["hosts", "groups", "graph", "api"], 120_000);
		await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);

		// ------------------------------------------------------------ seed
		log(`groups: seeding ${HOSTS} hosts ...`);
		const stamp = Date.now();
		const facts: HostFacts[] = [];
		const seed = Array.from({ length: HOSTS }, (_, i) => makeHost(i, stamp, []));
		for (const h of seed) facts.push({ _id: h._id as string, grain: h.grain });
		for (const batch of batchesBySize(seed, 500)) await broker.call("hosts.upsertMany", { hosts: batch });
		log("groups: creating 500 groups five levels deep ...");
		const groups: GroupDef[] = [];
		const make = async (def: Omit<GroupDef, "_id"> & { name: string; type?: number }) => {
			const res = await apiJson(base, "POST", "/api/groups", def);
			if (res.status !== 201) throw new Error(`POST /api/groups answered ${res.status}: ${JSON.stringify(res.body)}`);
			groups.push({ ...def, _id: res.body._id });
			return res.body._id as string;
		};
		const leaves: string[] = [];
		const autoLeaves: string[] = [];
		const perLeaf = Math.ceil(HOSTS / 275);
		for (let i = 0; i < 275; i++)
			leaves.push(
				await make({
					name: `leaf-${i}`,
					hosts: Array.from({ length: perLeaf }, (_, k) => hostId(Math.min(HOSTS - 1, i * perLeaf + k))),
				}),
			);
		for (let i = 0; i < 50; i++)
			autoLeaves.push(
				await make({
					name: `auto-re-${i}`,
					type: 1,
					info: { regex: `[a-z]+-[a-z]+-0${String(i % 100).padStart(2, "0")}` },
				}),
			);
		const osReleases = ["10.1", "10.2"];
		for (let i = 0; i < 50; i++)
			autoLeaves.push(
				await make({
					name: `auto-grain-${i}`,
					type: 1,
					info: {
						grain: {
							osrelease: osReleases[i % 2],
							num_cpus: String([4, 6, 8][i % 3]),
							"gpus:0:vendor": ["intel", "amd", "nvidia"][i % 3],
						},
					},
				}),
			);
		const level4 = [...leaves, ...autoLeaves];
		const level3: string[] = [];
		for (let i = 0; i < 100; i++) {
			const children = level4.filter((_, k) => k % 100 === i);
			if (i < 25) children.push(level4[(i * 7 + 1) % level4.length]); // shared leaves
			level3.push(await make({ name: `l3-${i}`, subgroups: [...new Set(children)] }));
		}
		const level2: string[] = [];
		for (let i = 0; i < 20; i++)
			level2.push(await make({ name: `l2-${i}`, subgroups: level3.filter((_, k) => k % 20 === i) }));
		const level1: string[] = [];
		for (let i = 0; i < 4; i++)
			level1.push(await make({ name: `l1-${i}`, subgroups: level2.filter((_, k) => k % 4 === i) }));
		const root = await make({ name: "root", subgroups: level1 });
		const settle = await (async () => {
			const t = now();
			await broker.call("hosts.membershipSettled");
			return now() - t;
		})();
		log(`groups: ${groups.length} groups; memberships settled ${fmt(settle, 1)} ms after the last one`);

		// Check the memberships fleet-ctl computed against lib/fleet/group-rules.ts on the same data.
		const index = new GroupIndex(groups);
		for (const i of [0, Math.floor(HOSTS / 2), HOSTS - 1]) {
			const rec = (await apiJson(base, "GET", `/api/hosts/${hostId(i)}`)).body;
			const expected = index.groupsOf(facts[i]);
			if (JSON.stringify(rec.groups) !== JSON.stringify(expected)) {
				valid = false;
				log(
					`groups: INVALID: host ${hostId(i)} has groups ${JSON.stringify(rec.groups)}, expected ${JSON.stringify(expected)}`,
				);
			}
		}

		// ------------------------------------------------------------ measurements
		log("groups: resolving ...");
		const all = await measure(async () => {
			const res = await apiJson(base, "GET", `/api/groups/${root}/hostnames`);
			if (res.body.length !== HOSTS) throw new Error(`root resolved to ${res.body.length} hosts`);
		});
		const rootFloor = await measure(async () => {
			const byId = new Map(groups.map(g => [g._id, g]));
			const seen = new Set([root]);
			const queue = [root];
			const names = new Set<string>();
			const rules: Array<(h: HostFacts) => boolean> = [];
			while (queue.length) {
				const g = byId.get(queue.shift()!)!;
				for (const h of g.hosts ?? []) names.add(h);
				const rule = compileRule(g.info);
				if (rule) rules.push(rule);
				for (const c of g.subgroups ?? []) if (!seen.has(c)) seen.add(c), queue.push(c);
			}
			for (const f of facts) if (rules.some(r => r(f))) names.add(f._id);
			return [...names].sort();
		});
		const biggestAuto = autoLeaves[50];
		const auto = await measure(() => apiJson(base, "GET", `/api/groups/${biggestAuto}/hostnames`));
		const autoFloor = await measure(async () => {
			const rule = compileRule(groups.find(g => g._id === biggestAuto)!.info)!;
			return facts.filter(f => rule(f)).map(f => f._id);
		});

		log("groups: one host's grains change ...");
		const changed = makeHost(1, stamp, []);
		let flip = 0;
		const grain = await measure(async () => {
			const g = { ...(changed.grain as Record<string, unknown>), osrelease: flip++ % 2 ? "10.1" : "10.2" };
			await broker.call("hosts.upsertMany", { hosts: [{ _id: changed._id, grain: g }] });
			await broker.call("hosts.membershipSettled");
		});
		const grainFloor = await measure(async () =>
			new GroupIndex(groups).groupsOf({ _id: changed._id as string, grain: changed.grain }),
		);

		log("groups: a new automatic group ...");
		const newAuto = await measure(async () => {
			const res = await apiJson(base, "POST", "/api/groups", {
				name: "bench-new-auto",
				type: 1,
				info: { grain: { osrelease: "10.2", cpu_model: "Intel*" } },
			});
			await broker.call("hosts.membershipSettled");
			await apiJson(base, "DELETE", `/api/groups/${res.body._id}`);
			await broker.call("hosts.membershipSettled");
		}, 5);
		const newAutoFloor = await measure(async () => {
			const idx = new GroupIndex([
				...groups,
				{ _id: "new", info: { grain: { osrelease: "10.2", cpu_model: "Intel*" } } },
			]);
			for (const f of facts) idx.groupsOf(f);
		}, 5);

		log("groups: GET /api/graph/{root} ...");
		const graph = await measure(async () => {
			const res = await apiJson(base, "GET", `/api/graph/${root}`);
			if (res.body.nodes.length !== groups.length) throw new Error(`graph has ${res.body.nodes.length} nodes`);
		}, 50);

		log("groups: compound target previews ...");
		// The in-memory side: hosts with their nodegroups, groups resolved to their hosts (what F@ reads).
		const nodegroupDefs = Object.entries(NODEGROUPS).map(([name, info]) => ({ name, info }));
		const withGroups = new GroupIndex(groups, nodegroupDefs);
		const targetHosts: TargetHost[] = facts.map(f => ({
			_id: f._id,
			grain: f.grain,
			nodegroups: withGroups.nodegroupsOf(f),
		}));
		const membersOf = new Map<string, Set<string>>();
		for (const f of facts)
			for (const g of withGroups.groupsOf(f)) (membersOf.get(g) ?? membersOf.set(g, new Set()).get(g)!).add(f._id);
		const byName = new Map(groups.map(g => [g.name as string, g._id]));
		const ctx = { group: (ref: string) => membersOf.get(byName.get(ref) ?? ref) ?? new Set<string>() };
		const some = [0, 17, 4242, HOSTS - 1].map(i => hostId(Math.min(i, HOSTS - 1)));
		const TARGETS: Array<[string, string]> = [
			["a glob on the id", "ws-*"],
			["two grain globs", "G@osrelease:10.2 and G@cpu_model:Intel*"],
			["a nodegroup and not a grain", "N@workstations and not G@num_cpus:4"],
			["a regex or a list", `E@[a-z]+-[a-z]+-00[0-9][0-9]$ or L@${some.join(",")}`],
			["a group and a nested grain", "F@l2-3 and G@gpus:0:vendor:nvidia"],
		];
		const previews: string[] = [];
		for (const [label, target] of TARGETS) {
			const expected = targetHosts
				.filter(compileTarget(target, ctx).test)
				.map(h => h._id)
				.sort();
			const res = await apiJson(base, "POST", "/api/targets/preview", { target });
			if (res.status !== 200 || JSON.stringify(res.body.hosts) !== JSON.stringify(expected)) {
				valid = false;
				log(
					`groups: INVALID: preview of '${target}' answered ${res.status} with ${res.body?.count} hosts, in memory ${expected.length}`,
				);
			}
			const api = await measure(() => apiJson(base, "POST", "/api/targets/preview", { target }));
			const once = await measure(async () => {
				const test = compileTarget(target, ctx).test;
				return targetHosts
					.filter(test)
					.map(h => h._id)
					.sort();
			});
			const naive = await measure(
				async () =>
					targetHosts
						.filter(h => compileTarget(target, ctx).test(h))
						.map(h => h._id)
						.sort(),
				5,
			);
			const shown = target.length > 60 ? `${target.slice(0, 57)}...` : target;
			previews.push(
				`| preview: ${label}, \`${shown}\` (${fmt(expected.length, 0)} hosts) | ${fmt(api.p50, 1)} | ${fmt(api.p99, 1)} | ${fmt(once.p50, 1)} (compiled per host: ${fmt(naive.p50, 1)}) |`,
			);
		}

		lines.push(
			`Groups: ${fmt(HOSTS, 0)} hosts, ${groups.length} groups five levels deep (100 automatic, 25 shared leaves), 10 nodegroups; fleet-ctl in one process on NeDB:`,
			"",
			"| what | fleet-ctl p50 ms | p99 ms | computed in memory alone p50 ms |",
			"|---|---|---|---|",
			`| GET /groups/{root}/hostnames (${fmt(HOSTS, 0)} hosts) | ${fmt(all.p50, 1)} | ${fmt(all.p99, 1)} | ${fmt(rootFloor.p50, 1)} |`,
			`| GET /groups/{auto}/hostnames (grain rule) | ${fmt(auto.p50, 1)} | ${fmt(auto.p99, 1)} | ${fmt(autoFloor.p50, 1)} |`,
			`| one host's grains change, until its memberships are right | ${fmt(grain.p50, 1)} | ${fmt(grain.p99, 1)} | ${fmt(grainFloor.p50, 1)} |`,
			`| a new automatic group, until every host's memberships are right (then its removal, the same) | ${fmt(newAuto.p50, 1)} | ${fmt(newAuto.p99, 1)} | ${fmt(newAutoFloor.p50 * 2, 1)} |`,
			`| GET /graph/{root} (${groups.length} nodes) | ${fmt(graph.p50, 1)} | ${fmt(graph.p99, 1)} | – |`,
			...previews,
			"",
		);
	} catch (err) {
		throw withProcLogs(err, proc);
	} finally {
		await broker.stop().catch(() => undefined);
		await stopProc(proc);
	}
	return { report: lines.join("\n"), valid };
}
