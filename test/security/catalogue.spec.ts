/**
 * The function catalogue (lib/security/catalogue.ts, its data catalogue-data.ts): every function the salt-api simulator
 * can run is classified, every entry names the line of Salt 3006.0's source behind it, and the classifications the
 * scope model depends on stay what Salt's source shows.
 */
import { atLeast, CATALOGUE, classOf, entryOf, FUNCTION_CLASSES } from "../../lib/security/catalogue";
import { makeMinion } from "../simulators/salt/fleet";
import { execute } from "../simulators/salt/modules";
import { FileServer } from "../simulators/salt/states";

/** What the simulator itself answers to `sys.list_functions`: every function it can run. */
function simulatedFunctions(): string[] {
	const out = execute({
		minion: makeMinion({ id: "web-01" }, "fleet-ctl", Date.now()),
		jid: "20261129080000000000",
		fun: "sys.list_functions",
		arg: [],
		files: new FileServer(),
		patchFailure: () => undefined,
		drifts: { get: () => undefined, fix: () => undefined },
		fireMinionEvent: () => undefined,
		sendLoad: () => undefined,
		pub: {},
		nowMs: Date.now(),
	});
	expect(out.retcode).toBe(0);
	return out.ret as string[];
}

/** Functions that run another function named in their arguments: scopes and governance must see that one too. */
const RELAYS = [
	"test.try",
	"test.cross_test",
	"state.single",
	"saltutil.cmd",
	"saltutil.cmd_iter",
	"saltutil.mmodule",
	"saltutil.runner",
	"saltutil.wheel",
	"publish.publish",
	"publish.full_data",
	"publish.runner",
	"mine.send",
	"schedule.add",
	"schedule.modify",
];
/** Functions that run what a data structure describes (low or high data, a mapping of functions): no one name to check. */
const DATA_RUNNERS = ["state.low", "state.high", "mine.update", "saltcheck.run_test"];

