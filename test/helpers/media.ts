/** Small files the channel tests send: enough bytes to be typed and compared, no real content. */

/** A PDF's signature and end marker. */
export const PDF = Buffer.from('%PDF-1.7\n%%EOF\n');
/** A PNG's signature and 32 bytes. */
export const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(32, 2)]);

/** The Ogg page checksum table (CRC-32, polynomial 0x04c11db7, no reflection). */
const OGG_CRC = Array.from({ length: 256 }, (_, i) => {
  let r = i << 24;
  for (let j = 0; j < 8; j++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
  return r >>> 0;
});

/**
 * An Ogg/Opus file of `ms` milliseconds, as far as its length goes (what a
 * container reader takes it for; there is one 20 ms packet of sound): an
 * `OpusHead` page (pre-skip 312), an `OpusTags` page whose vendor string is
 * `vendor` (a marker a test finds the file by), then the last page at the end
 * granule, each page with its checksum.
 */
export function oggOpus(ms: number, vendor = 'test'): Buffer {
  const page = (flags: number, granule: bigint, seq: number, payload: Buffer) => {
    const header = Buffer.alloc(27);
    header.write('OggS', 0, 'latin1');
    header[5] = flags;
    header.writeBigInt64LE(granule, 6);
    header.writeUInt32LE(1, 14);
    header.writeUInt32LE(seq, 18);
    header[26] = 1;
    const bytes = Buffer.concat([header, Buffer.from([payload.length]), payload]);
    let crc = 0;
    for (const b of bytes) crc = ((crc << 8) ^ OGG_CRC[((crc >>> 24) ^ b) & 255]!) >>> 0;
    bytes.writeUInt32LE(crc, 22);
    return bytes;
  };
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48_000, 12);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(Buffer.byteLength(vendor));
  const tags = Buffer.concat([Buffer.from('OpusTags', 'latin1'), length, Buffer.from(vendor), Buffer.alloc(4)]);
  // One 20 ms SILK packet (TOC config 1, one frame): the last page's granule says how long the file is.
  return Buffer.concat([page(2, 0n, 0, head), page(0, 0n, 1, tags), page(4, BigInt(ms * 48 + 312), 2, Buffer.from([1 << 3, 0xff, 0xfe]))]);
}
