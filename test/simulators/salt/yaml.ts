/**
 * A small YAML subset, enough for what salt-api sees and sends:
 * - parse: lowstate bodies (`application/x-yaml`, `text/yaml`) and SLS/top files: block mappings and
 *   sequences, flow `[...]`/`{...}`, quoted and plain scalars with PyYAML's (YAML 1.1) resolution of
 *   booleans (yes/no/on/off too), null, ints and floats, `|`/`>` block scalars and comments.
 * - dump: PyYAML `safe_dump(default_flow_style=False)` layout (sorted keys, indentless sequences).
 * Anchors, tags, multi-document streams and multi-line plain scalars are not supported.
 */

export class YamlError extends Error {}

interface Line {
	indent: number;
	text: string;
	no: number;
}

const BOOL_TRUE = new Set(["yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "y", "Y"]);
const BOOL_FALSE = new Set(["no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N"]);
// PyYAML does not resolve the single letters y/n as booleans.
BOOL_TRUE.delete("y");
BOOL_TRUE.delete("Y");
BOOL_FALSE.delete("n");
BOOL_FALSE.delete("N");
const NULLS = new Set(["", "~", "null", "Null", "NULL"]);

/** Resolve a plain (unquoted) scalar the way PyYAML's SafeLoader does. */
export function resolvePlain(s: string): unknown {
	if (NULLS.has(s)) return null;
	if (BOOL_TRUE.has(s)) return true;
	if (BOOL_FALSE.has(s)) return false;
	if (/^[-+]?(0|[1-9][0-9_]*)$/.test(s)) return Number(s.replace(/_/g, ""));
	if (/^[-+]?0x[0-9a-fA-F_]+$/.test(s)) return parseInt(s.replace(/_/g, ""), 16);
	if (/^[-+]?0[0-7_]+$/.test(s)) return parseInt(s.replace(/_/g, ""), 8);
	if (/^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$/.test(s) && /\d/.test(s)) return Number(s.replace(/_/g, ""));
	if (/^[-+]?\.(inf|Inf|INF)$/.test(s)) return s.startsWith("-") ? -Infinity : Infinity;
	if (/^\.(nan|NaN|NAN)$/.test(s)) return NaN;
	return s;
}

/** Strip a trailing comment that is outside quotes. */
function stripComment(text: string): string {
	let quote: string | null = null;
	for (let i = 0; i < text.length; i++) {
		const c = text[i];
		if (quote) {
			if (c === quote) {
				if (quote === "'" && text[i + 1] === "'") i++;
				else quote = null;
			} else if (c === "\\" && quote === '"') i++;
		} else if (c === '"' || c === "'") {
			if (i === 0 || /[\s:[{,-]/.test(text[i - 1])) quote = c;
		} else if (c === "#" && (i === 0 || /\s/.test(text[i - 1]))) return text.slice(0, i).trimEnd();
	}
	return text.trimEnd();
}

class Parser {
	private pos = 0;
	constructor(private readonly raw: string[]) {}

	/** The next significant line (skips blanks, comments and document markers), without consuming it. */
	peek(): Line | null {
		while (this.pos < this.raw.length) {
			const rawLine = this.raw[this.pos];
			if (/\t/.test(rawLine.match(/^\s*/)![0]))
				throw new YamlError(`found character '\\t' that cannot start any token (line ${this.pos + 1})`);
			const text = stripComment(rawLine.trim() === "---" || rawLine.trim() === "..." ? "" : rawLine);
			if (text.trim() === "") {
				this.pos++;
				continue;
			}
			const indent = text.length - text.trimStart().length;
			return { indent, text: text.trim(), no: this.pos };
		}
		return null;
	}

	parseDocument(): unknown {
		const first = this.peek();
		if (!first) return null;
		const v = this.parseBlock(first.indent);
		const rest = this.peek();
		if (rest) throw new YamlError(`expected <block end>, but found another node (line ${rest.no + 1})`);
		return v;
	}

	private parseBlock(indent: number): unknown {
		const line = this.peek();
		if (!line || line.indent < indent) return null;
		if (line.text === "-" || line.text.startsWith("- ")) return this.parseSeq(line.indent);
		if (splitKey(line.text)) return this.parseMap(line.indent);
		this.pos++;
		return this.parseInlineValue(line.text, line.indent);
	}

	private parseSeq(indent: number): unknown[] {
		const out: unknown[] = [];
		for (;;) {
			const line = this.peek();
			if (!line || line.indent !== indent || !(line.text === "-" || line.text.startsWith("- "))) break;
			const rest = line.text === "-" ? "" : line.text.slice(2).trimStart();
			if (rest === "") {
				this.pos++;
				const next = this.peek();
				out.push(next && next.indent > indent ? this.parseBlock(next.indent) : null);
				continue;
			}
			const childIndent = indent + (line.text.length - rest.length);
			if (rest === "-" || rest.startsWith("- ") || (splitKey(rest) && !/^[[{"']/.test(rest))) {
				// "- key: value" or "- - x": the item is a block starting on this line, one column in.
				this.raw[this.pos] = " ".repeat(childIndent) + rest;
				out.push(this.parseBlock(childIndent));
				continue;
			}
			this.pos++;
			out.push(this.parseInlineValue(rest, indent));
		}
		return out;
	}

	private parseMap(indent: number): Record<string, unknown> {
		const out: Record<string, unknown> = {};
		for (;;) {
			const line = this.peek();
			if (!line || line.indent !== indent) {
				if (line && line.indent > indent)
					throw new YamlError(`mapping values are not allowed here (line ${line.no + 1})`);
				break;
			}
			const kv = splitKey(line.text);
			if (!kv) throw new YamlError(`could not find expected ':' (line ${line.no + 1})`);
			this.pos++;
			const [key, rest] = kv;
			if (rest === "") {
				const next = this.peek();
				if (next && next.indent > indent) out[key] = this.parseBlock(next.indent);
				else if (next && next.indent === indent && (next.text === "-" || next.text.startsWith("- ")))
					out[key] = this.parseSeq(indent);
				else out[key] = null;
			} else out[key] = this.parseInlineValue(rest, indent);
		}
		return out;
	}

	/** A value that starts on the current (already consumed) line. */
	private parseInlineValue(text: string, parentIndent: number): unknown {
		const block = /^([|>])([-+]?)\d*$/.exec(text);
		if (block) return this.parseBlockScalar(block[1] === ">", block[2], parentIndent);
		return parseFlowScalar(text);
	}

	private parseBlockScalar(folded: boolean, chomp: string, parentIndent: number): string {
		const lines: string[] = [];
		let blockIndent = -1;
		while (this.pos < this.raw.length) {
			const rawLine = this.raw[this.pos];
			if (rawLine.trim() === "") {
				lines.push("");
				this.pos++;
				continue;
			}
			const ind = rawLine.length - rawLine.trimStart().length;
			if (ind <= parentIndent) break;
			if (blockIndent < 0) blockIndent = ind;
			if (ind < blockIndent) break;
			lines.push(rawLine.slice(blockIndent));
			this.pos++;
		}
		let trailing = 0;
		while (lines.length && lines[lines.length - 1] === "") {
			lines.pop();
			trailing++;
		}
		let body = folded ? foldLines(lines) : lines.join("\n");
		if (chomp === "-") return body;
		body += "\n";
		if (chomp === "+") body += "\n".repeat(trailing);
		return body;
	}
}

function foldLines(lines: string[]): string {
	let out = "";
	for (let i = 0; i < lines.length; i++) {
		const l = lines[i];
		if (i === 0) out = l;
		else if (l === "" || lines[i - 1] === "" || /^\s/.test(l)) out += "\n" + l;
		else out += " " + l;
	}
	return out;
}

/** Split "key: value" / "key:" (key may be quoted); null if the line is not a mapping entry. */
function splitKey(text: string): [string, string] | null {
	if (text.startsWith('"') || text.startsWith("'")) {
		const q = text[0];
		let i = 1;
		for (; i < text.length; i++) {
			if (text[i] === "\\" && q === '"') i++;
			else if (text[i] === q) {
				if (q === "'" && text[i + 1] === "'") i++;
				else break;
			}
		}
		const after = text.slice(i + 1);
		const m = /^\s*:(\s+|$)/.exec(after);
		if (!m) return null;
		return [String(parseFlowScalar(text.slice(0, i + 1))), after.slice(m[0].length).trim()];
	}
	if (/^[[{]/.test(text)) return null;
	const m = /^(.*?):(\s+|$)/.exec(text);
	if (!m || m[1].trim() === "") return null;
	return [m[1].trim(), text.slice(m[0].length).trim()];
}

/** Quoted scalars, flow collections and plain scalars on one line. */
export function parseFlowScalar(text: string): unknown {
	const p = new FlowParser(text.trim());
	const v = p.value(true);
	p.skipWs();
	if (!p.done()) throw new YamlError(`unexpected characters after value: ${JSON.stringify(text)}`);
	return v;
}

class FlowParser {
	i = 0;
	constructor(private readonly s: string) {}
	done() {
		return this.i >= this.s.length;
	}
	skipWs() {
		while (this.i < this.s.length && /\s/.test(this.s[this.i])) this.i++;
	}
	value(top: boolean): unknown {
		this.skipWs();
		const c = this.s[this.i];
		if (c === "[") return this.seq();
		if (c === "{") return this.map();
		if (c === '"') return this.dquoted();
		if (c === "'") return this.squoted();
		return this.plain(top);
	}
	private seq(): unknown[] {
		this.i++;
		const out: unknown[] = [];
		for (;;) {
			this.skipWs();
			if (this.s[this.i] === "]") {
				this.i++;
				return out;
			}
			out.push(this.value(false));
			this.skipWs();
			if (this.s[this.i] === ",") this.i++;
			else if (this.s[this.i] !== "]") throw new YamlError("expected ',' or ']' in flow sequence");
		}
	}
	private map(): Record<string, unknown> {
		this.i++;
		const out: Record<string, unknown> = {};
		for (;;) {
			this.skipWs();
			if (this.s[this.i] === "}") {
				this.i++;
				return out;
			}
			const key = this.value(false);
			this.skipWs();
			let val: unknown = null;
			if (this.s[this.i] === ":") {
				this.i++;
				val = this.value(false);
			}
			out[String(key)] = val;
			this.skipWs();
			if (this.s[this.i] === ",") this.i++;
			else if (this.s[this.i] !== "}") throw new YamlError("expected ',' or '}' in flow mapping");
		}
	}
	private dquoted(): string {
		const start = this.i;
		this.i++;
		while (this.i < this.s.length && this.s[this.i] !== '"') {
			if (this.s[this.i] === "\\") this.i++;
			this.i++;
		}
		if (this.i >= this.s.length) throw new YamlError("unterminated double-quoted scalar");
		this.i++;
		const body = this.s.slice(start, this.i);
		try {
			return JSON.parse(body.replace(/\\x([0-9a-fA-F]{2})/g, "\\u00$1").replace(/\\'/g, "'"));
		} catch {
			throw new YamlError(`bad escape in ${body}`);
		}
	}
	private squoted(): string {
		this.i++;
		let out = "";
		for (;;) {
			if (this.i >= this.s.length) throw new YamlError("unterminated single-quoted scalar");
			const c = this.s[this.i++];
			if (c === "'") {
				if (this.s[this.i] === "'") {
					out += "'";
					this.i++;
				} else return out;
			} else out += c;
		}
	}
	private plain(top: boolean): unknown {
		const start = this.i;
		while (this.i < this.s.length) {
			const c = this.s[this.i];
			if (!top && (c === "," || c === "]" || c === "}")) break;
			if (!top && c === ":" && (this.i + 1 >= this.s.length || /[\s,\]}]/.test(this.s[this.i + 1]))) break;
			this.i++;
		}
		return resolvePlain(this.s.slice(start, this.i).trim());
	}
}

export function parseYaml(text: string): unknown {
	return new Parser(text.replace(/\r\n?/g, "\n").split("\n")).parseDocument();
}

// ------------------------------------------------------------------ dump

const SPECIAL_START = /^[-?:,[\]{}#&*!|>'"%@`\s]/;

function needsQuotes(s: string): boolean {
	if (s === "") return true;
	if (resolvePlain(s) !== s) return true;
	if (SPECIAL_START.test(s) || /\s$/.test(s)) return true;
	if (/: |:$| #/.test(s)) return true;
	return false;
}

function dumpScalar(v: unknown): string {
	if (v === null || v === undefined) return "null";
	// PyYAML's datetime: "YYYY-MM-DD HH:MM:SS.ffffff", unquoted.
	if (v instanceof Date) return `${v.toISOString().slice(0, 19).replace("T", " ")}.${v.toISOString().slice(20, 23)}000`;
	if (typeof v === "boolean") return v ? "true" : "false";
	if (typeof v === "number") {
		if (Number.isNaN(v)) return ".nan";
		if (!Number.isFinite(v)) return v > 0 ? ".inf" : "-.inf";
		return String(v);
	}
	const s = String(v);
	if (/[\n\r\t\u0000-\u001f\u007f]/.test(s)) return JSON.stringify(s);
	if (needsQuotes(s)) return `'${s.replace(/'/g, "''")}'`;
	return s;
}

function isCollection(v: unknown): v is Record<string, unknown> | unknown[] {
	return typeof v === "object" && v !== null && !(v instanceof Date);
}

function isEmptyCollection(v: Record<string, unknown> | unknown[]): boolean {
	return Array.isArray(v) ? v.length === 0 : Object.keys(v).length === 0;
}

function dumpNode(v: unknown, indent: number, out: string[], firstPrefix: string | null): void {
	const pad = " ".repeat(indent);
	let prefix = firstPrefix;
	const lead = () => {
		const p = prefix ?? pad;
		prefix = null;
		return p;
	};
	if (!isCollection(v) || isEmptyCollection(v)) {
		out.push(lead() + (isCollection(v) ? (Array.isArray(v) ? "[]" : "{}") : dumpScalar(v)));
		return;
	}
	if (Array.isArray(v)) {
		for (const item of v) {
			const p = lead() + "- ";
			if (isCollection(item) && !isEmptyCollection(item)) dumpNode(item, indent + 2, out, p);
			else out.push(p + (isCollection(item) ? (Array.isArray(item) ? "[]" : "{}") : dumpScalar(item)));
		}
		return;
	}
	for (const key of Object.keys(v).sort()) {
		const val = (v as Record<string, unknown>)[key];
		if (val === undefined) continue;
		const k = dumpScalar(key);
		if (isCollection(val) && !isEmptyCollection(val)) {
			out.push(`${lead()}${k}:`);
			// PyYAML writes sequences inside a mapping without extra indentation.
			dumpNode(val, Array.isArray(val) ? indent : indent + 2, out, null);
		} else out.push(`${lead()}${k}: ${isCollection(val) ? (Array.isArray(val) ? "[]" : "{}") : dumpScalar(val)}`);
	}
}

/** PyYAML `safe_dump(obj, default_flow_style=False)`. */
export function dumpYaml(v: unknown): string {
	const out: string[] = [];
	dumpNode(v, 0, out, null);
	if (!isCollection(v) || isEmptyCollection(v)) return `${out[0]}\n${isCollection(v) ? "" : "...\n"}`;
	return out.join("\n") + "\n";
}
