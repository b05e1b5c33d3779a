/**
 * Command-line words, as the REPL and the dashboard's run form read them: a line split as a shell splits it,
 * and the words as a Salt call's `arg` and `kwarg`. One source for both: the dashboard's build (Vite) bundles this
 * file, so it uses nothing from outside itself (no Node module).
 */

/**
 * A command line into words as a shell splits it: whitespace separates, '…' and "…" quote (the quotes go),
 * so `exec web cmd.run 'uptime -p'` passes one argument and `hosts '{"status": "up"}'` one filter.
 */
export function splitWords(line: string): string[] {
	const words: string[] = [];
	let word: string | null = null;
	let quote: string | null = null;
	for (const ch of line) {
		if (quote) {
			if (ch === quote) quote = null;
			else word += ch;
		} else if (ch === "'" || ch === '"') {
			quote = ch;
			word ??= "";
		} else if (/\s/.test(ch)) {
			if (word !== null) words.push(word);
			word = null;
		} else word = (word ?? "") + ch;
	}
	if (quote) throw new Error(`unterminated ${quote} quote`);
	if (word !== null) words.push(word);
	return words;
}

/** Salt arguments: plain words are `arg`, `k=v` are `kwarg`; values parse as JSON when they do. */
export function parseRunArgs(words: string[]): { arg: unknown[]; kwarg: Record<string, unknown> } {
	const value = (v: string) => {
		try {
			return JSON.parse(v);
		} catch {
			return v;
		}
	};
	const arg: unknown[] = [];
	const kwarg: Record<string, unknown> = {};
	for (const w of words) {
		const eq = w.indexOf("=");
		if (eq > 0) kwarg[w.slice(0, eq)] = value(w.slice(eq + 1));
		else arg.push(value(w));
	}
	return { arg, kwarg };
}
