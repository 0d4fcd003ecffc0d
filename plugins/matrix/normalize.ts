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

/** A room id, `!opaque:server`. */
const ROOM_ID = /^![^\s:]+:\S+$/;

/** The conversation of a room: `<channel id>:<room id>` (`roomOf` parses it back). */
export const conversationIdOf = (channelId: string, roomId: string): string => `${channelId}:${roomId}`;

/** The room of a conversation, or undefined when `conversationId` is not one of this channel's. */
export function roomOf(channelId: string, conversationId: string): string | undefined {
  const prefix = `${channelId}:`;
  const id = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  return ROOM_ID.test(id) ? id : undefined;
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

type Relation = { rel_type?: unknown; 'm.in_reply_to'?: { event_id?: unknown } };

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
  const relation = (typeof content['m.relates_to'] === 'object' && content['m.relates_to'] !== null ? content['m.relates_to'] : {}) as Relation;
  if (relation.rel_type === 'm.replace') return { kind: 'skip', reason: 'edit' };
  const replyTo = typeof relation['m.in_reply_to']?.event_id === 'string' ? relation['m.in_reply_to'].event_id : undefined;
  const body = media ? media.text : content.body;
  const text = replyTo === undefined ? body : stripReplyFallback(body);
  if (text.trim() === '' && !media) return { kind: 'skip', reason: 'empty' };
  const message: InboundMessage = {
    conversationId: conversationIdOf(ctx.channelId, ctx.roomId),
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
