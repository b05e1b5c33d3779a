/**
 * What a token's scope grants (docs/security.md, "Scopes"), decided on the effective call (effective-call.ts)
 * against the function catalogue (catalogue.ts):
 *
 *  - `scope.functions` entries are exact names (that function, whatever its class), globs (`*`: only catalogued
 *    functions of class read or change) or classes (`@read`, `@change`, `@secrets`, `@arbitrary`; `@arbitrary`
 *    also grants functions the catalogue does not know);
 *  - a relay (a function whose catalogue entry names the function it runs, `inner`) also needs that function
 *    granted; when the call does not name it plainly, only `@arbitrary` grants the relay;
 *  - `scope.calls` holds argument matchers, like Salt's eauth `args`/`kwargs`, plus `mods`, `saltenv`, `pillarenv`;
 *  - a token with a `functions` limit never sends the keywords that change what a state run is (pillar overrides,
 *    `localconfig`, another saltenv, Salt's own `__pub_*`) unless its scope allows them.
 *
 * Every refusal says which rule refused. Patterns are RE2 (linear time), their length and the text they are
 * matched against are capped.
 */
import { RE2JS } from "re2js";
import Validator from "fastest-validator";
import { CATALOGUE, classOf, entryOf, type FunctionClass } from "./catalogue";
import { Structured, type EffectiveCall } from "./effective-call";
import { globMatches } from "../http/auth";

/** One `scope.calls` entry: what a call of a function it matches must look like. */
export interface CallMatcher {
	/** Per position, a pattern the argument must match whole (`null`: anything); no argument beyond the list. */
	args?: (string | null)[];
	/** Per keyword, a pattern its value must match whole; with `args` or `kwargs`, no other keyword (but `test`, `queue`). */
	kwargs?: Record<string, string>;
	/** Globs every sls name of a `state.apply`/`state.sls` (and the other sls-taking state functions) must match. */
	mods?: string[];
	/** The saltenvs and pillarenvs a call may name (without a list: `base` only). */
	saltenv?: string[];
	pillarenv?: string[];
}

/** The part of a scope that says what may run (its `groups` say where). */
export interface FunctionScope {
	functions?: string[];
	calls?: Record<string, CallMatcher>;
}

/** A `scope.functions` entry: a class, or a name or glob (`*` only). */
export const SCOPE_FUNCTION = /^(?:@(?:read|change|secrets|arbitrary)|[A-Za-z0-9_.*]{1,200})$/;
/** A `scope.calls` key: a name or glob. */
export const CALL_KEY = /^[A-Za-z0-9_.*]{1,200}$/;
/** A matcher's pattern is at most this long; a value longer than VALUE_MAX is refused rather than matched. */
export const PATTERN_MAX = 500;
export const VALUE_MAX = 10_000;

/** The fastest-validator rules of `scope.functions` and `scope.calls` (services/tokens/tokens.service.ts). */
export const SCOPE_FUNCTIONS_SCHEMA = {
	type: "array",
	items: { type: "string", pattern: SCOPE_FUNCTION },
	min: 1,
	max: 200,
	optional: true,
} as const;
const patternRule = { type: "string", min: 1, max: PATTERN_MAX, custom: checkPattern } as const;
const nameList = {
	type: "array",
	items: { type: "string", min: 1, max: 200 },
	min: 1,
	max: 100,
	optional: true,
} as const;
export const SCOPE_CALLS_SCHEMA = {
	type: "record",
	optional: true,
	key: { type: "string", pattern: CALL_KEY },
	value: {
		type: "object",
		strict: true,
		props: {
			args: { type: "array", items: { ...patternRule, nullable: true }, max: 50, optional: true },
			kwargs: { type: "record", key: { type: "string", min: 1, max: 200 }, value: patternRule, optional: true },
			mods: {
				type: "array",
				items: { type: "string", pattern: /^[A-Za-z0-9_.*/-]{1,200}$/ },
				min: 1,
				max: 100,
				optional: true,
			},
			saltenv: nameList,
			pillarenv: nameList,
		},
	},
} as const;

/** A scope's rules apart from where its groups must exist (tokens check those against the groups). */
const checkScope = new Validator({ useNewCustomCheckerFunction: true }).compile({
	$$root: true,
	type: "object",
	strict: true,
	props: {
		groups: { type: "array", items: { type: "string", min: 1, max: 200 }, max: 1000, optional: true },
		functions: SCOPE_FUNCTIONS_SCHEMA,
		calls: SCOPE_CALLS_SCHEMA,
	},
});

