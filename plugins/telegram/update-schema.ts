/**
 * The part of a Telegram `Update` steerbot reads, validated at the webhook
 * and poll boundary. Unknown fields pass through untouched: Telegram adds
 * fields often, and a new one must not turn a good update into a 400.
 */
import { z } from 'zod';

const id = z.number().int();

const userSchema = z.looseObject({
  id,
  is_bot: z.boolean().optional(),
  first_name: z.string().optional(),
  last_name: z.string().optional(),
  username: z.string().optional(),
});

const chatSchema = z.looseObject({
  id,
  type: z.enum(['private', 'group', 'supergroup', 'channel']),
  title: z.string().optional(),
  username: z.string().optional(),
  is_forum: z.boolean().optional(),
});

const entitySchema = z.looseObject({
  type: z.string(),
  offset: z.number().int().nonnegative(),
  length: z.number().int().nonnegative(),
  user: userSchema.optional(),
});

const fileSchema = z.looseObject({
  file_id: z.string().min(1),
  file_unique_id: z.string().optional(),
  file_name: z.string().optional(),
  mime_type: z.string().optional(),
  file_size: z.number().int().nonnegative().optional(),
});

const photoSizeSchema = fileSchema.extend({ width: z.number().int(), height: z.number().int() });

/** Fields shared by a message and the message it replies to. */
const messageFields = {
  message_id: id,
  message_thread_id: id.optional(),
  is_topic_message: z.boolean().optional(),
  from: userSchema.optional(),
  /** Set when the message was sent on behalf of a chat (a channel, or a group's anonymous admin); `from` is then a placeholder bot. */
  sender_chat: chatSchema.optional(),
  chat: chatSchema,
  date: z.number().int().optional(),
  text: z.string().optional(),
  caption: z.string().optional(),
  entities: z.array(entitySchema).optional(),
  caption_entities: z.array(entitySchema).optional(),
  photo: z.array(photoSizeSchema).optional(),
  document: fileSchema.optional(),
  voice: fileSchema.optional(),
  audio: fileSchema.optional(),
  video: fileSchema.optional(),
  video_note: fileSchema.optional(),
  animation: fileSchema.optional(),
  sticker: fileSchema.extend({ emoji: z.string().optional() }).optional(),
};

/** A message replied to: Telegram may omit `chat` there in some clients' payloads, so it is lenient. */
const repliedMessageSchema = z.looseObject({ ...messageFields, chat: chatSchema.optional() });

/** A Telegram message, as far as steerbot reads it. */
export const telegramMessageSchema = z.looseObject({
  ...messageFields,
  reply_to_message: repliedMessageSchema.optional(),
});

/** A click on an inline keyboard button under one of the bot's messages. */
export const callbackQuerySchema = z.looseObject({
  id: z.string().min(1),
  from: userSchema,
  data: z.string().max(64).optional(),
  message: repliedMessageSchema.optional(),
});

/** A Telegram update: `message` and `callback_query` are handled; other kinds are accepted and ignored. */
export const telegramUpdateSchema = z.looseObject({
  update_id: z.number().int().nonnegative(),
  message: telegramMessageSchema.optional(),
  callback_query: callbackQuerySchema.optional(),
});

export type TelegramUser = z.infer<typeof userSchema>;
export type TelegramChat = z.infer<typeof chatSchema>;
export type TelegramEntity = z.infer<typeof entitySchema>;
export type TelegramMessage = z.infer<typeof telegramMessageSchema>;
export type TelegramUpdate = z.infer<typeof telegramUpdateSchema>;
