/** The effective call (lib/security/effective-call.ts): `arg` and `kwarg` read the way a Salt 3006 minion reads them. */
import { effectiveCall, kwargIsTrue, parseKwargString, Structured, yamlify } from "../../lib/security/effective-call";

describe("the effective call", () => {
	it("lets kwarg win over a key=value argument, as salt-api appends it last", () => {
		const call = effectiveCall("state.apply", ["test=True"], { test: false });
		expect(call.kwargs.test).toBe(false);
		expect(kwargIsTrue(call, "test")).toBe(false);
	});

	it("lets a later key=value or __kwarg__ dict replace an earlier one, in order", () => {
		expect(effectiveCall("state.apply", ["test=True", "test=False"], undefined).kwargs.test).toBe(false);
		expect(effectiveCall("state.apply", [{ __kwarg__: true, test: false }, "test=yes"], undefined).kwargs.test).toBe(
			true,
		);
		expect(effectiveCall("state.apply", ["test=True", { __kwarg__: true, test: "False" }], undefined).kwargs.test).toBe(
			"False",
		);
	});

	it("reads key=value values as YAML 1.1, and positional strings too", () => {
		for (const t of ["True", "true", "TRUE", "yes", "Yes", "on", "ON", " True ", "True # a comment"])
			expect(yamlify(t)).toBe(true);
		for (const f of ["False", "no", "off", "OFF"]) expect(yamlify(f)).toBe(false);
		for (const s of ["y", "n", "1_000", "abc", "True#x", "#x", "08"]) expect(yamlify(s)).toBe(s);
		expect(yamlify("None")).toBeNull();
		expect(yamlify("~")).toBeNull();
		expect(yamlify("017")).toBe(15);
		expect(yamlify("0x1F")).toBe(31);
		expect(yamlify("1.5")).toBe(1.5);
		expect(yamlify("'True'")).toBe("True");
		expect(yamlify("[a, b]")).toBeInstanceOf(Structured);
		expect(effectiveCall("test.arg", ["1", "x"], undefined).args).toEqual([1, "x"]);
	});

	it("splits key=value the way KWARG_REGEX does", () => {
		expect(parseKwargString("password=hunter2")).toEqual({ key: "password", value: "hunter2" });
		expect(parseKwargString("a.b-c=1")).toEqual({ key: "a.b-c", value: "1" });
		expect(parseKwargString("_x=")).toEqual({ key: "_x", value: "" });
		expect(parseKwargString("a=b\n")).toEqual({ key: "a", value: "b" });
		expect(parseKwargString("pässword=x")).toEqual({ key: "pässword", value: "x" });
		for (const positional of ["a==b", "1a=b", "=b", "a b=c", "a=b\nc", "a=b\n\n", "echo x=1"])
			expect(parseKwargString(positional)).toBeNull();
	});

	it("takes only a dict marked __kwarg__: true as keywords; other dicts stay positional", () => {
		const call = effectiveCall("test.arg", [{ test: true }, { __kwarg__: "true", x: 1 }], undefined);
		expect(call.kwargs).toEqual({});
		expect(call.args).toHaveLength(2);
	});
});
