/**
 * Salt's compound targets, evaluated by fleet-ctl on its own inventory (the cached grains), never by
 * publishing to minions (issue 21; docs/targeting.md). The grammar and each matcher follow Salt 3006's
 * (salt/matchers/compound_match.py and the matchers it calls):
 *
 *   - words are separated by whitespace; `and`, `or`, `not`, `(` and `)` are operators (parentheses
 *     stand alone, as in Salt); `not` after a term means `and not`; precedence is Python's
 *     (`not` > `and` > `or`);
 *   - a word without an engine is a glob on the minion id (fnmatch: `*`, `?`, `[...]`, `[!...]`,
 *     case-sensitive);
 *   - `E@regex`: the id matched from its start (Python's re.match);
 *   - `L@a,b,c`: the id is one of the list;
 *   - `G@path:glob` and `P@path:regex`: a grain at a `:`-delimited path (or `G<d>@` with the delimiter
 *     `<d>`), tried at every split of the expression from the deepest, lists matched member by member,
 *     dicts by key, both sides lowercased (salt.utils.data.subdict_match: ./subdict-match.ts);
 *   - `S@cidr` or `S@address`: one of the host's `ipv4`/`ipv6` grains in the subnet, or equal (Python's
 *     ipaddress: a netmask for IPv4, no host bits set);
 *   - `N@name`: the nodegroup's members (fleet-ctl keeps them per host);
 *   - `F@group`: beyond Salt, the hosts a fleet-ctl group resolves to (by id or name), as `POST /groups/{id}`
 *     runs on them (the caller resolves them before compiling: TargetContext.group).
 *
 * Pillar (`I@`, `J@`), range (`R@`) and the proxy engines (`T@`, `M@`) need data fleet-ctl does not
 * hold: they are refused with a message, as is any expression Salt would not evaluate (Salt answers
 * "no minion" to those; a preview says why). Regexes compile with RE2 (linear time). What an expression
 * may cost is bounded (issue 43): its length, terms, nesting, grain terms' length and parts when it is
 * compiled, and the steps its evaluation takes on each host.
 */
import { BlockList, isIP } from "node:net";
import { RE2JS } from "re2js";
import { subdictMatcher, type PatternCompiler } from "./subdict-match";

/**
 * What one expression may ask of the evaluator (issue 43: every host of a preview, a run, a task, a rollout,
 * a window, a policy or a group's rule is evaluated with it). Constants, not configuration: they bound the
 * work a client can make one request cost, and are far above what a person or a tool writes (Salt's own
 * examples use a handful of terms and grain paths of two or three parts).
 */
/** The longest expression, in characters (the request bodies' `target` has the same maximum). */
export const MAX_TARGET_LENGTH = 10_000;
/** The deepest nesting of parentheses and `not`. */
export const MAX_TARGET_DEPTH = 64;
/** The most terms (words other than `and`, `or`, `not` and parentheses); an `L@` list is one term. */
export const MAX_TARGET_TERMS = 100;
/** The longest `G@`/`P@` term, engine included. */
export const MAX_GRAIN_TERM_LENGTH = 1_000;
/** The most parts of a `G@`/`P@` term, path and pattern together, split at its delimiter or at ':'. */
export const MAX_GRAIN_PATH_PARTS = 32;
/**
 * The most steps the evaluation of one expression may take on one host. A step is one grain looked at (a path
 * part followed, a value or list member visited); a pattern compared with a value costs COMPARE_STEPS and one
 * step for each character of the value times the pattern's width (how many ways RE2 may follow at once:
 * patternWidth); a grain pattern compiled when a host first needs it costs COMPILE_STEPS_PER_CHARACTER a
 * character. Grains are the master's data, of any size: the limits above bound the expression, this bounds
 * what it may cost on them. At the limit a host takes a few milliseconds on the development machine
 * (docs/targeting.md); ordinary targets take a few hundred to a few thousand steps.
 */
