/**
 * What a message says, by its type (pure): the `content` JSON of
 * `im.message.receive_v1`, validated with zod, read into text and
 * attachments by reference (`resources.ts`).
 *
 * - `text`: its text, the bot's mention removed and others shown as `@name`.
 * - `post` (rich text): its title and paragraphs, inline images and videos as attachments (`post.ts`).
 * - `image`: an image attachment (`<message id>/image/<image_key>`).
 * - `file`: a file attachment (`<message id>/file/<file_key>`), typed by its name.
 * - `audio` (a voice message): an audio attachment, downloaded as a `file`
 *   resource, as the platform requires for audio, and transcribed by a runner that can.
 * - `media` (a video): a video attachment, a `file` resource, with its name.
 * - `sticker`: the platform serves no sticker's bytes, so the model is told `[sticker]`.
 *
 * A content off its type's shape (or naming a key off the grammar) is a
 * problem, named for the log; the message is then not taken.
 */
import { type Attachment, parseJson } from 'steerbot/plugin';
import { z } from 'zod';
import type { MessageEvent } from './event-schema.js';
import { type Mention, readPost } from './post.js';
import { kindOfMime, mimeOfName, resourceRef } from './resources.js';

/** What stands for a sticker. */
export const STICKER_TEXT = '[sticker]';

/** A message's text and attachments, and what the record keeps beside them. */
export interface Body {
  text: string;
  attachments?: Attachment[];
  /** A voice message's or video's length, in ms, when the platform names it. */
  metadata?: { durationMs: number };
}

/** A length in ms; one of another type is dropped rather than failing the message (it is only noted). */
const duration = z.number().int().nonnegative().max(86_400_000).optional().catch(undefined);

const SCHEMAS = {
  text: z.looseObject({ text: z.string() }),
  image: z.looseObject({ image_key: z.string().max(256) }),
  file: z.looseObject({ file_key: z.string().max(256), file_name: z.string().optional() }),
  audio: z.looseObject({ file_key: z.string().max(256), duration }),
  media: z.looseObject({ file_key: z.string().max(256), file_name: z.string().optional(), duration }),
  sticker: z.looseObject({ file_key: z.string().max(256) }),
};

/** The message's `content`, parsed; undefined when it is not a JSON object (or is nested past the limit). */
function jsonOf(e: MessageEvent): Record<string, unknown> | undefined {
  const content = parseJson(e.message.content);
  if (!content.ok) return undefined;
  const v = content.value;
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** A file's name as the model may be shown it, in a placeholder line: control characters and line breaks become spaces; undefined when empty. */
function fileName(raw: string | undefined): string | undefined {
  const name = (raw ?? '')
    .replace(/[\p{Cc}\s]+/gu, ' ')
    .trim()
    .slice(0, 512);
  return name === '' ? undefined : name;
}

const problemOf = (type: string, r: { error: { issues: Array<{ path: PropertyKey[]; message: string }> } }): { problem: string } => {
  const issue = r.error.issues[0];
  return { problem: `${type} ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}` };
};

const badKey = (type: string) => ({ problem: `${type} names a key off the grammar` });

/** Where a message was sent and who it mentions: what a reader needs besides the content. */
interface ReadContext {
  type: string;
  messageId: string;
  mentions: Mention[];
  botOpenId: string | undefined;
}

type Reader = (json: Record<string, unknown>, o: ReadContext) => Body | { problem: string };

const durationOf = (ms: number | undefined): { metadata?: { durationMs: number } } => (ms === undefined ? {} : { metadata: { durationMs: ms } });

/** A file resource's attachment, typed by its name (a video's, when it names none, is still a video). */
function fileBody(o: ReadContext, kind: 'file' | 'video', key: string, rawName: string | undefined, durationMs?: number): Body | { problem: string } {
  const ref = resourceRef({ messageId: o.messageId, type: 'file', key });
  if (ref === undefined) return badKey(o.type);
  const name = fileName(rawName);
  const mime = name === undefined ? undefined : mimeOfName(name);
  const attachment: Attachment = {
    kind: kind === 'video' ? kind : kindOfMime(mime),
    ref,
    ...(name !== undefined && { name }),
    ...(mime !== undefined && { mime }),
  };
  return { text: '', attachments: [attachment], ...durationOf(durationMs) };
}

/** Each read type's reader. */
const READERS: Record<string, Reader> = {
  text: (json, o) => {
    const r = SCHEMAS.text.safeParse(json);
    if (!r.success) return problemOf(o.type, r);
    let text = r.data.text;
    for (const m of o.mentions) text = text.split(m.key).join(m.openId === o.botOpenId ? '' : `@${m.name ?? 'someone'}`);
    return { text: text.replace(/\s+/g, ' ').trim() };
  },
  post: (json, o) => readPost(json, o),
  image: (json, o) => {
    const r = SCHEMAS.image.safeParse(json);
    if (!r.success) return problemOf(o.type, r);
    const ref = resourceRef({ messageId: o.messageId, type: 'image', key: r.data.image_key });
    return ref === undefined ? badKey(o.type) : { text: '', attachments: [{ kind: 'image', ref }] };
  },
  file: (json, o) => {
    const r = SCHEMAS.file.safeParse(json);
    return r.success ? fileBody(o, 'file', r.data.file_key, r.data.file_name) : problemOf(o.type, r);
  },
  media: (json, o) => {
    const r = SCHEMAS.media.safeParse(json);
    return r.success ? fileBody(o, 'video', r.data.file_key, r.data.file_name, r.data.duration) : problemOf(o.type, r);
  },
  audio: (json, o) => {
    const r = SCHEMAS.audio.safeParse(json);
    if (!r.success) return problemOf(o.type, r);
    const ref = resourceRef({ messageId: o.messageId, type: 'file', key: r.data.file_key });
    if (ref === undefined) return badKey(o.type);
    // The platform's voice messages are Opus in Ogg (it takes only `opus` uploads for them).
    return { text: '', attachments: [{ kind: 'audio', ref, mime: 'audio/ogg' }], ...durationOf(r.data.duration) };
  },
  sticker: (json, o) => {
    const r = SCHEMAS.sticker.safeParse(json);
    return r.success ? { text: STICKER_TEXT } : problemOf(o.type, r);
  },
};

/** Message types read. */
export const READ_TYPES: ReadonlySet<string> = new Set(Object.keys(READERS));

/** A message's body by its type (one of `READ_TYPES`), or the problem with its content. */
export function readBody(e: MessageEvent, botOpenId: string | undefined): Body | { problem: string } {
  const type = e.message.message_type;
  // Own keys only: a type named like an Object method is not read.
  const reader = Object.hasOwn(READERS, type) ? READERS[type] : undefined;
  if (reader === undefined) return { problem: `${type} is not read` };
  const json = jsonOf(e);
  if (json === undefined) return { problem: `${type} content is not a JSON object` };
  const mentions = (e.message.mentions ?? []).map((m) => ({ key: m.key, openId: m.id?.open_id, name: m.name }));
  return reader(json, { type, messageId: e.message.message_id, mentions, botOpenId });
}
