/**
 * The floor of a start (part `curve`, bench/curve.ts): what any store of JSON lines pays to hold a hosts file in
 * memory, with nothing of fleet-ctl. A fresh Node process reads the file given as its argument, JSON.parse's each
 * line into a map by `_id` (the last line of an id wins, as NeDB reads it) and keeps the records until it exits.
 * The curve times it from spawn to exit, on the same file and the same machine, next to fleet-ctl's start: a
 * start-up goal above this floor plus the services' own start cannot be met here by any loader of this format.
 *
 * Prints one JSON line: {records, parseMs} (parseMs: the read and the parse alone, Node's own boot left out).
 */
import fs from "node:fs";

const file = process.argv[2];
if (!file) throw new Error("usage: node dist/bench/start-floor.js <hosts.db>");
const t0 = performance.now();
const records = new Map<unknown, unknown>();
let rest = "";
const take = (line: string) => {
	if (line === "") return;
	const doc = JSON.parse(line) as { _id?: unknown };
	if (doc._id !== undefined) records.set(doc._id, doc);
};
const stream = fs.createReadStream(file, { encoding: "utf8" });
stream.on("data", chunk => {
	const parts = (rest + String(chunk)).split("\n");
	rest = parts.pop() as string;
	for (const part of parts) take(part);
});
stream.on("end", () => {
	take(rest);
	process.stdout.write(`${JSON.stringify({ records: records.size, parseMs: performance.now() - t0 })}\n`);
});
