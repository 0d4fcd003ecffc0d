/**
 * The event content of a file sent to Matrix (pure): `m.image` for the
 * image types clients show inline, `m.audio` for audio, a spoken reply as a
 * voice message (MSC3245: `org.matrix.msc3245.voice`, with the MSC1767
 * audio block clients read its length from), `m.file` for the rest. The
 * file name is `filename` and a caption is `body` (the spec's media
 * captions); without a caption `body` is the file name.
 */
import type { OutboundFile } from 'steerbot/channel';

/** Types sent as `m.image` (shown inline by clients). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * The length of an Ogg/Opus recording, in ms: the last page's granule
 * position (48 kHz samples) less the `OpusHead` pre-skip. Undefined for
 * anything else or a file it cannot read. Pure.
 */
export function oggOpusDurationMs(bytes: Uint8Array): number | undefined {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const head = buf.subarray(0, 512).indexOf('OpusHead');
  const last = buf.lastIndexOf('OggS');
  if (buf.subarray(0, 4).toString('latin1') !== 'OggS' || head < 0 || last < 0 || last + 14 > buf.length || head + 12 > buf.length) return undefined;
  const granule = buf.readBigInt64LE(last + 6);
  const samples = Number(granule) - buf.readUInt16LE(head + 10);
  return samples > 0 && Number.isSafeInteger(samples) ? Math.round(samples / 48) : undefined;
}

/** The `m.room.message` content of `file`, uploaded as `mxc`. */
export function fileContent(file: OutboundFile, mxc: string): Record<string, unknown> {
  const audio = file.voice === true || file.mimeType.startsWith('audio/');
  const msgtype = audio ? 'm.audio' : IMAGE_TYPES.has(file.mimeType) ? 'm.image' : 'm.file';
  const duration = audio ? oggOpusDurationMs(file.bytes) : undefined;
  const info: Record<string, unknown> = { mimetype: file.mimeType, size: file.bytes.byteLength, ...(duration !== undefined && { duration }) };
  const content: Record<string, unknown> = { msgtype, body: file.caption || file.name, filename: file.name, url: mxc, info };
  if (file.voice) {
    content['org.matrix.msc1767.audio'] = duration === undefined ? {} : { duration };
    content['org.matrix.msc3245.voice'] = {};
  }
  return content;
}
