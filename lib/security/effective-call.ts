/**
 * The effective call: what a minion will execute for a run's `arg` and `kwarg`, computed the way Salt 3006 computes
 * it (docs/security.md, "The effective call"). Authorization, masking and "is this a dry run" are all decided on
 * this, never on the raw body: `{"arg": ["test=True"], "kwarg": {"test": false}}` is not a dry run to Salt.
 *
 * Salt's path, read in its source (salt/netapi, salt/client, salt/utils/args.py, salt/minion.py):
 *  - salt-api's `local` client appends `kwarg` to `arg` as one dict `{"__kwarg__": true, ...kwarg}` (condition_input);
 *  - the minion (load_args_and_kwargs) walks `arg` in order: a dict with `__kwarg__: true` adds its keys as keywords,
 *    a string `key=value` (KWARG_REGEX) adds `key` with the value read as YAML (yamlify_arg), anything else is
 *    positional (strings read as YAML too). A later keyword replaces an earlier one, so `kwarg` wins over `arg`.
 */

/** A run's arguments as the minion will see them. */
export interface EffectiveCall {
	fun: string;
	/** Positional arguments, in order, each read as Salt reads it. */
	args: unknown[];
	/** Keyword arguments; a key set twice holds the last value, as on the minion. */
	kwargs: Record<string, unknown>;
}

/** Salt's KWARG_REGEX: a name that starts with a letter or `_`, then `=`, not `==`. `.` excludes newlines, as Python's. */
const KWARG = /^([^\d\P{L}]|_)([\p{L}\p{N}\p{M}\p{Pc}.-]*)=(?!=)([^\n]*)$/u;

/**
 * `key=value` as Salt splits it, or null when the string is positional. Python's `$` also matches before one
 * trailing newline, so `"a=b\n"` is `a` = `b`.
 */
export function parseKwargString(s: string): { key: string; value: string } | null {
	const text = s.endsWith("\n") ? s.slice(0, -1) : s;
	const m = KWARG.exec(text);
	return m ? { key: m[1] + m[2], value: m[3] } : null;
}

/** PyYAML's (YAML 1.1) implicit scalars, as `salt.utils.yaml.safe_load` resolves them. */
const YAML_TRUE = /^(?:yes|Yes|YES|true|True|TRUE|on|On|ON)$/;
const YAML_FALSE = /^(?:no|No|NO|false|False|FALSE|off|Off|OFF)$/;
const YAML_NULL = /^(?:~|null|Null|NULL)$/;
const YAML_INT = /^[-+]?(?:0b[01_]+|0[0-7_]+|(?:0|[1-9][0-9_]*)|0x[0-9a-fA-F_]+)$/;
const YAML_FLOAT = /^[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$/;

function yamlInt(t: string): number {
	const sign = t.startsWith("-") ? -1 : 1;
	const body = t.replace(/^[-+]/, "").replace(/_/g, "");
	if (body.startsWith("0b")) return sign * parseInt(body.slice(2), 2);
	if (body.startsWith("0x")) return sign * parseInt(body.slice(2), 16);
	if (body.length > 1 && body.startsWith("0")) return sign * parseInt(body.slice(1), 8);
	return sign * Number(body);
}

/**
 * A scalar as PyYAML reads it, or `undefined` when it is not one of the implicit types (a string then). Flow
 * collections (`[…]`, `{…}`) are not parsed: a value that Salt would read as a list or a dict is reported as
 * `STRUCTURED`, and callers that decide on it treat it as what it is — not a boolean, not a name.
 */
function scalar(t: string): unknown {
	if (YAML_TRUE.test(t)) return true;
	if (YAML_FALSE.test(t)) return false;
	if (YAML_NULL.test(t)) return null;
	if (YAML_INT.test(t)) return yamlInt(t);
	if (YAML_FLOAT.test(t)) {
		const low = t.toLowerCase();
		if (low.endsWith("inf")) return t.startsWith("-") ? -Infinity : Infinity;
		if (low.endsWith("nan")) return NaN;
		return Number(t.replace(/_/g, ""));
	}
	return undefined;
}

/** A value Salt would read as a list or a dict from a `[…]` or `{…}` string: kept as its text, marked. */
export class Structured {
	constructor(readonly text: string) {}
	toString(): string {
		return this.text;
	}
}

/**
 * `salt.utils.args.yamlify_arg` for one string: booleans, null, numbers as YAML 1.1 reads them (`True`, `yes`, `on`
 * are true; `None` is null), a comment after ` #` dropped when what is left is not a string, quotes taken off,
 * digit strings with `_` kept as text, flow collections marked `Structured`; anything else stays the string it was.
 */
export function yamlify(s: string): unknown {
	if (s.trim() === "") return s;
	if (s.includes("_") && /^[0-9_]+$/.test(s.trim())) return s;
	if (s === "None") return null;
	let t = s.trim();
	const hash = t.search(/(^|\s)#/);
	if (hash >= 0) {
		const before = t.slice(0, hash).trim();
		if (/^\[.*\]$|^\{.*\}$/s.test(before)) return new Structured(before);
		const v = before === "" ? undefined : scalar(before);
		// With a comment, Salt keeps the original text unless what is left reads as a non-string.
		return v === undefined || v === null ? s : v;
	}
	if ((t.startsWith("[") && t.endsWith("]")) || (t.startsWith("{") && t.endsWith("}"))) return new Structured(t);
	const v = scalar(t);
	if (v !== undefined) return v;
	if (t.length >= 2 && ((t.startsWith("'") && t.endsWith("'")) || (t.startsWith('"') && t.endsWith('"'))))
		t = t.slice(1, -1);
	return t === s.trim() ? s : t;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
	return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Structured);
}

/** The call the minion will execute for `fun` with `arg` and `kwarg` as sent to salt-api's `local` client. */
export function effectiveCall(
	fun: string,
	arg: readonly unknown[] | undefined,
	kwarg: Readonly<Record<string, unknown>> | undefined,
): EffectiveCall {
	const args: unknown[] = [];
	const kwargs: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
	const published: unknown[] = [...(arg ?? [])];
	if (kwarg && Object.keys(kwarg).length) published.push({ __kwarg__: true, ...kwarg });
	for (const a of published) {
		if (isPlainObject(a) && a.__kwarg__ === true) {
			for (const [k, v] of Object.entries(a)) if (k !== "__kwarg__") kwargs[k] = v;
			continue;
		}
		if (typeof a === "string") {
			const kw = parseKwargString(a);
			if (kw) kwargs[kw.key] = yamlify(kw.value);
			else args.push(yamlify(a));
			continue;
		}
		args.push(a);
	}
	return { fun, args, kwargs };
}

/** Whether the effective keyword `name` is exactly the boolean true (never a string or a number that Python finds truthy). */
export function kwargIsTrue(call: EffectiveCall, name: string): boolean {
	return Object.hasOwn(call.kwargs, name) && call.kwargs[name] === true;
}
