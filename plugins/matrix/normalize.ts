/**
 * Matrix timeline event → normalized inbound message (pure). Update key
 * `<channel id>:<event id>` (an event id is unique on its homeserver and the
 * same in every `/sync` that carries it, so a repeat is a duplicate);
 * conversation `<channel id>:<room id>`, a group when the room has more than
 * two joined members. `m.text` messages and media (`m.image`, `m.file`,
 * `m.audio` — voice messages are audio —, `m.video`) from others are passed
 * on, media as attachments referenced by their `mxc://` URI (checked here,
 * fetched only when a prompt is built); notices (bots talk to each other
 * with them), emotes, edits and the bot's own messages are skipped.
 */
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import { parseMxc } from './media.js';
import { type TimelineEvent, timelineEventSchema } from './sync-schema.js';

/** Attachment kind by media message type. */
const MEDIA_KINDS: Record<string, Attachment['kind']> = { 'm.image': 'image', 'm.file': 'file', 'm.audio': 'audio', 'm.video': 'video' };

/** A room id: `!opaque:server`, or from room version 12 on `!opaque` alone (the hash of the room's create event). */
const ROOM_ID = /^![^\s:]+(?::\S+)?$/;

/** A thread's root event id, `$opaque` (no whitespace, `/` or braces). */
const ROOT_ID = /^\$[^\s/{}]+$/;

/**
 * The conversation of a room, `<channel id>:<room id>`, or of a thread in it
 * (`m.thread`), `<channel id>:<room id>/<root event id>`: each thread is a
 * conversation of its own (`roomOf` and `threadOf` parse them back).
 */
export const conversationIdOf = (channelId: string, roomId: string, threadRoot?: string): string =>
  threadRoot === undefined ? `${channelId}:${roomId}` : `${channelId}:${roomId}/${threadRoot}`;

/** The room and thread root of a conversation, or undefined when `conversationId` is not one of this channel's. */
function partsOf(channelId: string, conversationId: string): { roomId: string; threadRoot?: string } | undefined {
  const prefix = `${channelId}:`;
  const id = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  const at = id.indexOf('/$');
  const roomId = at < 0 ? id : id.slice(0, at);
  const threadRoot = at < 0 ? undefined : id.slice(at + 1);
  if (!ROOM_ID.test(roomId) || roomId.includes('/') || (threadRoot !== undefined && !ROOT_ID.test(threadRoot))) return undefined;
  return { roomId, ...(threadRoot !== undefined && { threadRoot }) };
}

/** The room of a conversation, or undefined when `conversationId` is not one of this channel's. */
export function roomOf(channelId: string, conversationId: string): string | undefined {
  return partsOf(channelId, conversationId)?.roomId;
}

/** The thread root of a thread's conversation; undefined for a room's (or not this channel's). */
export function threadOf(channelId: string, conversationId: string): string | undefined {
  return partsOf(channelId, conversationId)?.threadRoot;
}

/** Why an event is not passed on. */
export type SkipReason = 'unreadable' | 'not-a-message' | 'own' | 'unsupported-type' | 'bad-media' | 'edit' | 'empty' | 'encrypted';

