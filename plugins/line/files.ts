/**
 * What a file the agent sends becomes on LINE, which takes media by HTTPS
 * URL only (the file is kept for signed download first, `signedFileStore`):
 * a JPEG or PNG up to 10 MB an `image` message, audio (a spoken reply among
 * it) up to 200 MB an `audio` message, anything else a text message with the
 * file's name and link. A caption follows as a text message in the same
 * request (LINE takes up to 5 messages in one).
 */
import type { messagingApi } from '@line/bot-sdk';
import type { OutboundFile } from 'steerbot/channel';
import { oggDurationMs } from 'steerbot/plugin';

/** LINE's limit on an image message's file, in bytes (10 MB). */
export const LINE_IMAGE_MAX_BYTES = 10 * 1024 * 1024;
/** LINE's limit on an audio message's file, in bytes (200 MB). */
export const LINE_AUDIO_MAX_BYTES = 200 * 1024 * 1024;
/** The length an audio message names when it cannot be read from the file (not OGG), in ms: LINE only shows it. */
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
    return [{ type: 'audio', originalContentUrl: url, duration: oggDurationMs(file.bytes) ?? UNKNOWN_AUDIO_DURATION_MS }, ...caption];
  }
  const text = `${file.caption ? `${file.caption}\n` : ''}${file.name}: ${url}`;
  return [{ type: 'text', text: text.length <= TEXT_MAX ? text : `${file.name}: ${url}` }];
}
