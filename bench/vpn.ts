/**
 * The VPN part of `npm run bench` (BENCH_ONLY=vpn): BENCH_HOSTS (default 10,000) hosts, each a Pritunl
 * user of one of 10 organizations (half with a hardware token) in the Pritunl simulator (in the bench
 * process, real HTTP, session login), one manager. fleet-ctl runs every service in one child process
 * (the production command) on NATS, with the periodic sync off; the bench calls `vpn.sync`.
 *
 *   first sync      every host gets its identity (10,000 hosts written)
 *   no change       a sync that finds everything as it is (nothing written)
 *   100 changed     100 users got a new hardware token: a sync writes those 100 hosts
 *
 * Next to each, the floor: the same Pritunl reads (GET /organization, GET /user/<org> for each
 * organization) made directly by services/vpn/pritunl-client.ts from the bench process.
 */
import { ServiceBroker, type BrokerOptions } from "moleculer";
import { batchesBySize } from "../lib/fleet/batches";
import { PritunlClient } from "../services/vpn/pritunl-client";
import { PritunlSimulator } from "../test/simulators/pritunl";
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
const ORGS = 10;
const RUNS = 5;

const now = () => performance.now();

async function measure(fn: (run: number) => Promise<unknown>, runs = RUNS): Promise<{ p50: number; p99: number }> {
	const times: number[] = [];
	for (let i = 0; i < runs; i++) {
		const t = now();
		await fn(i);
		times.push(now() - t);
	}
	return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) };
}

export async function benchVpn(
	dataDir: string,
	log: (msg: string) => void,
): Promise<{ report: string; valid: boolean }> {
	const sim = new PritunlSimulator({ username: "bench", password: "bench-pritunl-pw" });
	const { url } = await sim.start();
	const { nats, namespace, base, env } = await benchCluster("vpn", dataDir, {
		VPN_SYNC_INTERVAL_MS: "0",
		OUTBOUND_ALLOW: "127.0.0.1/32",
	}); // the Pritunl simulator is on loopback (docs/security.md, "Outbound addresses")
	const proc = runProductionCommand("vpn-all", serviceNames(), env);
	const broker = new ServiceBroker({
		namespace,
		nodeID: `bench-vpn-${process.pid}`,
		transporter: nats.url as BrokerOptions["transporter"],
		logger: false,
		serializer: "JSONExt",
		requestTimeout: 600_000,
	});
	const floorClient = new PritunlClient({ url, username: "bench", password: "bench-pritunl-pw" });
	let valid = true;
	const lines: string[] = [];
	try {
		await broker.start();
		await broker.waitForServices(["hosts", "vpn", "vpn-organizations", "api"], 120_000);
		await waitForHttp200(`${base}/api/settings/0`, 120_000, [proc]);

		log(`vpn: seeding ${HOSTS} hosts and ${ORGS} organizations with their users ...`);
		const stamp = Date.now();
		for (const batch of batchesBySize(
			Array.from({ length: HOSTS }, (_, i) => makeHost(i, stamp, [])),
			500,
		))
			await broker.call("hosts.upsertMany", { hosts: batch });
		const manager = await apiJson(base, "POST", "/api/vpn_managers", {
			name: "bench",
			server_address: url,
			dashboard_address: `${url}/`,
			username: "bench",
			password: "bench-pritunl-pw",
		});
		if (manager.status !== 201)
			throw new Error(`POST /api/vpn_managers answered ${manager.status}: ${JSON.stringify(manager.body)}`);
		const pids: string[] = [];
		for (let o = 0; o < ORGS; o++) {
			const org = await apiJson(base, "POST", "/api/vpn_organizations", {
				name: `bench-org-${o}`,
				vpn_representation: { name: `bench-org-${o}` },
				cipher_type: "rsa",
				vpn_manager: manager.body._id,
			});
			if (org.status !== 201)
				throw new Error(`POST /api/vpn_organizations answered ${org.status}: ${JSON.stringify(org.body)}`);
			pids.push(sim.orgList().find(x => x.name === `bench-org-${o}`)!.id);
		}
		const users: string[] = [];
		for (let i = 0; i < HOSTS; i++)
			users.push(
				sim.addUser(pids[i % ORGS], {
					name: hostId(i),
					yubico_id: i % 2 ? `cccccc${String(i).padStart(6, "0")}` : null,
				}).id,
			);

		const floor = () =>
			measure(async () => {
				await floorClient.json("GET", "/organization");
				for (const pid of pids) await floorClient.json("GET", `/user/${pid}`);
			});
		const sync = async (wantChanged: number) => {
			const res = await broker.call<{ hosts: string[]; failed: unknown[] }, Record<string, never>>("vpn.sync", {});
			if (res.failed.length || res.hosts.length !== wantChanged) {
				valid = false;
				throw new Error(
					`vpn.sync changed ${res.hosts.length} hosts (expected ${wantChanged}), failures: ${JSON.stringify(res.failed)}`,
				);
			}
		};

		log("vpn: the first sync ...");
		const first = await measure(() => sync(HOSTS), 1);
		const firstFloor = await floor();
		log("vpn: syncs without changes ...");
		const same = await measure(() => sync(0));
		log("vpn: syncs after 100 new hardware tokens ...");
		const changed = await measure(async run => {
			for (let k = 0; k < 100; k++)
				sim.updateUser(users[(run * 100 + k * 97) % HOSTS], { yubico_id: `cccccc${run}${String(k).padStart(5, "0")}` });
			await sync(100);
		});
		const sample = await apiJson(base, "GET", `/api/hosts/${encodeURIComponent(hostId(1))}`);
		if (sample.body?.vpn_representation?.organization !== pids[1]) {
			valid = false;
			throw new Error(`host ${hostId(1)} has no VPN identity after the syncs`);
		}

		lines.push(
			`VPN sync: ${fmt(HOSTS, 0)} hosts, each a user of one of ${ORGS} Pritunl organizations (simulator, session login, one manager); fleet-ctl in one process on NeDB:`,
			"",
			"| what | fleet-ctl p50 ms | p99 ms | the Pritunl reads alone p50 ms |",
			"|---|---|---|---|",
			`| first sync: every host gets its identity (${fmt(HOSTS, 0)} hosts written) | ${fmt(first.p50, 0)} | – | ${fmt(firstFloor.p50, 0)} |`,
			`| a sync that changes nothing | ${fmt(same.p50, 0)} | ${fmt(same.p99, 0)} | ${fmt(firstFloor.p50, 0)} |`,
			`| a sync after 100 users got a new hardware token (100 hosts written) | ${fmt(changed.p50, 0)} | ${fmt(changed.p99, 0)} | ${fmt(firstFloor.p50, 0)} |`,
			"",
		);
	} catch (err) {
		valid = false;
		throw withProcLogs(err, proc);
	} finally {
		floorClient.close();
		await broker.stop().catch(() => undefined);
		await stopProc(proc);
		await sim.stop();
	}
	return { report: lines.join("\n"), valid };
}
