/**
 * Realistic host records for the benchmark: what the Salt master's inventory (hosts.upsertMany)
 * writes for a workstation fleet. Deterministic (seeded PRNG) so every run measures the same bytes.
 */

/** mulberry32: small, fast, deterministic. */
export function prng(seed: number): () => number {
	let a = seed >>> 0;
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

const SITES = ["kzn", "msk", "spb", "nsk", "ekb", "sam", "ufa", "krd"];
const ROLES = ["ws", "kiosk", "pos", "srv", "lab"];
const CPUS: Array<[string, number]> = [
	["Intel(R) Core(TM) i5-8500 CPU @ 3.00GHz", 6],
	["Intel(R) Core(TM) i3-10100 CPU @ 3.60GHz", 8],
	["Intel(R) Core(TM) i7-9700 CPU @ 3.00GHz", 8],
	["AMD Ryzen 5 3400G with Radeon Vega Graphics", 8],
	["Intel(R) Pentium(R) Gold G5400 CPU @ 3.70GHz", 4],
	["Intel(R) Celeron(R) J4125 CPU @ 2.00GHz", 4],
];
const GPUS = [
	{ model: "UHD Graphics 630", vendor: "intel" },
	{ model: "Picasso/Raven 2 [Radeon Vega Series / Radeon Vega Mobile Series]", vendor: "amd" },
	{ model: "GP107 [GeForce GTX 1050 Ti]", vendor: "nvidia" },
	{ model: "GeminiLake [UHD Graphics 600]", vendor: "intel" },
];
const OSES = [
	{
		osfullname: "ALT Workstation",
		osrelease: "10.2",
		oscodename: "Sorbaronia Mitschurinii",
		kernelrelease: "6.1.79-un-def-alt1",
	},
	{
		osfullname: "ALT Workstation",
		osrelease: "10.1",
		oscodename: "Sorbaronia Mitschurinii",
		kernelrelease: "5.10.208-std-def-alt1",
	},
	{
		osfullname: "ALT Education",
		osrelease: "10.2",
		oscodename: "Sorbaronia Mitschurinii",
		kernelrelease: "6.1.79-un-def-alt1",
	},
];
const CPU_FLAGS =
	"fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch".split(
		" ",
	);
const NODEGROUPS = [
	"workstations",
	"kiosks",
	"pos-terminals",
	"servers",
	"labs",
	"alt10",
	"alt10-2",
	"intel",
	"amd",
	"nvidia",
];

const hex = (rnd: () => number, n: number) => {
	let s = "";
	for (let i = 0; i < n; i++) s += "0123456789abcdef"[Math.floor(rnd() * 16)];
	return s;
};
const pick = <T>(rnd: () => number, list: readonly T[]): T => list[Math.floor(rnd() * list.length)];
const int = (rnd: () => number, lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

/** 40 group ids (Mongo ObjectId shaped) the hosts belong to. */
export function groupIds(): string[] {
	const rnd = prng(7);
	return Array.from({ length: 40 }, () => hex(rnd, 24));
}

export function hostId(i: number): string {
	const site = SITES[i % SITES.length];
	const role = ROLES[Math.floor(i / SITES.length) % ROLES.length];
	return `${role}-${site}-${String(i).padStart(5, "0")}.corp.example.org`;
}

/** The Pritunl user record the VPN service keeps for a host (18 keys). */
function pritunlUser(rnd: () => number, id: string, org: string): Record<string, unknown> {
	return {
		id: hex(rnd, 24),
		organization: org,
		organization_name: "fleet-workstations",
		name: id.split(".")[0],
		email: null,
		groups: ["workstations"],
		last_active: 1717000000 + int(rnd, 0, 9_000_000),
		pin: false,
		type: "client",
		auth_type: "local",
		otp_auth: false,
		otp_secret: hex(rnd, 16).toUpperCase(),
		client_to_client: false,
		dns_servers: [],
		dns_suffix: null,
		port_forwarding: [],
		bypass_secondary: false,
		disabled: false,
	};
}

export function makeHost(i: number, now: number, groups: string[]): Record<string, unknown> {
	const rnd = prng(1000 + i);
	const id = hostId(i);
	const [cpuModel, numCpus] = pick(rnd, CPUS);
	const gpu = pick(rnd, GPUS);
	const os = pick(rnd, OSES);
	const ip = `10.${int(rnd, 0, 255)}.${int(rnd, 0, 255)}.${int(rnd, 1, 254)}`;
	const vpnIp = `172.16.${int(rnd, 0, 255)}.${int(rnd, 1, 254)}`;
	const mac = () => Array.from({ length: 6 }, () => hex(rnd, 2)).join(":");
	const nic = rnd() < 0.5 ? "enp3s0" : "eno1";
	const mac1 = mac();
	const day = 86_400_000;
	const lastDist = new Date(Math.floor((now - int(rnd, 1, 120) * day - int(rnd, 0, day)) / 1000) * 1000);
	const lastState = new Date(Math.floor((now - int(rnd, 0, 14) * day - int(rnd, 0, day)) / 1000) * 1000);
	const heartbeat = new Date(Math.floor((now - int(rnd, 0, 3600_000)) / 1000) * 1000);
	const hostGroups = Array.from(new Set(Array.from({ length: int(rnd, 1, 4) }, () => pick(rnd, groups))));
	const mem = pick(rnd, [3840, 7865, 15890, 31954]);
	const grain = {
		id,
		host: id.split(".")[0],
		fqdn: id,
		nodename: id.split(".")[0],
		domain: "corp.example.org",
		localhost: id.split(".")[0],
		cpu_model: cpuModel,
		cpuarch: "x86_64",
		cpu_flags: CPU_FLAGS,
		num_cpus: numCpus,
		mem_total: mem,
		swap_total: pick(rnd, [0, 2047, 4095]),
		num_gpus: 1,
		gpus: [gpu],
		kernel: "Linux",
		kernelrelease: os.kernelrelease,
		kernelversion: "#1 SMP PREEMPT_DYNAMIC Wed Mar  6 12:00:00 UTC 2024",
		os: "ALT",
		os_family: "ALT",
		osfullname: os.osfullname,
		osrelease: os.osrelease,
		osrelease_info: os.osrelease.split(".").map(Number),
		osmajorrelease: 10,
		oscodename: os.oscodename,
		osarch: "x86_64",
		osfinger: `${os.osfullname}-10`,
		virtual: "physical",
		init: "systemd",
		systemd: {
			version: "254",
			features:
				"+PAM +AUDIT +SELINUX -APPARMOR +IMA +SMACK +SECCOMP +GCRYPT -GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS",
		},
		biosversion: `F${int(rnd, 1, 20)}`,
		biosreleasedate: `${String(int(rnd, 1, 12)).padStart(2, "0")}/${String(int(rnd, 1, 28)).padStart(2, "0")}/20${int(rnd, 18, 23)}`,
		manufacturer: pick(rnd, ["Gigabyte Technology Co., Ltd.", "ASUSTeK COMPUTER INC.", "Dell Inc.", "LENOVO", "HP"]),
		productname: pick(rnd, ["B360M DS3H", "PRIME H410M-E", "OptiPlex 3070", "ThinkCentre M720s", "ProDesk 400 G6"]),
		serialnumber: hex(rnd, 12).toUpperCase(),
		uuid: `${hex(rnd, 8)}-${hex(rnd, 4)}-${hex(rnd, 4)}-${hex(rnd, 4)}-${hex(rnd, 12)}`,
		machine_id: hex(rnd, 32),
		disks: ["sda"],
		SSDs: rnd() < 0.6 ? ["nvme0n1"] : [],
		ip_interfaces: {
			lo: ["127.0.0.1", "::1"],
			[nic]: [ip, `fe80::${hex(rnd, 4)}:${hex(rnd, 4)}:${hex(rnd, 4)}:${hex(rnd, 4)}`],
			tun0: [vpnIp],
		},
		ip4_interfaces: { lo: ["127.0.0.1"], [nic]: [ip], tun0: [vpnIp] },
		ipv4: ["127.0.0.1", ip, vpnIp],
		ipv6: ["::1"],
		hwaddr_interfaces: { lo: "00:00:00:00:00:00", [nic]: mac1, tun0: "" },
		fqdn_ip4: [ip],
		dns: {
			nameservers: ["10.0.0.53", "10.0.1.53"],
			ip4_nameservers: ["10.0.0.53", "10.0.1.53"],
			ip6_nameservers: [],
			domain: "corp.example.org",
			search: ["corp.example.org"],
			options: [],
		},
		locale_info: { defaultlanguage: "ru_RU", defaultencoding: "UTF-8", detectedencoding: "utf-8", timezone: "MSK" },
		timezone: "Europe/Moscow",
		selinux: { enabled: false, enforced: "Disabled" },
		saltversion: "3006.9",
		saltversioninfo: [3006, 9],
		pythonversion: [3, 12, 1, "final", 0],
		zmqversion: "4.3.5",
		shell: "/bin/sh",
		username: "root",
		groupname: "root",
		uid: 0,
		gid: 0,
		ctl: { last_distupgrade: lastDist, last_stateapply: lastState },
	};
	const up = rnd() < 0.85;
	return {
		_id: id,
		version: "3006.9",
		ip,
		nodegroups: [pick(rnd, NODEGROUPS.slice(0, 5)), pick(rnd, NODEGROUPS.slice(5, 7)), gpu.vendor],
		groups: hostGroups,
		last_distupgrade: lastDist,
		last_stateapply: lastState,
		status: up ? "up" : "down",
		key: "accepted",
		heartbeat,
		nat: rnd() < 0.3,
		fingerprint: Array.from({ length: 32 }, () => hex(rnd, 2)).join(":"),
		vpn_organization: "65f0c0ffee0000000000aa01",
		vpn_representation: pritunlUser(rnd, id, "65f0c0ffee0000000000aa01"),
		grain,
	};
}
