/**
 * What a file the agent sends becomes on Feishu / Lark, which takes media
 * uploaded first: an image (JPEG, PNG, WEBP, GIF, TIFF, BMP, ICO) up to
 * 10 MB goes to `/open-apis/im/v1/images` and becomes an `image` message by
 * its `image_key`; anything else up to 30 MB goes to `/open-apis/im/v1/files`
 * (typed by its media type) and becomes a `file` message by its `file_key`,
 * or an `audio` message when it is Ogg/Opus (a spoken reply), uploaded as
 * `opus` with its duration. A larger image goes as a file.
 *
 * An upload shows nothing by itself, so one retried (a rate limit, a 5xx, a
 * takeover) leaves at most an unused key on the platform; only the message
 * naming it is shown, and that carries the delivery key's `uuid`.
 */
import type { Client } from '@larksuiteoapi/node-sdk';
import type { OutboundFile } from 'steerbot/channel';
import { oggDurationMs } from 'steerbot/plugin';
import { FeishuApiError } from './errors.js';

/** The platform's limit on an uploaded image, in bytes (10 MB). */
export const FEISHU_IMAGE_MAX_BYTES = 10 * 1024 * 1024;
/** The platform's limit on an uploaded file, in bytes (30 MB): the channel's `maxFileBytes`. */
export const FEISHU_FILE_MAX_BYTES = 30 * 1024 * 1024;

const IMAGE_TYPES = new Set([
  'image/jpeg',
  'image/png',
  'image/webp',
  'image/gif',
  'image/tiff',
  'image/bmp',
  'image/x-ms-bmp',
  'image/x-icon',
  'image/vnd.microsoft.icon',
]);

/** `file_type` of an upload to `/open-apis/im/v1/files`. */
export type FeishuFileType = 'opus' | 'mp4' | 'pdf' | 'doc' | 'xls' | 'ppt' | 'stream';

/** How a file is uploaded and which message names it. */
export type FeishuUpload = { kind: 'image' } | { kind: 'file'; fileType: FeishuFileType; msgType: 'file' | 'audio'; durationMs?: number };

/** The `file_type` of a (non-Opus) media type: the Office families by their old and new types, else `stream`. Pure. */
function fileTypeOf(mimeType: string): FeishuFileType {
  const t = mimeType.toLowerCase();
  if (t === 'application/pdf') return 'pdf';
  if (t === 'video/mp4') return 'mp4';
  if (t === 'application/msword' || t.startsWith('application/vnd.openxmlformats-officedocument.wordprocessingml')) return 'doc';
  if (t === 'application/vnd.ms-excel' || t.startsWith('application/vnd.openxmlformats-officedocument.spreadsheetml')) return 'xls';
  if (t === 'application/vnd.ms-powerpoint' || t.startsWith('application/vnd.openxmlformats-officedocument.presentationml')) return 'ppt';
  return 'stream';
}

/** How `file` goes out. Pure. */
export function uploadOf(file: OutboundFile): FeishuUpload {
  const type = file.mimeType.toLowerCase().split(';')[0]?.trim() ?? '';
  if (IMAGE_TYPES.has(type) && file.bytes.byteLength <= FEISHU_IMAGE_MAX_BYTES) return { kind: 'image' };
  if (file.voice || type === 'audio/ogg' || type === 'audio/opus') {
    const durationMs = oggDurationMs(file.bytes);
    return { kind: 'file', fileType: 'opus', msgType: 'audio', ...(durationMs !== undefined && { durationMs }) };
  }
  return { kind: 'file', fileType: fileTypeOf(type), msgType: 'file' };
}

/**
 * Uploads `file`; returns the message that shows it: its `msg_type` and
 * `content`. Throws FeishuApiError (a rate limit with `retryAfterMs`).
 */
export async function uploadFile(client: Client, file: OutboundFile): Promise<{ msgType: 'image' | 'file' | 'audio'; content: string }> {
  const bytes = Buffer.from(file.bytes.buffer, file.bytes.byteOffset, file.bytes.byteLength);
  const how = uploadOf(file);
  if (how.kind === 'image') {
    const answer = await client.im.image.create({ data: { image_type: 'message', image: bytes } });
    return { msgType: 'image', content: JSON.stringify({ image_key: keyOf('image upload', answer?.image_key) }) };
  }
  const answer = await client.im.file.create({
    data: { file_type: how.fileType, file_name: file.name, file: bytes, ...(how.durationMs !== undefined && { duration: how.durationMs }) },
  });
  return { msgType: how.msgType, content: JSON.stringify({ file_key: keyOf('file upload', answer?.file_key) }) };
}

function keyOf(what: string, key: string | undefined): string {
  if (typeof key !== 'string' || key === '') throw new FeishuApiError(`feishu ${what}: the answer named no key`, { status: 502 });
  return key;
}
