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

/** An Ogg page of `packets` (each laced whole into it), its granule position and checksum set. */
function oggPage(flags: number, granule: bigint, seq: number, packets: readonly Buffer[]): Buffer {
  const lacing = packets.flatMap((p) => [...Array<number>(Math.floor(p.length / 255)).fill(255), p.length % 255]);
  const header = Buffer.alloc(27);
  header.write('OggS', 0, 'latin1');
  header[5] = flags;
  header.writeBigInt64LE(granule, 6);
  header.writeUInt32LE(1, 14);
  header.writeUInt32LE(seq, 18);
  header[26] = lacing.length;
  const bytes = Buffer.concat([header, Buffer.from(lacing), ...packets]);
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) ^ OGG_CRC[((crc >>> 24) ^ b) & 255]!) >>> 0;
  bytes.writeUInt32LE(crc, 22);
  return bytes;
}

/** A CELT packet of six empty 20 ms frames (TOC config 31, code 3, count byte 6): 120 ms of sound in two bytes. */
const OPUS_120MS = Buffer.from([(31 << 3) | 3, 6]);
/** A CELT packet of one empty 20 ms frame (TOC config 31, code 0). */
const OPUS_20MS = Buffer.from([31 << 3]);

/**
 * An Ogg/Opus file that plays `ms` milliseconds (rounded down to 20 ms): an `OpusHead` page (pre-skip 312), an
 * `OpusTags` page whose vendor string is `vendor` (a marker a test finds the file by), then pages of up to 255
 * packets of 120 ms and 20 ms (a few bytes each, so hours stay small), each page with its granule position and
 * checksum. `claimMs` makes its pages lie: the last page's granule position claims the file lasts `claimMs` (what a
 * container reader takes it for), the others claim no packet ends on them (-1), while its packets play for `ms`.
 */
export function oggOpus(ms: number, vendor = 'test', { claimMs }: { claimMs?: number } = {}): Buffer {
  const head = Buffer.alloc(19);
  head.write('OpusHead', 0, 'latin1');
  head[8] = 1;
  head[9] = 1;
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48_000, 12);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(Buffer.byteLength(vendor));
  const tags = Buffer.concat([Buffer.from('OpusTags', 'latin1'), length, Buffer.from(vendor), Buffer.alloc(4)]);
  const frames = Math.floor(ms / 20);
  const packets = [...Array<Buffer>(Math.floor(frames / 6)).fill(OPUS_120MS), ...Array<Buffer>(frames % 6).fill(OPUS_20MS)];
  const pages = [oggPage(2, 0n, 0, [head]), oggPage(0, 0n, 1, [tags])];
  let samples = 312;
  for (let i = 0; i < packets.length || i === 0; i += 255) {
    const chunk = packets.slice(i, i + 255);
    samples += chunk.reduce((n, p) => n + (p === OPUS_120MS ? 5760 : 960), 0);
    const last = i + 255 >= packets.length;
    const granule = claimMs === undefined ? BigInt(samples) : last ? BigInt(claimMs * 48 + 312) : -1n;
    pages.push(oggPage(last ? 4 : 0, granule, pages.length, chunk));
  }
  return Buffer.concat(pages);
}
