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
 */
import type { Doc } from "./store";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const model = require("@seald-io/nedb/lib/model.js") as { getDotValue(doc: Doc, field: string): unknown; compareThings(a: unknown, b: unknown): number };

/** A node of NeDB's AVL tree (@seald-io/binary-search-tree): its key, the records holding it, its children. */
export interface TreeNode {
	key?: unknown;
	data: Doc[];
	left: TreeNode | null;
	right: TreeNode | null;
	parent: TreeNode | null;
	height?: number;
	createSimilar(options: { key?: unknown; parent?: TreeNode | null }): TreeNode;
}

/** The parts of NeDB's Index this pass uses. */
export interface TreeIndex {
	fieldName: string;
	unique: boolean;
	sparse: boolean;
	/** The AVL tree: `tree.tree` is its root node (an empty node, with no key, when the tree is empty). */
	tree: { tree: TreeNode };
	reset(docs?: Doc[]): void;
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
