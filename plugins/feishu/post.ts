/**
 * Rich-text (`post`) messages, read (pure). The client sends `post`
 * whenever a message has formatting, a link, an inline image or an
 * @mention in rich text. An event carries it unwrapped, `{ title, content }`;
 * the send API's shape wraps it in a locale, `{ zh_cn: { title, content } }`,
 * and either is read (`zh_cn`, then `en_us`, `ja_jp`, then any other).
 * `content` is paragraphs of elements (`tag`): `text`, `a` (its text and
 * URL), `at` (the member, `@name`; the bot's own mention is dropped, as in
 * a text message), `emotion`, `code_block`, `hr`; an `img` becomes an image
 * attachment and a `media` a video attachment (a `file` resource), by the
 * same references as image and file messages. Other tags are skipped. Sizes are
 * bounded (paragraphs, elements, attachments); a content off the shape is
 * unreadable, never half read.
 */
import type { Attachment } from 'steerbot/plugin';
import { z } from 'zod';
import { resourceRef } from './resources.js';

/** Most paragraphs a post may have. */
export const POST_MAX_PARAGRAPHS = 1000;
/** Most elements a post may have, in all its paragraphs. */
export const POST_MAX_ELEMENTS = 5000;
/** Most attachments kept of one post (the record's limit); later images and videos are left out. */
export const POST_MAX_ATTACHMENTS = 32;

const element = z.looseObject({
  tag: z.string().max(32),
  text: z.string().optional(),
  href: z.string().max(8192).optional(),
  user_id: z.string().max(128).optional(),
  user_name: z.string().max(256).optional(),
  image_key: z.string().max(256).optional(),
  file_key: z.string().max(256).optional(),
  emoji_type: z.string().max(64).optional(),
  language: z.string().max(64).optional(),
});

const body = z.looseObject({
  title: z.string().max(10_000).optional(),
  content: z
    .array(z.array(element).max(POST_MAX_ELEMENTS))
    .max(POST_MAX_PARAGRAPHS)
    .refine((ps) => ps.reduce((n, p) => n + p.length, 0) <= POST_MAX_ELEMENTS, { error: `more than ${POST_MAX_ELEMENTS} elements` }),
});

type PostBody = z.output<typeof body>;
type PostElement = z.output<typeof element>;

/** Locales tried first, in order, when the post is wrapped in locales. */
const LOCALES = ['zh_cn', 'en_us', 'ja_jp'];

/** The post's body: unwrapped, or the first locale's; a problem when neither is there or it is off the shape. */
function bodyOf(content: Record<string, unknown>): { post: PostBody } | { problem: string } {
  let raw: unknown = content;
  if (!('content' in content)) {
    const keys = [...LOCALES.filter((k) => k in content), ...Object.keys(content).filter((k) => !LOCALES.includes(k))];
    const locale = keys.find((k) => typeof content[k] === 'object' && content[k] !== null && 'content' in (content[k] as object));
    if (locale === undefined) return { problem: 'post without content' };
    raw = content[locale];
  }
  const r = body.safeParse(raw);
  if (r.success) return { post: r.data };
  const issue = r.error.issues[0];
  return { problem: `post ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}` };
}

/** Who an `at` element names: its mention key (`@_user_1`) in the event's `mentions`, or an open id. */
export interface Mention {
  key: string;
  openId?: string | undefined;
  name?: string | undefined;
}

/** A name or language on one line: control characters and line breaks become spaces. */
const oneLine = (s: string): string => s.replace(/[\p{Cc}\s]+/gu, ' ').trim();

/** A link as text: its text, then its URL when that says more. */
function linkText(e: PostElement): string {
  const text = e.text ?? '';
  const href = oneLine(e.href ?? '');
  if (href === '' || text.includes(href)) return text;
  return text.trim() === '' ? href : `${text} (${href})`;
}

/** An `at` element as text: empty for the bot, else `@name`. */
function mentionText(e: PostElement, mentions: readonly Mention[], botOpenId: string | undefined): string {
  const id = e.user_id ?? '';
  const m = mentions.find((x) => x.key === id);
  const openId = m?.openId ?? (id.startsWith('ou_') ? id : undefined);
  if (openId !== undefined && openId === botOpenId) return '';
  if (id === 'all' || id === '@_all') return '@all';
  const name = oneLine(m?.name ?? e.user_name ?? '');
  return `@${name === '' ? 'someone' : name}`;
}

