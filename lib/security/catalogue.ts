/**
 * The function catalogue (docs/security.md, "The function catalogue"): every Salt execution function fleet-ctl may be
 * asked to run, classified by what it can do, each entry with the line of Salt 3006's source that justifies it.
 * Scopes expand globs against it, and a function it does not know is treated as the most dangerous class.
 *
 * Classes, least to most dangerous:
 *  - `read`: reads the host and changes nothing;
 *  - `change`: changes the host within its own documented meaning (installs a package, restarts a service);
 *  - `secrets`: reveals secrets (the minion's configuration, pillar data);
 *  - `arbitrary`: runs arbitrary code — calls another function by name, renders a template or code, or writes files or
 *    configuration that run later.
 */
import { CATALOGUE_DATA } from "./catalogue-data";

export const FUNCTION_CLASSES = ["read", "change", "secrets", "arbitrary"] as const;
export type FunctionClass = (typeof FUNCTION_CLASSES)[number];

/** A function's entry: its class, where Salt's source shows it, and why when the class is not obvious. */
export interface CatalogueEntry {
	class: FunctionClass;
	/** `salt/modules/<file>.py:<line>` in Salt v3006.0: the definition (or the line) that justifies the class. */
	source: string;
	note?: string;
	/**
	 * For a function that runs other functions: the keyword (or positional index) that names the function it runs,
	 * so that scopes and governance can look at that one too.
	 */
	inner?: {
		kwarg?: string;
		index?: number;
		/** A keyword that, when given, names the function instead (`mine.send`'s `mine_function` over `name`). */
		override?: string;
	};
	/** The function's `test=True` is known to change nothing (only `state.apply`, `state.sls`, `state.highstate`). */
	dryRun?: boolean;
	/**
	 * Acts beyond the host it runs on: publishes to other minions through the master (where the master's `peer`
	 * configuration allows it) or runs on the master. A token limited to groups never runs it (lib/http/auth.ts).
	 */
	beyondHost?: boolean;
}

/** The catalogue (its data is catalogue-data.ts; a test checks every function the simulator knows is there). */
export const CATALOGUE: Readonly<Record<string, CatalogueEntry>> = deepFreeze(CATALOGUE_DATA);

function deepFreeze<T>(o: T): T {
	if (o !== null && typeof o === "object" && !Object.isFrozen(o)) {
		for (const v of Object.values(o)) deepFreeze(v);
		Object.freeze(o);
	}
	return o;
}

const RANK: Record<FunctionClass | "unknown", number> = { read: 0, change: 1, secrets: 2, arbitrary: 3, unknown: 4 };

/** A function's class, or `unknown` when the catalogue does not have it (treated as more dangerous than `arbitrary`). */
export function classOf(fun: string): FunctionClass | "unknown" {
	return Object.hasOwn(CATALOGUE, fun) ? CATALOGUE[fun].class : "unknown";
}

/** Whether `a` is at least as dangerous as `b`. */
export function atLeast(a: FunctionClass | "unknown", b: FunctionClass | "unknown"): boolean {
	return RANK[a] >= RANK[b];
}

/** The catalogue's entry for `fun`, when it has one. */
export function entryOf(fun: string): CatalogueEntry | undefined {
	return Object.hasOwn(CATALOGUE, fun) ? CATALOGUE[fun] : undefined;
}
