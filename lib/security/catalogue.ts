/**
 * The function catalogue (docs/security.md, "The function catalogue"): every Salt execution function fleet-ctl may be
 * asked to run, classified by what it can do, each entry with the line of Salt 3006's source that justifies it.
 * Scopes expand globs against it, and a function it does not know is treated as the most dangerous class.
 *
 * Classes, least to most dangerous:
 *  - `read`: reads the host and changes nothing;
 *  - `change`: changes the host within its own documented meaning (installs a package, restarts a service);
 *  - `secrets`: reveals secrets (the minion's configuration, pillar data);
 *  - `arbitrary`: runs arbitrary code — calls another function by name, renders a template or code, or writes files or
 *    configuration that run later.
 */

export const FUNCTION_CLASSES = ["read", "change", "secrets", "arbitrary"] as const;
export type FunctionClass = (typeof FUNCTION_CLASSES)[number];

/** A function's entry: its class, where Salt's source shows it, and why when the class is not obvious. */
export interface CatalogueEntry {
	class: FunctionClass;
	/** `salt/modules/<file>.py:<line>` in Salt v3006.0: the definition (or the line) that justifies the class. */
	source: string;
	note?: string;
	/**
	 * For a function that runs other functions: the keyword (or positional index) that names the function it runs,
	 * so that scopes and governance can look at that one too.
	 */
	inner?: { kwarg?: string; index?: number };
	/** The function's `test=True` is known to change nothing (only `state.apply`, `state.sls`, `state.highstate`). */
	dryRun?: boolean;
}

