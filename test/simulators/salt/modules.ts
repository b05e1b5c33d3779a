/**
 * Canned execution modules, run "on" a simulated minion. Each returns what the real minion would put
 * in its job return: `return`, `retcode` and, for state runs, `out: "highstate"`.
 */
import type { Minion } from "./fleet";
import { subdictMatch } from "./targeting";
import {
	EX_GENERIC,
	EX_OK,
	type DriftBook,
	type FileServer,
	type StepFailure,
	compileSls,
	noStatesReturn,
	runSteps,
	topMatches,
	withRequisites,
} from "./states";
import { grainDate, hashString, isPlainObject, traverse } from "./util";
import { parseFlowScalar } from "./yaml";

export interface ExecResult {
	ret: unknown;
	retcode: number;
	out?: string;
}

export interface ExecContext {
	minion: Minion;
	jid: string;
	fun: string;
	/** The job's `arg` list as published (positional args, `k=v` strings, the `__kwarg__` dict). */
	arg: unknown[];
	files: FileServer;
	/** Failure configured for a patch (sls name) on this minion, if any. */
	patchFailure: (sls: string) => StepFailure | undefined;
	/** The states of this minion a test made drift from their desired state. */
	drifts: DriftBook;
	/** Fire an event on the master bus through this minion's daemon (`_fire_master`: the `_minion_event` wrapper). */
	fireMinionEvent: (tag: string, data: unknown) => void;
	/**
	 * Record a function another one ran on this minion (`test.try module=cmd.run`: cmd.run, via test.try), or
	 * scheduled to run later (`schedule.add`): the master's `executions()` lists it with `via`.
	 */
	recordInner?: (fun: string, arg: unknown[], via: string, scheduled?: boolean) => void;
	/**
	 * Send a load to the master over a request channel of this minion's own (`event.fire_master` with `preload`):
	 * the master handles it by its `cmd` (master.ts `minionLoad`).
	 */
	sendLoad: (load: Record<string, unknown>) => void;
	/** The job's `__pub_*` keys, which a function taking `**kwargs` receives (`__pub_fun`, `__pub_arg`, …). */
	pub: Record<string, unknown>;
	nowMs: number;
}

type Fn = (ctx: ExecContext, args: unknown[], kwargs: Record<string, unknown>) => ExecResult;

const ok = (ret: unknown): ExecResult => ({ ret, retcode: EX_OK });

/** `salt.minion.load_args_and_kwargs`: split positional args, `key=value` strings and the `__kwarg__` dict. */
export function splitArgs(arg: unknown[]): { args: unknown[]; kwargs: Record<string, unknown> } {
	const args: unknown[] = [];
	const kwargs: Record<string, unknown> = {};
	for (const a of arg) {
		if (isPlainObject(a) && a.__kwarg__ === true) {
			for (const [k, v] of Object.entries(a)) if (k !== "__kwarg__") kwargs[k] = v;
		} else if (typeof a === "string" && /^[A-Za-z_]\w*=/.test(a)) {
			const i = a.indexOf("=");
			kwargs[a.slice(0, i)] = yamlify(a.slice(i + 1));
		} else args.push(a);
	}
	return { args, kwargs };
}

