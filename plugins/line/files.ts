/**
 * What a file the agent sends becomes on LINE, which takes media by HTTPS
 * URL only (the file is kept for signed download first, `signedFileStore`):
 * a JPEG or PNG up to 10 MB an `image` message, M4A audio (a spoken reply
 * among it, `m4a.ts`) up to 200 MB an `audio` message with its length,
 * anything else a text message with the file's name and link. A caption follows as a text message in the same
 * request (LINE takes up to 5 messages in one).
 */
import type { messagingApi } from '@line/bot-sdk';
import type { OutboundFile } from 'steerbot/channel';

/** LINE's limit on an image message's file, in bytes (10 MB). */
export const LINE_IMAGE_MAX_BYTES = 10 * 1024 * 1024;
/** LINE's limit on an audio message's file, in bytes (200 MB). */
export const LINE_AUDIO_MAX_BYTES = 200 * 1024 * 1024;
/** LINE's limit on a text message, in characters. */
const TEXT_MAX = 5000;

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png']);

/** The messages of `file`, downloadable at `url`; `audioMs`: its length when it is M4A audio (`lineAudio`). Pure. */
export function fileMessages(file: OutboundFile, url: string, audioMs?: number): messagingApi.Message[] {
  const size = file.bytes.byteLength;
  const caption = file.caption ? [{ type: 'text', text: file.caption.slice(0, TEXT_MAX) } satisfies messagingApi.TextMessage] : [];
  if (IMAGE_TYPES.has(file.mimeType) && size <= LINE_IMAGE_MAX_BYTES) {
    return [{ type: 'image', originalContentUrl: url, previewImageUrl: url }, ...caption];
  }
  if (audioMs !== undefined && size <= LINE_AUDIO_MAX_BYTES) {
    return [{ type: 'audio', originalContentUrl: url, duration: audioMs }, ...caption];
  }
  const text = `${file.caption ? `${file.caption}\n` : ''}${file.name}: ${url}`;
  return [{ type: 'text', text: text.length <= TEXT_MAX ? text : `${file.name}: ${url}` }];
}
