/**
 * The simulated minions: ids, keys (state + fingerprint), presence, grains and per-minion behaviour.
 * Everything generated here is deterministic for a given seed and reference time.
 */
import { Prng, grainDate, hashString, keyPair } from "./util";

export type KeyState = "accepted" | "pending" | "rejected" | "denied";

/** Key state → the key directory name Salt reports (`key.list_all`). */
export const KEY_DIRS: Record<KeyState, "minions" | "minions_pre" | "minions_rejected" | "minions_denied"> = {
	accepted: "minions",
	pending: "minions_pre",
	rejected: "minions_rejected",
	denied: "minions_denied",
};

export type Grains = Record<string, unknown>;

export interface Minion {
	id: string;
	key: KeyState;
	fingerprint: string;
	/** Connected to the master (answers jobs, shows in manage.up). */
	up: boolean;
	grains: Grains;
	/** Base return latency in ms (deterministic per id). */
	latencyMs: number;
	/** Override: return after this many ms instead of latencyMs. */
	delayMs: number | null;
	/** The minion receives jobs but its returns are lost (never arrive). */
	neverReturns: boolean;
	/** Packages pkg.upgrade would upgrade ({} once upgraded). */
	upgrades: Record<string, { old: string; new: string }>;
	/** Custom grain modules not yet synced (saltutil.sync_grains returns them once). */
	unsyncedGrainModules: string[];
	/**
	 * A second key under `minions_denied` while the accepted one stays under `minions` (a minion that presented
	 * a new key: `presentNewKey`). Its fingerprint.
	 */
	deniedFingerprint?: string;
	/** The key the minion process holds, when it is not the accepted one (it is then refused and exits). */
	presentedFingerprint?: string;
	/** The master restarted (new AES key): the minion authenticates again at the next publication it receives. */
	needsReauth: boolean;
}

interface Role {
	name: string;
	weight: number;
	gpu?: boolean;
	virtual?: boolean;
}

const ROLES: Role[] = [
	{ name: "web", weight: 5, virtual: true },
	{ name: "app", weight: 4, virtual: true },
	{ name: "db", weight: 2 },
	{ name: "cache", weight: 2, virtual: true },
	{ name: "ws", weight: 4 },
	{ name: "gpu", weight: 1, gpu: true },
	{ name: "build", weight: 1 },
	{ name: "mon", weight: 1, virtual: true },
];
const ROLE_CYCLE: Role[] = ROLES.flatMap(r => Array.from({ length: r.weight }, () => r));

