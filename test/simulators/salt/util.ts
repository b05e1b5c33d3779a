/**
 * Small helpers shared by the salt-api simulator: a seeded PRNG, Salt's jid and `_stamp` formats,
 * Python's fnmatch and re.match semantics, and Python's json.dumps layout.
 */
import { createHash, randomBytes } from "node:crypto";

// ------------------------------------------------------------------ deterministic randomness

/** 32-bit string hash (xmur3-like), used to seed the PRNG and to derive per-minion values. */
export function hashString(s: string): number {
	let h = 1779033703 ^ s.length;
	for (let i = 0; i < s.length; i++) {
		h = Math.imul(h ^ s.charCodeAt(i), 3432918353);
		h = (h << 13) | (h >>> 19);
	}
	h = Math.imul(h ^ (h >>> 16), 2246822507);
	h = Math.imul(h ^ (h >>> 13), 3266489909);
	return (h ^= h >>> 16) >>> 0;
}

/** mulberry32: small, fast, good enough for realistic-looking test data. */
export class Prng {
	private state: number;
	constructor(seed: string | number) {
		this.state = typeof seed === "number" ? seed >>> 0 : hashString(seed);
	}
	/** Uniform in [0, 1). */
	next(): number {
		let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	}
	int(min: number, max: number): number {
		return min + Math.floor(this.next() * (max - min + 1));
	}
	pick<T>(items: readonly T[]): T {
		return items[Math.floor(this.next() * items.length)];
	}
	chance(p: number): boolean {
		return this.next() < p;
	}
	hex(bytes: number): string {
		let out = "";
		for (let i = 0; i < bytes; i++) out += this.int(0, 255).toString(16).padStart(2, "0");
		return out;
	}
}

export function randomHex(bytes: number): string {
	return randomBytes(bytes).toString("hex");
}

/** A key fingerprint as Salt prints it: sha256 digest as 32 lower-case hex pairs joined by ':'. */
export function fingerprintFrom(hex64: string): string {
	return hex64.match(/../g)!.join(":");
}

/** Public keys by their fingerprint: what a minion presents in salt/auth (`pub`) for the fingerprint key.finger shows. */
const PUBLIC_KEYS = new Map<string, string>();

/**
 * A stand-in PEM public key made from `seedHex`, and its fingerprint as Salt computes it (salt.utils.crypt
 * pem_finger: sha256 of the lines between BEGIN and END, each with its newline), so that a client can tell the
 * key of a salt/auth event from the fingerprints of key.finger as it can with a real master.
 */
export function keyPair(seedHex: string): { pub: string; fingerprint: string } {
	const pub = keyPairPem(seedHex);
	const lines = pub.split("\n").slice(1, -1);
	const fingerprint = fingerprintFrom(
		createHash("sha256")
			.update(lines.map(l => `${l}\n`).join(""))
			.digest("hex"),
	);
	PUBLIC_KEYS.set(fingerprint, pub);
	return { pub, fingerprint };
}

/** The public key of a fingerprint keyPair made; for one given by hand, a stand-in whose bytes derive from it. */
export function publicKeyOf(fingerprint: string): string {
	return PUBLIC_KEYS.get(fingerprint) ?? keyPairPem(fingerprint.replace(/:/g, ""));
}

function keyPairPem(seedHex: string): string {
	const b64 = Buffer.from(seedHex.repeat(4), "hex").toString("base64");
	return `-----BEGIN PUBLIC KEY-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----`;
}

// ------------------------------------------------------------------ time: jids and stamps

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const p2 = (n: number) => String(n).padStart(2, "0");

/** Microseconds since the epoch, from the wall clock with sub-millisecond precision. */
let hrBase: { wallUs: number; hr: bigint } | null = null;
export function nowMicros(): number {
	if (!hrBase) hrBase = { wallUs: Date.now() * 1000, hr: process.hrtime.bigint() };
	const elapsedUs = Number((process.hrtime.bigint() - hrBase.hr) / 1000n);
	const us = hrBase.wallUs + elapsedUs;
	// Resynchronise with the wall clock if it drifted (suspend, NTP step) by more than 50 ms.
	if (Math.abs(us - Date.now() * 1000) > 50_000) {
		hrBase = null;
		return nowMicros();
	}
	return us;
}

