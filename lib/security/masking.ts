/**
 * The one masking rule for secrets in what fleet-ctl shows or sends (docs/security.md, "What is masked"): the audit
 * log, the job history (`salt_jobs`, `actions`), approvals and their stream, and anything else that shows a run's
 * call. A value is masked when its key looks secret (`password`, `secret`, `token`, `otp`, `private`, `credential`,
 * `key`, `*_key`, …), wherever the key is: an object's key at any depth (a `kwarg`, a `__kwarg__` dict in `arg`, a
 * request body), or the key of a `key=value` string, split exactly as Salt splits it (parseKwargString), so
 * `password=hunter2` in `arg` is masked like `{"password": "hunter2"}` in `kwarg`. A `key=value` whose value is a
 * JSON object or list has that value masked by the same rule; one whose value cannot be read and names a secret key
 * is masked whole. Masking is for showing: the call that runs is kept whole where it must run (approvals, tasks,
 * rollouts), and a mask sent back in place of a stored secret keeps it (keepMasked).
 */
import { MASK } from "../eve/render";
import { parseKwargString } from "./effective-call";

/** Keys whose values are secrets. */
const SECRET_KEY = /pass(word)?|secret|token|otp|private|credential|^key$|_key$/i;
/** Deeper than this, masking cuts: request bodies are refused beyond 64 levels (lib/eve/json-depth.ts) long before. */
const MASK_DEPTH = 100;

/** Whether a value under this key is a secret. */
export function isSecretKey(key: string): boolean {
	return SECRET_KEY.test(key);
}

/** A `key=value` string as shown: the value masked when the key is secret, masked inside when it is JSON. */
function maskKwargString(s: string, depth: number): string {
	const kw = parseKwargString(s);
	if (!kw) return s;
	if (isSecretKey(kw.key)) return `${kw.key}=${MASK}`;
	const text = kw.value.trim();
	if (!/^[[{]/.test(text)) return s;
	try {
		return `${kw.key}=${JSON.stringify(maskSecrets(JSON.parse(text), depth + 1))}`;
	} catch {
		// YAML flow that is not JSON (Salt still reads it as a dict or a list): masked whole when one of its keys is secret.
		return [...text.matchAll(/([\w.-]+)['"]?\s*:/g)].some(m => isSecretKey(m[1])) ? `${kw.key}=${MASK}` : s;
	}
}

/**
 * A copy with every secret masked, at any depth: values under secret-looking keys, and `key=value` strings with a
 * secret-looking key. Keys are copied as own properties whatever they are (`__proto__` included); the walk is bounded.
 */
export function maskSecrets(value: unknown, depth = 0): unknown {
	if (depth > MASK_DEPTH) return "…";
	if (typeof value === "string") return maskKwargString(value, depth);
	if (Array.isArray(value)) return value.map(v => maskSecrets(v, depth + 1));
	if (value !== null && typeof value === "object" && !(value instanceof Date) && !Buffer.isBuffer(value)) {
		return Object.fromEntries(
			Object.entries(value).map(([k, v]) => [k, isSecretKey(k) && v != null ? MASK : maskSecrets(v, depth + 1)]),
		);
	}
	return value;
}

/**
 * A run's arguments with every value withheld, their shape kept (what a viewer is shown): each positional argument
 * is the mask, a `key=value` string keeps its key, a `__kwarg__` dict keeps its keys. Viewers see what ran and
 * where, never with what.
 */
export function withholdArgs(args: unknown): unknown {
	if (!Array.isArray(args)) return args === undefined ? undefined : MASK;
	return args.map(a => {
		if (typeof a === "string") {
			const kw = parseKwargString(a);
			return kw ? `${kw.key}=${MASK}` : MASK;
		}
		if (a !== null && typeof a === "object" && !Array.isArray(a) && (a as Record<string, unknown>).__kwarg__ === true)
			return withholdKwarg(a);
		return MASK;
	});
}

/** A `kwarg` dict with every value withheld, its keys kept (a `__kwarg__: true` flag kept as it is). */
export function withholdKwarg(kwarg: unknown): unknown {
	if (kwarg === null || typeof kwarg !== "object" || Array.isArray(kwarg))
		return kwarg === undefined ? undefined : MASK;
	return Object.fromEntries(Object.entries(kwarg).map(([k, v]) => [k, k === "__kwarg__" && v === true ? v : MASK]));
}

/** Whether a role is shown a run's arguments (masked): operators and admins; viewers get them withheld. */
export function seesRunArgs(role: string | undefined): boolean {
	return role === "operator" || role === "admin";
}

/** A run's arguments as shown to `role` (undefined: no caller known, as for an embedded record): masked, or withheld. */
export function argsAsShown(args: unknown, role: string | undefined): unknown {
	return seesRunArgs(role) ? maskSecrets(args) : withholdArgs(args);
}

/** A run's `kwarg` dict as shown to `role`: masked, or withheld (its keys kept). */
export function kwargAsShown(kwarg: unknown, role: string | undefined): unknown {
	return seesRunArgs(role) ? maskSecrets(kwarg) : withholdKwarg(kwarg);
}

/** Whether a string holds the mask where the rule puts one (`password=********`): shown with other values there, it reads the same. */
function masksASecret(s: string): boolean {
	return s.includes(MASK) && maskSecrets(s.split(MASK).join("x")) === s;
}

/**
 * The round trip: a client that was shown a stored call masked may send it back with the masks in it. The answer is
 * `sent` with each mask put back to what `stored` holds at the same place — the same key path, or the same string
 * that the rule shows so — which keeps a secret where it was and never carries it to another key or record; `kept`
 * and `unkept` are the paths of the masks put back and of those with nothing to keep there (`kwarg.password`).
 */
export function keepMasked(
	sent: unknown,
	stored: unknown,
	path: string,
): { value: unknown; kept: string[]; unkept: string[] } {
	const kept: string[] = [];
	const unkept: string[] = [];
	const walk = (s: unknown, old: unknown, at: string, secret: boolean): unknown => {
		if (typeof s === "string") {
			const restores =
				(secret && s === MASK && old != null) || (typeof old === "string" && old !== s && maskSecrets(old) === s);
			if (restores) kept.push(at);
			else if ((secret && s === MASK) || masksASecret(s)) unkept.push(at);
			return restores ? old : s;
		}
		if (Array.isArray(s)) return s.map((v, i) => walk(v, Array.isArray(old) ? old[i] : undefined, `${at}.${i}`, false));
		if (s === null || typeof s !== "object" || s instanceof Date) return s;
		const within =
			old !== null && typeof old === "object" && !Array.isArray(old) ? (old as Record<string, unknown>) : {};
		return Object.fromEntries(
			Object.entries(s).map(([k, v]) => [
				k,
				walk(v, Object.hasOwn(within, k) ? within[k] : undefined, `${at}.${k}`, isSecretKey(k)),
			]),
		);
	};
	return { value: walk(sent, stored, path, false), kept, unkept };
}