describe("the function catalogue", () => {
	it("classifies every function the salt-api simulator can run", () => {
		const funs = simulatedFunctions();
		expect(funs.length).toBeGreaterThan(20);
		expect(funs.filter(f => classOf(f) === "unknown")).toEqual([]);
	});

	it("names, for every entry, the line of Salt's source that justifies it", () => {
		const bad = Object.entries(CATALOGUE).filter(
			([, e]) => !/^salt\/(modules|states)\/[a-z0-9_]+\.py:[1-9]\d*$/.test(e.source),
		);
		expect(bad).toEqual([]);
		for (const [fun, e] of Object.entries(CATALOGUE)) {
			expect(fun).toMatch(/^[a-z0-9_]+\.[A-Za-z0-9_]+$/);
			expect(FUNCTION_CLASSES).toContain(e.class);
		}
	});

	it("takes each module's functions from the file that loads under that name on a Debian, Ubuntu or RHEL minion", () => {
		// Salt's virtual names whose file is named otherwise (`__virtualname__`): the Debian file, and the RHEL one for the
		// functions only it has (yumpkg, rpm_lowpkg); deb_apache adds to apache on Debian.
		const files: Record<string, string[]> = {
			cmd: ["cmdmod"],
			pkg: ["aptpkg", "yumpkg"],
			service: ["systemd_service"],
			sys: ["sysmod"],
			user: ["useradd"],
			group: ["groupadd"],
			sysctl: ["linux_sysctl"],
			locale: ["localemod"],
			virtualenv: ["virtualenv_mod"],
			shadow: ["linux_shadow"],
			debconf: ["debconfmod"],
			lowpkg: ["dpkg_lowpkg", "rpm_lowpkg"],
			random: ["mod_random"],
			ip: ["debian_ip"],
			acl: ["linux_acl"],
			lvm: ["linux_lvm"],
			partition: ["parted_partition"],
			raid: ["mdadm_raid"],
			ini: ["ini_manage"],
			augeas: ["augeas_cfg"],
			kernelpkg: ["kernelpkg_linux_apt"],
			apache: ["apache", "deb_apache"],
		};
		const odd = Object.entries(CATALOGUE).filter(([fun, e]) => {
			const mod = fun.split(".")[0];
			const file = /^salt\/modules\/([a-z0-9_]+)\.py:/.exec(e.source)?.[1];
			return !(files[mod] ?? [mod]).includes(file ?? "");
		});
		expect(odd).toEqual([]);
	});

	it("says which argument names the function a relay runs, and treats every relay as arbitrary code", () => {
		for (const fun of RELAYS) {
			const e = entryOf(fun);
			expect([fun, e?.class]).toEqual([fun, "arbitrary"]);
			expect([fun, e?.inner !== undefined && (e.inner.kwarg !== undefined || e.inner.index !== undefined)]).toEqual([
				fun,
				true,
			]);
		}
		expect(entryOf("mine.send")?.inner).toEqual({ kwarg: "name", index: 0, override: "mine_function" });
		expect(entryOf("test.try")?.inner).toEqual({ kwarg: "module", index: 0 });
		expect(entryOf("saltutil.cmd")?.inner).toEqual({ kwarg: "fun", index: 1 });
		for (const fun of DATA_RUNNERS)
			expect([fun, entryOf(fun)?.class, entryOf(fun)?.inner]).toEqual([fun, "arbitrary", undefined]);
		// Only arbitrary entries relay.
		expect(Object.entries(CATALOGUE).filter(([, e]) => e.inner && e.class !== "arbitrary")).toEqual([]);
	});

	it("takes only state.apply, state.sls and state.highstate for dry runs", () => {
		const dry = Object.entries(CATALOGUE)
			.filter(([, e]) => e.dryRun !== undefined)
			.map(([f]) => f)
			.sort();
		expect(dry).toEqual(["state.apply", "state.highstate", "state.sls"]);
		for (const f of dry) expect(entryOf(f)?.dryRun).toBe(true);
	});

	it("keeps the classifications the scope model relies on", () => {
		const pinned: Record<string, string> = {
			"test.try": "arbitrary",
			"test.cross_test": "arbitrary",
			"cmd.run": "arbitrary",
			"cmd.run_all": "arbitrary",
			"test.get_opts": "secrets",
			"config.get": "secrets",
			"pillar.items": "secrets",
			"grains.items": "read",
			"test.ping": "read",
			"pkg.install": "change",
			"pkg.upgrade": "change",
			"state.apply": "change",
			"state.sls_id": "change",
			"state.single": "arbitrary",
			"state.low": "arbitrary",
			"state.high": "arbitrary",
			"state.template_str": "arbitrary",
			"state.run_request": "arbitrary",
			"state.request": "arbitrary",
			"saltutil.mmodule": "arbitrary",
			"saltutil.cmd": "arbitrary",
			"saltutil.sync_grains": "change",
			"mine.send": "arbitrary",
			"mine.update": "arbitrary",
			"schedule.add": "arbitrary",
			"event.fire_master": "arbitrary",
			"event.send": "arbitrary",
			"file.write": "arbitrary",
			"file.find": "arbitrary",
			"cp.get_file": "arbitrary",
			"cron.set_job": "arbitrary",
			"pip.install": "arbitrary",
			"ssh.set_auth_key": "arbitrary",
		};
		const actual = Object.fromEntries(Object.keys(pinned).map(f => [f, classOf(f)]));
		expect(actual).toEqual(pinned);
	});

	it("points the seed entries at their definitions in Salt 3006.0", () => {
		expect(entryOf("test.ping")?.source).toBe("salt/modules/test.py:107");
		expect(entryOf("test.try")?.source).toBe("salt/modules/test.py:577");
		expect(entryOf("state.apply")?.source).toBe("salt/modules/state.py:629");
		expect(entryOf("state.sls")?.source).toBe("salt/modules/state.py:1210");
		expect(entryOf("state.highstate")?.source).toBe("salt/modules/state.py:989");
		expect(entryOf("cmd.run")?.source).toBe("salt/modules/cmdmod.py:1037");
	});

	it("treats a function it does not know as more dangerous than arbitrary code", () => {
		expect(classOf("no_such.function")).toBe("unknown");
		expect(classOf("toString")).toBe("unknown");
		expect(classOf("__proto__")).toBe("unknown");
		expect(entryOf("constructor")).toBeUndefined();
		expect(atLeast("unknown", "arbitrary")).toBe(true);
		expect(atLeast("arbitrary", "unknown")).toBe(false);
		expect(atLeast("secrets", "change")).toBe(true);
		expect(atLeast("read", "change")).toBe(false);
	});

	it("cannot be changed at run time", () => {
		expect(Object.isFrozen(CATALOGUE)).toBe(true);
		expect(Object.isFrozen(CATALOGUE["test.try"])).toBe(true);
		expect(Object.isFrozen(CATALOGUE["test.try"].inner)).toBe(true);
	});
});
