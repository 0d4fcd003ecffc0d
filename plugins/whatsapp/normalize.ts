/**
 * WhatsApp message → normalized inbound message (pure). Ids as DESIGN.md
 * has them: update key `<channel id>:<message id>` (the `wamid`, so a
 * redelivered message is a duplicate), conversation `<channel id>:<wa_id>`
 * (WhatsApp chats with a business number are one-to-one; a group's
 * message, naming its `group_id`, is skipped). A button click, of the bot's
 * buttons or a template's quick replies, is a click (`interaction`), never
 * a typed message.
 */
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import type { WaMessage } from './payload-schema.js';

/** The conversation of a WhatsApp user: `<channel id>:<wa_id>` (`recipientOf` parses it back). */
export const conversationIdOf = (channelId: string, waId: string): string => `${channelId}:${waId}`;

/** Why a message is not passed on. */
export type SkipReason = 'unsupported-type' | 'empty' | 'group';

/** Result of `normalizeMessage`. `button`: a click on a reply button (its id, a control command, is the text). */
export type Normalized = { kind: 'message' | 'button'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason };

type Media = NonNullable<WaMessage['image']>;

function ref(kind: Attachment['kind'], m: Media): Attachment {
  return {
    kind,
    ref: m.id,
    ...(m.filename !== undefined && { name: m.filename.slice(0, 512) }),
    ...(m.mime_type !== undefined && { mime: m.mime_type.slice(0, 128) }),
  };
}

/** The text and attachments of a message by its type; undefined for a type the channel does not read (location, contacts, reaction, …). */
function contentOf(msg: WaMessage): { text: string; attachments: Attachment[] } | undefined {
  switch (msg.type) {
    case 'text':
      return { text: msg.text?.body ?? '', attachments: [] };
    case 'image':
    case 'video':
    case 'document':
    case 'sticker': {
      const m = msg[msg.type];
      if (!m) return undefined;
      const kind = msg.type === 'document' ? 'file' : msg.type;
      return { text: m.caption ?? '', attachments: [ref(kind, m)] };
    }
    case 'audio':
      // A voice note is `audio` with `voice: true`; both are audio to the runner.
      return msg.audio ? { text: '', attachments: [ref('audio', msg.audio)] } : undefined;
    case 'button':
      // A template's quick-reply button: what it said is the user's message.
      return { text: msg.button?.text ?? '', attachments: [] };
    case 'interactive': {
      const reply = msg.interactive?.list_reply;
      return reply ? { text: reply.title, attachments: [] } : undefined;
    }
    default:
      return undefined;
  }
}

/** Turns one message into an inbound message, or says why it is skipped. `name`: the sender's profile name, from `contacts`. */
export function normalizeMessage(channelId: string, msg: WaMessage, name: string | undefined): Normalized {
  const base = {
    conversationId: conversationIdOf(channelId, msg.from),
    updateKey: `${channelId}:${msg.id}`,
    chatId: msg.from,
    sender: { id: msg.from, ...(name && { name: name.slice(0, 256) }) },
    messageId: msg.id,
  };
  // A group's message (Cloud API groups): this channel's conversations are one-to-one.
  if (msg.group_id !== undefined) return { kind: 'skip', reason: 'group' };
  const button = msg.interactive?.type === 'button_reply' ? msg.interactive.button_reply : undefined;
  // Buttons the bot sends carry a control command as their id (`/approve ap_…`).
  if (button?.id.startsWith('/')) return { kind: 'button', message: { ...base, text: button.id, interaction: 'button' } };
  // Any other button says its id (the command it was sent with), never its title: a title is only shown, and a
  // click is a click (`interaction`), so neither can pass for a typed `/pair`.
  const content = button ? { text: button.id, attachments: [] } : contentOf(msg);
  if (!content) return { kind: 'skip', reason: 'unsupported-type' };
  if (content.text.trim() === '' && content.attachments.length === 0) return { kind: 'skip', reason: 'empty' };
  const clicked = button !== undefined || msg.type === 'button';
  const message: InboundMessage = { ...base, text: content.text, ...(clicked && { interaction: 'button' as const }) };
  if (msg.context?.id !== undefined) message.replyTo = { messageId: msg.context.id };
  if (content.attachments.length > 0) message.attachments = content.attachments;
  return { kind: 'message', message };
}
