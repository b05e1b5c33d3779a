/**
 * The gateway's alias lookups, remembered: moleculer-web finds a request's alias by trying every alias's regular
 * expression in turn (some 250 here), on every request. The answer for a method and path is kept (a bounded
 * number, the oldest going first) until the alias table changes, which moleculer-web does by replacing its array
 * or by pushing onto it. Each answer is handed out as a new object with its own copy of the path's parameters,
 * since moleculer-web may keep or merge them.
 */
interface Found {
	alias: unknown;
	params: Record<string, unknown>;
}

export class AliasLookups {
	private readonly found = new Map<string, Found | false>();
	private table: readonly unknown[] | null = null;
	private tableLength = -1;

	constructor(private readonly maxEntries: number) {}

	resolve(aliases: readonly unknown[], url: string, method: string, lookup: () => Found | false): Found | false {
		if (aliases !== this.table || aliases.length !== this.tableLength) {
			this.found.clear();
			this.table = aliases;
			this.tableLength = aliases.length;
		}
		const key = `${method} ${url}`;
		let hit = this.found.get(key);
		if (hit === undefined) {
			hit = lookup();
			if (this.found.size >= this.maxEntries) this.found.delete(this.found.keys().next().value as string);
			this.found.set(key, hit);
		}
		return hit && { alias: hit.alias, params: { ...hit.params } };
	}
}
