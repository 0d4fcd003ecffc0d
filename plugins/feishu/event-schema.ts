/**
 * The parts of the events the channel reads, validated with zod at the
 * edge, in the flattened shape the SDK's `EventDispatcher` hands its
 * handlers (v2 schema: the header's fields and the event's side by side).
 * Objects are loose (the platform adds fields); what the channel reads has
 * to have its type.
 */
import { z } from 'zod';

/** An open platform id (`ou_…`, `oc_…`, `om_…`, `omt_…`): no whitespace, at most 128 characters. */
const id = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, { error: 'expected a Feishu id' });

/** `im.message.receive_v1`. */
export const messageEventSchema = z.looseObject({
  event_id: z.string().max(128).optional(),
  sender: z.looseObject({
    sender_id: z.looseObject({ open_id: id.optional() }).optional(),
    sender_type: z.string().max(32).optional(),
  }),
  message: z.looseObject({
    message_id: id,
    root_id: id.optional(),
    thread_id: id.optional(),
    chat_id: id,
    chat_type: z.string().max(32),
    message_type: z.string().max(32),
    content: z.string().max(200_000),
    mentions: z
      .array(z.looseObject({ key: z.string().max(64), id: z.looseObject({ open_id: id.optional() }).optional(), name: z.string().max(256).optional() }))
      .max(100)
      .optional(),
  }),
});

/** `card.action.trigger`: a click on a card's button. */
export const cardActionSchema = z.looseObject({
  event_id: z.string().max(128).optional(),
  operator: z.looseObject({ open_id: id, name: z.string().max(256).optional() }),
  action: z.looseObject({ tag: z.string().max(64).optional(), value: z.record(z.string(), z.unknown()).optional() }),
  context: z.looseObject({ open_message_id: id.optional(), open_chat_id: id }),
});

/** An HTTP callback's body once decrypted: a URL verification, or a v2 event or callback. */
export const callbackSchema = z.looseObject({
  type: z.string().max(64).optional(),
  challenge: z.string().max(256).optional(),
  token: z.string().max(256).optional(),
  schema: z.string().max(16).optional(),
  header: z.looseObject({ event_id: z.string().max(128), event_type: z.string().max(128), token: z.string().max(256).optional() }).optional(),
  event: z.record(z.string(), z.unknown()).optional(),
});

export type MessageEvent = z.output<typeof messageEventSchema>;
export type CardAction = z.output<typeof cardActionSchema>;
export type Callback = z.output<typeof callbackSchema>;