/** The catalogue: data only (filled from Salt's source; a test checks every function the simulator knows is here). */
export const CATALOGUE: Readonly<Record<string, CatalogueEntry>> = Object.freeze({
	"test.ping": { class: "read", source: "salt/modules/test.py:102" },
	"state.apply": { class: "change", source: "salt/modules/state.py:695", dryRun: true },
	"state.sls": { class: "change", source: "salt/modules/state.py:1079", dryRun: true },
	"state.highstate": { class: "change", source: "salt/modules/state.py:938", dryRun: true },
	"test.try": { class: "arbitrary", source: "salt/modules/test.py:636", note: "runs __salt__[module](**kwargs)", inner: { kwarg: "module", index: 0 } },
	"cmd.run": { class: "arbitrary", source: "salt/modules/cmd.py:1024", note: "runs a shell command" },
	// Seed entries the scope tests need (issue 43, scopes); the catalogue's data keeps these keys.
	"test.echo": { class: "read", source: "salt/modules/test.py:94" },
	"test.arg": { class: "read", source: "salt/modules/test.py:262" },
	"test.kwarg": { class: "read", source: "salt/modules/test.py:247" },
	"test.version": { class: "read", source: "salt/modules/test.py:161" },
	"test.true": { class: "read", source: "salt/modules/test.py:612" },
	"test.sleep": { class: "read", source: "salt/modules/test.py:131" },
	"test.retcode": { class: "read", source: "salt/modules/test.py:403" },
	"test.get_opts": { class: "secrets", source: "salt/modules/test.py:227", note: "returns __opts__, the minion's whole configuration" },
	"test.cross_test": { class: "arbitrary", source: "salt/modules/test.py:244", note: "returns __salt__[func](*args)", inner: { kwarg: "func", index: 0 } },
	"status.all_status": { class: "read", source: "salt/modules/status.py:1574" },
	"status.loadavg": { class: "read", source: "salt/modules/status.py:282" },
	"status.uptime": { class: "read", source: "salt/modules/status.py:197" },
	"grains.items": { class: "read", source: "salt/modules/grains.py:141" },
	"grains.get": { class: "read", source: "salt/modules/grains.py:75" },
	"saltutil.sync_grains": { class: "change", source: "salt/modules/saltutil.py:405", note: "loads the grain modules of the master's file server, which only its admins write" },
	"saltutil.refresh_grains": { class: "change", source: "salt/modules/saltutil.py:370" },
	"saltutil.running": { class: "read", source: "salt/modules/saltutil.py:1228" },
	"saltutil.find_job": { class: "read", source: "salt/modules/saltutil.py:1306" },
	"saltutil.mmodule": { class: "arbitrary", source: "salt/modules/saltutil.py:1905", note: "returns mminion.functions[fun](*args, **kwargs)", inner: { kwarg: "fun", index: 1 } },
	"saltutil.cmd": { class: "arbitrary", source: "salt/modules/saltutil.py:1627", note: "publishes any function to other minions, outside the token's hosts" },
	"saltutil.runner": { class: "arbitrary", source: "salt/modules/saltutil.py:1703", note: "runs a runner on the master" },
	"state.sls_id": { class: "change", source: "salt/modules/state.py:1806" },
	"state.single": { class: "arbitrary", source: "salt/modules/state.py:2217", note: "calls any state function (cmd.run, module.run) with the given arguments" },
	"state.low": { class: "arbitrary", source: "salt/modules/state.py:447", note: "calls the state function its low data names" },
	"state.high": { class: "arbitrary", source: "salt/modules/state.py:496", note: "calls the state functions its high data names" },
	"state.template_str": { class: "arbitrary", source: "salt/modules/state.py:602", note: "renders the string (Jinja: {{ salt['cmd.run'](...) }}) and runs the states it gives" },
	"state.request": { class: "arbitrary", source: "salt/modules/state.py:852", note: "stores a state run that state.run_request later applies for real" },
	"state.run_request": { class: "arbitrary", source: "salt/modules/state.py:958", note: "applies the stored request with its test keyword removed (state.py:976)" },
	"mine.send": { class: "arbitrary", source: "salt/modules/mine.py:208", note: "runs __salt__[mine_function or name](*args, **kwargs)", inner: { kwarg: "mine_function", index: 0 } },
	"mine.get": { class: "read", source: "salt/modules/mine.py:271" },
	"schedule.add": { class: "arbitrary", source: "salt/modules/schedule.py:575", note: "schedules any function to run later", inner: { kwarg: "function" } },
	"cmd.run_all": { class: "arbitrary", source: "salt/modules/cmdmod.py:2083", note: "runs a shell command" },
	"pkg.upgrade": { class: "change", source: "salt/modules/aptpkg.py:1229" },
	"pkg.list_upgrades": { class: "read", source: "salt/modules/aptpkg.py:1617" },
	"pkg.refresh_db": { class: "change", source: "salt/modules/aptpkg.py:533" },
	"grains.item": { class: "read", source: "salt/modules/grains.py:167" },
	"grains.ls": { class: "read", source: "salt/modules/grains.py:466" },
	"grains.setval": { class: "change", source: "salt/modules/grains.py:288" },
	"cmd.retcode": { class: "arbitrary", source: "salt/modules/cmdmod.py:2365", note: "runs a shell command" },
	"state.check_request": { class: "read", source: "salt/modules/state.py:895" },
	"schedule.list": { class: "read", source: "salt/modules/schedule.py:99" },
	"event.send": { class: "arbitrary", source: "salt/modules/event.py:126", note: "fires an event on the master's bus, where reactors may run anything" },
} satisfies Record<string, CatalogueEntry>);

const RANK: Record<FunctionClass | "unknown", number> = { read: 0, change: 1, secrets: 2, arbitrary: 3, unknown: 4 };

/** A function's class, or `unknown` when the catalogue does not have it (treated as more dangerous than `arbitrary`). */
export function classOf(fun: string): FunctionClass | "unknown" {
	return Object.prototype.hasOwnProperty.call(CATALOGUE, fun) ? CATALOGUE[fun].class : "unknown";
}

/** Whether `a` is at least as dangerous as `b`. */
export function atLeast(a: FunctionClass | "unknown", b: FunctionClass | "unknown"): boolean {
	return RANK[a] >= RANK[b];
}

/** The catalogue's entry for `fun`, when it has one. */
export function entryOf(fun: string): CatalogueEntry | undefined {
	return Object.prototype.hasOwnProperty.call(CATALOGUE, fun) ? CATALOGUE[fun] : undefined;
}
