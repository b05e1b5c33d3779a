/** The one masking rule (lib/security/masking.ts): a run's secrets as shown, kwargs and `key=value` strings alike; viewers' withheld arguments. */
import { argsAsShown, maskSecrets, seesRunArgs, withholdArgs } from "../../lib/security/masking";

const M = "********";

describe("masking a run's secrets", () => {
	it("masks a `key=value` string as Salt splits it, like the same key in a kwarg dict", () => {
		expect(maskSecrets(["password=hunter2", "db_key=k", "api_token=t", "user=alice", "plain word", "x==y"])).toEqual([
			`password=${M}`,
			`db_key=${M}`,
			`api_token=${M}`,
			"user=alice",
			"plain word",
			"x==y",
		]);
		// Salt's KWARG_REGEX: a name that starts with a letter or `_`; `1password=x` is positional, `a b=c` too.
		expect(maskSecrets(["1password=x", "a b=c", "_otp=123456"])).toEqual(["1password=x", "a b=c", `_otp=${M}`]);
		// Python's `$` matches before one trailing newline: Salt still reads a keyword.
		expect(maskSecrets(["password=x\n"])).toEqual([`password=${M}`]);
		expect(maskSecrets({ __kwarg__: true, password: "p", name: "n" })).toEqual({
			__kwarg__: true,
			password: M,
			name: "n",
		});
	});

	it("masks at any depth: nested dicts, lists, and `key=value` strings inside them", () => {
		expect(
			maskSecrets([{ __kwarg__: true, env: { DB: { private_key: "k", host: "h" } }, args: ["secret=s", "ok"] }]),
		).toEqual([{ __kwarg__: true, env: { DB: { private_key: M, host: "h" } }, args: [`secret=${M}`, "ok"] }]);
	});

	it("masks inside a `key=value` whose value is JSON, and masks whole a YAML flow value that names a secret key", () => {
		expect(maskSecrets(['pillar={"db": {"password": "p", "port": 5432}}'])).toEqual([
			`pillar={"db":{"password":"${M}","port":5432}}`,
		]);
		expect(
			maskSecrets([
				"pillar={db: {password: p}}",
				"pillar={'api_key': k}",
				"pillar={db: {port: 5432}}",
				"pkgs=[vim, git]",
			]),
		).toEqual([`pillar=${M}`, `pillar=${M}`, "pillar={db: {port: 5432}}", "pkgs=[vim, git]"]);
	});

	it("keeps null and absent secrets as they are, and leaves what is not a string or a container alone", () => {
		expect(maskSecrets({ password: null, token: undefined, n: 1, b: true })).toEqual({
			password: null,
			token: undefined,
			n: 1,
			b: true,
		});
		expect(maskSecrets(42)).toBe(42);
	});

	it("withholds every argument from viewers, keeping the keys and the shape", () => {
		expect(
			withholdArgs([
				"uptime",
				"password=p",
				"user=u",
				3,
				{ __kwarg__: true, runas: "svc", env: { a: 1 } },
				{ other: 1 },
			]),
		).toEqual([M, `password=${M}`, `user=${M}`, M, { __kwarg__: true, runas: M, env: M }, M]);
		expect(withholdArgs(undefined)).toBeUndefined();
	});

	it("shows operators and admins masked arguments; viewers, and a caller not known, withheld ones", () => {
		expect(["admin", "operator", "viewer", undefined].map(seesRunArgs)).toEqual([true, true, false, false]);
		expect(argsAsShown(["uptime", "password=p"], "operator")).toEqual(["uptime", `password=${M}`]);
		expect(argsAsShown(["uptime", "password=p"], undefined)).toEqual([M, `password=${M}`]);
	});
});