/** `salt.utils.args.yamlify_arg`, simplified: structured-looking strings become data. */
export function yamlify(s: string): unknown {
	const t = s.trim();
	if (t === "" || /\s#/.test(t)) return s;
	// Long digit strings (jids) would lose precision as JavaScript numbers: keep them as text.
	if (/^[-+]?\d{16,}$/.test(t)) return s;
	try {
		const v = parseFlowScalar(t);
		if (typeof v === "string") return s;
		if (v === null && t !== "null" && t !== "None") return s;
		return v;
	} catch {
		return s;
	}
}

const truthy = (v: unknown) => v === true || v === "True" || v === "true" || v === 1;

/** Python's truth of a value (a non-empty string is true, "False" included). */
const pyTrue = (v: unknown) =>
	!(
		v === undefined ||
		v === null ||
		v === false ||
		v === 0 ||
		v === "" ||
		(Array.isArray(v) && v.length === 0) ||
		(isPlainObject(v) && Object.keys(v).length === 0)
	);

/**
 * `state._get_test_value` (salt/modules/state.py:479): the `test` argument when given, whatever its type (Python's
 * truth decides), else a `Test`/`TEST` keyword that is true, else the minion's config (`test: False` here).
 */
function stateTest(test: unknown, kwargs: Record<string, unknown>): boolean {
	if (test !== undefined && test !== null) return pyTrue(test);
	return Object.entries(kwargs).some(
		([k, v]) =>
			k.toLowerCase() === "test" && (v === true || (typeof v === "string" && /^(true|yes|on|1)$/i.test(v)) || v === 1),
	);
}

function simulateCommand(ctx: ExecContext, cmd: string): { stdout: string; stderr: string; retcode: number } {
	const g = ctx.minion.grains;
	const c = cmd.trim();
	let m: RegExpExecArray | null;
	if ((m = /^echo\s+(.*)$/s.exec(c))) {
		const t = m[1].trim();
		const unq = (t.startsWith('"') && t.endsWith('"')) || (t.startsWith("'") && t.endsWith("'")) ? t.slice(1, -1) : t;
		return { stdout: unq, stderr: "", retcode: 0 };
	}
	if (c === "echo") return { stdout: "", stderr: "", retcode: 0 };
	if (c === "hostname") return { stdout: String(g.host), stderr: "", retcode: 0 };
	if (c === "hostname -f") return { stdout: String(g.fqdn), stderr: "", retcode: 0 };
	if (c === "uname -r") return { stdout: String(g.kernelrelease), stderr: "", retcode: 0 };
	if (c === "uname -a")
		return { stdout: `Linux ${g.host} ${g.kernelrelease} ${g.kernelversion} x86_64 GNU/Linux`, stderr: "", retcode: 0 };
	if (c === "true" || c === ":") return { stdout: "", stderr: "", retcode: 0 };
	if (c === "false") return { stdout: "", stderr: "", retcode: 1 };
	if ((m = /^exit\s+(\d+)$/.exec(c))) return { stdout: "", stderr: "", retcode: Number(m[1]) };
	if (c === "uptime")
		return {
			stdout: ` 12:00:00 up ${hashString(ctx.minion.id) % 300} days,  1 user,  load average: 0.08, 0.03, 0.01`,
			stderr: "",
			retcode: 0,
		};
	return { stdout: "", stderr: "", retcode: 0 };
}

function stateApply(
	ctx: ExecContext,
	mods: unknown,
	kwargs: Record<string, unknown>,
	testArg: unknown = kwargs.test,
): ExecResult {
	const saltenv = typeof kwargs.saltenv === "string" ? kwargs.saltenv : "base";
	const test = stateTest(testArg, kwargs);
	const names =
		mods === undefined || mods === null || mods === ""
			? null
			: Array.isArray(mods)
				? mods.map(String)
				: String(mods)
						.split(",")
						.map(s => s.trim())
						.filter(Boolean);
	let slsNames: string[];
	if (names === null) {
		const matched = topMatches(ctx.files, ctx.minion.id, expr => subdictMatch(ctx.minion.grains, expr));
		if (!matched || matched.length === 0) {
			const r = noStatesReturn("No Top file or master_tops data matches found. Please see master log for details.");
			return { ...r, out: "highstate" };
		}
		slsNames = matched;
	} else slsNames = names;
	const compiled = compileSls(ctx.files, slsNames, saltenv, ctx.minion.grains);
	if ("errors" in compiled) return { ret: compiled.errors, retcode: EX_GENERIC, out: "highstate" };
	if (compiled.steps.length === 0) return { ...noStatesReturn("No states found for this minion"), out: "highstate" };
	const run = runSteps(ctx.minion.id, compiled.steps, ctx.patchFailure, test, ctx.drifts);
	if (!test) {
		const ctl = isPlainObject(ctx.minion.grains.ctl) ? ctx.minion.grains.ctl : {};
		ctx.minion.grains.ctl = { ...ctl, last_stateapply: grainDate(ctx.nowMs) };
	}
	return { ...run, out: "highstate" };
}

/**
 * `state.sls_id <id> <mods>`: the state with that id of those sls and the states it requires, those first
 * (state_sls_id_fix.json); Salt's answer when none has it: an error list, retcode 1.
 */
function stateSlsId(ctx: ExecContext, id: unknown, mods: unknown, kwargs: Record<string, unknown>): ExecResult {
	const saltenv = typeof kwargs.saltenv === "string" ? kwargs.saltenv : "base";
	const names = Array.isArray(mods)
		? mods.map(String)
		: String(mods ?? "")
				.split(",")
				.map(s => s.trim())
				.filter(Boolean);
	const compiled = compileSls(ctx.files, names, saltenv, ctx.minion.grains);
	if ("errors" in compiled) return { ret: compiled.errors, retcode: EX_GENERIC, out: "highstate" };
	const steps = withRequisites(compiled.steps, String(id));
	if (!steps.length)
		return {
			ret: [`No matches for ID '${String(id)}' found in SLS '${names.join(",")}' within saltenv '${saltenv}'`],
			retcode: EX_GENERIC,
			out: "highstate",
		};
	const run = runSteps(ctx.minion.id, steps, ctx.patchFailure, stateTest(kwargs.test, kwargs), ctx.drifts);
	return { ...run, out: "highstate" };
}

/** `/proc/meminfo` lines status.meminfo reports (kB values), after MemTotal/MemFree/MemAvailable. */
const MEMINFO_KEYS = [
	"Buffers",
	"Cached",
	"SwapCached",
	"Active",
	"Inactive",
	"Unevictable",
	"Mlocked",
	"SwapTotal",
	"SwapFree",
	"Dirty",
	"Writeback",
	"AnonPages",
	"Mapped",
	"Shmem",
	"Slab",
	"SReclaimable",
	"SUnreclaim",
	"KernelStack",
	"PageTables",
	"CommitLimit",
	"Committed_AS",
	"VmallocTotal",
	"VmallocUsed",
];
const DISKSTAT_FIELDS = [
	"reads_issued",
	"reads_merged",
	"sectors_read",
	"ms_spent_reading",
	"writes_completed",
	"writes_merged",
	"sectors_written",
	"ms_spent_writing",
	"io_in_progress",
	"ms_spent_in_io",
	"weighted_ms_spent_in_io",
];
const NETDEV_FIELDS = [
	"rx_bytes",
	"rx_compressed",
	"rx_drop",
	"rx_errs",
	"rx_fifo",
	"rx_frame",
	"rx_multicast",
	"rx_packets",
	"tx_bytes",
	"tx_carrier",
	"tx_colls",
	"tx_compressed",
	"tx_drop",
	"tx_errs",
	"tx_fifo",
	"tx_packets",
];

/**
 * `status.all_status` as a 3006 minion answers it (status_all_status.json of the 2026-11-29 captures): `cpuinfo` of
 * one processor with `flags` a list, `cpustats` with one `cpuN` per cpu and `intr`/`softirq` totals, `diskstats`
 * and `netdev` rows with every /proc field (and `device`/`iface`), `meminfo` `{value, unit}` entries (counts: no
 * unit), `netstats`
 * by section (TcpExt, IpExt, MPTcpExt), `uptime` with `time` ("H:MM"), `vmstats` and `w` (the logged-in users).
 */
function allStatus(ctx: ExecContext): Record<string, unknown> {
	const g = ctx.minion.grains;
	const t = Math.floor(ctx.nowMs / 1000);
	const h = hashString(`${ctx.minion.id}/${Math.floor(t / 10)}`);
	const cpus = Math.max(1, Number(g.num_cpus) || 1);
	const load = (n: number) => Math.round((((h >>> n) % 400) / 100 + cpus * 0.02) * 1024) / 1024;
	const memTotalKb = (Number(g.mem_total) || 1024) * 1024;
	const memFreeKb = Math.floor(memTotalKb * (0.2 + (h % 50) / 100));
	const kb = (n: number) => ({ value: String(Math.max(0, Math.floor(n))), unit: "kB" });
	const ifaces = ["lo", ...Object.keys((g.ip_interfaces as Record<string, unknown>) ?? {}).filter(i => i !== "lo")];
	const uptimeS = 86400 * (hashString(ctx.minion.id) % 300) + (t % 86400);
	const since = t - uptimeS;
	const flags = Array.isArray(g.cpu_flags)
		? g.cpu_flags.map(String)
		: ["fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep"];
	const perCpu = Object.fromEntries(
		Array.from({ length: cpus }, (_v, i) => [`cpu${i}`, 100_000 + ((h >>> i) % 50_000)]),
	);
	return {
		cpuinfo: {
			processor: String(cpus - 1),
			vendor_id: "GenuineIntel",
			"cpu family": "6",
			model: "85",
			"model name": g.cpu_model,
			stepping: "7",
			microcode: "0x1",
			"cpu MHz": "2593.906",
			"cache size": "16384 KB",
			"physical id": "0",
			siblings: String(cpus),
			"core id": String(cpus - 1),
			"cpu cores": String(cpus),
			apicid: String(cpus - 1),
			"initial apicid": String(cpus - 1),
			fpu: "yes",
			fpu_exception: "yes",
			"cpuid level": "13",
			wp: "yes",
			flags,
			bugs: "spectre_v1 spectre_v2 spec_store_bypass",
			bogomips: "5187.81",
			"TLB size": "3584 4K pages",
			"clflush size": "64",
			cache_alignment: "64",
			"address sizes": "46 bits physical, 48 bits virtual",
			"power management": "",
		},
		cpustats: {
			cpu: {
				idle: 10_000_000 + (h % 5_000_000),
				iowait: h % 3000,
				irq: 0,
				nice: 12,
				softirq: 17,
				steal: 0,
				system: 500 + (h % 20000),
				user: 1000 + (h % 100000),
			},
			...perCpu,
			intr: { total: 4_000_000 + (h % 1_000_000), irqs: [0, 9, 0, 0, 0, 0, 0, 0, 0, 0] },
			ctxt: 90_000_000 + (h % 1_000_000),
			btime: since,
			processes: 200_000 + (h % 50_000),
			procs_running: 1 + (h % 4),
			procs_blocked: 0,
			softirq: {
				total: 8_000_000 + (h % 1_000_000),
				softirqs: [0, 277_732, 6, 6_474_281, 240_101, 0, 2, 446_793, 5862, 634_098],
			},
		},
		diskstats: Object.fromEntries(
			["sda", "sda1"].map((device, i) => [
				device,
				{
					major: 8,
					minor: i,
					device,
					...Object.fromEntries(DISKSTAT_FIELDS.map((f, j) => [f, f === "io_in_progress" ? 0 : (h >>> j) % 100_000])),
				},
			]),
		),
		diskusage: {
			"/": { available: 30_000_000_000 + (h % 10_000_000_000), total: 52_576_092_160 },
			"/boot": { available: 350_000_000, total: 498_900_992 },
			"/dev/shm": { available: memTotalKb * 512, total: memTotalKb * 512 },
		},
		loadavg: { "1-min": load(0), "5-min": load(3), "15-min": load(6) },
		meminfo: {
			MemTotal: kb(memTotalKb),
			MemFree: kb(memFreeKb),
			MemAvailable: kb(memFreeKb + 100_000),
			...Object.fromEntries(
				MEMINFO_KEYS.map((k, i) => [
					k,
					kb(k.startsWith("Swap") && k !== "SwapCached" ? (Number(g.swap_total) || 0) * 1024 : (h >>> i) % 200_000),
				]),
			),
			// Counts, not sizes: no unit.
			HugePages_Total: { value: "0" },
			HugePages_Free: { value: "0" },
		},
		netdev: Object.fromEntries(
			ifaces.map((iface, i) => [
				iface,
				{
					iface,
					...Object.fromEntries(
						NETDEV_FIELDS.map((f, j) => [
							f,
							f.endsWith("bytes")
								? 1_000_000 * (i + 1) + ((h >>> j) % 1_000_000)
								: f.endsWith("packets")
									? 60_000 + ((h >>> j) % 10_000)
									: 0,
						]),
					),
				},
			]),
		),
		netstats: {
			TcpExt: {
				SyncookiesSent: 0,
				SyncookiesRecv: 0,
				SyncookiesFailed: 0,
				EmbryonicRsts: 0,
				PruneCalled: 0,
				TW: 100 + (h % 900),
				DelayedACKs: 1000 + (h % 9000),
				TCPTimeouts: h % 50,
			},
			IpExt: {
				InNoRoutes: 0,
				InTruncatedPkts: 0,
				InMcastPkts: 0,
				OutMcastPkts: 0,
				InOctets: 9_000_000_000 + (h % 1_000_000_000),
				OutOctets: 4_000_000_000 + (h % 900_000_000),
			},
			MPTcpExt: { MPCapableSYNRX: 0, MPCapableSYNTX: 0, MPCapableSYNACKRX: 0, MPCapableACKRX: 0 },
		},
		uptime: {
			seconds: uptimeS,
			since_iso: new Date(since * 1000)
				.toISOString()
				.replace("Z", "")
				.replace(/\.(\d{3})$/, ".$1000"),
			since_t: since,
			days: Math.floor(uptimeS / 86400),
			time: `${Math.floor((uptimeS % 86400) / 3600)}:${String(Math.floor((uptimeS % 3600) / 60)).padStart(2, "0")}`,
			users: h % 3,
		},
		vmstats: {
			nr_free_pages: Math.floor(memFreeKb / 4),
			nr_zone_inactive_anon: 5000 + (h % 1000),
			nr_zone_active_anon: 90_000 + (h % 10_000),
			pgpgin: 50_000_000,
			pgpgout: 90_000_000,
			pswpin: 0,
			pswpout: 0,
		},
		w: [
			{ user: "root", tty: "pts/0", login: "09:12", idle: "2:13m", jcpu: "0.03s", pcpu: "0.00s", what: "-bash" },
		].slice(0, h % 2),
	};
}

const FUNCTIONS: Record<string, Fn> = {
	"test.ping": () => ok(true),
	"test.true": () => ok(true),
	"test.echo": (_c, args) => ok(args.length ? String(args[0]) : ""),
	"test.version": c => ok(c.minion.grains.saltversion),
	"test.arg": (_c, args, kwargs) => ok({ args, kwargs }),
	"test.kwarg": (_c, _args, kwargs) => ok(kwargs),
	"test.sleep": () => ok(true),
	"test.get_opts": c => ok(minionOpts(c)),
	"test.retcode": (_c, args) => ({ ret: true, retcode: Number(args[0] ?? 0) || 0 }),
	"grains.items": c => ok(structuredClone(c.minion.grains)),
	"grains.get": (c, args, kwargs) => {
		const key = String(args[0] ?? kwargs.key ?? "");
		const dflt = args.length > 1 ? args[1] : (kwargs.default ?? "");
		return ok(
			structuredClone(
				traverse(c.minion.grains, key, dflt, typeof kwargs.delimiter === "string" ? kwargs.delimiter : ":"),
			),
		);
	},
	"grains.item": (c, args) => {
		const out: Record<string, unknown> = {};
		for (const k of args.map(String)) out[k] = structuredClone(traverse(c.minion.grains, k, "", ":"));
		return ok(out);
	},
	"grains.ls": c => ok(Object.keys(c.minion.grains).sort()),
	"grains.setval": (c, args, kwargs) => {
		const key = String(args[0] ?? kwargs.key);
		const val = args.length > 1 ? args[1] : kwargs.val;
		c.minion.grains[key] = val;
		return ok({ [key]: val });
	},
	"cmd.run": (c, args, kwargs) => {
		const r = simulateCommand(c, String(args[0] ?? kwargs.cmd ?? ""));
		return { ret: [r.stdout, r.stderr].filter(Boolean).join("\n"), retcode: r.retcode };
	},
	"cmd.run_all": (c, args, kwargs) => {
		const r = simulateCommand(c, String(args[0] ?? kwargs.cmd ?? ""));
		return {
			ret: {
				pid: 1000 + (hashString(`${c.jid}/${c.minion.id}`) % 60000),
				retcode: r.retcode,
				stdout: r.stdout,
				stderr: r.stderr,
			},
			retcode: r.retcode,
		};
	},
	"cmd.retcode": (c, args, kwargs) => {
		const r = simulateCommand(c, String(args[0] ?? kwargs.cmd ?? ""));
		return { ret: r.retcode, retcode: r.retcode };
	},
	"state.apply": (c, args, kwargs) => stateApply(c, args[0] ?? kwargs.mods, kwargs),
	// sls(mods, test=None, …) and highstate(test=None, …) also take `test` positionally.
	"state.sls": (c, args, kwargs) => stateApply(c, args[0] ?? kwargs.mods ?? "", kwargs, args[1] ?? kwargs.test),
	"state.highstate": (c, args, kwargs) => stateApply(c, undefined, kwargs, args[0] ?? kwargs.test),
	"state.sls_id": (c, args, kwargs) => stateSlsId(c, args[0] ?? kwargs.id, args[1] ?? kwargs.mods, kwargs),
	"pkg.upgrade": (c, _args, kwargs) => {
		const changes = c.minion.upgrades;
		c.minion.upgrades = {};
		if (truthy(kwargs.dist_upgrade)) {
			const ctl = isPlainObject(c.minion.grains.ctl) ? c.minion.grains.ctl : {};
			c.minion.grains.ctl = { ...ctl, last_distupgrade: grainDate(c.nowMs) };
		}
		return ok(changes);
	},
	"pkg.list_upgrades": c => ok(Object.fromEntries(Object.entries(c.minion.upgrades).map(([p, v]) => [p, v.new]))),
	"pkg.refresh_db": () =>
		ok({
			"http://deb.debian.org/debian bookworm InRelease": null,
			"http://security.debian.org/debian-security bookworm-security InRelease": true,
		}),
	"status.all_status": c => ok(allStatus(c)),
	"status.loadavg": c => ok((allStatus(c) as { loadavg: unknown }).loadavg),
	"status.uptime": c => ok((allStatus(c) as { uptime: unknown }).uptime),
	"saltutil.sync_grains": c => {
		const mods = c.minion.unsyncedGrainModules;
		c.minion.unsyncedGrainModules = [];
		return ok(mods);
	},
	"saltutil.refresh_grains": () => ok(true),
	"saltutil.running": () => ok([]),
	"saltutil.find_job": () => ok({}),
	"event.fire_master": (c, args, kwargs) =>
		fireMaster(
			c,
			args.length > 0 ? args[0] : kwargs.data,
			String(args[1] ?? kwargs.tag ?? ""),
			args[2] ?? kwargs.preload,
		),
	"event.send": (c, args, kwargs) => {
		// salt/modules/event.py `send`: its loose keywords (the job's __pub_* keys among them), then `data`'s keys.
		const {
			tag: kwTag,
			data: kwData,
			preload,
			with_env: _e,
			with_grains: _g,
			with_pillar: _p,
			with_env_opts: _o,
			...loose
		} = kwargs;
		const tag = String(args[0] ?? kwTag ?? "");
		const data = args.length > 1 ? args[1] : kwData;
		const payload = { ...loose, ...c.pub, ...(isPlainObject(data) ? data : {}) };
		return fireMaster(c, payload, tag, args[2] ?? preload);
	},
};

// ---------------------------------------------------------------- functions that run other functions
// Each runs its inner function the way Salt 3006's module does (the line is named), recording it
// (ctx.recordInner) so a test sees "cmd.run ran on web-01" however it was reached.

/** What one minion keeps between jobs for these functions: its pending state request, its schedule, its mine. */
interface MinionStore {
	requests: Record<string, { mods: unknown; kwargs: Record<string, unknown> }>;
	schedule: Record<string, Record<string, unknown>>;
	mine: Record<string, unknown>;
}
const stores = new WeakMap<Minion, MinionStore>();
function storeOf(m: Minion): MinionStore {
	let s = stores.get(m);
	if (!s) stores.set(m, (s = { requests: {}, schedule: {}, mine: {} }));
	return s;
}

/** A Python exception inside a module: the minion's error return. */
class ModuleError extends Error {}

/** `__salt__[fun](*args, **kwargs)` on this minion, recorded as run via `via`; a function it does not have raises KeyError. */
function callInner(
	ctx: ExecContext,
	fun: string,
	args: unknown[],
	kwargs: Record<string, unknown>,
	via: string,
): ExecResult {
	const fn = FUNCTIONS[fun];
	if (!fn) throw new ModuleError(`KeyError: '${fun}'`);
	ctx.recordInner?.(fun, [...args, ...(Object.keys(kwargs).length ? [{ __kwarg__: true, ...kwargs }] : [])], via);
	return fn({ ...ctx, fun }, args, kwargs);
}

/** A value that came as a YAML/JSON string where Salt expects data (`state.low '{"state": …}'`). */
function dataOf(v: unknown): unknown {
	if (typeof v !== "string") return v;
	try {
		return JSON.parse(v);
	} catch {
		try {
			return parseFlowScalar(v);
		} catch {
			return v;
		}
	}
}

function without(kwargs: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
	return Object.fromEntries(Object.entries(kwargs).filter(([k]) => !keys.includes(k)));
}

/** One state's return, keyed as Salt keys it: `<state>_|-<id>_|-<name>_|-<fun>`. */
function stateReturn(
	state: string,
	fn: string,
	id: string,
	name: string,
	result: boolean | null,
	comment: string,
	changes: Record<string, unknown> = {},
): Record<string, unknown> {
	return {
		[`${state}_|-${id}_|-${name}_|-${fn}`]: {
			name,
			changes,
			result,
			comment,
			__id__: id,
			__run_num__: 0,
			start_time: "00:00:00.000000",
			duration: 1.0,
			__sls__: null,
		},
	};
}

/**
 * One low chunk (`{state, fun, name, __id__, …}`) through the state engine (salt/state.py `State.call`): `cmd.run`
 * runs `cmd.run_all` (salt/states/cmd.py:860), `module.run` its function(s) (salt/states/module.py:343: new style
 * when every key but `name` names a function, else legacy: `name` is the function), `test.*` states change nothing.
 * With test, nothing runs (`result: None`).
 */
function callState(
	ctx: ExecContext,
	low: Record<string, unknown>,
	test: boolean,
	via: string,
): Record<string, unknown> {
	const state = String(low.state ?? "");
	const fn = String(low.fun ?? "");
	const name = String(low.name ?? low.__id__ ?? "");
	const id = String(low.__id__ ?? name);
	const params = without(low, "state", "fun", "__id__", "name", "test", "queue", "__env__", "__sls__", "order");
	if (state === "cmd" && (fn === "run" || fn === "script" || fn === "wait")) {
		if (test) return stateReturn(state, fn, id, name, null, `Command "${name}" would have been executed`);
		const r = callInner(ctx, "cmd.run_all", [name], without(params, "onlyif", "unless", "creates"), via).ret as {
			retcode: number;
			stdout: string;
			stderr: string;
			pid: number;
		};
		return stateReturn(state, fn, id, name, r.retcode === 0, `Command "${name}" run`, {
			pid: r.pid,
			retcode: r.retcode,
			stdout: r.stdout,
			stderr: r.stderr,
		});
	}
	if (state === "module" && fn === "run") {
		const keys = Object.keys(params);
		const newStyle = keys.length > 0 && keys.every(k => k.includes("."));
		const calls: [string, unknown[], Record<string, unknown>][] = newStyle
			? keys.map(k => {
					const spec = dataOf(params[k]);
					const list = Array.isArray(spec) ? spec : spec === undefined || spec === null ? [] : [spec];
					const kw: Record<string, unknown> = {};
					const pos: unknown[] = [];
					for (const a of list)
						if (isPlainObject(a)) Object.assign(kw, a);
						else pos.push(a);
					return [k.split(":")[0], pos, kw];
				})
			: [[name, [], Object.fromEntries(Object.entries(params).map(([k, v]) => [k.replace(/^m_/, ""), v]))]];
		if (test)
			return stateReturn(
				state,
				fn,
				id,
				name,
				null,
				`Function${calls.length > 1 ? "s" : ""} ${calls.map(c => c[0]).join(", ")} to be executed.`,
			);
		const out: Record<string, unknown> = {};
		for (const [f, a, kw] of calls) {
			if (!FUNCTIONS[f]) return stateReturn(state, fn, id, name, false, `Unavailable function: ${f}.`);
			out[f] = callInner(ctx, f, a, kw, via).ret;
		}
		return stateReturn(
			state,
			fn,
			id,
			name,
			true,
			Object.keys(out)
				.map(f => `${f}: Success`)
				.join(", "),
			{ ret: newStyle ? out : out[name] },
		);
	}
	if (state === "test") return stateReturn(state, fn, id, name, fn !== "fail_without_changes", "Success!");
	return stateReturn(state, fn, id, name, false, `State '${state}.${fn}' was not found in SLS '${id}'`);
}

/** `{{ salt['mod.fun'](…) }}` calls in a Jinja template, with their quoted (or numeric) positional arguments. */
const JINJA_SALT_CALL = /salt\[\s*['"]([\w.]+)['"]\s*\]\s*\(([^)]*)\)/g;
function jinjaCalls(tem: string): [string, unknown[]][] {
	const out: [string, unknown[]][] = [];
	for (const m of tem.matchAll(JINJA_SALT_CALL)) {
		const args = [...m[2].matchAll(/'([^']*)'|"([^"]*)"|(-?\d+(?:\.\d+)?)/g)].map(a =>
			a[3] !== undefined ? Number(a[3]) : (a[1] ?? a[2]),
		);
		out.push([m[1], args]);
		if (out.length >= 100) break;
	}
	return out;
}

const RELAYS: Record<string, Fn> = {
	// salt/modules/test.py:577 try_(module, return_try_exception=False, **kwargs): __salt__[module](**kwargs); None on an exception.
	"test.try": (c, args, kwargs) => {
		const module = String(args[0] ?? kwargs.module ?? "");
		try {
			return ok(callInner(c, module, [], without(kwargs, "module", "return_try_exception"), "test.try").ret);
		} catch (e) {
			return ok(pyTrue(kwargs.return_try_exception) ? String((e as Error).message) : null);
		}
	},
	// salt/modules/test.py:230 cross_test(func, args=None): __salt__[func](*args).
	"test.cross_test": (c, args, kwargs) => {
		const func = String(args[0] ?? kwargs.func ?? "");
		const a = dataOf(args[1] ?? kwargs.args ?? []);
		return callInner(c, func, Array.isArray(a) ? a : [a], {}, "test.cross_test");
	},
	// salt/modules/state.py:2217 single(fun, name, test=None, **kwargs): one state function, e.g. cmd.run name=….
	"state.single": (c, args, kwargs) => {
		const fun = String(args[0] ?? kwargs.fun ?? "");
		const name = args[1] ?? kwargs.name;
		const comps = fun.split(".");
		if (comps.length < 2) return { ret: "Invalid function passed", retcode: 5, out: "highstate" };
		const low = { ...without(kwargs, "fun"), state: comps[0], fun: comps[1], __id__: name, name };
		return {
			ret: callState(c, low, stateTest(args[2] ?? kwargs.test, kwargs), "state.single"),
			retcode: EX_OK,
			out: "highstate",
		};
	},
	// salt/modules/state.py:447 low(data, queue=None, **kwargs): one low chunk, its state's return alone. It runs with the
	// minion's own test option: a `test` keyword changes nothing (seen on a real 3006.0 minion); a chunk without
	// `__id__` raises KeyError in State.call.
	"state.low": (c, args, kwargs) => {
		const data = dataOf(args[0] ?? kwargs.data);
		if (!isPlainObject(data)) return { ret: ["Low data must be a dictionary"], retcode: 5, out: "highstate" };
		if (!("__id__" in data)) throw new ModuleError("KeyError: '__id__'");
		return { ret: Object.values(callState(c, data, false, "state.low"))[0], retcode: EX_OK, out: "highstate" };
	},
	// salt/modules/state.py:496 high(data, test=None, …): high data as the renderer leaves it, `{id: {cmd: ["run", {name: …}]}}`
	// (a `cmd.run:` key, as in an SLS file before it is compiled, runs nothing: `{}` on a real 3006.0 minion).
	"state.high": (c, args, kwargs) => {
		const data = dataOf(args[0] ?? kwargs.data);
		if (!isPlainObject(data)) return { ret: ["High data must be a dictionary"], retcode: 5, out: "highstate" };
		const test = stateTest(args[1] ?? kwargs.test, kwargs);
		const ret: Record<string, unknown> = {};
		for (const [id, body] of Object.entries(data)) {
			if (!isPlainObject(body)) continue;
			for (const [state, raw] of Object.entries(body)) {
				if (state.startsWith("__") || state.includes(".") || !Array.isArray(raw)) continue;
				const fn = raw.find(x => typeof x === "string");
				if (typeof fn !== "string") continue;
				const low: Record<string, unknown> = { state, fun: fn, __id__: id, name: id };
				for (const x of raw) if (isPlainObject(x)) Object.assign(low, x);
				Object.assign(ret, callState(c, low, test, "state.high"));
			}
		}
		return { ret, retcode: EX_OK, out: "highstate" };
	},
	// salt/modules/state.py:602 template_str(tem, …): the template is rendered first — its salt[...] calls run, test or not.
	"state.template_str": (c, args, kwargs) => {
		const tem = String(args[0] ?? kwargs.tem ?? "");
		for (const [fun, a] of jinjaCalls(tem)) callInner(c, fun, a, {}, "state.template_str");
		return { ret: {}, retcode: EX_OK, out: "highstate" };
	},
	// salt/modules/state.py:852 request(mods=None, **kwargs): a test run, kept to be applied by run_request.
	"state.request": (c, args, kwargs) => {
		const mods = args[0] ?? kwargs.mods;
		const kw = { ...without(kwargs, "mods"), test: true };
		const ret = stateApply(c, mods, kw);
		storeOf(c.minion).requests[String(kwargs.name ?? "default")] = { mods, kwargs: kw };
		return ret;
	},
	// salt/modules/state.py:958 run_request(name="default", **kwargs): applies the request, its `test` removed (state.py:976).
	"state.run_request": (c, args, kwargs) => {
		const name = String(args[0] ?? kwargs.name ?? "default");
		const store = storeOf(c.minion);
		const req = store.requests[name];
		if (!req) return ok({});
		const kw = without({ ...req.kwargs, ...without(kwargs, "name") }, "test");
		delete store.requests[name];
		c.recordInner?.(
			"state.apply",
			[...(req.mods !== undefined ? [req.mods] : []), { __kwarg__: true, ...kw }],
			"state.run_request",
		);
		return stateApply(c, req.mods, kw, undefined);
	},
	"state.check_request": (c, args, kwargs) => {
		const reqs = storeOf(c.minion).requests;
		const name = args[0] ?? kwargs.name;
		return ok(name !== undefined ? (reqs[String(name)] ?? {}) : reqs);
	},
	// salt/modules/saltutil.py:1893 mmodule(saltenv, fun, *args, **kwargs): mminion.functions[fun](*args, **kwargs).
	"saltutil.mmodule": (c, args, kwargs) => {
		const fun = String(args[1] ?? kwargs.fun ?? "");
		return callInner(c, fun, args.slice(2), without(kwargs, "fun", "saltenv"), "saltutil.mmodule");
	},
	// salt/modules/mine.py:208 send(name, *args, **kwargs): __salt__[mine_function or name](*args, **kwargs), stored in the mine.
	"mine.send": (c, args, kwargs) => {
		const name = String(args[0] ?? kwargs.name ?? "");
		const fun = typeof kwargs.mine_function === "string" ? kwargs.mine_function : name;
		try {
			storeOf(c.minion).mine[name] = callInner(
				c,
				fun,
				args.slice(1),
				without(kwargs, "name", "mine_function", "allow_tgt", "allow_tgt_type"),
				"mine.send",
			).ret;
			return ok(true);
		} catch {
			return ok(false);
		}
	},
	// salt/modules/schedule.py:575 add(name, **kwargs): `function` scheduled to run every `seconds`/…: kept, and recorded as scheduled.
	"schedule.add": (c, args, kwargs) => {
		const name = String(args[0] ?? kwargs.name ?? "");
		const schedule = storeOf(c.minion).schedule;
		if (name in schedule) return ok({ comment: `Job ${name} already exists in schedule.`, result: false, changes: {} });
		if (pyTrue(kwargs.test))
			return ok({ comment: `Job: ${name} would be added to schedule.`, result: true, changes: {} });
		const fun = String(kwargs.function ?? "");
		const jobArgs = dataOf(kwargs.job_args ?? []);
		schedule[name] = { ...without(kwargs, "name", "test"), name };
		c.recordInner?.(
			fun,
			[
				...(Array.isArray(jobArgs) ? jobArgs : [jobArgs]),
				...(isPlainObject(kwargs.job_kwargs) ? [{ __kwarg__: true, ...kwargs.job_kwargs }] : []),
			],
			"schedule.add",
			true,
		);
		return ok({ comment: `Added job: ${name} to schedule.`, result: true, changes: { [name]: "added" } });
	},
	"schedule.list": c => ok({ schedule: storeOf(c.minion).schedule }),
};

Object.assign(FUNCTIONS, RELAYS);

FUNCTIONS["sys.list_functions"] = () => ok(Object.keys(FUNCTIONS).sort());

/**
 * `test.get_opts`: the minion's `__opts__` (a few of its 300 keys). Its schedule's `__mine_interval` holds Python
 * datetimes, which salt-api's JSON encoder refuses: a JSON answer is a 500 and `/events` is cut after the
 * return's tag line (real-salt-43.md, section 3); YAML shows them.
 */
function minionOpts(c: ExecContext): Record<string, unknown> {
	const last = new Date(c.nowMs);
	const next = new Date(c.nowMs + 3_600_000);
	return {
		id: c.minion.id,
		master: "salt",
		master_uri: "tcp://127.0.0.1:4506",
		// A real minion's opts hold its configuration's secrets and its whole compiled pillar (checked on 3006.0).
		"mysql.pass": `sim-secret-${c.minion.id}`,
		pillar: { api_key: `sim-pillar-secret-${c.minion.id}` },
		schedule: {
			__mine_interval: {
				_last_run: last,
				_next_fire_time: next,
				_next_scheduled_fire_time: next,
				_run_on_start: false,
				_seconds: 3600,
				_splay: null,
				enabled: true,
				function: "mine.update",
				jid_include: true,
				maxrunning: 2,
				minutes: 60,
				name: "__mine_interval",
				return_job: false,
				run: true,
				run_on_start: true,
				splay: null,
			},
		},
	};
}

/** A stand-in for the minion's token (`SAuth.gen_token`): bytes, which salt-api's JSON encoder refuses. */
const MINION_TOKEN = Buffer.from("salt-token-bytes");

/**
 * `event.fire_master(data, tag, preload=None)`: through the minion daemon (the `_minion_event` wrapper), or, with
 * a `preload`, as a raw load over the minion's own channel, the preload's keys merged in last (they may replace
 * `cmd`, `id`, `tok`: what the master then does is its business, master.ts `minionLoad`).
 */
function fireMaster(c: ExecContext, data: unknown, tag: string, preload: unknown): ExecResult {
	if (preload)
		c.sendLoad({
			id: c.minion.id,
			tag,
			data,
			tok: MINION_TOKEN,
			cmd: "_minion_event",
			...(isPlainObject(preload) ? preload : {}),
		});
	else c.fireMinionEvent(tag, data);
	return ok(true);
}

/** Run one function on one minion. Unknown functions return Salt's "is not available" string. */
export function execute(ctx: ExecContext): ExecResult {
	const fn = FUNCTIONS[ctx.fun];
	if (!fn) return { ret: `'${ctx.fun}' is not available.`, retcode: EX_GENERIC, out: "nested" };
	const { args, kwargs } = splitArgs(ctx.arg);
	try {
		return fn(ctx, args, kwargs);
	} catch (e) {
		if (e instanceof ModuleError)
			return { ret: `The minion function caused an exception: ${e.message}`, retcode: EX_GENERIC, out: "nested" };
		return {
			ret: `The minion function caused an exception: ${e instanceof Error ? e.stack : String(e)}`,
			retcode: EX_GENERIC,
			out: "nested",
		};
	}
}
