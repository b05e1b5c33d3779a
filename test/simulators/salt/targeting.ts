/**
 * Target resolution as the master does it (`salt.utils.minions.CkMinions.check_minions`), against
 * accepted keys only: glob, pcre, list, grain, grain_pcre, pillar(_pcre) (no pillar data: no match),
 * ipcidr, nodegroup, compound (and/or/not, parentheses, G@ P@ E@ L@ N@ S@ I@ J@ R@, bare globs), range
 * (unavailable: no match).
 */
import type { Fleet, Grains } from "./fleet";
import { fnmatch, isPlainObject, pyReMatch, pyStr, traverse } from "./util";

/** Salt raises SaltInvocationError (HTTP 400) for an unknown nodegroup. */
export class TargetInvocationError extends Error {}

export interface TargetResult {
	/** Accepted minions that match: sorted, except for `list` targets (given order). */
	minions: string[];
	/** For `list` targets: ids in the list that have no accepted key. */
	missing: string[];
}

export type Nodegroups = Record<string, string | string[]>;

export const TGT_TYPES = [
	"glob",
	"pcre",
	"list",
	"grain",
	"grain_pcre",
	"pillar",
	"pillar_pcre",
	"pillar_exact",
	"nodegroup",
	"range",
	"compound",
	"ipcidr",
];

export class Targeting {
	constructor(
		private readonly fleet: Fleet,
		private readonly nodegroups: () => Nodegroups,
		private readonly delimiter = ":",
	) {}

	/**
	 * Resolve a target. Like the master, a malformed expression matches nothing instead of failing;
	 * only an unknown nodegroup is an error (raised by LocalClient before publishing).
	 */
	check(tgt: unknown, tgtType: unknown = "glob"): TargetResult {
		const type = typeof tgtType === "string" && tgtType ? tgtType : "glob";
		if (type === "nodegroup") return this.check(this.resolveNodegroup(String(tgt)), "compound");
		if (type === "compound") this.expandNodegroups(tgt, new Set()); // raises for unknown nodegroups
		try {
			return this.checkInner(tgt, type);
		} catch (e) {
			if (e instanceof TargetInvocationError) throw e;
			return { minions: [], missing: [] };
		}
	}