const CPUS = [
	{ model: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", cores: [8, 16, 32, 40] },
	{ model: "Intel(R) Xeon(R) Silver 4214R CPU @ 2.40GHz", cores: [4, 8, 12, 24] },
	{ model: "AMD EPYC 7402P 24-Core Processor", cores: [8, 24, 48] },
	{ model: "AMD EPYC 7313 16-Core Processor", cores: [4, 16, 32] },
	{ model: "Intel(R) Core(TM) i7-10700 CPU @ 2.90GHz", cores: [8, 16] },
	{ model: "Intel(R) Core(TM) i5-8500 CPU @ 3.00GHz", cores: [6] },
];
const MEM_MB = [3923, 7951, 15885, 32117, 64259, 128722];
const GPUS = [
	{ model: "TU104GL [Tesla T4]", vendor: "nvidia" },
	{ model: "GA102GL [A10]", vendor: "nvidia" },
	{ model: "AD102GL [L40S]", vendor: "nvidia" },
];
const OSES = [
	{
		id: "Debian",
		full: "Debian GNU/Linux",
		desc: "Debian GNU/Linux 12 (bookworm)",
		release: "12.8",
		codename: "bookworm",
		kernels: ["6.1.0-28-amd64", "6.1.0-27-amd64", "6.1.0-26-amd64"],
		weight: 6,
	},
	{
		id: "Debian",
		full: "Debian GNU/Linux",
		desc: "Debian GNU/Linux 11 (bullseye)",
		release: "11.11",
		codename: "bullseye",
		kernels: ["5.10.0-33-amd64", "5.10.0-32-amd64"],
		weight: 2,
	},
	{
		id: "Ubuntu",
		full: "Ubuntu",
		desc: "Ubuntu 22.04.5 LTS",
		release: "22.04",
		codename: "jammy",
		kernels: ["5.15.0-126-generic", "5.15.0-125-generic"],
		weight: 2,
	},
];
const OS_CYCLE = OSES.flatMap(o => Array.from({ length: o.weight }, () => o));
const SALT_VERSIONS = ["3006.9", "3006.9", "3006.9", "3006.8", "3007.1"];
const BIOS = {
	physical: ["2.14.1", "2.19.0", "U46 v2.72"],
	kvm: ["1.16.2-debian-1.16.2-1"],
	VMware: ["VMW71.00V.21100432.B64.2301110304"],
};
const UPGRADABLE = [
	"openssl",
	"libssl3",
	"curl",
	"libcurl4",
	"linux-image-amd64",
	"tzdata",
	"openssh-server",
	"systemd",
	"sudo",
	"bash",
];

/** Site names: site-a … site-z, then site-aa, site-ab, … */
export function siteName(i: number): string {
	let s = "";
	let n = i;
	do {
		s = String.fromCharCode(97 + (n % 26)) + s;
		n = Math.floor(n / 26) - 1;
	} while (n >= 0);
	return `site-${s}`;
}

/** Deterministic ids like `web-01.site-a.example`, about 200 minions per site. */
export function generateIds(count: number, perSite = 200): string[] {
	const ids: string[] = [];
	const counters = new Map<string, number>();
	for (let i = 0; i < count; i++) {
		const site = siteName(Math.floor(i / perSite));
		const role = ROLE_CYCLE[i % ROLE_CYCLE.length].name;
		const key = `${role}.${site}`;
		const n = (counters.get(key) ?? 0) + 1;
		counters.set(key, n);
		ids.push(`${role}-${String(n).padStart(2, "0")}.${site}.example`);
	}
	return ids;
}

export function roleOf(id: string): Role {
	const name = id.split(".")[0].replace(/-\d+$/, "");
	return ROLES.find(r => r.name === name) ?? { name, weight: 1 };
}

export function makeFingerprint(prng: Prng): string {
	return keyPair(prng.hex(32)).fingerprint;
}

/** Realistic grains for one minion: the keys the fleet-ctl spec lists plus Salt's usual core grains. */
export function makeGrains(id: string, prng: Prng, referenceMs: number): Grains {
	const [host, ...domainParts] = id.split(".");
	const domain = domainParts.join(".");
	const role = roleOf(id);
	const cpu = prng.pick(CPUS);
	const numCpus = prng.pick(cpu.cores);
	const os = prng.pick(OS_CYCLE);
	const virtual = role.virtual ? prng.pick(["kvm", "kvm", "VMware"] as const) : "physical";
	const numGpus = role.gpu ? prng.int(1, 4) : 0;
	const gpuModel = prng.pick(GPUS);
	const siteIdx = domain.startsWith("site-") ? Math.max(0, domain.charCodeAt(5) - 97) : 0;
	const ip = `10.${(siteIdx % 200) + 10}.${prng.int(0, 31)}.${prng.int(2, 254)}`;
	const mac = `52:54:00:${prng.hex(1)}:${prng.hex(1)}:${prng.hex(1)}`;
	const ipv6 = `fe80::5054:ff:fe${mac.slice(9, 11)}:${mac.slice(12, 14)}${mac.slice(15, 17)}`;
	const iface = virtual === "physical" ? prng.pick(["eno1", "enp3s0", "eth0"]) : "ens3";
	const saltVersion = prng.pick(SALT_VERSIONS);
	const day = 86_400_000;
	const lastDist = referenceMs - prng.int(1, 120) * day - prng.int(0, day / 1000) * 1000;
	const lastApply = referenceMs - prng.int(0, 30) * day - prng.int(0, day / 1000) * 1000;
	const serial =
		virtual === "physical"
			? `CZ${prng.int(1, 9)}${prng.hex(3).toUpperCase()}${prng.pick(["XY", "K8", "QP", "7Z"])}`
			: "";
	const memTotal = role.name === "db" || role.gpu ? prng.pick(MEM_MB.slice(3)) : prng.pick(MEM_MB.slice(0, 5));
	const kernelRelease = prng.pick(os.kernels);
	const [major, minor] = saltVersion.split(".").map(Number);
	// Salt's other core grains (the key set of a real 3006 minion, ../shared/reference/salt-3006/cache_grains.json),
	// from their own generator so that the values above stay what they were for a given seed.
	const core = new Prng(`core/${id}`);
	const osMajor = Number(os.release.split(".")[0]);
	const cpuFlags = [
		"fpu",
		"vme",
		"de",
		"pse",
		"tsc",
		"msr",
		"pae",
		"mce",
		"cx8",
		"apic",
		"sep",
		"mtrr",
		"pge",
		"mca",
		"cmov",
		"pat",
		"pse36",
		"clflush",
		"mmx",
		"fxsr",
		"sse",
		"sse2",
		"ht",
		"syscall",
		"nx",
		"lm",
		"constant_tsc",
		"pni",
		"ssse3",
		"cx16",
		"sse4_1",
		"sse4_2",
		"popcnt",
		"aes",
		"xsave",
		"avx",
		"hypervisor",
	];
	const gw = `10.${(siteIdx % 200) + 10}.0.1`;
	const systemPath = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
	const coreGrains: Grains = {
		cwd: "/",
		ip_gw: true,
		ip4_gw: gw,
		ip6_gw: "fe80::1",
		fqdns: [],
		server_id: core.int(1, 2_147_483_647),
		ip6_interfaces: { lo: ["::1"], [iface]: [ipv6] },
		fqdn_ip6: [],
		kernelparams: [
			["BOOT_IMAGE", `/boot/vmlinuz-${kernelRelease}`],
			["root", `UUID=${core.hex(4)}-${core.hex(2)}-${core.hex(2)}-${core.hex(2)}-${core.hex(6)}`],
			["ro", null],
			["quiet", null],
		],
		cpu_flags: cpuFlags,
		systemd: {
			version: os.codename === "bookworm" ? "252" : os.codename === "bullseye" ? "247" : "249",
			features:
				"+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT -GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS +FIDO2 +IDN2 -IDN +IPTC +KMOD +LIBCRYPTSETUP +LIBFDISK +PCRE2 -PWQUALITY +P11KIT +QRENCODE +TPM2 +BZIP2 +LZ4 +XZ +ZLIB +ZSTD -BPF_FRAMEWORK -XKBCOMMON +UTMP +SYSVINIT default-hierarchy=unified",
		},
		osrelease_info: os.release.split(".").map(Number),
		osmajorrelease: osMajor,
		osfinger: `${os.id}-${os.id === "Ubuntu" ? os.release : osMajor}`,
		systempath: systemPath,
		pythonexecutable: "/opt/saltstack/salt/bin/python3.10",
		pythonpath: [
			"/opt/saltstack/salt/bin",
			"/opt/saltstack/salt/extras-3.10",
			"/opt/saltstack/salt/lib/python310.zip",
			"/opt/saltstack/salt/lib/python3.10",
			"/opt/saltstack/salt/lib/python3.10/lib-dynload",
			"/opt/saltstack/salt/lib/python3.10/site-packages",
		],
		zmqversion: "4.3.4",
		disks: virtual === "physical" ? ["sda", "sdb"] : ["vda"],
		ssds: virtual === "physical" ? ["sda"] : [],
		efi: virtual === "physical",
		"efi-secure-boot": false,
		username: "root",
		groupname: "root",
		pid: core.int(400, 40_000),
		gid: 0,
		uid: 0,
		zfs_support: false,
		zfs_feature_flags: false,
		transactional: false,
		ps: "ps -efHww",
	};
	return {
		id,
		host,
		domain,
		fqdn: id,
		nodename: host,
		localhost: host,
		kernel: "Linux",
		kernelrelease: kernelRelease,
		kernelversion: `#1 SMP PREEMPT_DYNAMIC ${os.id} ${kernelRelease.split("-")[0]}`,
		os: os.id,
		os_family: "Debian",
		osfullname: os.full,
		osrelease: os.release,
		oscodename: os.codename,
		osarch: "amd64",
		lsb_distrib_id: os.id,
		lsb_distrib_description: os.desc,
		lsb_distrib_release: os.release,
		lsb_distrib_codename: os.codename,
		cpuarch: "x86_64",
		cpu_model: cpu.model,
		num_cpus: numCpus,
		mem_total: memTotal,
		swap_total: virtual === "physical" ? 8191 : 0,
		num_gpus: numGpus,
		gpus: Array.from({ length: numGpus }, () => ({ ...gpuModel })),
		virtual,
		manufacturer: virtual === "physical" ? prng.pick(["HPE", "Dell Inc.", "Supermicro"]) : "QEMU",
		productname:
			virtual === "physical"
				? prng.pick(["ProLiant DL360 Gen10", "PowerEdge R650", "SYS-1029P-WTR"])
				: "Standard PC (Q35 + ICH9, 2009)",
		serialnumber: serial,
		biosversion: prng.pick(BIOS[virtual]),
		biosreleasedate: `${String(prng.int(1, 12)).padStart(2, "0")}/${String(prng.int(1, 28)).padStart(2, "0")}/20${prng.int(19, 24)}`,
		uuid: `${prng.hex(4)}-${prng.hex(2)}-${prng.hex(2)}-${prng.hex(2)}-${prng.hex(6)}`,
		machine_id: prng.hex(16),
		saltversion: saltVersion,
		saltversioninfo: [major, minor],
		saltpath: "/opt/saltstack/salt/lib/python3.10/site-packages/salt",
		pythonversion: [3, 10, 14, "final", 0],
		// The fleet-ctl spec's names for the salt version and the hosts' own custom grains.
		cmversion: saltVersion,
		"ctl-version": prng.int(3, 7),
		ctl: { last_distupgrade: grainDate(lastDist), last_stateapply: grainDate(lastApply) },
		ip_interfaces: { lo: ["127.0.0.1", "::1"], [iface]: [ip, ipv6] },
		ip4_interfaces: { lo: ["127.0.0.1"], [iface]: [ip] },
		ipv4: ["127.0.0.1", ip],
		ipv6: ["::1", ipv6],
		hwaddr_interfaces: { lo: "00:00:00:00:00:00", [iface]: mac },
		fqdn_ip4: [ip],
		ip,
		init: "systemd",
		path: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		shell: "/bin/sh",
		locale_info: { defaultlanguage: "en_US", defaultencoding: "UTF-8", detectedencoding: "utf-8", timezone: "UTC" },
		master: "salt",
		roles: [role.name],
		...coreGrains,
		dns: {
			nameservers: [`10.${(siteIdx % 200) + 10}.0.53`],
			ip4_nameservers: [`10.${(siteIdx % 200) + 10}.0.53`],
			ip6_nameservers: [],
			sortlist: [],
			domain,
			search: domain ? [domain] : [],
			options: [],
		},
	};
}

export interface MinionSpec {
	id: string;
	key?: KeyState;
	up?: boolean;
	grains?: Grains;
	fingerprint?: string;
}

export function makeMinion(spec: MinionSpec, seed: string, referenceMs: number): Minion {
	const prng = new Prng(`${seed}/${spec.id}`);
	const grains = makeGrains(spec.id, prng, referenceMs);
	Object.assign(grains, spec.grains ?? {});
	const upgrades: Minion["upgrades"] = {};
	const nUp = prng.int(0, 4);
	for (let i = 0; i < nUp; i++) {
		const pkg = prng.pick(UPGRADABLE);
		const old = `${prng.int(1, 9)}.${prng.int(0, 20)}.${prng.int(0, 9)}-${prng.int(1, 4)}`;
		upgrades[pkg] = { old, new: `${old.replace(/-\d+$/, "")}-${prng.int(5, 9)}+deb12u1` };
	}
	return {
		id: spec.id,
		key: spec.key ?? "accepted",
		fingerprint: spec.fingerprint ?? makeFingerprint(prng),
		up: spec.up ?? true,
		grains,
		latencyMs: 0,
		delayMs: null,
		neverReturns: false,
		upgrades,
		unsyncedGrainModules: ["grains.ctl"],
		needsReauth: false,
	};
}

/** Base latency for a minion, uniform in [min, max] and stable for its id. */
export function baseLatency(id: string, min: number, max: number): number {
	if (max <= min) return min;
	return min + (hashString(`latency/${id}`) % (max - min + 1));
}

/**
 * The fleet: minions by id plus a cached sorted id list (listing 10,000 minions must stay cheap).
 */
export class Fleet {
	private readonly byId = new Map<string, Minion>();
	private sorted: string[] | null = null;
	private acceptedSorted: string[] | null = null;

	get size(): number {
		return this.byId.size;
	}
	get(id: string): Minion | undefined {
		return this.byId.get(id);
	}
	has(id: string): boolean {
		return this.byId.has(id);
	}
	add(m: Minion): void {
		this.byId.set(m.id, m);
		this.invalidate();
	}
	remove(id: string): boolean {
		const ok = this.byId.delete(id);
		this.invalidate();
		return ok;
	}
	/** Call after a key state change. */
	invalidate(): void {
		this.sorted = null;
		this.acceptedSorted = null;
	}
	ids(): string[] {
		return (this.sorted ??= [...this.byId.keys()].sort());
	}
	all(): Minion[] {
		return this.ids().map(id => this.byId.get(id)!);
	}
	/** Sorted ids of minions whose key is accepted: the only ones Salt targets. */
	acceptedIds(): string[] {
		return (this.acceptedSorted ??= this.ids().filter(id => this.byId.get(id)!.key === "accepted"));
	}
	byKeyState(): Record<KeyState, string[]> {
		const out: Record<KeyState, string[]> = { accepted: [], pending: [], rejected: [], denied: [] };
		for (const id of this.ids()) {
			const m = this.byId.get(id)!;
			out[m.key].push(id);
			// A minion that presented a new key: the old key stays accepted, the new one is denied.
			if (m.deniedFingerprint !== undefined && m.key !== "denied") out.denied.push(id);
		}
		return out;
	}
}
