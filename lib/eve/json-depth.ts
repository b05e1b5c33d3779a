/**
 * How deeply client JSON may nest, checked on the raw text before anything parses or walks it: every
 * recursive walk over client data (validation, masking, truncation, storage, serialization) can then
 * rely on the bound instead of on the stack. One linear pass, no allocation, no recursion.
 */

/** The deepest nesting of objects and arrays accepted in a request body or a JSON query parameter. */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPENERS = new Set([0x5b, 0x7b]); // [ {
const CLOSERS = new Set([0x5d, 0x7d]); // ] }
const PAREN_OPEN = 0x28;
const PAREN_CLOSE = 0x29;

/**
 * The nesting depth of `text`, counting `[` and `{` outside strings (and `(` when `parens`, for Eve's
 * Python-style `where`), stopping as soon as it passes `limit`. Malformed text is left to the parser.
 */
export function nestingDepth(text: string | Uint8Array, limit = Number.POSITIVE_INFINITY, parens = false): number {
	const bytes = typeof text === "string" ? null : text;
	const n = bytes ? bytes.length : (text as string).length;
	let depth = 0;
	let max = 0;
	let inString = false;
	for (let i = 0; i < n; i++) {
		const c = bytes ? bytes[i] : (text as string).charCodeAt(i);
		if (inString) {
			if (c === BACKSLASH) i++;
			else if (c === QUOTE) inString = false;
			continue;
		}
		if (c === QUOTE) inString = true;
		else if (OPENERS.has(c) || (parens && c === PAREN_OPEN)) {
			if (++depth > max) {
				max = depth;
				if (max > limit) return max;
			}
		} else if (CLOSERS.has(c) || (parens && c === PAREN_CLOSE)) depth = Math.max(0, depth - 1);
	}
	return max;
}

/** Whether `text` nests deeper than MAX_JSON_DEPTH. */
export function tooDeep(text: string | Uint8Array, parens = false): boolean {
	return nestingDepth(text, MAX_JSON_DEPTH, parens) > MAX_JSON_DEPTH;
}