/** What is wrong with a scope given outside the API (OIDC_ROLES), in one line, or null. */
export function scopeIssues(scope: unknown): string | null {
	const result = checkScope(scope);
	if (result === true) return null;
	return (result as Array<{ field?: string; message?: string }>)
		.map(e => `${e.field ?? "scope"}: ${e.message ?? "invalid"}`)
		.join("; ");
}

/** fastest-validator's custom check: the pattern compiles in RE2. */
function checkPattern(value: unknown, errors: { type: string; message?: string }[]): unknown {
	if (typeof value === "string") {
		const bad = patternError(value);
		if (bad) errors.push({ type: "pattern", message: `not a valid RE2 pattern: ${bad}` });
	}
	return value;
}

/** Why `pattern` is not a usable RE2 pattern, or null. */
export function patternError(pattern: string): string | null {
	if (pattern.length > PATTERN_MAX) return `longer than ${PATTERN_MAX} characters`;
	try {
		compiled(pattern);
		return null;
	} catch (err) {
		return String((err as Error).message).slice(0, 200);
	}
}

const patterns = new Map<string, RE2JS>();
function compiled(pattern: string): RE2JS {
	let re = patterns.get(pattern);
	if (!re) {
		re = RE2JS.compile(pattern);
		if (patterns.size >= 10_000) patterns.clear();
		patterns.set(pattern, re);
	}
	return re;
}

const GLOB_CLASSES: ReadonlySet<FunctionClass | "unknown"> = new Set(["read", "change"]);

/** Whether one `scope.functions` entry grants `fun` by name (a relay's inner function is checked apart). */
export function entryGrants(entry: string, fun: string): boolean {
	const cls = classOf(fun);
	if (entry === "@arbitrary") return cls === "arbitrary" || cls === "unknown";
	if (entry.startsWith("@")) return cls === entry.slice(1);
	if (entry.includes("*")) return GLOB_CLASSES.has(cls) && globMatches(entry, fun);
	return entry === fun;
}

/** Whether `functions` grants `fun` by name. */
export function grantsName(functions: readonly string[], fun: string): boolean {
	return functions.some(e => entryGrants(e, fun));
}

/** What a relay runs: the function its call names, `undefined` when the call does not name one plainly, or null for a call that is no relay. */
export function innerFunction(call: EffectiveCall): string | undefined | null {
	const inner = entryOf(call.fun)?.inner;
	if (!inner) return null;
	const has = (k: string | undefined): k is string => k !== undefined && Object.hasOwn(call.kwargs, k);
	// `mine.send`: `mine_function`, when given, names what runs instead of `name`.
	const named = has(inner.override)
		? call.kwargs[inner.override]
		: has(inner.kwarg)
			? call.kwargs[inner.kwarg]
			: inner.index !== undefined
				? call.args[inner.index]
				: undefined;
	return typeof named === "string" && /^[A-Za-z0-9_]+\.[A-Za-z0-9_]+$/.test(named) ? named : undefined;
}

/** Why `functions` does not grant the call's function (a relay: with what it runs), or null. */
export function functionDenial(
	functions: readonly string[],
	call: EffectiveCall,
	calls: Record<string, CallMatcher> | undefined,
): string | null {
	const { fun } = call;
	if (!grantsName(functions, fun)) return `function '${fun}' is outside the token's scope (${whyNot(fun)})`;
	// A scope with @arbitrary may run anything: what a relay runs adds nothing to it.
	if (functions.includes("@arbitrary")) return null;
	const inner = innerFunction(call);
	if (inner === null) return null;
	if (inner === undefined)
		return `function '${fun}' runs a function its arguments do not name plainly: only @arbitrary grants it so`;
	if (entryOf(inner)?.inner)
		return `function '${fun}' would run '${inner}', which runs other functions in turn: only @arbitrary grants that`;
	if (!grantsName(functions, inner))
		return `function '${fun}' would run '${inner}', which is outside the token's scope (${whyNot(inner)})`;
	const matcher = Object.keys(calls ?? {}).find(k => globMatches(k, inner));
	if (matcher !== undefined)
		return `function '${fun}' would run '${inner}', whose arguments scope.calls['${matcher}'] restricts: they cannot be checked through ${fun}; call ${inner} directly`;
	return null;
}