export const MAX_TARGET_STEPS_PER_HOST = 100_000;
/**
 * The most steps one resolution of a client's target may take over the whole fleet: this much, plus
 * MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE for each host evaluated. The per-host limit alone times a large fleet would
 * be minutes of one process's time; with this an expression costs at most about what an ordinary one costs at most.
 */
export const MAX_TARGET_STEPS_PER_RESOLUTION = 20_000_000;
/** What a resolution may take per host evaluated, on average, beyond MAX_TARGET_STEPS_PER_RESOLUTION. */
export const MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE = 2_500;
/** What compiling a pattern costs in steps, per character (RE2 compiles a character in about the time of 20 steps). */
const COMPILE_STEPS_PER_CHARACTER = 20;
/** What one comparison costs in steps beyond its characters (the call into RE2's matcher). */
const COMPARE_STEPS = 20;

/**
 * How many threads RE2's matcher may run at once for a pattern, at most (its cost per character of a value):
 * one, and one more for each operator that can leave a choice open (`*`, `?`, `[` in a glob; `*`, `+`, `?`, `|`
 * in a regex, and a counted repetition's largest count, which RE2 unrolls).
 */
export function patternWidth(pattern: string, kind: "glob" | "regex"): number {
	let width = 1;
	for (const c of pattern) if ((kind === "glob" ? "*?[" : "*+?|").includes(c)) width++;
	if (kind === "regex")
		for (const [, counts] of pattern.matchAll(/\{(\d+(?:,\d*)?)\}/g))
			width += Math.max(...counts.split(",").map(n => Number(n) || 0));
	return width;
}

/** An expression fleet-ctl cannot evaluate, and why (a 400 at the API). */
export class TargetError extends Error {}

/**
 * Parentheses that do not pair up. Salt's master still publishes such a target (its preview closes them), and
 * every minion fails to evaluate it and runs nothing (more-2026-11-29/compound_differential.json).
 */
export class UnbalancedTargetError extends TargetError {}

/** Counts the steps of one host's evaluation (MAX_TARGET_STEPS_PER_HOST). */
class Meter {
	private left = 0;
	private host = "";
	/** What is left of the budget of all the hosts evaluated so far (Infinity: none), and what each host adds to it. */
	private total: number;
	private readonly perHost: number;

	constructor(bounded: boolean) {
		this.total = bounded ? MAX_TARGET_STEPS_PER_RESOLUTION : Infinity;
		this.perHost = bounded ? MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE : 0;
		this.left = MAX_TARGET_STEPS_PER_HOST;
	}

	start(host: string): void {
		this.total += this.perHost - (MAX_TARGET_STEPS_PER_HOST - Math.max(this.left, 0));
		if (this.total < 0)
			throw new TargetError(
				`evaluating the target on the fleet takes more than the limit of ${MAX_TARGET_STEPS_PER_RESOLUTION} steps and ${MAX_TARGET_STEPS_PER_HOST_ON_AVERAGE} a host on average for one resolution: use fewer or shorter patterns, fewer '*' parts in grain paths, or narrow it first (a host glob or a group before grain terms)`,
			);
		this.left = MAX_TARGET_STEPS_PER_HOST;
		this.host = host;
	}

	readonly charge = (steps: number): void => {
		this.left -= steps;
		if (this.left < 0) {
			throw new TargetError(
				`evaluating the target on '${this.host}' takes more than the limit of ${MAX_TARGET_STEPS_PER_HOST} steps per host (grains looked at, and characters of values times characters of the patterns they are compared with): use fewer or shorter patterns, or fewer '*' parts in grain paths`,
			);
		}
	};

	/** Charges a match of `value` with a pattern of this width (patternWidth). */
	compare(value: string, width: number): void {
		this.charge(COMPARE_STEPS + (value.length + 1) * width);
	}
}

/** What the evaluator knows of a host. */
export interface TargetHost {
	_id: string;
	grain?: unknown;
	nodegroups?: string[];
}

/** Resolves an `F@` reference to the hostnames its group resolves to (null: no such group). */
export interface TargetContext {
	group(ref: string): Set<string> | null;
	/** Why `N@name` cannot select hosts (no such nodegroup, or one fleet-ctl cannot evaluate), null when it can; absent: not checked. */
	nodegroup?(name: string): string | null;
}

