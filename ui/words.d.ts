/**
 * The types of dist/ui/words.js, which scripts/build-ui.js writes from lib/repl/words.ts (its one source): how
 * the run form splits its arguments, exactly as the REPL does.
 */
export declare function splitWords(line: string): string[];
export declare function parseRunArgs(words: string[]): { arg: unknown[]; kwarg: Record<string, unknown> };
