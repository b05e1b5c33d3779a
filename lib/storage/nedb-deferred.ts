/**
 * A deferred field of an embedded (NeDB) collection: the one large field its lists never show (a host's grain,
 * three quarters of its line), left in the file at a load and parsed the first time it is read. The load then
 * parses each record without it (at 50,000 hosts, in a bare process: 2.3 s of parsing down to 0.8 s), and a page
 * of a list, which never reads it, costs what it did.
 *
 * How a line is cut without parsing it: the writer puts the deferred field last (serializeDeferred), so a line is
 * `{...rest,"grain":VALUE}`. At load, the first `,"grain":` of the line is where the rest ends if `{...rest}`
 * parses: JSON.stringify escapes every `"` inside a string, so the sequence never occurs inside one, and a key
 * `"grain"` nested deeper than the record's own would leave `{...rest}` with an unclosed object or list, which
 * does not parse; the line is then parsed whole. Lines written before the field was deferred hold it anywhere:
 * the writer puts a marker line first when it rewrites a file (DEFERRED_MARKER, a line NeDB's own loader ignores),
 * and only the lines of a file with the marker are cut. A file without it is parsed whole and rewritten once.
 *
 * Where the field lies is kept (its offsets in the file), not its bytes: the file stays open until every field
 * loaded from it is read. NeDB never changes a file in place (it appends, and a rewrite renames a new file over
 * it), so the open file keeps the bytes of the load even after a rewrite.
 *
 * A loaded record holds the field as an accessor (one getter and setter for every record, so records keep one
 * hidden class): reading it reads and parses the bytes once, revives NeDB's dates and shares strings as a load does
 * (the caller's `settle`), and keeps the value; assigning it makes it a plain field. NeDB's copies (`for...in`),
 * JSON.stringify and the matcher read it through the getter, so every read means what it meant. Once the process
 * has started, the rest are read in the background (`hydrateSome`, a few milliseconds per turn of the event loop),
 * so the process soon holds what it held when the load parsed everything, and the file is closed.
 */

import fs from "node:fs";

/** The first line of a file whose deferred field is written last on every line: `{"$$deferred":"<field>"}`. */
export const DEFERRED_MARKER = "$$deferred";

/** The file a load read, kept open while records loaded from it hold their field as its bytes. */
class Source {
	/** Records of this load still pending, and the load itself until it ends. */
	waiting = 1;
	constructor(readonly fd: number) {}
	read(start: number, end: number, into?: Buffer): Buffer {
		const bytes = into && into.length >= end - start ? into.subarray(0, end - start) : Buffer.allocUnsafe(end - start);
		let done = 0;
		while (done < bytes.length) {
			const n = fs.readSync(this.fd, bytes, done, bytes.length - done, start + done);
			if (n === 0) throw new Error("the file ended before the field's bytes");
			done += n;
		}
		return bytes;
	}
	/** One record of the load was parsed: the file is closed after the last. */
	settled(): void {
		if (--this.waiting === 0) fs.closeSync(this.fd);
	}
}

/** A record's field still in its file: bytes [start, end) of the source. */
export class Pending {
	constructor(
		readonly source: Source,
		readonly start: number,
		readonly end: number,
	) {}
	text(): string {
		return this.source.read(this.start, this.end).toString("utf8");
	}
}

/** Where a record keeps its deferred field: the Pending bytes, then the parsed value. Not enumerable, so never copied or written. */
const SLOT = Symbol("deferred field");

type Doc = Record<string, unknown>;
type Slotted = Doc & { [SLOT]?: unknown };

/** How much of the file the background pass reads at once. */
const BATCH_BYTES = 1 << 18;

export class DeferredField {
	/** The field as the line holds it: `,"<field>":`. */
	readonly key: Buffer;
	/** Records parsed from their bytes so far (tests, the benchmark). */
	hydrated = 0;
	/** Loaded records whose field is still in the file (the gauge `fleet_store_deferred_pending`). */
	unread = 0;
	/** Records whose bytes could not be read or parsed (the value is then null; a disk's fault, never a write of fleet-ctl). */
	unreadable = 0;
	private source: Source | null = null;
	/** Records loaded with their field pending, in file order, for the background pass. */
	private pending: Slotted[] = [];
	private next = 0;
	private readonly accessor: PropertyDescriptor;

	constructor(
		readonly field: string,
		/** Makes a parsed value as a loaded record holds it (NeDB's dates revived, strings shared). */
		private readonly settle: (value: unknown, record: Doc) => unknown,
	) {
		this.key = Buffer.from(`,${JSON.stringify(field)}:`);
		const self = this;
		this.accessor = {
			enumerable: true,
			configurable: true,
			get(this: Slotted) {
				const slot = this[SLOT];
				return slot instanceof Pending ? self.hydrate(this, slot) : slot;
			},
			set(this: Slotted, value: unknown) {
				const slot = this[SLOT];
				Object.defineProperty(this, SLOT, { value: undefined });
				if (slot instanceof Pending) {
					self.unread--;
					slot.source.settled();
				}
				Object.defineProperty(this, field, { value, writable: true, enumerable: true, configurable: true });
			},
		};
	}

	/**
	 * A load of `file` starts: lines cut from now on keep their field in it. Fields a previous load left pending
	 * are parsed first (their file stays open until then).
	 */
	open(file: string): void {
		this.hydrateSome(Infinity);
		this.source = new Source(fs.openSync(file, "r"));
	}

