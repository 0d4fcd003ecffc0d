/**
 * Turns a discord.js message into the host's normalized InboundMessage, or
 * says why the bot stays silent: its own message, another bot, a system
 * message, a guild message that does not address it, a user or chat outside
 * the allow-lists.
 */
import { type Message, MessageType } from 'discord.js';
import type { InboundMessage } from 'steerbot/channel';
import type { Attachment } from 'steerbot/plugin';
import type { DiscordConfig } from './config.js';

/** Why a message is not handed to the host. */
export type SkipReason = 'own' | 'bot' | 'system' | 'not-addressed' | 'not-allowed' | 'empty';

/** Result of `normalizeMessage`. */
export type Normalized = { kind: 'message'; message: InboundMessage } | { kind: 'skip'; reason: SkipReason };

/** Most attachments kept per message (the record's limit). */
const MAX_ATTACHMENTS = 32;

type AddressingConfig = Pick<DiscordConfig, 'alwaysChannels' | 'allowedUsers' | 'allowedChats' | 'answerBots'>;

/** Decides on and normalizes one gateway message. `botId` is the bot's own user id. */
// biome-ignore lint/complexity/noExcessiveCognitiveComplexity: one skip guard per rule (own message, bots, system, addressing, allow-lists, empty), then the message built; the guards read as the decision table
export function normalizeMessage(m: Message, channelId: string, botId: string, config: AddressingConfig): Normalized {
  if (m.author.id === botId) return { kind: 'skip', reason: 'own' };
  if ((m.author.bot || m.webhookId) && !config.answerBots) return { kind: 'skip', reason: 'bot' };
  if (m.type !== MessageType.Default && m.type !== MessageType.Reply) return { kind: 'skip', reason: 'system' };

  const channel = m.channel;
  const threadParentId = channel.isThread() ? (channel.parentId ?? undefined) : undefined;
  const guildId = m.guildId ?? undefined;
  if (guildId !== undefined) {
    const always = config.alwaysChannels.includes(m.channelId) || (threadParentId !== undefined && config.alwaysChannels.includes(threadParentId));
    if (!always && !addressesBot(m, botId)) return { kind: 'skip', reason: 'not-addressed' };
  }
  if (config.allowedUsers.length > 0 && !config.allowedUsers.includes(m.author.id)) return { kind: 'skip', reason: 'not-allowed' };
  // The host checks `chatId` against the same allow-list, so it is the id that matched: the
  // channel itself, a thread's parent channel, or the guild (most specific first).
  let chatId = m.channelId;
  if (config.allowedChats.length > 0) {
    const matched = [m.channelId, threadParentId, guildId].find((c) => c !== undefined && config.allowedChats.includes(c));
    if (matched === undefined) return { kind: 'skip', reason: 'not-allowed' };
    chatId = matched;
  }

  const text = stripLeadingMention(m.content, botId, m.guild?.roles.botRoleFor(botId)?.id);
  const attachments = attachmentsOf(m);
  if (text.length === 0 && attachments.length === 0) return { kind: 'skip', reason: 'empty' };

  const message: InboundMessage = {
    // A thread is its own channel, so its id alone gives one conversation per thread.
    conversationId: `${channelId}:${m.channelId}`,
    updateKey: `${channelId}:${m.id}`,
    chatId,
    sender: { id: m.author.id, name: m.author.globalName ?? m.author.username, isBot: m.author.bot },
    text,
    messageId: m.id,
    ...(guildId !== undefined && { group: true }),
  };
  const ref = m.reference?.messageId;
  if (ref) {
    const quoted = m.reference?.channelId === m.channelId ? m.channel.messages.cache.get(ref)?.content : undefined;
    message.replyTo = quoted ? { messageId: ref, text: quoted } : { messageId: ref };
  }
  if (attachments.length > 0) message.attachments = attachments;
  const metadata: Record<string, unknown> = {};
  if (guildId !== undefined) metadata.guildId = guildId;
  if (threadParentId !== undefined) metadata.threadParentId = threadParentId;
  if (guildId === undefined) metadata.dm = true;
  message.metadata = metadata;
  return { kind: 'message', message };
}

/**
 * A guild message addresses the bot when it mentions the bot, or the bot's
 * managed role (what Discord inserts when `@BotName` is picked as the role),
 * or replies to one of the bot's messages.
 */
function addressesBot(m: Message, botId: string): boolean {
  if (m.mentions.users.has(botId)) return true;
  if (m.mentions.repliedUser?.id === botId) return true;
  const role = m.guild?.roles.botRoleFor(botId);
  if (role && m.mentions.roles.has(role.id)) return true;
  return new RegExp(`<@!?${botId}>`).test(m.content);
}

/** Removes the bot's mention (`<@id>`, the legacy `<@!id>`, or its role `<@&role>`) from the start of the text. */
export function stripLeadingMention(content: string, botId: string, botRoleId?: string): string {
  const target = botRoleId ? `(?:@!?${botId}|@&${botRoleId})` : `@!?${botId}`;
  return content.replace(new RegExp(`^\\s*<${target}>[\\s,:]*`), '').trim();
}

function attachmentsOf(m: Message): Attachment[] {
  const out: Attachment[] = [];
  for (const a of m.attachments.values()) {
    const item: Attachment = { kind: kindOf(a.contentType), ref: a.url };
    if (a.name) item.name = a.name.slice(0, 512);
    if (a.contentType) item.mime = a.contentType.slice(0, 128);
    if (Number.isInteger(a.size) && a.size >= 0) item.size = a.size;
    out.push(item);
  }
  for (const s of m.stickers.values()) out.push({ kind: 'sticker', ref: s.url, name: s.name.slice(0, 512) });
  return out.slice(0, MAX_ATTACHMENTS);
}

function kindOf(contentType: string | null): Attachment['kind'] {
  const major = contentType?.split('/')[0];
  if (major === 'image' || major === 'audio' || major === 'video') return major;
  return 'file';
}