function utcParts(us: number) {
	const d = new Date(Math.floor(us / 1000));
	return {
		y: d.getUTCFullYear(),
		mo: d.getUTCMonth(),
		d: d.getUTCDate(),
		h: d.getUTCHours(),
		mi: d.getUTCMinutes(),
		s: d.getUTCSeconds(),
		micro: ((us % 1_000_000) + 1_000_000) % 1_000_000,
	};
}

/** `salt.utils.jid.gen_jid`: `%Y%m%d%H%M%S%f` in UTC, strictly increasing within the process. */
export class JidClock {
	private last = 0;
	next(): string {
		let us = nowMicros();
		if (us <= this.last) us = this.last + 1;
		this.last = us;
		return formatJid(us);
	}
}

export function formatJid(us: number): string {
	const t = utcParts(us);
	return `${t.y}${p2(t.mo + 1)}${p2(t.d)}${p2(t.h)}${p2(t.mi)}${p2(t.s)}${String(t.micro).padStart(6, "0")}`;
}

/** `salt.utils.jid.is_jid`. */
export function isJid(jid: unknown): jid is string {
	if (typeof jid !== "string") return false;
	if (jid.length < 20 || (jid.length > 20 && (jid.length <= 21 || jid[20] !== "_"))) return false;
	return /^\d{20}$/.test(jid.slice(0, 20));
}

/** `salt.utils.jid.jid_to_time`: "2024, May 01 12:00:00.123456", or "" for a malformed jid. */
export function jidToTime(jid: string): string {
	if (!isJid(jid)) return "";
	const j = jid.slice(0, 20);
	const month = Number(j.slice(4, 6));
	if (month < 1 || month > 12) return "";
	return `${j.slice(0, 4)}, ${MONTHS[month - 1]} ${j.slice(6, 8)} ${j.slice(8, 10)}:${j.slice(10, 12)}:${j.slice(12, 14)}.${j.slice(14, 20)}`;
}

/** Python's `datetime.utcnow().isoformat()` (the event `_stamp`): no zone, fraction omitted when 0. */
export function isoStamp(us: number = nowMicros()): string {
	const t = utcParts(us);
	const base = `${t.y}-${p2(t.mo + 1)}-${p2(t.d)}T${p2(t.h)}:${p2(t.mi)}:${p2(t.s)}`;
	return t.micro ? `${base}.${String(t.micro).padStart(6, "0")}` : base;
}

/** Time of day with microseconds, as a state step's `start_time` ("12:00:00.123456"). */
export function timeOfDay(us: number = nowMicros()): string {
	const t = utcParts(us);
	return `${p2(t.h)}:${p2(t.mi)}:${p2(t.s)}.${String(t.micro).padStart(6, "0")}`;
}

/** "YYYY-MM-DD HH:MM:SS+00:00", the format of the hosts' `ctl` grain dates. */
export function grainDate(ms: number): string {
	const d = new Date(ms);
	return `${d.getUTCFullYear()}-${p2(d.getUTCMonth() + 1)}-${p2(d.getUTCDate())} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}+00:00`;
}

// ------------------------------------------------------------------ Python matching semantics

const globCache = new Map<string, RegExp>();

/** Python `fnmatch.fnmatch` on POSIX (case-sensitive): `*`, `?`, `[seq]`, `[!seq]`. */
export function fnmatch(name: string, pattern: string): boolean {
	let re = globCache.get(pattern);
	if (!re) {
		re = new RegExp(`^${translateGlob(pattern)}$`, "s");
		if (globCache.size > 5000) globCache.clear();
		globCache.set(pattern, re);
	}
	return re.test(name);
}

function translateGlob(pat: string): string {
	let out = "";
	for (let i = 0; i < pat.length; i++) {
		const c = pat[i];
		if (c === "*") out += ".*";
		else if (c === "?") out += ".";
		else if (c === "[") {
			let j = i + 1;
			if (pat[j] === "!") j++;
			if (pat[j] === "]") j++;
			while (j < pat.length && pat[j] !== "]") j++;
			if (j >= pat.length) out += "\\[";
			else {
				let stuff = pat.slice(i + 1, j).replace(/\\/g, "\\\\");
				if (stuff.startsWith("!")) stuff = "^" + stuff.slice(1);
				else if (stuff.startsWith("^")) stuff = "\\" + stuff;
				out += `[${stuff}]`;
				i = j;
			}
		} else out += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
	}
	return out;
}