/** Why a name is not granted, in the user's terms: the glob rule for dangerous classes, else "not named". */
function whyNot(fun: string): string {
	const cls = classOf(fun);
	if (cls === "unknown") return "the function catalogue does not know it: only its exact name or @arbitrary grants it";
	if (cls === "arbitrary") return "it runs arbitrary code: only its exact name or @arbitrary grants it, never a glob";
	if (cls === "secrets") return "it reveals secrets: only its exact name or @secrets grants it, never a glob";
	return `class ${cls}: not named by the scope`;
}

/**
 * The keywords a scoped token may not send unless a matcher allows them (by naming them in its `kwargs`):
 * they change what a state run is or where its data comes from. `saltenv` and `pillarenv` are checked against
 * the matchers' lists instead; a `__`-prefixed keyword (Salt's `__pub_*` publication data) is never allowed.
 */
export const GUARDED_KEYWORDS: Readonly<Record<string, string>> = {
	pillar: "it overrides the pillar data a state run sees",
	pillar_enc: "it sends encrypted pillar overrides",
	localconfig: "it loads the minion's options from another file",
	concurrent: "it runs the state run beside another one, without the state lock",
	// event.fire_master(preload=…) sends a raw load the master fires as is: a forged return or presence event that
	// nothing in it gives away (docs/salt.md, "Forged events").
	preload: "it sends the master a raw load of its own (a forged event or job return)",
};

/** Keywords an argument-restricting matcher lets through without naming them: they say how, not what (saltenv and pillarenv have their lists). */
const FREE_KEYWORDS = new Set(["test", "queue", "saltenv", "pillarenv"]);

/** Where each sls-taking state function reads its `mods` positionally. */
const MODS_AT: Readonly<Record<string, number>> = {
	"state.apply": 0,
	"state.sls": 0,
	"state.request": 0,
	"state.show_sls": 0,
	"state.show_low_sls": 0,
	"state.sls_exists": 0,
	"state.sls_id": 1,
	"state.id_exists": 1,
};

/** The matchers of `calls` that apply to `fun`: every one whose key (a name or glob) matches it. */
function matchersOf(calls: Record<string, CallMatcher> | undefined, fun: string): [string, CallMatcher][] {
	return Object.entries(calls ?? {}).filter(([k]) => globMatches(k, fun));
}

/** A value as a matcher sees it: a string as it is, anything else as its compact JSON (a YAML flow value as its text). */
function textOf(v: unknown): string {
	if (typeof v === "string") return v;
	if (v instanceof Structured) return v.text;
	return JSON.stringify(v) ?? String(v);
}

function fullMatch(pattern: string, value: unknown): boolean {
	const text = textOf(value);
	if (text.length > VALUE_MAX) return false;
	return compiled(pattern).matches(text);
}

/** The sls names a call applies, or undefined when they cannot be read (a flow value, a non-string). */
function slsNames(call: EffectiveCall): string[] | null | undefined {
	const at = MODS_AT[call.fun];
	if (at === undefined) return undefined;
	const has = Object.hasOwn(call.kwargs, "mods");
	const mods = has ? call.kwargs.mods : call.args[at];
	if (mods === undefined || mods === null || mods === "") return null;
	if (typeof mods === "string")
		return mods
			.split(",")
			.map(s => s.trim())
			.filter(Boolean);
	if (Array.isArray(mods) && mods.every(m => typeof m === "string")) return mods as string[];
	return undefined;
}

/** Why the call's keywords or arguments break the scope's rules (dangerous keywords, matchers), or null. */
export function argumentDenial(scope: FunctionScope, call: EffectiveCall): string | null {
	const matchers = matchersOf(scope.calls, call.fun);
	if (scope.functions) {
		for (const key of Object.keys(call.kwargs)) {
			if (key.startsWith("__")) return `keyword '${key}' is refused for a scoped token (Salt's own publication data)`;
			const why = GUARDED_KEYWORDS[key];
			if (why && !matchers.some(([, m]) => m.kwargs && Object.hasOwn(m.kwargs, key)))
				return `keyword '${key}' is refused for a scoped token (${why}); a scope.calls entry for ${call.fun} may allow it by naming it in its kwargs`;
		}
		for (const env of ["saltenv", "pillarenv"] as const) {
			if (!Object.hasOwn(call.kwargs, env)) continue;
			const value = call.kwargs[env];
			const lists = matchers.filter(([, m]) => m[env]).map(([k, m]) => [k, m[env]!] as const);
			if (!lists.length && value !== "base")
				return `${env} '${textOf(value).slice(0, 100)}' is refused for a scoped token: only base, unless a scope.calls entry for ${call.fun} lists it in its ${env}`;
			const refusing = lists.find(([, list]) => typeof value !== "string" || !list.includes(value));
			if (refusing) return `${env} '${textOf(value).slice(0, 100)}' is not among scope.calls['${refusing[0]}'].${env}`;
		}
	}
	for (const [key, m] of matchers) {
		const denial = matcherDenial(key, m, call);
		if (denial) return denial;
	}
	return null;
}

