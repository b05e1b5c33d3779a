/**
 * Principals and token families (docs/security.md, "Principals"): who a token acts for, and the tokens minted from a
 * token. A person's tokens belong to them (`principal` = their `subject`, `oidc:<sub>`); a token an admin makes is a
 * service account of its own (`token:<its id>`); a token minted from another (`POST /api/tokens/mine`) records its
 * parent (`owner`) and shares its principal. Revoking a token revokes its descendants, generation by generation.
 */
import { nowSeconds } from "../../lib/eve/dates";
import type { Doc, FindOptions, Store } from "../../lib/storage/store";

/** What the walks read of a record: its id. */
const IDS: FindOptions = { only: ["_id"] };

/** The principal of a service account: the token an admin made (or the bootstrap admin). */
export function servicePrincipal(id: string): string {
	return `token:${id}`;
}

/**
 * The principal of a token record: its own field, else (a record written before principals, or by an older replica)
 * found up its chain of parents: the first with a principal or a subject, else the service account of the chain's
 * first token. Each record is visited once, so a cycle (which no write makes) ends the walk.
 */
export async function resolvePrincipal(
	store: Store,
	doc: Doc,
	known: Map<string, string> = new Map(),
): Promise<string> {
	const seen = new Set<string>();
	let current: Doc | null = doc;
	let root = String(doc._id);
	while (current) {
		const id = String(current._id);
		if (current.principal) return current.principal as string;
		if (current.subject) return current.subject as string;
		const memo = known.get(id);
		if (memo) return memo;
		seen.add(id);
		root = id;
		const parent: string | undefined = current.owner;
		if (!parent || seen.has(parent)) break;
		// A parent no longer stored still names the family: its id is the service account's.
		root = parent;
		current = await store.findOne({ _id: parent });
	}
	return servicePrincipal(root);
}

/**
 * Calls `visit` with `roots`, then with each generation of tokens minted from the one before, once the visit of
 * that one is done. Each token is visited once: bounded by the collection, whatever the records say.
 */
async function eachGeneration(
	store: Store,
	roots: string[],
	visit: (generation: string[]) => Promise<void>,
): Promise<void> {
	const seen = new Set(roots);
	let generation = roots;
	while (generation.length) {
		await visit(generation);
		const children = await store.find({ owner: { $in: generation } }, IDS);
		generation = children.map(d => String(d._id)).filter(id => !seen.has(id));
		for (const id of generation) seen.add(id);
	}
}

/**
 * Revokes `ids` and every token minted from them, recursively: the roots first, then each generation found from
 * the one revoked before it, so that a token minted meanwhile from a token being revoked is found too (its maker
 * checks its parent after writing it: services/tokens/personal.ts). Revoked descendants are walked as well (a
 * record from before this rule may have live children under a revoked one). Answers the ids newly revoked.
 */
export async function revokeFamily(store: Store, ids: string[]): Promise<string[]> {
	const revoked: string[] = [];
	await eachGeneration(store, ids, async generation => {
		const live = await store.find({ _id: { $in: generation }, revoked: { $ne: true } }, IDS);
		if (!live.length) return;
		await store.updateMany({ _id: { $in: live.map(d => d._id) } }, { $set: { revoked: true, _updated: nowSeconds() } });
		revoked.push(...live.map(d => String(d._id)));
	});
	return revoked;
}

/** `id` and the tokens minted from it, at any depth, each once. */
export async function familyOf(store: Store, id: string): Promise<string[]> {
	const found: string[] = [];
	await eachGeneration(store, [id], async generation => void found.push(...generation));
	return found;
}

/**
 * The start's migration, on either store: every record without a principal gets one (resolvePrincipal), and the
 * live descendants of tokens revoked before revocation cascaded are revoked now (a session's sign-out excepted:
 * a person's tokens outlive the session they were made in). Answers how many records got a principal and the
 * tokens revoked; nothing when every record has its principal already.
 */
export async function migratePrincipals(store: Store): Promise<{ assigned: number; revoked: string[] }> {
	const missing = await store.find({ principal: { $exists: false } }, { only: ["_id", "owner", "subject"] });
	if (!missing.length) return { assigned: 0, revoked: [] };
	const known = new Map<string, string>();
	const byPrincipal = new Map<string, string[]>();
	for (const doc of missing) {
		const principal = await resolvePrincipal(store, doc, known);
		known.set(String(doc._id), principal);
		const ids = byPrincipal.get(principal);
		if (ids) ids.push(String(doc._id));
		else byPrincipal.set(principal, [String(doc._id)]);
	}
	for (const [principal, ids] of byPrincipal) await store.updateMany({ _id: { $in: ids } }, { $set: { principal } });
	const revokedBefore = await store.find({ revoked: true, session: { $ne: true } }, IDS);
	const revoked = revokedBefore.length
		? await revokeFamily(
				store,
				revokedBefore.map(d => String(d._id)),
			)
		: [];
	return { assigned: missing.length, revoked };
}
