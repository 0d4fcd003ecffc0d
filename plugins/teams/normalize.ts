/**
 * Teams activity → normalized inbound message (pure). Conversation
 * `<channel id>:<conversation.id>`: a personal chat (`a:…`), a group chat
 * (`19:…@thread.v2`) or a channel thread (`19:…@thread.tacv2;messageid=<root
 * id>`: Teams names the thread in the id, so each thread is its own
 * conversation). Update key `<channel id>:<conversation.id>:<activity id>`
 * (a redelivered activity keeps its id, so it is a duplicate). A click on
 * one of the bot's Adaptive Card buttons is an activity whose `value`
 * carries the button's command: it becomes that command from the clicker.
 * Only activities of the Teams channel are taken: the same Azure Bot may
 * also be on Web Chat or Direct Line, whose clients choose their own
 * sender ids.
 */
import type { InboundMessage } from 'steerbot/channel';
import { InvalidInputError } from 'steerbot/plugin';
import type { TeamsActivity } from './activity-schema.js';

/** The key of an `Action.Submit`'s data that holds the command of one of our buttons. */
export const COMMAND_FIELD = 'steerbot';

/** Why an activity is not passed on. */
export type SkipReason = 'not-teams' | 'not-a-message' | 'own' | 'no-id' | 'not-our-button' | 'empty';

/** The `channelId` of activities from Microsoft Teams. */
const TEAMS_CHANNEL_ID = 'msteams';

/** The conversation of a Teams conversation id. */
export const conversationIdOf = (channelId: string, teamsConversationId: string): string => `${channelId}:${teamsConversationId}`;

/** Parses `<channel id>:<conversation.id>` back; throws InvalidInputError for any other conversation. */
export function teamsConversationOf(channelId: string, conversationId: string): string {
  const prefix = `${channelId}:`;
  const id = conversationId.startsWith(prefix) ? conversationId.slice(prefix.length) : '';
  if (!/^[^\s/?#]{1,512}$/.test(id)) throw new InvalidInputError(`not a ${channelId} conversation: ${conversationId}`);
  return id;
}

/** The text without the `<at>…</at>` mentions of the bot (Teams puts them in the text of a channel or group message). */
function withoutBotMentions(a: TeamsActivity): string {
  let text = a.text ?? '';
  for (const e of a.entities ?? []) {
    if (e.type === 'mention' && e.text && e.mentioned?.id === a.recipient?.id) text = text.split(e.text).join('');
  }
  return text.replace(/&nbsp;/g, ' ').trim();
}

/** The command of a click on one of our buttons, or undefined. */
function commandOf(value: unknown): string | undefined {
  const command = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[COMMAND_FIELD] : undefined;
  return typeof command === 'string' && command.startsWith('/') && command.length <= 512 ? command : undefined;
}

/** Turns one activity into an inbound message, or says why it is skipped. */
export function normalizeActivity(channelId: string, a: TeamsActivity): { kind: 'message'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason } {
  if (a.channelId !== TEAMS_CHANNEL_ID) return { kind: 'skip', reason: 'not-teams' };
  if (a.type !== 'message') return { kind: 'skip', reason: 'not-a-message' };
  if (a.recipient && a.from.id === a.recipient.id) return { kind: 'skip', reason: 'own' };
  if (a.id === undefined) return { kind: 'skip', reason: 'no-id' };
  const command = a.value === undefined ? undefined : commandOf(a.value);
  if (a.value !== undefined && !command && !a.text) return { kind: 'skip', reason: 'not-our-button' };
  const text = command ?? withoutBotMentions(a);
  if (text === '') return { kind: 'skip', reason: 'empty' };
  const chatId = a.conversation.id;
  const type = a.conversation.conversationType;
  const message: InboundMessage = {
    conversationId: conversationIdOf(channelId, chatId),
    updateKey: `${channelId}:${chatId}:${a.id}`,
    chatId,
    sender: { id: a.from.id, ...(a.from.name && { name: a.from.name.slice(0, 256) }) },
    text,
    messageId: a.id,
    ...(type !== undefined && type !== 'personal' && { group: true }),
    ...(command !== undefined && { interaction: 'button' as const }),
  };
  if (command === undefined && a.replyToId !== undefined) message.replyTo = { messageId: a.replyToId };
  return { kind: 'message', message };
}