type Test = (h: TargetHost) => boolean;

/** A compiled expression: the test, and the ids it names literally (`L@` members, globs without a wildcard). */
export interface CompiledTarget {
	/** Whether the host is selected; throws a TargetError when it would take more than MAX_TARGET_STEPS_PER_HOST. */
	test: Test;
	named: string[];
	/** Whether a test reads grains (a host must then be given with them). */
	usesGrains: boolean;
	/** Whether a test reads the host's nodegroups (`N@`). */
	usesNodegroups: boolean;
}

const OPERATORS = new Set(["and", "or", "not", "(", ")"]);
const ENGINE = /^(?:([A-Z])([^@\s]?)@)(.*)$/s;
const GLOB_CHARS = /[*?[]/;

// ---------------------------------------------------------------- the terms

/** A Salt glob (Python's fnmatch) as an RE2 pattern for the whole value. */
export function globPattern(glob: string): string {
	let out = "";
	for (let i = 0; i < glob.length; i++) {
		const c = glob[i];
		if (c === "*") out += ".*";
		else if (c === "?") out += ".";
		else if (c === "[") {
			const end = glob.indexOf("]", i + 2);
			if (end < 0) out += "\\[";
			else {
				let body = glob.slice(i + 1, end);
				const negate = body.startsWith("!");
				if (negate) body = body.slice(1);
				out += `[${negate ? "^" : ""}${body.replace(/\\/g, "\\\\").replace(/\^/g, "\\^")}]`;
				i = end;
			}
		} else out += c.replace(/[.+()|{}$^\\]/g, "\\$&");
	}
	return `^(?s:${out})$`;
}

function compileRegex(pattern: string, word: string): RE2JS {
	try {
		return RE2JS.compile(pattern);
	} catch (err) {
		throw new TargetError(
			`'${word}': invalid regular expression (RE2 syntax: no backreferences or lookaround): ${(err as Error).message.replace(/^error parsing regexp: /, "")}`,
		);
	}
}

/** The pattern compiled by RE2, or null when RE2 cannot compile it. */
function tryCompile(pattern: string): RE2JS | null {
	try {
		return RE2JS.compile(pattern);
	} catch {
		return null;
	}
}

/** What RE2 compiles for a grain pattern: a glob as its regex, a regex as it is. */
const patternSource = (kind: "glob" | "regex", pattern: string): string =>
	kind === "glob" ? globPattern(pattern) : pattern;

/**
 * The per-value comparison of `G@` (a glob: Python's fnmatch, the whole value) or `P@` (a regex from the start:
 * Python's re.match). A pattern RE2 cannot compile matches nothing, as Salt's matcher logs and answers False for
 * it (a split of `path:pattern` may leave part of the path in the pattern); a term none of whose splits compiles
 * is refused when compiled.
 */
function valueCompiler(kind: "glob" | "regex", meter: Meter): PatternCompiler {
	return pattern => {
		meter.charge(pattern.length * COMPILE_STEPS_PER_CHARACTER);
		const re = tryCompile(patternSource(kind, pattern));
		if (re === null) return null;
		const width = patternWidth(pattern, kind);
		return value => {
			meter.compare(value, width);
			return kind === "glob" ? re.matches(value) : re.matcher(value).lookingAt();
		};
	};
}

/** The addresses of one family a host's grains give it (`ipv4` or `ipv6`, as Salt's ipcidr matcher reads them). */
function addresses(h: TargetHost, family: 4 | 6): string[] {
	if (h.grain === null || typeof h.grain !== "object" || Array.isArray(h.grain)) return [];
	const v = (h.grain as Record<string, unknown>)[`ipv${family}`];
	return Array.isArray(v) ? v.filter((a): a is string => typeof a === "string") : [];
}

/** An IPv4 address as a number. */
const ipv4Number = (address: string): number => address.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);