type Content = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * The text and attachment of a media message: its `body` is a caption when
 * a `filename` differs from it (the spec's media captions), else the file
 * name. `bad-media`: no `url`, or one off the `mxc://` grammar; an encrypted
 * file (`file` instead of `url`) is unsupported.
 */
function mediaOf(kind: Attachment['kind'], content: Content): { text: string; attachment: Attachment } | SkipReason {
  const url = str(content.url);
  if (url === undefined) return content.file === undefined ? 'bad-media' : 'unsupported-type';
  if (!parseMxc(url)) return 'bad-media';
  const body = str(content.body) ?? '';
  const filename = str(content.filename);
  const info = (typeof content.info === 'object' && content.info !== null ? content.info : {}) as Content;
  const mime = str(info.mimetype);
  const size = typeof info.size === 'number' && Number.isSafeInteger(info.size) && info.size >= 0 ? info.size : undefined;
  const name = (filename ?? body).slice(0, 512);
  const attachment: Attachment = { kind, ref: url, ...(name && { name }), ...(mime && { mime: mime.slice(0, 128) }), ...(size !== undefined && { size }) };
  return { text: filename !== undefined && filename !== body ? body : '', attachment };
}

/** What `normalizeEvent` needs besides the event. */
export interface NormalizeContext {
  channelId: string;
  roomId: string;
  /** The bot's user id (its own messages are skipped). */
  selfId: string;
  /** The room has more than two joined members. */
  group: boolean;
}

type Relation = { rel_type?: unknown; event_id?: unknown; is_falling_back?: unknown; 'm.in_reply_to'?: { event_id?: unknown } };

/** What an event's `m.relates_to` makes of it: an edit, or the thread it is in and the message it replies to. */
function relationOf(raw: unknown): 'edit' | { threadRoot?: string; replyTo?: string } {
  const relation = (typeof raw === 'object' && raw !== null ? raw : {}) as Relation;
  if (relation.rel_type === 'm.replace') return 'edit';
  const root = relation.rel_type === 'm.thread' && typeof relation.event_id === 'string' && ROOT_ID.test(relation.event_id) ? relation.event_id : undefined;
  const inReplyTo = typeof relation['m.in_reply_to']?.event_id === 'string' ? relation['m.in_reply_to'].event_id : undefined;
  // In a thread, a falling-back `m.in_reply_to` is for clients without threads, not a reply.
  const replyTo = root !== undefined && relation.is_falling_back === true ? undefined : inReplyTo;
  return { ...(root !== undefined && { threadRoot: root }), ...(replyTo !== undefined && { replyTo }) };
}

/**
 * A reply's body starts with a quote of the message it answers (`> <@ann:x> …`
 * lines, then an empty line), for clients that do not show replies; the
 * person's own text follows it.
 */
export function stripReplyFallback(body: string): string {
  const lines = body.split('\n');
  let i = 0;
  while (i < lines.length && lines[i]!.startsWith('>')) i++;
  if (i === 0 || lines[i] !== '') return body;
  return lines.slice(i + 1).join('\n');
}

/** Turns one raw timeline event into an inbound message, or says why it is skipped. */
export function normalizeEvent(
  ctx: NormalizeContext,
  raw: unknown,
): { kind: 'message'; message: InboundMessage; event: TimelineEvent } | { kind: 'skip'; reason: SkipReason } {
  const parsed = timelineEventSchema.safeParse(raw);
  if (!parsed.success) return { kind: 'skip', reason: 'unreadable' };
  const event = parsed.data;
  if (event.sender === ctx.selfId) return { kind: 'skip', reason: 'own' };
  // The bot holds no end-to-end keys: an encrypted message cannot be read (the room is told, inbound.ts).
  if (event.type === 'm.room.encrypted') return { kind: 'skip', reason: 'encrypted' };
  if (event.type !== 'm.room.message') return { kind: 'skip', reason: 'not-a-message' };
  const content = event.content ?? {};
  const mediaKind = typeof content.msgtype === 'string' ? MEDIA_KINDS[content.msgtype] : undefined;
  const media = mediaKind === undefined ? undefined : mediaOf(mediaKind, content);
  if (typeof media === 'string') return { kind: 'skip', reason: media };
  if ((content.msgtype !== 'm.text' && !media) || typeof content.body !== 'string') return { kind: 'skip', reason: 'unsupported-type' };
  const relation = relationOf(content['m.relates_to']);
  if (relation === 'edit') return { kind: 'skip', reason: 'edit' };
  const { threadRoot, replyTo } = relation;
  const body = media ? media.text : content.body;
  const text = replyTo === undefined ? body : stripReplyFallback(body);
  if (text.trim() === '' && !media) return { kind: 'skip', reason: 'empty' };
  const message: InboundMessage = {
    conversationId: conversationIdOf(ctx.channelId, ctx.roomId, threadRoot),
    updateKey: `${ctx.channelId}:${event.event_id}`,
    chatId: ctx.roomId,
    sender: { id: event.sender },
    text,
    messageId: event.event_id,
    ...(ctx.group && { group: true }),
    ...(replyTo !== undefined && { replyTo: { messageId: replyTo } }),
    ...(media && { attachments: [media.attachment] }),
  };
  return { kind: 'message', message, event };
}

type MemberEvent = { type?: unknown; state_key?: unknown; content?: { membership?: unknown }; unsigned?: { prev_content?: { membership?: unknown } } };

/**
 * The events after the bot's own join, when `events` (a room's timeline)
 * holds it: a newly joined room comes with its recent history, written
 * before the bot was there. A join that follows a join (a profile change)
 * is not one.
 */
export function afterOwnJoin(events: readonly unknown[], selfId: string): readonly unknown[] {
  const join = events.findLastIndex((raw) => {
    const e = raw as MemberEvent | null;
    return e?.type === 'm.room.member' && e.state_key === selfId && e.content?.membership === 'join' && e.unsigned?.prev_content?.membership !== 'join';
  });
  return join < 0 ? events : events.slice(join + 1);
}
