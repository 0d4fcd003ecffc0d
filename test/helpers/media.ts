/** Small files the channel tests send: enough bytes to be typed and compared, no real content. */

/** A PDF's signature and end marker. */
export const PDF = Buffer.from('%PDF-1.7\n%%EOF\n');
/** A PNG's signature and 32 bytes. */
export const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(32, 2)]);

/** An Ogg/Opus file of `ms` milliseconds, as far as its length goes: an `OpusHead` page (pre-skip 312), then a last page at the end granule. */
export function oggOpus(ms: number): Buffer {
  const page = (granule: bigint, payload: Buffer) => {
    const header = Buffer.alloc(27);
    header.write('OggS', 0, 'latin1');
    header.writeBigInt64LE(granule, 6);
    header[26] = 1;
    return Buffer.concat([header, Buffer.from([payload.length]), payload]);
  };
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt16LE(312, 10);
  return Buffer.concat([page(0n, head), page(BigInt(ms * 48 + 312), Buffer.from('opus audio'))]);
}
