/**
 * Principals and token families on the embedded store (services/tokens/family.ts; docs/security.md, "Principals"):
 * who a record acts for, found up its chain of makers; revocation of a token with everything minted from it,
 * generation by generation, each token once; the start's migration of records from before principals. Each case
 * writes its records to a fresh in-memory NeDB store and reads them back: every expectation is a literal.
 */
import Datastore from "@seald-io/nedb";
import type { Doc, Store } from "../../lib/storage/store";
import { NedbStore, type NedbDatastore } from "../../lib/storage/nedb-store";
import {
	familyOf,
	migratePrincipals,
	resolvePrincipal,
	revokeFamily,
	servicePrincipal,
} from "../../services/tokens/family";

/** Ids as the store keeps them (24 hex digits): id("a1") is "a1" padded with zeros. */
const id = (short: string) => short.padEnd(24, "0");

async function storeWith(records: Doc[]): Promise<Store> {
	const db = new Datastore();
	await db.loadDatabaseAsync();
	const store = new NedbStore(db as unknown as NedbDatastore);
	if (records.length) await store.insertMany(records);
	return store;
}

/** A token record: `fields` over a live operator token made long ago. */
const token = (short: string, fields: Doc = {}): Doc => ({
	_id: id(short),
	name: short,
	role: "operator",
	revoked: false,
	_updated: new Date("2020-01-01T00:00:00Z"),
	...fields,
});

/** The ids of the revoked records, sorted. */
const revokedIds = async (store: Store) =>
	(await store.find({ revoked: true }, { only: ["_id"] })).map(d => String(d._id)).sort();

describe("the principal of a service account", () => {
	it("is token:<its id>", () => {
		expect(servicePrincipal("0123456789abcdef01234567")).toBe("token:0123456789abcdef01234567");
	});
});

describe("resolvePrincipal: who a record acts for", () => {
	it("is its own principal, else its subject, before anything up its chain", async () => {
		const store = await storeWith([token("b1", { principal: "token:elsewhere" })]);
		expect(
			await resolvePrincipal(store, token("a1", { principal: "oidc:ann", subject: "oidc:other", owner: id("b1") })),
		).toBe("oidc:ann");
		expect(await resolvePrincipal(store, token("a2", { subject: "oidc:bob", owner: id("b1") }))).toBe("oidc:bob");
	});

	it("is the service account of a token that has neither and no maker", async () => {
		expect(await resolvePrincipal(await storeWith([]), token("a1"))).toBe(`token:${id("a1")}`);
	});

	it("is found up the chain of makers: the first with a principal or a subject", async () => {
		const store = await storeWith([
			token("c1", { principal: "token:root" }),
			token("c2", { owner: id("c1") }),
			token("c3", { owner: id("c2") }),
			token("s1", { subject: "oidc:sue" }),
			token("s2", { owner: id("s1") }),
		]);
		expect(await resolvePrincipal(store, token("c4", { owner: id("c3") }))).toBe("token:root");
		expect(await resolvePrincipal(store, token("s3", { owner: id("s2") }))).toBe("oidc:sue");
	});

	it("is the service account of the chain's first token when none up the chain has one", async () => {
		const store = await storeWith([token("d1"), token("d2", { owner: id("d1") })]);
		expect(await resolvePrincipal(store, token("d3", { owner: id("d2") }))).toBe(`token:${id("d1")}`);
	});

	it("is named by a maker no longer stored: its id is the service account's", async () => {
		const store = await storeWith([token("e2", { owner: id("e1") })]);
		expect(await resolvePrincipal(store, token("e3", { owner: id("e2") }))).toBe(`token:${id("e1")}`);
	});

	it("takes what the migration already found for a record on the chain", async () => {
		const store = await storeWith([token("f1"), token("f2", { owner: id("f1") })]);
		const known = new Map([[id("f2"), "oidc:found-before"]]);
		expect(await resolvePrincipal(store, token("f3", { owner: id("f2") }), known)).toBe("oidc:found-before");
		expect(await resolvePrincipal(store, token("f3", { owner: id("f2") }))).toBe(`token:${id("f1")}`);
	});

	it("ends on a cycle of makers (which no write makes), naming a token of the cycle", async () => {
		const store = await storeWith([token("g1", { owner: id("g2") }), token("g2", { owner: id("g1") })]);
		expect([`token:${id("g1")}`, `token:${id("g2")}`]).toContain(
			await resolvePrincipal(store, token("g3", { owner: id("g1") })),
		);
		expect(await resolvePrincipal(store, token("g4", { owner: id("g4") }))).toBe(`token:${id("g4")}`);
	});
});