	/**
	 * The load has ended with these records (its file is closed once no record of it is pending): records of its
	 * lines that later lines superseded or deleted are not pending any more.
	 */
	loaded(records: Doc[] = []): void {
		const source = this.source;
		this.source = null;
		if (!source) return;
		const loadedHere = (records as Slotted[]).filter(r => {
			const slot = r[SLOT];
			return slot instanceof Pending && slot.source === source;
		});
		const attached = this.pending.length;
		source.waiting -= attached - loadedHere.length;
		this.unread -= attached - loadedHere.length;
		this.pending = loadedHere;
		this.next = 0;
		source.settled();
	}

	/**
	 * The line `bytes[from, to)`, which starts at `offset` in the file, whose field's key starts at `at`, cut: its
	 * record without the field (`doc`) and where the field is in the file (`field`, for `attach`); null when the rest
	 * does not parse alone (the line is then parsed whole by the caller).
	 */
	cut(bytes: Buffer, from: number, at: number, to: number, offset: number): { doc: Doc; field: Pending } | null {
		if (!this.source) return null;
		const rest = bytes.toString("utf8", from, at) + "}";
		// JSON that parses and ends with `}` is an object: no other check of what it parsed to.
		let doc: Doc;
		try {
			doc = JSON.parse(rest) as Doc;
		} catch {
			return null;
		}
		const start = offset + (at - from) + this.key.length;
		return { doc, field: new Pending(this.source, start, offset + (to - 1 - from)) };
	}

	/** Gives a cut record its field back, still in the file (read through the accessor: see the header). */
	attach(doc: Doc, field: Pending): void {
		const record = doc as Slotted;
		Object.defineProperty(record, SLOT, { value: field, writable: true });
		Object.defineProperty(record, this.field, this.accessor);
		field.source.waiting++;
		this.unread++;
		this.pending.push(record);
	}

	/**
	 * The field's JSON as the file holds it when it is still pending (a rewrite copies it as it is); undefined otherwise,
	 * and when its bytes cannot be read (the writer then reads the field, which is null).
	 */
	pendingText(record: Doc): string | undefined {
		const slot = (record as Slotted)[SLOT];
		if (!(slot instanceof Pending)) return undefined;
		try {
			return slot.text();
		} catch {
			return undefined;
		}
	}

	/** Whether any loaded record still holds its field in the file. */
	get waiting(): boolean {
		return this.next < this.pending.length;
	}

	/**
	 * Parses the pending fields of the next records, in file order, for about `budgetMs` (the bytes of many records
	 * read at once); answers whether any are left.
	 */
	hydrateSome(budgetMs: number): boolean {
		const until = performance.now() + budgetMs;
		let buffer: Buffer | undefined;
		while (this.next < this.pending.length) {
			// The next records still pending whose bytes lie within BATCH_BYTES of the first's, read at once.
			const first = this.pending[this.next][SLOT];
			if (!(first instanceof Pending)) {
				this.next++;
				continue;
			}
			let last = this.next;
			let end = first.end;
			while (last + 1 < this.pending.length) {
				const slot = this.pending[last + 1][SLOT];
				if (slot instanceof Pending) {
					if (slot.source !== first.source || slot.end - first.start > BATCH_BYTES) break;
					end = Math.max(end, slot.end);
				}
				last++;
			}
			buffer ??= Buffer.allocUnsafe(BATCH_BYTES);
			let bytes: Buffer | null = null;
			try {
				bytes = first.source.read(first.start, end, buffer);
			} catch {
				// Read one by one instead: a record whose bytes cannot be read is then null (hydrate), the others as they are.
			}
			for (; this.next <= last; this.next++) {
				const record = this.pending[this.next];
				const slot = record[SLOT];
				if (slot instanceof Pending)
					this.hydrate(record, slot, bytes?.toString("utf8", slot.start - first.start, slot.end - first.start));
			}
			if (performance.now() >= until) break;
		}
		if (this.next < this.pending.length) return true;
		this.pending = [];
		this.next = 0;
		return false;
	}

	/** Parses a record's field (`text`, or read from the file now) and keeps it; null if it cannot be read or parsed. */
	private hydrate(record: Slotted, slot: Pending, text?: string): unknown {
		let value: unknown = null;
		try {
			value = this.settle(JSON.parse(text ?? slot.text()), record);
		} catch {
			this.unreadable++;
		}
		this.hydrated++;
		this.unread--;
		Object.defineProperty(record, SLOT, { value });
		slot.source.settled();
		return value;
	}
}

/**
 * `doc`'s line with its deferred `field` written last (see the header), each part written by `write` (JSON.stringify
 * with NeDB's dates); a field still pending is copied as the file held it, never parsed to be written again.
 */
export function serializeDeferred(
	doc: Doc,
	deferred: DeferredField,
	write: (value: unknown) => string | undefined,
): string {
	const field = deferred.field;
	if (!Object.hasOwn(doc, field)) return write(doc) as string;
	const others: Doc = {};
	for (const key of Object.keys(doc)) {
		if (key === field) continue;
		// defineProperty: a key `__proto__` stays a key (an assignment would set the copy's prototype).
		if (key === "__proto__")
			Object.defineProperty(others, key, { value: doc[key], enumerable: true, writable: true, configurable: true });
		else others[key] = doc[key];
	}
	const head = write(others) as string;
	const text = deferred.pendingText(doc) ?? write(doc[field]);
	// A value JSON cannot write (undefined, a function) is left out, as JSON.stringify leaves it out of a record.
	if (text === undefined) return head;
	return `${head.slice(0, -1)}${head.length > 2 ? "," : ""}${JSON.stringify(field)}:${text}}`;
}
