/**
 * NeDB's tree indexes (the _id index and the ordered fields', such as a host's `_updated` and `ip`) built from a
 * whole file's records at once. NeDB builds them at load record by record, each an AVL insert with its
 * rebalancing: at 50,000 hosts, three trees took 0.35 s of the start. Here the records are sorted by key
 * (NeDB's own order, `compareThings`; a stable sort, so records of one key keep their file order, as NeDB's
 * inserts leave them) and the tree is made balanced from the sorted list in one pass: the same tree NeDB
 * would hold, of NeDB's own node class, which NeDB then keeps current as before.
 *
 * Whatever this pass does not make exactly as NeDB would is left to NeDB: a record whose key is a list (a
 * key per element), and a unique index with a repeated key (NeDB's own insert throws its own error, and the
 * load fails as NeDB's does).
 *
 * And the removal of one record from a key many records share (`quickRemovals`), which every update of a record
 * makes in every index of its collection: NeDB copies the key's whole list of records but that one into a new
 * list; here the record is spliced out of the list in place (tasks that ran: thousands under `next: null`).
 */
import type { Doc } from "./store";
import * as model from "./nedb-internals";

/** A node of NeDB's AVL tree (@seald-io/binary-search-tree): its key, the records holding it, its children. */
export interface TreeNode {
	key?: unknown;
	data: Doc[];
	left: TreeNode | null;
	right: TreeNode | null;
	parent: TreeNode | null;
	height?: number;
	createSimilar(options: { key?: unknown; parent?: TreeNode | null }): TreeNode;
	compareKeys(a: unknown, b: unknown): number;
}

/** The parts of NeDB's Index this module uses. */
export interface TreeIndex {
	fieldName: string;
	unique: boolean;
	sparse: boolean;
	/** The AVL tree: `tree.tree` is its root node (an empty node, with no key, when the tree is empty). */
	tree: { tree: TreeNode };
	reset(docs?: Doc[]): void;
	remove(doc: Doc | Doc[]): void;
}

/** Whether `index` is one of NeDB's tree indexes (not a bucket index, which has no tree). */
export function isTreeIndex(index: unknown): index is TreeIndex {
	const tree = (index as { tree?: { tree?: unknown } } | null)?.tree?.tree;
	return tree != null && typeof (tree as TreeNode).createSimilar === "function";
}

/** A key and its records, in the order they come in. */
interface Run {
	key: unknown;
	docs: Doc[];
}

/** The records of `docs` grouped by key in NeDB's order; null where NeDB's own inserts must decide. */
function runsOf(index: TreeIndex, docs: Doc[]): Run[] | null {
	const keyed: Array<{ key: unknown; doc: Doc }> = [];
	for (const doc of docs) {
		const key = model.getDotValue(doc, index.fieldName);
		if (key === undefined && index.sparse) continue;
		if (Array.isArray(key)) return null;
		keyed.push({ key, doc });
	}
	keyed.sort((a, b) => model.compareThings(a.key, b.key));
	const runs: Run[] = [];
	for (const { key, doc } of keyed) {
		const last = runs[runs.length - 1];
		if (last !== undefined && model.compareThings(last.key, key) === 0) {
			if (index.unique) return null;
			last.docs.push(doc);
		} else runs.push({ key, docs: [doc] });
	}
	return runs;
}

/**
 * Empties `index` and fills it with `docs`, as NeDB's `index.reset(docs)` does. The tree is built balanced
 * (every node's subtrees differ in height by at most one), so it is an AVL tree as NeDB's inserts leave it.
 */
export function resetTree(index: TreeIndex, docs: Doc[]): void {
	const runs = runsOf(index, docs);
	if (runs === null) {
		index.reset(docs);
		return;
	}
	index.reset();
	if (runs.length === 0) return;
	const empty = index.tree.tree;
	// Depth is log2 of the keys: no list of records can make it deep.
	const build = (lo: number, hi: number, parent: TreeNode | null): TreeNode | null => {
		if (lo > hi) return null;
		const mid = (lo + hi) >>> 1;
		const node = empty.createSimilar({ key: runs[mid].key, parent });
		node.data = runs[mid].docs;
		node.left = build(lo, mid - 1, node);
		node.right = build(mid + 1, hi, node);
		node.height = 1 + Math.max(node.left?.height ?? 0, node.right?.height ?? 0);
		return node;
	};
	index.tree.tree = build(0, runs.length - 1, null) as TreeNode;
}

const quick = new WeakSet<TreeIndex>();

/**
 * Makes `index` remove a record from a key other records share by splicing it out of the key's list, where NeDB's
 * tree builds a new list of all the others (@seald-io/binary-search-tree `delete(key, value)`): at thousands of
 * records under one key (every one-shot task that ran holds `next: null`), each update of one of them cost a copy of
 * the thousands. The result is NeDB's, list order included: the record's every occurrence (it has one) leaves the
 * list, the others keep their order, and a key left with no record keeps its node, as NeDB's leaves it. Everything
 * else (a key with one record, which removes the node; a key that is a list; a sparse index's missing key) is
 * NeDB's own removal. Idempotent.
 */
export function quickRemovals(index: TreeIndex): void {
	if (quick.has(index)) return;
	quick.add(index);
	const removeOne = index.remove.bind(index);
	index.remove = (doc: Doc | Doc[]) => {
		if (Array.isArray(doc)) {
			for (const d of doc) index.remove(d);
			return;
		}
		const key = model.getDotValue(doc, index.fieldName);
		if (Array.isArray(key) || (key === undefined && index.sparse)) return removeOne(doc);
		const node = nodeOf(index.tree.tree, key);
		if (node === null || node.data.length <= 1) return removeOne(doc);
		// NeDB's trees compare records by identity (indexes.js checkValueEquality: a === b), as indexOf does.
		for (let at = node.data.indexOf(doc); at >= 0; at = node.data.indexOf(doc, at)) node.data.splice(at, 1);
	};
}

/** The node holding `key`, found as NeDB's tree finds it (its own comparison); null when no node holds it. */
function nodeOf(root: TreeNode, key: unknown): TreeNode | null {
	if (!Object.hasOwn(root, "key")) return null;
	let node: TreeNode | null = root;
	while (node !== null) {
		const c = node.compareKeys(key, node.key);
		if (c === 0) return node;
		node = c < 0 ? node.left : node.right;
	}
	return null;
}
