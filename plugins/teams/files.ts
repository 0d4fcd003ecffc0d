/**
 * What a file the agent sends becomes on Teams (the file is kept for signed
 * download first, `signedFileStore`). Teams shows an image attachment a bot
 * sends by HTTPS `contentUrl` inline, but no other file sent that way; its
 * only other native path (a FileConsentCard, then an upload to the person's
 * OneDrive) needs a click per file and per person, works in personal chats
 * only, and cannot be sent exactly once through the outbox. So a PNG, JPEG
 * or GIF up to 4 MB is one message with the image attached and the caption
 * as its text; any other file, and audio (a spoken reply among it), is an
 * Adaptive Card naming the file, its size and type, with an `Action.OpenUrl`
 * button to the signed URL and the caption as the card's text.
 */
import type { OutboundFile } from 'steerbot/channel';
import { ADAPTIVE_CARD, adaptiveCard } from './cards.js';

/**
 * Largest image sent inline, in bytes (4 MB). Microsoft documents no limit
 * for an image a bot hosts itself (the client fetches it); this conservative
 * cap keeps an inline image quick to show on a phone, and a larger one goes
 * as a card.
 */
export const TEAMS_INLINE_IMAGE_MAX_BYTES = 4 * 1024 * 1024;
/** Most characters of a caption (`OutboundFile.caption` holds at most 1000). */
const CAPTION_MAX = 1000;

const INLINE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif']);

/** A size for people: `512 B`, `12 KB`, `3.4 MB`. Pure. */
function sizeText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${Math.round(bytes / 1000)} KB`;
  return `${(bytes / 1_000_000).toFixed(1).replace(/\.0$/, '')} MB`;
}

/** The message activity of `file`, downloadable at `url`. Pure. */
export function fileActivity(file: OutboundFile, url: string): Record<string, unknown> {
  const size = file.bytes.byteLength;
  const caption = file.caption?.slice(0, CAPTION_MAX);
  if (INLINE_TYPES.has(file.mimeType) && size <= TEAMS_INLINE_IMAGE_MAX_BYTES) {
    return {
      type: 'message',
      ...(caption && { text: caption, textFormat: 'plain' }),
      attachments: [{ contentType: file.mimeType, contentUrl: url, name: file.name }],
    };
  }
  const audio = file.voice === true || file.mimeType.startsWith('audio/');
  const facts = [
    { title: audio ? 'Audio' : 'File', value: file.name },
    { title: 'Size', value: sizeText(size) },
    { title: 'Type', value: file.mimeType },
  ];
  const body = [...(caption ? [{ type: 'TextBlock', text: caption, wrap: true }] : []), { type: 'FactSet', facts }];
  const card = adaptiveCard(body, [{ type: 'Action.OpenUrl', title: audio ? 'Play' : 'Download', url }]);
  return {
    type: 'message',
    // The notification's preview: a card has no text of its own.
    summary: (caption || file.name).slice(0, 200),
    attachments: [{ contentType: ADAPTIVE_CARD, name: file.name, content: card }],
  };
}
