/**
 * The parts of a WhatsApp Cloud API webhook delivery the channel reads,
 * validated with zod at the edge. Objects are loose (Meta adds fields);
 * what the channel reads has to have its type.
 */
import { z } from 'zod';

const media = z.looseObject({
  id: z.string().min(1).max(256),
  mime_type: z.string().max(128).optional(),
  caption: z.string().max(4096).optional(),
  filename: z.string().max(512).optional(),
  voice: z.boolean().optional(),
});

/** One inbound message (`value.messages[]`). */
export const inboundMessageSchema = z.looseObject({
  from: z.string().regex(/^\d{1,32}$/, { error: 'expected a WhatsApp id (digits)' }),
  id: z.string().regex(/^[^\s{}]{1,256}$/, { error: 'expected a message id without whitespace or braces' }),
  timestamp: z.string().optional(),
  type: z.string().max(64),
  text: z.looseObject({ body: z.string() }).optional(),
  image: media.optional(),
  audio: media.optional(),
  video: media.optional(),
  document: media.optional(),
  sticker: media.optional(),
  interactive: z
    .looseObject({
      type: z.string(),
      button_reply: z.looseObject({ id: z.string().max(256), title: z.string().max(64) }).optional(),
      list_reply: z.looseObject({ id: z.string().max(256), title: z.string().max(64) }).optional(),
    })
    .optional(),
  button: z.looseObject({ payload: z.string().max(256).optional(), text: z.string().max(256) }).optional(),
  context: z.looseObject({ id: z.string().max(256).optional() }).optional(),
  /** Set on a message sent in a group (Cloud API groups). */
  group_id: z.string().max(256).optional(),
});

/** One status callback (`value.statuses[]`) of a message the bot sent. */
export const statusSchema = z.looseObject({
  id: z.string().min(1).max(256),
  status: z.string().max(32),
  recipient_id: z.string().regex(/^\d{1,32}$/, { error: 'expected a WhatsApp id (digits)' }),
  timestamp: z.string().optional(),
  errors: z.array(z.looseObject({ code: z.number().optional(), title: z.string().max(512).optional(), message: z.string().max(1024).optional() })).optional(),
});

const changeValue = z.looseObject({
  messaging_product: z.string().optional(),
  metadata: z.looseObject({ phone_number_id: z.string().max(64) }).optional(),
  contacts: z
    .array(z.looseObject({ wa_id: z.string().max(32).optional(), profile: z.looseObject({ name: z.string().max(256).optional() }).optional() }))
    .optional(),
  messages: z.array(inboundMessageSchema).max(100).optional(),
  statuses: z.array(statusSchema).max(1000).optional(),
});

/** A webhook delivery: `{ object, entry: [{ id, changes: [{ field, value }] }] }`. */
export const webhookPayloadSchema = z.looseObject({
  object: z.literal('whatsapp_business_account', { error: 'expected object "whatsapp_business_account"' }),
  entry: z
    .array(z.looseObject({ id: z.string().optional(), changes: z.array(z.looseObject({ field: z.string(), value: changeValue })).max(100) }))
    .min(1)
    .max(100),
});

export type WebhookPayload = z.output<typeof webhookPayloadSchema>;
export type WaMessage = z.output<typeof inboundMessageSchema>;
export type WaStatus = z.output<typeof statusSchema>;
export type ChangeValue = z.output<typeof changeValue>;