/** A code block, fenced, with its language when it is a plain word. */
function codeBlock(e: PostElement): string {
  const language = /^[A-Za-z0-9_+#.-]{1,32}$/.test(e.language ?? '') ? (e.language as string).toLowerCase() : '';
  return `\`\`\`${language}\n${trimNewlines(e.text ?? '')}\n\`\`\``;
}

/** `text` without its trailing newlines, in one pass (`/\n+$/` tried every newline of a run that does not end the text: 7 s for 100 000). */
function trimNewlines(text: string): string {
  let end = text.length;
  while (end > 0 && text[end - 1] === '\n') end--;
  return text.slice(0, end);
}

/** What one element adds: text in its line, a block of lines of its own, an attachment, nothing, or a problem. */
type Piece = { inline: string } | { block: string } | { attachment: Attachment } | { problem: string } | undefined;

/** Where a post was sent, and who its `at` elements may name. */
interface PostContext {
  messageId: string;
  mentions: readonly Mention[];
  botOpenId: string | undefined;
}

/** What element `e` adds. */
function pieceOf(e: PostElement, o: PostContext): Piece {
  switch (e.tag) {
    case 'text':
      return { inline: e.text ?? '' };
    case 'a':
      return { inline: linkText(e) };
    case 'at':
      return { inline: mentionText(e, o.mentions, o.botOpenId) };
    case 'emotion':
      return { inline: e.text ?? (/^[A-Za-z0-9_]{1,64}$/.test(e.emoji_type ?? '') ? `[${e.emoji_type}]` : '') };
    case 'hr':
      return { block: '---' };
    case 'code_block':
      return { block: codeBlock(e) };
    case 'img':
    case 'media': {
      const image = e.tag === 'img';
      const key = image ? e.image_key : e.file_key;
      const ref = key === undefined ? undefined : resourceRef({ messageId: o.messageId, type: image ? 'image' : 'file', key });
      return ref === undefined ? { problem: `post ${e.tag} without a key of the grammar` } : { attachment: { kind: image ? 'image' : 'video', ref } };
    }
    default:
      // A tag this build does not know (or one with nothing to read): its neighbours are still read.
      return undefined;
  }
}

/** The lines of one paragraph (none for one with nothing to read); its attachments go to `attachments`. */
function readParagraph(paragraph: readonly PostElement[], o: PostContext, attachments: Attachment[]): string[] | { problem: string } {
  const out: string[] = [];
  let line = '';
  const flush = () => {
    const done = line.replace(/ {2,}/g, ' ').trim();
    if (done !== '') out.push(done);
    line = '';
  };
  for (const e of paragraph) {
    const piece = pieceOf(e, o);
    if (piece === undefined) continue;
    if ('problem' in piece) return piece;
    if ('inline' in piece) line += piece.inline;
    else if ('attachment' in piece) {
      if (attachments.length < POST_MAX_ATTACHMENTS) attachments.push(piece.attachment);
    } else {
      // A code block or a rule stands on its own lines, as it was written.
      flush();
      out.push(piece.block);
    }
  }
  flush();
  return out;
}

/**
 * The text and attachments of a post's content (parsed JSON) sent as
 * message `messageId`: the title, then each paragraph on its own line(s).
 * A problem (named for the log) when it is off the shape, or names a file
 * off the grammar of keys.
 */
export function readPost(content: Record<string, unknown>, o: PostContext): { text: string; attachments?: Attachment[] } | { problem: string } {
  const parsed = bodyOf(content);
  if ('problem' in parsed) return parsed;
  const lines: string[] = [];
  const attachments: Attachment[] = [];
  const push = (line: string) => {
    // One blank line at most between paragraphs.
    if (line !== '' || (lines.length > 0 && lines.at(-1) !== '')) lines.push(line);
  };
  push(oneLine(parsed.post.title ?? ''));
  for (const paragraph of parsed.post.content) {
    const read = readParagraph(paragraph, o, attachments);
    if ('problem' in read) return read;
    // An empty paragraph is an empty line (one that held only an image, say, is no line at all).
    for (const l of paragraph.length === 0 ? [''] : read) push(l);
  }
  const text = lines.join('\n').trim();
  return attachments.length > 0 ? { text, attachments } : { text };
}