function matcherDenial(key: string, m: CallMatcher, call: EffectiveCall): string | null {
	const rule = `scope.calls['${key}']`;
	if (m.args || m.kwargs) {
		const args = m.args ?? [];
		const mods = MODS_AT[call.fun];
		for (let i = 0; i < call.args.length; i++) {
			// The sls names are the mods rule's, whatever position they take.
			if (i === mods && m.mods && !m.args) continue;
			if (i >= args.length)
				return `argument ${i + 1} of ${call.fun} is not allowed by ${rule} (it allows ${args.length} positional argument${args.length === 1 ? "" : "s"})`;
			const p = args[i];
			if (p !== null && !fullMatch(p, call.args[i]))
				return `argument ${i + 1} of ${call.fun} does not match ${rule}.args[${i}]`;
		}
		for (const [k, v] of Object.entries(call.kwargs)) {
			const p = m.kwargs && Object.hasOwn(m.kwargs, k) ? m.kwargs[k] : undefined;
			if (p === undefined) {
				// The sls names are the mods rule's when the matcher has one.
				if (FREE_KEYWORDS.has(k) || (k === "mods" && m.mods)) continue;
				return `keyword '${k}' of ${call.fun} is not allowed by ${rule}`;
			}
			if (!fullMatch(p, v)) return `keyword '${k}' of ${call.fun} does not match ${rule}.kwargs['${k}']`;
		}
	}
	if (m.mods) {
		const names = slsNames(call);
		if (names === undefined)
			return `${rule} restricts the sls names, and ${call.fun} names them in a form that cannot be read (give mods as a name, a comma list or a list of names)`;
		if (names === null)
			return `${rule} restricts the sls names, and ${call.fun} without mods applies the whole highstate`;
		const outside = names.filter(n => !m.mods!.some(g => globMatches(g, n)));
		if (outside.length)
			return `sls ${outside.slice(0, 10).join(", ")} not allowed by ${rule}.mods (${m.mods.join(", ")})`;
	}
	return null;
}

/** Why the scope does not allow the call's function and arguments, or null. */
export function callDenial(scope: FunctionScope | undefined, call: EffectiveCall): string | null {
	if (!scope) return null;
	if (scope.functions) {
		const denial = functionDenial(scope.functions, call, scope.calls);
		if (denial) return denial;
	}
	return argumentDenial(scope, call);
}

/** Whether a scope's functions grant any function that runs arbitrary code (or one the catalogue does not know). */
export function grantsArbitrary(functions: readonly string[] | undefined): boolean {
	if (!functions) return true;
	return functions.some(
		e =>
			e === "@arbitrary" ||
			(!e.startsWith("@") && !e.includes("*") && (classOf(e) === "arbitrary" || classOf(e) === "unknown")),
	);
}

/** The functions of `wanted` (one entry) that `have` does not grant: none when it grants all of them. */
function entryBeyond(have: readonly string[], entry: string): boolean {
	if (entry === "@arbitrary") return !have.includes("@arbitrary");
	const covered = Object.keys(CATALOGUE).filter(fun => entryGrants(entry, fun));
	if (entry.startsWith("@") || entry.includes("*")) return covered.some(fun => !grantsName(have, fun));
	return !grantsName(have, entry);
}

/**
 * Why the functions `wanted` grants are not all granted by `have` (entries compared by what they grant, not by their
 * text), or null. Argument matchers compare by inclusion: `wanted` keeps every one of `have`'s (it may add more).
 */
export function functionsExceed(have: FunctionScope, wanted: FunctionScope | undefined): string | null {
	if (have.functions) {
		if (!wanted?.functions) return "your scope limits the functions: give scope.functions, among yours";
		const outside = wanted.functions.filter(e => entryBeyond(have.functions!, e));
		if (outside.length) return `functions outside your scope: ${outside.join(", ")}`;
	}
	const missing = Object.entries(have.calls ?? {})
		.filter(([k, m]) => JSON.stringify(wanted?.calls?.[k]) !== JSON.stringify(m))
		.map(([k]) => k);
	if (missing.length)
		return `your scope restricts the arguments of ${missing.join(", ")}: keep those scope.calls entries as they are`;
	return null;
}
