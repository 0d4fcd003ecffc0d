/**
 * How long one coded audio packet plays, read from the packet's own header
 * (what a decoder goes by), never from a container's declared duration. Pure.
 */

/** Opus frame lengths in 1/48000 s by TOC config (RFC 6716 §3.1): SILK 10/20/40/60 ms, Hybrid 10/20 ms, CELT 2.5/5/10/20 ms. */
const OPUS_FRAME = Array.from({ length: 32 }, (_, c) => (c < 12 ? [480, 960, 1920, 2880][c % 4]! : c < 16 ? [480, 960][c % 2]! : [120, 240, 480, 960][c % 4]!));

/**
 * Seconds an Opus packet plays: its TOC byte's frame length times its frame count (code 0: one, 1 and 2: two, 3: the
 * count byte's low six bits). An empty packet, or a code 3 one without its count byte, plays nothing.
 */
export function opusPacketSeconds(first: number | undefined, second: number | undefined): number {
  if (first === undefined) return 0;
  const code = first & 3;
  const frames = code === 0 ? 1 : code < 3 ? 2 : second === undefined ? 0 : second & 0x3f;
  return (OPUS_FRAME[first >> 3]! * frames) / 48_000;
}

/** Sample rates of MPEG audio by version bits (0: 2.5, 2: 2, 3: 1) and rate index. */
const MPEG_RATES: Record<number, readonly number[]> = { 0: [11_025, 12_000, 8000], 2: [22_050, 24_000, 16_000], 3: [44_100, 48_000, 32_000] };

/** Seconds an MPEG audio frame (MP3, MP2) plays, by its 4-byte header; undefined when `frame` does not start with one. */
export function mpegFrameSeconds(frame: Uint8Array): number | undefined {
  if (frame.length < 4 || frame[0] !== 0xff || (frame[1]! & 0xe0) !== 0xe0) return undefined;
  const version = (frame[1]! >> 3) & 3;
  const layer = (frame[1]! >> 1) & 3;
  const rate = MPEG_RATES[version]?.[(frame[2]! >> 2) & 3];
  if (!rate || layer === 0) return undefined;
  const samples = layer === 3 ? 384 : layer === 2 || version === 3 ? 1152 : 576;
  return samples / rate;
}

/**
 * Samples in a FLAC frame, by its header's block size code (with the 8 or 16-bit size after the coded frame number
 * for codes 6 and 7); undefined when `frame` does not start with a frame header.
 */
export function flacFrameSamples(frame: Uint8Array): number | undefined {
  if (frame.length < 5 || frame[0] !== 0xff || (frame[1]! & 0xfe) !== 0xf8) return undefined;
  const code = frame[2]! >> 4;
  if (code === 1) return 192;
  if (code >= 2 && code <= 5) return 576 << (code - 2);
  if (code >= 8) return 256 << (code - 8);
  if (code !== 6 && code !== 7) return undefined;
  // The frame or sample number, UTF-8 coded: its first byte's leading ones say how many bytes it takes.
  let n = 0;
  while (n < 8 && frame[4]! & (0x80 >> n)) n++;
  const at = 4 + Math.max(1, n);
  if (code === 6) return frame[at] === undefined ? undefined : frame[at]! + 1;
  return frame[at + 1] === undefined ? undefined : ((frame[at]! << 8) | frame[at + 1]!) + 1;
}
