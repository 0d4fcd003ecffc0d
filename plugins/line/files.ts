/**
 * What a file the agent sends becomes on LINE, which takes media by HTTPS
 * URL only (the file is kept for signed download first, `signedFileStore`):
 * a JPEG or PNG up to 10 MB an `image` message, audio (a spoken reply among
 * it, made as MP3: LINE plays M4A and MP3, not Opus) up to 200 MB an `audio`
 * message with its length read from the file, anything else a text message
 * with the file's name and link. A caption follows as a text message in the same
 * request (LINE takes up to 5 messages in one).
 */
import type { messagingApi } from '@line/bot-sdk';
import type { OutboundFile } from 'steerbot/channel';
import { oggDurationMs } from 'steerbot/plugin';

/** LINE's limit on an image message's file, in bytes (10 MB). */
export const LINE_IMAGE_MAX_BYTES = 10 * 1024 * 1024;
/** LINE's limit on an audio message's file, in bytes (200 MB). */
export const LINE_AUDIO_MAX_BYTES = 200 * 1024 * 1024;
/** The length an audio message names when it cannot be read from the file (neither Ogg Opus nor MP3), in ms: LINE only shows it. */
export const UNKNOWN_AUDIO_DURATION_MS = 60_000;
/** LINE's limit on a text message, in characters. */
const TEXT_MAX = 5000;

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png']);

/** The messages of `file`, downloadable at `url`. Pure. */
export function fileMessages(file: OutboundFile, url: string): messagingApi.Message[] {
  const size = file.bytes.byteLength;
  const caption = file.caption ? [{ type: 'text', text: file.caption.slice(0, TEXT_MAX) } satisfies messagingApi.TextMessage] : [];
  if (IMAGE_TYPES.has(file.mimeType) && size <= LINE_IMAGE_MAX_BYTES) {
    return [{ type: 'image', originalContentUrl: url, previewImageUrl: url }, ...caption];
  }
  if ((file.voice || file.mimeType.startsWith('audio/')) && size <= LINE_AUDIO_MAX_BYTES) {
    return [
      { type: 'audio', originalContentUrl: url, duration: oggDurationMs(file.bytes) ?? mp3DurationMs(file.bytes) ?? UNKNOWN_AUDIO_DURATION_MS },
      ...caption,
    ];
  }
  const text = `${file.caption ? `${file.caption}\n` : ''}${file.name}: ${url}`;
  return [{ type: 'text', text: text.length <= TEXT_MAX ? text : `${file.name}: ${url}` }];
}

/** Layer III bitrates by index, in kbit/s: MPEG-1, then MPEG-2 and 2.5 (index 0 is free format, 15 invalid: neither is timed). */
const MP3_KBPS = {
  v1: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  v2: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
/** Sample rates by version bits (`00` MPEG-2.5, `10` MPEG-2, `11` MPEG-1) and index, in Hz. */
const MP3_RATES: Record<number, number[]> = { 0: [11025, 12000, 8000], 2: [22050, 24000, 16000], 3: [44100, 48000, 32000] };

/** One MPEG Layer III frame header at `at`: its length in bytes and its samples and rate. Undefined when there is none. */
function mp3Frame(b: Uint8Array, at: number): { bytes: number; samples: number; rate: number } | undefined {
  if (at + 4 > b.length || b[at] !== 0xff || (b[at + 1]! & 0xe0) !== 0xe0) return undefined;
  const version = (b[at + 1]! >> 3) & 3;
  const layer = (b[at + 1]! >> 1) & 3;
  const rate = MP3_RATES[version]?.[(b[at + 2]! >> 2) & 3];
  const kbps = (version === 3 ? MP3_KBPS.v1 : MP3_KBPS.v2)[b[at + 2]! >> 4];
  if (layer !== 1 || !rate || !kbps) return undefined;
  const padding = (b[at + 2]! >> 1) & 1;
  // MPEG-1 Layer III frames hold 1152 samples, MPEG-2 and 2.5 576: 144 (or 72) bytes per kbit/s per kHz.
  const samples = version === 3 ? 1152 : 576;
  return { bytes: Math.floor(((samples / 8) * kbps * 1000) / rate) + padding, samples, rate };
}

/** Where the audio of an MP3 file starts: after its ID3v2 tag (10 bytes, a syncsafe size, a footer when flagged), if any. */
function id3v2End(b: Uint8Array): number {
  if (b.length < 10 || b[0] !== 0x49 || b[1] !== 0x44 || b[2] !== 0x33) return 0;
  const size = ((b[6]! & 0x7f) << 21) | ((b[7]! & 0x7f) << 14) | ((b[8]! & 0x7f) << 7) | (b[9]! & 0x7f);
  return 10 + size + (b[5]! & 0x10 ? 10 : 0);
}

/**
 * The length of an MP3 file (MPEG-1, 2 or 2.5 Layer III), in ms: the sum of
 * its frames' samples over their rate, constant or variable bitrate alike.
 * An ID3v2 tag is skipped; the frames start at the first header whose frame
 * is followed by another (or ends the file), and end at the first byte that
 * starts none (an ID3v1 or APE tag). Undefined when `bytes` holds no frame. Pure.
 */
export function mp3DurationMs(bytes: Uint8Array): number | undefined {
  const framed = (at: number): boolean => {
    const f = mp3Frame(bytes, at);
    return f !== undefined && (at + f.bytes === bytes.length || mp3Frame(bytes, at + f.bytes) !== undefined);
  };
  let at = id3v2End(bytes);
  while (at < bytes.length && !framed(at)) at++;
  let seconds = 0;
  for (let f = mp3Frame(bytes, at); f && at + f.bytes <= bytes.length; f = mp3Frame(bytes, at)) {
    seconds += f.samples / f.rate;
    at += f.bytes;
  }
  return seconds > 0 ? Math.round(seconds * 1000) : undefined;
}
