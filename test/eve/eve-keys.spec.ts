/**
 * The Eve layer keeps every key of a free-form dict a client writes, `__proto__` and `constructor`
 * included: created, then merged by PATCH (Eve's MERGE_NESTED_DOCUMENTS) key by key into what is stored.
 * Checked on the stored record, on NeDB and (when MONGO_URI is set: in CI an emulator) on MongoDB.
 */
import { ServiceBroker } from "moleculer";
import { EveCollection, type EveServiceSchema } from "../../mixins/eve-collection.mixin";
import { OBJECT_ID } from "../../lib/eve/ids";
import type { Store } from "../../lib/storage/store";
import { uniqueMongoUri } from "../support/harness";

/** NeDB, and MongoDB: reported skipped, with the reason, without MONGO_URI. */
function legs(): Array<[string, string]> {
	return [
		["NeDB", ""],
		process.env.MONGO_URI
			? ["MongoDB (MONGO_URI)", uniqueMongoUri(process.env.MONGO_URI)]
			: ["MongoDB (skipped: MONGO_URI is not set)", ""],
	];
}

const ThingsService: EveServiceSchema = {
	name: "things",
	mixins: [
		EveCollection({
			resource: "things",
			idPattern: OBJECT_ID,
			schema: { name: { type: "string" }, data: { type: "object", optional: true } },
		}),
	],
};

for (const [name, mongoUri] of legs())
	(name.includes("(skipped:") ? describe.skip : describe)(`free-form dicts on ${name}`, () => {
		let broker: ServiceBroker;
		const saved = { ...process.env };
		const stored = async (id: string) =>
			(broker.getLocalService("things") as unknown as { store: Store }).store.findOne({ _id: id });

		beforeAll(async () => {
			Object.assign(process.env, { DATA_DIR: ":memory:", MONGO_URI: mongoUri });
			broker = new ServiceBroker({ logger: false, transporter: null });
			broker.createService(ThingsService);
			await broker.start();
		});
		afterAll(async () => {
			await broker?.stop();
			process.env = saved;
		});

		it("are stored with every key, and a PATCH merges into them key by key", async () => {
			const body = JSON.parse(
				'{"name":"t","data":{"keep":1,"__proto__":{"old":true},"constructor":{"a":1},"$x":{"a.b":1}}}',
			);
			const created = await broker.call<{ _id: string }, unknown>("things.create", { body });
			expect(JSON.stringify((await stored(created._id))?.data)).toBe(
				'{"keep":1,"__proto__":{"old":true},"constructor":{"a":1},"$x":{"a.b":1}}',
			);

			const patch = JSON.parse(
				'{"data":{"__proto__":{"p":2},"constructor":{"b":2},"prototype":3,"$x":{"c.d":2},"new.key":null}}',
			);
			await broker.call("things.patch", { id: created._id, body: patch });
			const after = await stored(created._id);
			expect(JSON.stringify(after?.data)).toBe(
				'{"keep":1,"__proto__":{"old":true,"p":2},"constructor":{"a":1,"b":2},"$x":{"a.b":1,"c.d":2},"prototype":3,"new.key":null}',
			);
			expect(Object.getPrototypeOf(after?.data)).toBe(Object.prototype);
			expect(({} as Record<string, unknown>).p).toBeUndefined();
		});
	});
