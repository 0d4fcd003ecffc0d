/**
 * Files people send the bot: an `image` message or a rich text's inline
 * image (its `image_key`), and a `file`, `audio` or `media` (video) message
 * or a rich text's video (its `file_key`), becomes an attachment referenced
 * as `<message id>/<image|file>/<key>`, the message resource's path (the
 * platform serves audio and video as `file` resources). The record keeps the reference only; a runner downloads the bytes
 * when it builds a prompt (`fetchAttachment`), through
 * `GET /open-apis/im/v1/messages/:message_id/resources/:file_key?type=…`
 * with the tenant access token (the SDK's `im.messageResource.get`), at most
 * `maxBytes` (the declared length is checked first, and the download stops
 * past the limit whatever it declared). A reference off the grammar (ids
 * and keys of `[A-Za-z0-9_-]`) is never requested, so no path reaches the
 * platform but the resource's.
 */
import { addAbortSignal, type Readable } from 'node:stream';
import type { Client } from '@larksuiteoapi/node-sdk';
import { type Attachment, type FetchedFile, InvalidInputError } from 'steerbot/plugin';
import { networkError } from './errors.js';

/** What the resource API calls the two kinds (`type`). */
export type ResourceType = 'image' | 'file';

const ID = /^[A-Za-z0-9_-]{1,256}$/;

/** Where a resource is: its message, kind and key. */
export interface ResourceRef {
  messageId: string;
  type: ResourceType;
  key: string;
}

/** The attachment `ref` of a resource; undefined when an id or the key is off the grammar. Pure. */
export function resourceRef(r: ResourceRef): string | undefined {
  return ID.test(r.messageId) && ID.test(r.key) ? `${r.messageId}/${r.type}/${r.key}` : undefined;
}

/** A `ref` read back; undefined for one off the grammar. Pure. */
export function parseResourceRef(ref: string): ResourceRef | undefined {
  const [messageId, type, key, ...rest] = ref.split('/');
  if (rest.length > 0 || messageId === undefined || key === undefined || (type !== 'image' && type !== 'file')) return undefined;
  return ID.test(messageId) && ID.test(key) ? { messageId, type, key } : undefined;
}

const OOXML = 'application/vnd.openxmlformats-officedocument';

/** Media types by lower-case extension: what a model may be offered (the platform names none for a file). */
const BY_EXTENSION: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  pdf: 'application/pdf',
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  json: 'application/json',
  zip: 'application/zip',
  doc: 'application/msword',
  xls: 'application/vnd.ms-excel',
  ppt: 'application/vnd.ms-powerpoint',
  docx: `${OOXML}.wordprocessingml.document`,
  xlsx: `${OOXML}.spreadsheetml.sheet`,
  pptx: `${OOXML}.presentationml.presentation`,
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  wav: 'audio/wav',
  ogg: 'audio/ogg',
  opus: 'audio/ogg',
  mp4: 'video/mp4',
  mov: 'video/quicktime',
};

/** The media type of a file named `name`, by its extension; undefined for one not listed. Pure. */
export function mimeOfName(name: string): string | undefined {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? BY_EXTENSION[name.slice(dot + 1).toLowerCase()] : undefined;
}

/** The attachment kind of a media type: its major type for images, audio and video, else a file. Pure. */
export function kindOfMime(mime: string | undefined): Attachment['kind'] {
  const major = mime?.split('/')[0];
  return major === 'image' || major === 'audio' || major === 'video' ? major : 'file';
}

/**
 * Downloads an attachment by its resource reference.
 * @throws InvalidInputError for a reference off the grammar (nothing is requested) or a file larger than `maxBytes`; FeishuApiError when the platform refuses or the download breaks off; the signal's reason when `signal` aborts.
 */
export async function downloadResource(client: Client, attachment: Attachment, o: { maxBytes: number; signal?: AbortSignal }): Promise<FetchedFile> {
  const where = parseResourceRef(attachment.ref);
  if (!where) throw new InvalidInputError('not a Feishu message resource (<message id>/<image|file>/<key>)');
  const label = `Feishu ${where.type} ${attachment.name ?? where.key}`;
  const tooLarge = (size: number) => new InvalidInputError(`${label} is ${size} bytes or more, more than ${o.maxBytes}`);
  if (attachment.size !== undefined && attachment.size > o.maxBytes) throw tooLarge(attachment.size);
  o.signal?.throwIfAborted();
  const res = await client.im.messageResource.get({ params: { type: where.type }, path: { message_id: where.messageId, file_key: where.key } });
  const stream = res.getReadableStream();
  const headers = (res.headers ?? {}) as Record<string, string | undefined>;
  const declared = Number(headers['content-length']);
  if (declared > o.maxBytes) {
    stream.destroy();
    throw tooLarge(declared);
  }
  if (o.signal) addAbortSignal(o.signal, stream);
  let data: Buffer;
  try {
    data = await readAtMost(stream, o.maxBytes, tooLarge);
  } catch (err) {
    if (err instanceof InvalidInputError || (err instanceof Error && err.name === 'AbortError')) throw err;
    throw networkError(`${where.type} download`, err, []);
  }
  // A file the platform serves as bytes of no type has the type its name says.
  const type = headers['content-type'];
  const mediaType = (!type || type.startsWith('application/octet-stream')) && attachment.mime ? attachment.mime : type;
  return { data, ...(mediaType && { mediaType }) };
}

/** The stream's bytes; throws `tooLarge` once past `maxBytes` (leaving the loop destroys the stream). */
async function readAtMost(stream: Readable, maxBytes: number, tooLarge: (size: number) => Error): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    // The declared length may be missing or wrong: stop reading past the limit.
    if (size > maxBytes) throw tooLarge(size);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