/** An address (isIP gave its family) as its bits. */
function addressBits(address: string, family: 4 | 6): bigint {
	if (family === 4) return BigInt(ipv4Number(address));
	const groups = (part: string | undefined): string[] =>
		(part ? part.split(":") : []).flatMap(g =>
			g.includes(".") ? [(ipv4Number(g) >>> 16).toString(16), (ipv4Number(g) & 0xffff).toString(16)] : [g],
		);
	const [head, tail] = address.split("%")[0].split("::");
	const left = groups(head);
	const right = groups(tail);
	const all =
		tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
	return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/**
 * An address as Python's str() of it (Salt compares that with the grains): IPv6 compressed as RFC 5952 says, a
 * scope (`fe80::1%eth0`, which the URL parser refuses) kept as written.
 */
function canonical(address: string, family: 4 | 6): string {
	if (family === 4) return address;
	const scope = address.indexOf("%");
	const bare = scope < 0 ? address : address.slice(0, scope);
	return new URL(`http://[${bare}]`).hostname.slice(1, -1) + (scope < 0 ? "" : address.slice(scope));
}

/**
 * The prefix length after a subnet's `/`, as Python's ipaddress reads it: digits, or (IPv4 only) a netmask
 * (255.255.255.0) or a hostmask (0.0.0.255); null for anything else.
 */
function prefixLength(suffix: string, family: 4 | 6): number | null {
	const width = family === 4 ? 32 : 128;
	if (/^\d+$/.test(suffix)) return Number(suffix) <= width ? Number(suffix) : null;
	if (family !== 4 || isIP(suffix) !== 4) return null;
	const mask = ipv4Number(suffix);
	for (const candidate of [mask, 2 ** 32 - 1 - mask]) {
		for (let bits = 0; bits <= 32; bits++) if (candidate === 2 ** 32 - 2 ** (32 - bits)) return bits;
	}
	return null;
}

function subnetTest(pattern: string, word: string): Test {
	const single = isIP(pattern);
	if (single === 4 || single === 6) {
		const address = canonical(pattern, single);
		return h => addresses(h, single).includes(address);
	}
	const slash = pattern.lastIndexOf("/");
	const family = slash > 0 ? isIP(pattern.slice(0, slash)) : 0;
	const network = pattern.slice(0, slash);
	const bits = family === 4 || family === 6 ? prefixLength(pattern.slice(slash + 1), family) : null;
	if (bits === null || !(family === 4 || family === 6))
		throw new TargetError(
			`'${word}': S@ takes an IP address or a subnet in CIDR notation (10.0.0.0/8, or 10.0.0.0/255.0.0.0)`,
		);
	// Python's ip_network is strict: Salt logs "Invalid IP/CIDR target" and selects nothing; here, the reason.
	const hostBits = (1n << BigInt((family === 4 ? 32 : 128) - bits)) - 1n;
	if ((addressBits(network, family) & hostBits) !== 0n)
		throw new TargetError(
			`'${word}': ${network}/${bits} has host bits set, which Salt refuses (it selects nothing): give the network's address`,
		);
	const list = new BlockList();
	const type = family === 4 ? "ipv4" : "ipv6";
	list.addSubnet(network, bits, type);
	return h => addresses(h, family).some(a => isIP(a) === family && list.check(a, type));
}

/** A word for a message: quoted, and cut short when long (a term may be a thousand characters). */
function shown(word: string): string {
	return word.length > 60 ? `'${word.slice(0, 60)}…'` : `'${word}'`;
}

/** One word of an expression as a test. */
function compileTerm(
	word: string,
	ctx: TargetContext,
	named: string[],
	flags: { grains: boolean; nodegroups: boolean },
	meter: Meter,
): Test {
	const m = ENGINE.exec(word);
	if (!m) {
		if (!GLOB_CHARS.test(word)) {
			named.push(word);
			return h => h._id === word;
		}
		const re = compileRegex(globPattern(word), word);
		const width = patternWidth(word, "glob");
		return h => {
			meter.compare(h._id, width);
			return re.matches(h._id);
		};
	}
	const [, engine, delimiter, pattern] = m;
	if (delimiter && !"GPIJ".includes(engine))
		throw new TargetError(`'${word}': only G@, P@, I@ and J@ take a delimiter`);
	if (pattern === "") throw new TargetError(`'${word}': nothing after ${engine}@`);
	switch (engine) {
		case "E": {
			const re = compileRegex(pattern, word);
			const width = patternWidth(pattern, "regex");
			return h => {
				meter.compare(h._id, width);
				return re.matcher(h._id).lookingAt();
			};
		}
		case "L": {
			const ids = pattern.split(",");
			named.push(...ids.filter(Boolean));
			const set = new Set(ids);
			return h => set.has(h._id);
		}
		case "G":
		case "P": {
			flags.grains = true;
			const d = delimiter || ":";
			if (!pattern.includes(d))
				throw new TargetError(
					`'${word}': ${engine}@ takes a grain path and a ${engine === "G" ? "glob" : "regex"}, separated by '${d}' (G@os:Debian)`,
				);
			if (word.length > MAX_GRAIN_TERM_LENGTH)
				throw new TargetError(
					`${shown(word)}: a ${engine}@ term is longer than ${MAX_GRAIN_TERM_LENGTH} characters (the limit of a grain term)`,
				);
			// Salt splits at the term's delimiter, and inside dicts at ':' whatever the delimiter: both bounded.
			for (const cut of new Set([d, ":"])) {
				const parts = pattern.split(cut).length;
				if (parts > MAX_GRAIN_PATH_PARTS)
					throw new TargetError(
						`${shown(word)}: a ${engine}@ term has ${parts} parts separated by '${cut}', more than the limit of ${MAX_GRAIN_PATH_PARTS}`,
					);
			}
			const kind = engine === "G" ? "glob" : "regex";
			const splits = pattern.split(d);
			const candidates = splits.slice(1).map((_, i) =>
				splits
					.slice(i + 1)
					.join(d)
					.toLowerCase(),
			);
			if (!candidates.some(c => tryCompile(patternSource(kind, c)))) {
				if (engine === "P") compileRegex(candidates[candidates.length - 1], word);
				throw new TargetError(`'${word}': invalid glob`);
			}
			const matches = subdictMatcher(pattern, d, valueCompiler(kind, meter), meter.charge);
			return h => matches(h.grain);
		}
		case "S":
			flags.grains = true;
			return subnetTest(pattern, word);
		case "N": {
			const why = ctx.nodegroup?.(pattern) ?? null;
			if (why !== null) throw new TargetError(`'${word}': ${why}`);
			flags.nodegroups = true;
			return h => (h.nodegroups ?? []).includes(pattern);
		}
		case "F": {
			const members = ctx.group(pattern);
			if (members === null) throw new TargetError(`'${word}': no group has the id or name '${pattern}'`);
			return h => members.has(h._id);
		}
		case "I":
		case "J":
			throw new TargetError(
				`'${word}': pillar targeting (I@, J@) is not evaluated by fleet-ctl: it holds no pillar data`,
			);
		case "R":
			throw new TargetError(`'${word}': range targeting (R@) needs a range server; fleet-ctl does not evaluate it`);
		case "T":
		case "M":
			throw new TargetError(`'${word}': the proxy engines (T@, M@) are not evaluated by fleet-ctl`);
		default:
			throw new TargetError(
				`'${word}': unknown target engine ${engine}@ (known: G@ P@ E@ L@ S@ N@ and fleet-ctl's F@)`,
			);
	}
}

// ---------------------------------------------------------------- the expression

/** The references of an expression's `F@` terms (to resolve before compiling: TargetContext.group). */
export function groupRefs(expression: string): string[] {
	const refs = new Set<string>();
	for (const word of expression.split(/\s+/)) {
		const m = ENGINE.exec(word);
		if (m && m[1] === "F" && !m[2] && m[3]) refs.add(m[3]);
	}
	return [...refs];
}

/**
 * Compiles an expression (throws TargetError with the reason). The same rules as Salt: an operator may not
 * begin it (except `(` and `not`) or follow `(` (except `not`); `not` after a term means `and not`; two terms
 * side by side, a dangling operator or an unbalanced parenthesis are errors. `bounded`: one pass over the fleet
 * (a client's target resolved) may take MAX_TARGET_STEPS_PER_RESOLUTION steps in all, not only per host.
 */
export function compileTarget(expression: string, ctx: TargetContext, bounded = false): CompiledTarget {
	if (typeof expression !== "string" || expression.trim() === "") throw new TargetError("the target is empty");
	if (expression.length > MAX_TARGET_LENGTH)
		throw new TargetError(
			`the target is longer than the limit of ${MAX_TARGET_LENGTH} characters (${expression.length})`,
		);
	const tokens: string[] = [];
	let terms = 0;
	for (const word of expression.split(/\s+/).filter(Boolean)) {
		if (OPERATORS.has(word)) {
			const last = tokens[tokens.length - 1];
			if (last === undefined) {
				if (word !== "(" && word !== "not") throw new TargetError(`the target cannot begin with '${word}'`);
			} else {
				if (last === "(" && (word === "and" || word === "or")) throw new TargetError(`'${word}' cannot follow '('`);
				if (word === "not" && last === "not")
					throw new TargetError("'not not': Salt reads it as 'not and not', which it cannot evaluate");
				if (word === "not" && last !== "and" && last !== "or" && last !== "(") tokens.push("and");
			}
		} else if ((word.startsWith("(") || word.endsWith(")")) && !ENGINE.test(word)) {
			throw new TargetError(
				`'${word}': parentheses must stand alone, separated by spaces (as Salt reads them): ( ${word.replace(/^\(|\)$/g, "")} )`,
			);
		} else if (++terms > MAX_TARGET_TERMS) {
			throw new TargetError(
				`the target has more than the limit of ${MAX_TARGET_TERMS} terms (an L@ list is one term: L@a,b,c)`,
			);
		}
		tokens.push(word);
	}
	const named: string[] = [];
	const flags = { grains: false, nodegroups: false };
	const meter = new Meter(bounded);
	let at = 0;
	const peek = () => tokens[at];
	const expectTerm = (depth: number): Test => {
		if (depth > MAX_TARGET_DEPTH)
			throw new TargetError(
				`the target nests parentheses and 'not' deeper than the limit of ${MAX_TARGET_DEPTH} levels`,
			);
		const word = tokens[at++];
		if (word === undefined) throw new TargetError("the target ends where a term is expected");
		if (word === "not") {
			const inner = expectTerm(depth + 1);
			return h => !inner(h);
		}
		if (word === "(") {
			const inner = orExpr(depth + 1);
			if (tokens[at++] !== ")") throw new UnbalancedTargetError("a '(' is not closed");
			return inner;
		}
		if (OPERATORS.has(word)) throw new TargetError(`'${word}' where a term is expected`);
		return compileTerm(word, ctx, named, flags, meter);
	};
	/** Terms joined by one operator: `and` (every one holds) over `not`/terms, `or` (one holds) over `and`s. */
	const joined =
		(op: "and" | "or", next: (depth: number) => Test) =>
		(depth: number): Test => {
			const parts = [next(depth)];
			while (peek() === op) {
				at++;
				parts.push(next(depth));
			}
			if (parts.length === 1) return parts[0];
			return op === "and" ? h => parts.every(p => p(h)) : h => parts.some(p => p(h));
		};
	const andExpr = joined("and", expectTerm);
	const orExpr: (depth: number) => Test = joined("or", andExpr);
	const evaluate = orExpr(0);
	if (at < tokens.length) {
		const next = tokens[at];
		throw next === ")"
			? new UnbalancedTargetError("a ')' closes nothing")
			: new TargetError(`'${next}' follows a term without 'and' or 'or'`);
	}
	const test: Test = h => {
		meter.start(h._id);
		return evaluate(h);
	};
	return { test, named: [...new Set(named)], usesGrains: flags.grains, usesNodegroups: flags.nodegroups };
}