describe("revokeFamily: a token with everything minted from it", () => {
	it("revokes the roots and every generation below them, answering the ids newly revoked, generation by generation", async () => {
		const store = await storeWith([
			token("a1"),
			token("a2", { owner: id("a1") }),
			token("a3", { owner: id("a1") }),
			token("a4", { owner: id("a2") }),
			token("a5", { owner: id("a4") }),
			token("b1"),
			token("b2", { owner: id("b1") }),
			token("c1"),
		]);
		const before = Date.now();
		const revoked = await revokeFamily(store, [id("a1"), id("b1")]);
		expect(revoked.slice(0, 2).sort()).toEqual([id("a1"), id("b1")]);
		expect(revoked.slice(2, 5).sort()).toEqual([id("a2"), id("a3"), id("b2")]);
		expect(revoked.slice(5)).toEqual([id("a4"), id("a5")]);
		expect(await revokedIds(store)).toEqual([id("a1"), id("a2"), id("a3"), id("a4"), id("a5"), id("b1"), id("b2")]);
		// The revoked records say when (to the second); the token outside the families is untouched.
		const a5 = (await store.findOne({ _id: id("a5") }))!;
		expect((a5._updated as Date).getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
		expect((a5._updated as Date).getTime()).toBeLessThanOrEqual(Date.now());
		expect((await store.findOne({ _id: id("c1") }))!).toMatchObject({
			revoked: false,
			_updated: new Date("2020-01-01T00:00:00Z"),
		});
	});

	it("walks below tokens revoked before, answering only those it revokes, and leaves the earlier ones as they were", async () => {
		const store = await storeWith([
			token("a1", { revoked: true }),
			token("a2", { owner: id("a1"), revoked: true }),
			token("a3", { owner: id("a2") }),
			token("a4", { owner: id("a1") }),
		]);
		expect((await revokeFamily(store, [id("a1")])).sort()).toEqual([id("a3"), id("a4")]);
		expect(await revokedIds(store)).toEqual([id("a1"), id("a2"), id("a3"), id("a4")]);
		expect((await store.findOne({ _id: id("a2") }))!._updated).toEqual(new Date("2020-01-01T00:00:00Z"));
		// Nothing live left: nothing answered.
		expect(await revokeFamily(store, [id("a1")])).toEqual([]);
	});

	it("visits each token once, whatever the records say (a cycle of makers ends)", async () => {
		const store = await storeWith([
			token("a1", { owner: id("a3") }),
			token("a2", { owner: id("a1") }),
			token("a3", { owner: id("a2") }),
			token("a4", { owner: id("a2") }),
		]);
		const revoked = await revokeFamily(store, [id("a1")]);
		expect(revoked.slice(0, 2)).toEqual([id("a1"), id("a2")]);
		expect(revoked.slice(2).sort()).toEqual([id("a3"), id("a4")]);
	});

	it("revokes nothing for no roots, or roots not stored", async () => {
		const store = await storeWith([token("a1"), token("a2", { owner: id("a1") })]);
		expect(await revokeFamily(store, [])).toEqual([]);
		expect(await revokeFamily(store, [id("ff")])).toEqual([]);
		expect(await revokedIds(store)).toEqual([]);
	});
});

describe("familyOf: a token and what was minted from it", () => {
	it("is the token and its descendants at any depth, generation by generation, each once; revoked ones included", async () => {
		const store = await storeWith([
			token("a1"),
			token("a2", { owner: id("a1"), revoked: true }),
			token("a3", { owner: id("a2") }),
			token("a4", { owner: id("a3") }),
			token("a5", { owner: id("a4") }),
			token("a6", { owner: id("a1") }),
			token("b1", { owner: id("a9") }),
		]);
		const family = await familyOf(store, id("a1"));
		expect(family[0]).toBe(id("a1"));
		expect(family.slice(1, 3).sort()).toEqual([id("a2"), id("a6")]);
		expect(family.slice(3)).toEqual([id("a3"), id("a4"), id("a5")]);
		expect(await familyOf(store, id("a4"))).toEqual([id("a4"), id("a5")]);
		// A cycle of makers is walked once, through the token asked for or below it.
		const cyclic = await storeWith([
			token("c1", { owner: id("c2") }),
			token("c2", { owner: id("c1") }),
			token("c3", { owner: id("c2") }),
			token("c4", { owner: id("c3") }),
		]);
		expect(await familyOf(cyclic, id("c1"))).toEqual([id("c1"), id("c2"), id("c3"), id("c4")]);
		expect(await familyOf(cyclic, id("c4"))).toEqual([id("c4")]);
		// Records changed during the walk (by hand: no write changes an owner) into a cycle below the token asked for.
		const below = await storeWith([token("d1"), token("d2", { owner: id("d1") }), token("d3", { owner: id("d2") })]);
		const find = below.find.bind(below);
		let reads = 0;
		below.find = async (filter, opts) => {
			const found = await find(filter, opts);
			if (++reads === 1) await below.updateMany({ _id: id("d2") }, { $set: { owner: id("d3") } });
			return found;
		};
		expect(await familyOf(below, id("d1"))).toEqual([id("d1"), id("d2"), id("d3")]);
	});
});

describe("migratePrincipals: records from before principals, at the start", () => {
	it("gives each record without a principal the one found up its chain, and revokes the live tokens minted from revoked ones, sessions' excepted", async () => {
		const store = await storeWith([
			token("r1"),
			token("r2", { owner: id("r1") }),
			token("r3", { owner: id("r2") }),
			token("p1", { subject: "oidc:pat", session: true, revoked: true }),
			token("p2", { subject: "oidc:pat", owner: id("p1") }),
			token("p3", { owner: id("p2") }),
			token("l1", { revoked: true }),
			token("l2", { owner: id("l1") }),
			token("l3", { owner: id("l2") }),
			token("k1", { principal: "token:kept" }),
			token("k2", { owner: id("k1") }),
			token("o1", { owner: id("ee") }),
		]);
		const result = await migratePrincipals(store);
		expect(result.assigned).toBe(11);
		expect(result.revoked.sort()).toEqual([id("l2"), id("l3")]);
		const principals = Object.fromEntries(
			(await store.find({}, { only: ["_id", "principal"] })).map(d => [String(d._id).replace(/0+$/, ""), d.principal]),
		);
		expect(principals).toEqual({
			r1: `token:${id("r1")}`,
			r2: `token:${id("r1")}`,
			r3: `token:${id("r1")}`,
			p1: "oidc:pat",
			p2: "oidc:pat",
			p3: "oidc:pat",
			l1: `token:${id("l1")}`,
			l2: `token:${id("l1")}`,
			l3: `token:${id("l1")}`,
			k1: "token:kept",
			k2: "token:kept",
			o1: `token:${id("ee")}`,
		});
		expect(await revokedIds(store)).toEqual([id("l1"), id("l2"), id("l3"), id("p1")]);
	});

	it("does nothing once every record has its principal, not even revoke below a revoked token", async () => {
		const store = await storeWith([
			token("l1", { principal: "token:l1", revoked: true }),
			token("l2", { principal: "token:l1", owner: id("l1") }),
		]);
		expect(await migratePrincipals(store)).toEqual({ assigned: 0, revoked: [] });
		expect(await revokedIds(store)).toEqual([id("l1")]);
	});

	it("assigns principals with nothing revoked when no token is revoked", async () => {
		const store = await storeWith([token("a1"), token("a2", { owner: id("a1") })]);
		expect(await migratePrincipals(store)).toEqual({ assigned: 2, revoked: [] });
		expect(await store.count({ principal: `token:${id("a1")}` })).toBe(2);
	});
});
