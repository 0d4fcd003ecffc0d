/**
 * The length of a spoken reply (an Ogg Opus file), for platforms whose
 * audio message names its duration (LINE, Feishu). Pure.
 */

/**
 * The length of an Ogg Opus file, in ms: the last page's granule position
 * (48 kHz samples) less the pre-skip of its `OpusHead`. Undefined when `bytes`
 * is not one. Pure.
 */
export function oggDurationMs(bytes: Uint8Array): number | undefined {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < 47 || b.toString('latin1', 0, 4) !== 'OggS') return undefined;
  const head = b.indexOf('OpusHead', 0, 'latin1');
  if (head < 0 || head + 12 > b.length) return undefined;
  const preSkip = b.readUInt16LE(head + 10);
  const last = b.lastIndexOf('OggS', b.length - 27, 'latin1');
  if (last < 0) return undefined;
  const granule = Number(b.readBigUInt64LE(last + 6));
  if (!Number.isSafeInteger(granule) || granule <= preSkip) return undefined;
  return Math.round((granule - preSkip) / 48);
}
