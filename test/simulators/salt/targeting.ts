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

export const TGT_TYPES = ["glob", "pcre", "list", "grain", "grain_pcre", "pillar", "pillar_pcre", "pillar_exact", "nodegroup", "range", "compound", "ipcidr"];

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
				return { minions: accepted.filter(id => subdictMatch(this.fleet.get(id)!.grains, tgt, this.delimiter, type === "grain_pcre")), missing: [] };
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
		if (!Object.prototype.hasOwnProperty.call(groups, name)) throw new TargetInvocationError(`Node group ${name} unavailable in /etc/salt/master`);
		const def = groups[name];
		return Array.isArray(def) ? def.join(" ") : String(def);
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
				if (peek() !== ")") fail();
				pos++;
				return inner;
			}
			return this.term(t);
		};
		const result = parseOr();
		if (pos !== tokens.length) fail();
		return result;
	}

	private term(word: string): Set<string> {
		const m = /^([A-Z])@(.*)$/s.exec(word);
		if (!m) return new Set(this.checkInner(word, "glob").minions);
		const [, engine, expr] = m;
		switch (engine) {
			case "G":
				return new Set(this.checkInner(expr, "grain").minions);
			case "P":
				return new Set(this.checkInner(expr, "grain_pcre").minions);
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
	const words = Array.isArray(tgt) ? tgt.map(String).flatMap(w => w.split(/\s+/)) : String(tgt ?? "").split(/\s+/);
	const out: string[] = [];
	for (let w of words.filter(Boolean)) {
		// Be lenient with parentheses glued to a word: "(web*" → "(", "web*".
		while (w.startsWith("(") && w.length > 1) {
			out.push("(");
			w = w.slice(1);
		}
		let closing = 0;
		while (w.endsWith(")") && w.length > 1 && !/^[A-Z]@/.test(w)) {
			closing++;
			w = w.slice(0, -1);
		}
		out.push(w);
		for (let i = 0; i < closing; i++) out.push(")");
	}
	return out;
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
	if (Object.prototype.hasOwnProperty.call(target, pattern)) return true;
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

function ipv4ToInt(ip: string): number | null {
	const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
	if (!m) return null;
	const parts = m.slice(1).map(Number);
	if (parts.some(p => p > 255)) return null;
	return ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
}

function ipcidrMatch(grains: Grains, tgt: string): boolean {
	const addrs = Array.isArray(grains.ipv4) ? (grains.ipv4 as unknown[]).map(String) : [];
	if (!tgt.includes("/")) return addrs.includes(tgt);
	const [net, bitsStr] = tgt.split("/");
	const base = ipv4ToInt(net);
	const bits = Number(bitsStr);
	if (base === null || !Number.isInteger(bits) || bits < 0 || bits > 32) return false;
	const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
	return addrs.some(a => {
		const n = ipv4ToInt(a);
		return n !== null && (n & mask) >>> 0 === (base & mask) >>> 0;
	});
}
