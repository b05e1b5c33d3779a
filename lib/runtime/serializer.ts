/**
 * The transporter's serializer: Moleculer's JSONExt (Dates, Buffers, Maps... survive), made cheap for
 * the large responses the API sends.
 *
 * 1. A packet whose `data` is a Buffer (an Eve read: the serialized HTTP body; a stream chunk) is framed
 *    as [0x00][u32 header length][JSONExt header without data][raw data bytes], so the bytes are neither
 *    base64-encoded nor JSON-escaped, and the gateway writes them to the socket as they arrive.
 *    A JSON document never starts with 0x00, so both forms can be told apart.
 * 2. JSONExt's reviver only changes strings that start with "[[" (in the bytes: `"[[`). Bytes without
 *    that sequence are parsed without it; V8's JSON.parse with a reviver keeps the source text of every
 *    value and costs several times more.
 *
 * Every node of a cluster must use this serializer (as with any Moleculer serializer); plain packets are
 * byte-for-byte JSONExt.
 */
import { Serializers } from "moleculer";

const MARKER = Buffer.from('"[[');
const FRAMED = 0x00;

type Packet = Record<string, unknown>;

export class FleetJSONExt extends Serializers.JSONExt {
	override serialize(obj: any): Buffer {
		const data = obj?.data;
		if (!Buffer.isBuffer(data)) return super.serialize(obj) as Buffer;
		const header = super.serialize({ ...obj, data: null }) as Buffer;
		const prefix = Buffer.allocUnsafe(5);
		prefix[0] = FRAMED;
		prefix.writeUInt32BE(header.length, 1);
		return Buffer.concat([prefix, header, data]);
	}

	override deserialize(buf: Buffer): any {
		if (buf[0] === FRAMED) {
			const length = buf.readUInt32BE(1);
			const packet = this.parse(buf.subarray(5, 5 + length)) as Packet;
			packet.data = Buffer.from(buf.subarray(5 + length));
			return packet;
		}
		return this.parse(buf);
	}

	private parse(buf: Buffer): unknown {
		if (buf.indexOf(MARKER) === -1) return JSON.parse(buf.toString("utf8"));
		return super.deserialize(buf);
	}
}
