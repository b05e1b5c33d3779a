/**
 * The transporter's serializer: plain packets are exactly JSONExt (either side decodes the other's), and
 * packets carrying bytes arrive with exactly those bytes.
 */
import { Serializers } from "moleculer";
import { FleetJSONExt } from "../../lib/runtime/serializer";

const fast = new FleetJSONExt();
const stock = new Serializers.JSONExt();
// moleculer calls init(broker) before use; neither serializer needs the broker for these values.
for (const s of [fast, stock]) (s as any).init?.({ options: {} });

const SAMPLES: unknown[] = [
	{ plain: "text", n: 1, list: [1, "two", null], nested: { ok: true } },
	{ when: new Date("2024-05-01T12:00:00.123Z"), bytes: Buffer.from([0, 1, 2, 255]), big: 12345678901234567890n },
	{ tricky: "[[DT]]1714564800000", alsoTricky: "[[not a marker", quote: 'say "[[" inside' },
	{ body: JSON.stringify({ _items: [{ name: "[[x]]", _created: "Sun, 22 Nov 2026 05:45:03 GMT" }] }) },
	"[[ES]]a top-level string",
	[new Map([["a", 1]]), new Set([1, 2])],
];

describe("FleetJSONExt", () => {
	it("decodes everything the stock JSONExt encodes, to the same values", () => {
		for (const value of SAMPLES) {
			expect(fast.deserialize(stock.serialize(value as any) as Buffer)).toEqual(
				stock.deserialize(stock.serialize(value as any) as Buffer),
			);
			expect(fast.deserialize(stock.serialize(value as any) as Buffer)).toEqual(value);
		}
	});

	it("encodes what the stock JSONExt decodes, for packets without bytes", () => {
		for (const value of SAMPLES) expect(stock.deserialize(fast.serialize(value as any) as Buffer)).toEqual(value);
	});

	it("carries a response body of bytes unchanged, with the rest of the packet", () => {
		const body = Buffer.concat([
			Buffer.from('{"_items":[{"name":"[[x]] \u00e9\u4e2d"}]}'),
			Buffer.from([0, 255, 10, 13, 34]),
		]);
		const packet = {
			ver: "5",
			sender: "n1",
			id: "c1",
			success: true,
			data: body,
			meta: { $responseType: "application/json", when: new Date(1714564800000) },
		};
		const decoded = fast.deserialize(fast.serialize(packet as any) as Buffer);
		expect(Buffer.isBuffer(decoded.data)).toBe(true);
		expect(decoded.data.equals(body)).toBe(true);
		expect({ ...decoded, data: null }).toEqual({ ...packet, data: null });
		const empty = fast.deserialize(fast.serialize({ ...packet, data: Buffer.alloc(0) } as any) as Buffer);
		expect(empty.data).toEqual(Buffer.alloc(0));
	});
});