const reCache = new Map<string, RegExp | null>();

/**
 * Python `re.match(expr, s)`: anchored at the start only. Python-only syntax for named groups is
 * translated; an expression JavaScript cannot compile matches nothing (Salt logs and matches nothing).
 */
export function pyReMatch(expr: string, s: string, flags = ""): boolean {
	const key = `${flags}\u0000${expr}`;
	let re = reCache.get(key);
	if (re === undefined) {
		try {
			re = new RegExp(expr.replace(/\(\?P</g, "(?<").replace(/\(\?P=(\w+)\)/g, "\\k<$1>"), `y${flags}`);
		} catch {
			re = null;
		}
		if (reCache.size > 5000) reCache.clear();
		reCache.set(key, re);
	}
	if (!re) return false;
	re.lastIndex = 0;
	return re.test(s);
}

// ------------------------------------------------------------------ Python-style serialisation

/** Python's `TypeError: Object of type <bytes|datetime> is not JSON serializable` (values only Python has). */
export class NotJsonSerializable extends TypeError {
	constructor(readonly pyType: "bytes" | "datetime") {
		super(`Object of type ${pyType} is not JSON serializable`);
	}
}

/**
 * `json.dumps(obj)` as Salt calls it (`salt.utils.json.dumps`, ensure_ascii=False): the default
 * separators are ", " and ": ". Key order is insertion order, like a Python dict.
 */
export function pyJson(v: unknown): string {
	if (v === null || v === undefined) return "null";
	if (v instanceof Uint8Array || v instanceof Date)
		throw new NotJsonSerializable(v instanceof Date ? "datetime" : "bytes");
	switch (typeof v) {
		case "string":
			return JSON.stringify(v);
		case "number":
			return Number.isFinite(v) ? String(v) : Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
		case "boolean":
			return v ? "true" : "false";
		case "bigint":
			return v.toString();
		case "object": {
			if (Array.isArray(v)) {
				if (v.length === 0) return "[]";
				let out = "[";
				for (let i = 0; i < v.length; i++) out += (i ? ", " : "") + pyJson(v[i]);
				return out + "]";
			}
			let out = "{";
			let first = true;
			for (const k in v as Record<string, unknown>) {
				const val = (v as Record<string, unknown>)[k];
				if (val === undefined) continue;
				out += (first ? "" : ", ") + JSON.stringify(k) + ": " + pyJson(val);
				first = false;
			}
			return out + "}";
		}
		default:
			return "null";
	}
}

/** Python `str()` of a JSON-like value (Salt's `cmd.run`-style string returns, `grains` matching). */
export function pyStr(v: unknown): string {
	if (v === null || v === undefined) return "None";
	if (typeof v === "boolean") return v ? "True" : "False";
	if (typeof v === "string") return v;
	if (typeof v === "number") return String(v);
	if (Array.isArray(v)) return `[${v.map(pyRepr).join(", ")}]`;
	if (typeof v === "object") {
		return `{${Object.entries(v as Record<string, unknown>)
			.map(([k, val]) => `${pyRepr(k)}: ${pyRepr(val)}`)
			.join(", ")}}`;
	}
	return String(v);
}

export function pyRepr(v: unknown): string {
	if (typeof v === "string") return `'${v.replace(/\\/g, "\\\\").replace(/'/g, "\\'").replace(/\n/g, "\\n")}'`;
	return pyStr(v);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
	return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Walk `a:b:c` through nested objects and lists (`salt.utils.data.traverse_dict_and_list`). */
export function traverse(data: unknown, key: string, dflt: unknown, delimiter = ":"): unknown {
	let cur: unknown = data;
	for (const part of key.split(delimiter)) {
		if (Array.isArray(cur)) {
			const idx = Number(part);
			if (Number.isInteger(idx) && idx >= 0 && idx < cur.length) cur = cur[idx];
			else {
				const hit = cur.find(el => isPlainObject(el) && part in el);
				if (!hit) return dflt;
				cur = (hit as Record<string, unknown>)[part];
			}
		} else if (isPlainObject(cur) && Object.hasOwn(cur, part)) cur = cur[part];
		else return dflt;
	}
	return cur;
}

export function httpDate(ms: number): string {
	return new Date(ms).toUTCString();
}
