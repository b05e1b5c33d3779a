/**
 * Which hosts a group or a nodegroup selects, and which groups a host belongs to.
 *
 * A group selects its explicit `hosts`, the hosts its `info` rule matches, and everything its subgroups
 * select, recursively. A rule (`info`, on groups of any type and on nodegroups) holds when every condition
 * it gives holds; a rule with no condition selects nothing:
 *  - `regex`: matched against the host id from its start, as Salt's `E@`/pcre matcher (Python's
 *    `re.match`): "web-" selects "web-01" but not "old-web-01"; anchor with `$` to match the whole id.
 *    Patterns are compiled by RE2 (re2js): matching takes linear time whatever the pattern, so no pattern
 *    can hang the service; what RE2 does not support (backreferences, lookaround) is refused with a 422.
 *  - `grain`: each key is a grain path with Salt's ":" delimiter ("ip_interfaces:eth0", "ctl:last_stateapply";
 *    a numeric part indexes a list) and each value a glob as Salt's `G@` matcher takes it (`*`, `?`, `[...]`,
 *    case-sensitive); a list grain matches when one of its elements does. Grains are matched as stored,
 *    so a grain key with "." is written with "_" (docs/salt.md).
 */
import { RE2JS } from "re2js";
import { compileTarget, globPattern, TargetError, type CompiledTarget } from "./compound";

export interface Rule {
	regex?: string;
	grain?: Record<string, string>;
	/** A compound target (docs/targeting.md) without `F@`: a group's members come from its rule and subgroups. */
	target?: string;
}

export interface HostFacts {
	_id: string;
	grain?: unknown;
	/** The nodegroups the host is in (what `N@` in a group's compound rule reads). */
	nodegroups?: string[];
}

/** Groups are not named inside rules: a rule naming one could select itself through it. */
const RULE_TARGETS = {
	group: (ref: string): never => {
		throw new TargetError(`'F@${ref}': a group's rule cannot name groups; make that group a subgroup instead`);
	},
};

/** A rule's compound target compiled; `forNodegroup`: a nodegroup's rule may not name nodegroups either. */
function compileRuleTarget(target: string, forNodegroup = false): CompiledTarget {
	const compiled = compileTarget(target, RULE_TARGETS);
	if (forNodegroup && compiled.usesNodegroups) throw new TargetError("a nodegroup's rule cannot name nodegroups (N@)");
	return compiled;
}

export interface GroupDef {
	_id: string;
	name?: string;
	type?: number;
	hosts?: string[];
	subgroups?: string[];
	info?: Rule;
}

export interface NodegroupDef {
	name: string;
	info?: Rule;
}

/** Why a regex cannot be used, or null when it can. */
export function regexError(pattern: string): string | null {
	try {
		RE2JS.compile(pattern);
		return null;
	} catch (err) {
		return (err as Error).message.replace(/^error parsing regexp: /, "");
	}
}

/** What is wrong with a rule, by field (`regex`, `grain.<key>`, `target`), or null when it can be used. */
export function ruleProblems(rule: Rule | undefined, forNodegroup = false): Record<string, string> | null {
	if (!rule) return null;
	const out: Record<string, string> = {};
	if (typeof rule.target === "string") {
		try {
			compileRuleTarget(rule.target, forNodegroup);
		} catch (err) {
			if (!(err instanceof TargetError)) throw err;
			out.target = err.message;
		}
	}
	if (typeof rule.regex === "string") {
		const why = regexError(rule.regex);
		if (why) out.regex = `invalid regular expression (RE2 syntax: no backreferences or lookaround): ${why}`;
	}
	for (const [path, glob] of Object.entries(rule.grain ?? {})) {
		if (path.split(":").some(p => p === "")) out[`grain.${path}`] = "a grain path has an empty part";
		else if (regexError(globPattern(glob))) out[`grain.${path}`] = `invalid glob: ${glob}`;
	}
	return Object.keys(out).length ? out : null;
}

/** The value at a Salt grain path ("a:b:0"). */
export function grainAt(grains: unknown, path: string): unknown {
	let cur: unknown = grains;
	for (const part of path.split(":")) {
		if (Array.isArray(cur) && /^\d+$/.test(part)) cur = cur[Number(part)];
		else if (cur && typeof cur === "object" && !Array.isArray(cur)) cur = (cur as Record<string, unknown>)[part];
		else return undefined;
	}
	return cur;
}

/** How a scalar grain reads to a Salt glob (Python's str(): True, False, None). */
function grainText(v: unknown): string | null {
	if (typeof v === "string") return v;
	if (typeof v === "number") return String(v);
	if (typeof v === "boolean") return v ? "True" : "False";
	if (v === null) return "None";
	return null;
}

