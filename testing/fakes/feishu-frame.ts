/**
 * The long connection's frame (`pbbp2.Frame`, protobuf), encoded and decoded
 * by hand for the fake Feishu server: fields 1 SeqID (uint64), 2 LogID
 * (uint64), 3 service (int32), 4 method (int32: 0 control, 1 data),
 * 5 headers (repeated Header: 1 key, 2 value, strings), 6 payloadEncoding,
 * 7 payloadType (strings), 8 payload (bytes), 9 LogIDNew (string) — the
 * field numbers of the SDK's bundled protobuf code. SeqID, LogID, service
 * and method are required, so they are always written.
 */

/** One frame. */
export interface FeishuFrame {
  seqId: number;
  logId: number;
  service: number;
  /** 0: control (ping, pong), 1: data (an event and its acknowledgement). */
  method: number;
  headers: Array<{ key: string; value: string }>;
  payload?: Uint8Array;
}

function varint(n: number | bigint): number[] {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

function bytesField(field: number, bytes: Uint8Array): number[] {
  return [...varint((field << 3) | 2), ...varint(bytes.length), ...bytes];
}

const utf8 = (s: string) => new TextEncoder().encode(s);

/** The frame's bytes. */
export function encodeFrame(f: FeishuFrame): Uint8Array {
  const out: number[] = [...varint(1 << 3), ...varint(f.seqId), ...varint(2 << 3), ...varint(f.logId)];
  out.push(...varint(3 << 3), ...varint(f.service), ...varint(4 << 3), ...varint(f.method));
  for (const h of f.headers) out.push(...bytesField(5, new Uint8Array([...bytesField(1, utf8(h.key)), ...bytesField(2, utf8(h.value))])));
  if (f.payload) out.push(...bytesField(8, f.payload));
  return new Uint8Array(out);
}

/** Reads the fields of one message: number → values (varints as bigint, length-delimited as bytes). */
function fields(buf: Uint8Array): Map<number, Array<bigint | Uint8Array>> {
  const out = new Map<number, Array<bigint | Uint8Array>>();
  let i = 0;
  const readVarint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      const b = buf[i++];
      if (b === undefined) throw new Error('truncated frame');
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const tag = Number(readVarint());
    const [field, wire] = [tag >> 3, tag & 7];
    let value: bigint | Uint8Array;
    if (wire === 0) value = readVarint();
    else if (wire === 2) {
      const len = Number(readVarint());
      value = buf.subarray(i, i + len);
      i += len;
    } else if (wire === 1 || wire === 5) {
      i += wire === 1 ? 8 : 4;
      continue;
    } else throw new Error(`unsupported wire type ${wire}`);
    out.set(field, [...(out.get(field) ?? []), value]);
  }
  return out;
}

const num = (v: bigint | Uint8Array | undefined) => (typeof v === 'bigint' ? Number(v) : 0);
const str = (v: bigint | Uint8Array | undefined) => (v instanceof Uint8Array ? new TextDecoder().decode(v) : '');

/** The frame of `buf`. Throws on malformed bytes. */
export function decodeFrame(buf: Uint8Array): FeishuFrame {
  const f = fields(buf);
  const headers = (f.get(5) ?? []).map((h) => {
    const hf = fields(h as Uint8Array);
    return { key: str(hf.get(1)?.[0]), value: str(hf.get(2)?.[0]) };
  });
  const payload = f.get(8)?.[0];
  return {
    seqId: num(f.get(1)?.[0]),
    logId: num(f.get(2)?.[0]),
    service: num(f.get(3)?.[0]),
    method: num(f.get(4)?.[0]),
    headers,
    ...(payload instanceof Uint8Array && { payload }),
  };
}

/** The value of header `key`, when present. */
export const headerOf = (f: FeishuFrame, key: string): string | undefined => f.headers.find((h) => h.key === key)?.value;