	private checkInner(tgt: unknown, type: string): TargetResult {
		const accepted = this.fleet.acceptedIds();
		const none: TargetResult = { minions: [], missing: [] };
		switch (type) {
			case "glob":
				if (typeof tgt !== "string") return none;
				if (!/[*?[]/.test(tgt)) return { minions: this.fleet.get(tgt)?.key === "accepted" ? [tgt] : [], missing: [] };
				return { minions: accepted.filter(id => fnmatch(id, tgt)), missing: [] };
			case "pcre":
				if (typeof tgt !== "string") return none;
				return { minions: accepted.filter(id => pyReMatch(tgt, id)), missing: [] };
			case "list": {
				const ids = listTarget(tgt);
				const minions: string[] = [];
				const missing: string[] = [];
				const seen = new Set<string>();
				for (const id of ids) {
					if (seen.has(id)) continue;
					seen.add(id);
					(this.fleet.get(id)?.key === "accepted" ? minions : missing).push(id);
				}
				// Like the master: the list's own order, not sorted.
				return { minions, missing };
			}
			case "grain":
			case "grain_pcre":
				if (typeof tgt !== "string") return none;
				return {
					minions: accepted.filter(id =>
						subdictMatch(this.fleet.get(id)!.grains, tgt, this.delimiter, type === "grain_pcre"),
					),
					missing: [],
				};
			case "ipcidr":
				if (typeof tgt !== "string") return none;
				return { minions: accepted.filter(id => ipcidrMatch(this.fleet.get(id)!.grains, tgt)), missing: [] };
			case "compound":
				return { minions: [...this.compound(tgt)].sort(), missing: [] };
			default:
				// pillar, pillar_pcre, pillar_exact (no pillar data), range (seco.range missing), unknown types.
				return none;
		}
	}

	resolveNodegroup(name: string): string {
		const groups = this.nodegroups();
		if (!Object.hasOwn(groups, name))
			throw new TargetInvocationError(`Node group ${name} unavailable in /etc/salt/master`);
		const def = groups[name];
		// A list of minion ids (no compound words) is the list of them (nodegroup_matching.json: N@listgroup).
		if (Array.isArray(def))
			return def.some(w => ["and", "or", "not", "(", ")"].includes(String(w)) || /^[A-Z]@/.test(String(w)))
				? def.join(" ")
				: `L@${def.join(",")}`;
		return String(def);
	}

	/**
	 * What LocalClient publishes for a nodegroup target (`_prep_pub`: `nodegroup_comp`, tgt_type compound): the
	 * group's definition as written (`web` → `web-*`, events_cli_jobs.txt), expanded when it names other groups.
	 */
	nodegroupComp(name: string): unknown {
		const def = this.nodegroups()[name];
		const words = Array.isArray(def) ? def.map(String) : String(def).split(/\s+/);
		return words.some(w => w.startsWith("N@")) ? this.expandNodegroups(def, new Set([name])).join(" ") : def;
	}

	private expandNodegroups(tgt: unknown, seen: Set<string>): string[] {
		const words = tokenize(tgt);
		const out: string[] = [];
		for (const w of words) {
			if (w.startsWith("N@") && w.length > 2) {
				const name = w.slice(2);
				if (seen.has(name)) {
					out.push("L@");
					continue;
				}
				const inner = this.expandNodegroups(this.resolveNodegroup(name), new Set([...seen, name]));
				out.push("(", ...inner, ")");
			} else out.push(w);
		}
		return out;
	}

	private compound(tgt: unknown): Set<string> {
		const tokens = this.expandNodegroups(tgt, new Set());
		const universe = new Set(this.fleet.acceptedIds());
		let pos = 0;
		const peek = () => tokens[pos];
		const fail = (): never => {
			throw new Error(`invalid compound target: ${tokens.join(" ")}`);
		};
		const parseOr = (): Set<string> => {
			let left = parseAnd();
			while (peek() === "or") {
				pos++;
				const right = parseAnd();
				left = new Set([...left, ...right]);
			}
			return left;
		};
		const parseAnd = (): Set<string> => {
			let left = parseNot();
			for (;;) {
				const t = peek();
				if (t === "and") pos++;
				else if (t === undefined || t === "or" || t === ")") break;
				// Two terms in a row: Salt inserts an implicit "and".
				const right = parseNot();
				left = new Set([...left].filter(id => right.has(id)));
			}
			return left;
		};
		const parseNot = (): Set<string> => {
			if (peek() === "not") {
				pos++;
				// Salt's evaluation of "not not x" is a syntax error: nothing matches.
				if (peek() === "not") fail();
				const inner = parseNot();
				return new Set([...universe].filter(id => !inner.has(id)));
			}
			return parsePrimary();
		};
		const parsePrimary = (): Set<string> => {
			const t = peek();
			if (t === undefined || t === ")" || t === "and" || t === "or") return fail();
			pos++;
			if (t === "(") {
				const inner = parseOr();
				// Salt closes the parentheses left open at the end ("( web-01 or db-01").
				if (peek() === ")") pos++;
				else if (peek() !== undefined) fail();
				return inner;
			}
			return this.term(t);
		};
		const result = parseOr();
		if (pos !== tokens.length) fail();
		return result;
	}

	private term(word: string): Set<string> {
		// An engine letter, a delimiter of its own for G, P, I and J (`G|@weird|x:y`), then `@`.
		const m = /^([A-Z])([^\s@])?@(.*)$/s.exec(word);
		if (!m || (m[2] !== undefined && !"GPIJ".includes(m[1]))) return new Set(this.checkInner(word, "glob").minions);
		const [, engine, delim, expr] = m;
		switch (engine) {
			case "G":
			case "P":
				return new Set(
					this.fleet
						.acceptedIds()
						.filter(id => subdictMatch(this.fleet.get(id)!.grains, expr, delim ?? this.delimiter, engine === "P")),
				);
			case "E":
				return new Set(this.checkInner(expr, "pcre").minions);
			case "L":
				return new Set(this.checkInner(expr, "list").minions);
			case "S":
				return new Set(this.checkInner(expr, "ipcidr").minions);
			case "I":
			case "J":
			case "R":
				return new Set();
			default:
				throw new Error(`Unrecognized target engine "${engine}"`);
		}
	}
}

/** `list` targets: a JSON array or a comma-separated string. */
export function listTarget(tgt: unknown): string[] {
	if (Array.isArray(tgt)) return tgt.map(String);
	if (typeof tgt === "string") return tgt.split(",").filter(Boolean);
	return [];
}

function tokenize(tgt: unknown): string[] {
	// Words split on whitespace only, as `_check_compound_minions` does: a parenthesis glued to a word is part of it
	// ("(web-*" is a glob that matches nothing, compound_differential.json).
	const words = Array.isArray(tgt) ? tgt.map(String).flatMap(w => w.split(/\s+/)) : String(tgt ?? "").split(/\s+/);
	return words.filter(Boolean);
}

// ------------------------------------------------------------------ salt.utils.data.subdict_match

function matchValue(target: unknown, pattern: string, regex: boolean): boolean {
	const t = pyStr(target).toLowerCase();
	const p = pattern.toLowerCase();
	return regex ? pyReMatch(p, t) : fnmatch(t, p);
}

function dictMatch(target: Record<string, unknown>, pattern: string, regex: boolean, delimiter: string): boolean {
	const wildcard = pattern.startsWith("*:");
	if (wildcard) pattern = pattern.slice(2);
	if (pattern === "*") return true;
	if (Object.hasOwn(target, pattern)) return true;
	if (subdictMatch(target, pattern, delimiter, regex)) return true;
	if (wildcard) {
		for (const v of Object.values(target)) {
			if (isPlainObject(v)) {
				if (dictMatch(v, pattern, regex, delimiter)) return true;
			} else if (Array.isArray(v)) {
				if (v.some(item => matchValue(item, pattern, regex))) return true;
			} else if (matchValue(v, pattern, regex)) return true;
		}
	}
	return false;
}

/** Does `key:...:value` (value a glob, or a regex for grain_pcre) match these grains? */
export function subdictMatch(data: Grains, expr: string, delimiter = ":", regex = false): boolean {
	const splits = expr.split(delimiter);
	if (splits.length === 1) return false;
	for (let idx = 1; idx < splits.length; idx++) {
		const key = splits.slice(0, idx).join(delimiter);
		let matchstr: string;
		let match: unknown;
		if (key === "*") {
			matchstr = expr;
			match = data;
		} else {
			matchstr = splits.slice(idx).join(delimiter);
			match = traverse(data, key, NOT_FOUND, delimiter);
		}
		if (match === NOT_FOUND) continue;
		if (isPlainObject(match)) {
			if (Object.keys(match).length === 0) continue;
			if (dictMatch(match, matchstr, regex, delimiter)) return true;
			continue;
		}
		if (Array.isArray(match)) {
			for (const member of match) {
				if (isPlainObject(member)) {
					if (dictMatch(member, matchstr, regex, delimiter)) return true;
				} else if (matchValue(member, matchstr, regex)) return true;
			}
			continue;
		}
		if (matchValue(match, matchstr, regex)) return true;
	}
	return false;
}
const NOT_FOUND = Symbol("not found");

// ------------------------------------------------------------------ ipcidr

/** An IPv4 or IPv6 address as a number, as Python's `ipaddress.ip_address` reads it; null when it is neither. */
function parseIp(ip: string): { v: 4 | 6; n: bigint } | null {
	const m4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
	if (m4) {
		const parts = m4.slice(1).map(Number);
		if (parts.some(p => p > 255)) return null;
		return { v: 4, n: parts.reduce((acc, p) => (acc << 8n) | BigInt(p), 0n) };
	}
	if (!/^[0-9A-Fa-f:]+$/.test(ip) || ip.split("::").length > 2) return null;
	const [head, tail] = ip.includes("::") ? ip.split("::") : [ip, undefined];
	const groups = (part: string) => (part === "" ? [] : part.split(":"));
	const h = groups(head);
	const t = tail === undefined ? [] : groups(tail);
	const missing = 8 - h.length - t.length;
	if (tail === undefined ? missing !== 0 : missing < 1) return null;
	const all = [...h, ...Array(tail === undefined ? 0 : missing).fill("0"), ...t];
	if (all.some(g => !/^[0-9A-Fa-f]{1,4}$/.test(g))) return null;
	return { v: 6, n: all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

/**
 * An `S@`/ipcidr target as Salt's matcher reads it (`ipaddress.ip_address`, else `ip_network`, strict): an address,
 * or a network with a prefix length, a netmask or a hostmask (IPv4) whose host bits are zero; null otherwise
 * (compound_differential.json: `S@127.0.0.11/8` matches nothing, `S@127.0.0.13/255.255.255.255` and `S@::/0` do).
 */
function parseIpTarget(tgt: string): { v: 4 | 6; net: bigint; mask: bigint } | null {
	const [addr, pfx, extra] = tgt.split("/");
	if (extra !== undefined) return null;
	const ip = parseIp(addr);
	if (!ip) return null;
	const width = ip.v === 4 ? 32 : 128;
	const full = (1n << BigInt(width)) - 1n;
	let bits: number;
	if (pfx === undefined) bits = width;
	else if (/^\d+$/.test(pfx)) bits = Number(pfx);
	else {
		const m = ip.v === 4 ? parseIp(pfx) : null;
		if (m?.v !== 4) return null;
		// A netmask (ones then zeros) or a hostmask (zeros then ones).
		const asMask = (x: bigint) => {
			const str = x.toString(2).padStart(32, "0");
			return /^1*0*$/.test(str) ? (str.indexOf("0") === -1 ? 32 : str.indexOf("0")) : null;
		};
		const nm = asMask(m.n);
		const hm = asMask(~m.n & full);
		bits = nm ?? hm ?? -1;
	}
	if (!Number.isInteger(bits) || bits < 0 || bits > width) return null;
	const mask = bits === 0 ? 0n : (full >> BigInt(width - bits)) << BigInt(width - bits);
	if ((ip.n & ~mask & full) !== 0n) return null;
	return { v: ip.v, net: ip.n, mask };
}

function ipcidrMatch(grains: Grains, tgt: string): boolean {
	const target = parseIpTarget(tgt);
	if (!target) return false;
	const proto = grains[`ipv${target.v}`];
	const addrs = Array.isArray(proto) ? proto.map(a => parseIp(String(a))) : [];
	return addrs.some(a => a !== null && a.v === target.v && (a.n & target.mask) === target.net);
}