/** A compiled rule: does it select this host? null when the rule gives no condition. */
export function compileRule(rule: Rule | undefined): ((host: HostFacts) => boolean) | null {
	if (!rule) return null;
	const tests: Array<(host: HostFacts) => boolean> = [];
	if (typeof rule.regex === "string") {
		const re = RE2JS.compile(rule.regex);
		tests.push(h => re.matcher(h._id).lookingAt());
	}
	for (const [path, glob] of Object.entries(rule.grain ?? {})) {
		const re = RE2JS.compile(globPattern(glob));
		const matches = (v: unknown) => {
			const text = grainText(v);
			return text !== null && re.matches(text);
		};
		tests.push(h => {
			const v = grainAt(h.grain, path);
			return Array.isArray(v) ? v.some(matches) : matches(v);
		});
	}
	if (typeof rule.target === "string") {
		const compiled = compileRuleTarget(rule.target);
		tests.push(h => {
			try {
				return compiled.test(h);
			} catch (err) {
				// More work on this host's grains than a target may take (docs/targeting.md): not selected, as Salt
				// selects nothing where its matcher fails; rules are evaluated host by host, with no one to answer.
				if (err instanceof TargetError) return false;
				throw err;
			}
		});
	}
	if (!tests.length) return null;
	return h => tests.every(t => t(h));
}

/** Does any rule test grains (so that hosts must be read with theirs)? */
export function needsGrains(rules: Array<Rule | undefined>): boolean {
	return rules.some(
		r => (r?.grain && Object.keys(r.grain).length > 0) || (typeof r?.target === "string" && targetUsesGrains(r.target)),
	);
}

function targetUsesGrains(target: string): boolean {
	try {
		return compileTarget(target, RULE_TARGETS).usesGrains;
	} catch {
		// A rule that does not compile selects nothing (safeCompile): it needs no grains.
		return false;
	}
}

/**
 * The groups as a whole: who is whose parent, which rules select what, and so which groups (and
 * nodegroups) a host belongs to. Built from every group; cheap to ask host by host.
 */
export class GroupIndex {
	private readonly explicit = new Map<string, string[]>();
	private readonly rules: Array<{ id: string; test: (h: HostFacts) => boolean }> = [];
	/** For each group, itself and every group above it. */
	private readonly closure = new Map<string, string[]>();
	private readonly nodegroupRules: Array<{ name: string; test: (h: HostFacts) => boolean }> = [];
	readonly usesGrains: boolean;

	constructor(groups: GroupDef[], nodegroups: NodegroupDef[] = []) {
		const parents = new Map<string, string[]>();
		for (const g of groups) {
			for (const child of g.subgroups ?? []) parents.set(child, [...(parents.get(child) ?? []), g._id]);
			for (const host of g.hosts ?? []) this.explicit.set(host, [...(this.explicit.get(host) ?? []), g._id]);
			const test = safeCompile(g.info);
			if (test) this.rules.push({ id: g._id, test });
		}
		for (const g of groups) {
			const seen = new Set<string>([g._id]);
			const queue = [g._id];
			while (queue.length)
				for (const p of parents.get(queue.shift()!) ?? []) if (!seen.has(p)) queue.push(p), seen.add(p);
			this.closure.set(g._id, [...seen]);
		}
		for (const n of nodegroups) {
			const test = safeCompile(n.info);
			if (test) this.nodegroupRules.push({ name: n.name, test });
		}
		this.usesGrains = needsGrains([...groups.map(g => g.info), ...nodegroups.map(n => n.info)]);
	}

	/** Every group that resolves to this host, in a stable order. */
	groupsOf(host: HostFacts): string[] {
		const out = new Set<string>();
		const direct = [...(this.explicit.get(host._id) ?? []), ...this.rules.filter(r => r.test(host)).map(r => r.id)];
		// Every id here is a group's (explicit and rules come from the groups): each has its closure.
		for (const id of direct) for (const g of this.closure.get(id)!) out.add(g);
		return [...out].sort();
	}

	/** The names of the nodegroups whose rule selects this host, in the order given (the nodegroups service: by name). */
	nodegroupsOf(host: HostFacts): string[] {
		return this.nodegroupRules.filter(r => r.test(host)).map(r => r.name);
	}
}

/** A stored rule that no longer compiles (stored before a check existed) selects nothing. */
function safeCompile(rule: Rule | undefined): ((h: HostFacts) => boolean) | null {
	try {
		return compileRule(rule);
	} catch {
		return null;
	}
}
