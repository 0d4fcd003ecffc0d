/**
 * The parts of a LINE webhook delivery the channel reads, validated with zod
 * at the edge. Objects are loose (LINE adds fields and event types); what
 * the channel reads has to have its type. The SDK's `webhook.CallbackRequest`
 * types the same body but does not check it.
 */
import { z } from 'zod';

/** A LINE id (user `U…`, group `C…`, room `R…`): no whitespace, at most 64 characters. */
const lineId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected a LINE id' });

const source = z.looseObject({
  type: z.string().max(32),
  userId: lineId.optional(),
  groupId: lineId.optional(),
  roomId: lineId.optional(),
});

/** One webhook event (`events[]`). */
export const eventSchema = z.looseObject({
  type: z.string().max(64),
  mode: z.string().max(32).optional(),
  /** Event time, ms since the epoch. */
  timestamp: z.number().optional(),
  webhookEventId: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, { error: 'expected a webhook event id' }),
  deliveryContext: z.looseObject({ isRedelivery: z.boolean().optional() }).optional(),
  source: source.optional(),
  replyToken: z.string().max(256).optional(),
  message: z
    .looseObject({
      type: z.string().max(32),
      id: z.string().max(64).optional(),
      text: z.string().max(20_000).optional(),
      quotedMessageId: z.string().max(64).optional(),
    })
    .optional(),
});

/** A webhook delivery: `{ destination, events: [...] }` (an empty `events` is the console's "Verify" request). */
export const webhookPayloadSchema = z.looseObject({
  destination: z.string().max(64).optional(),
  events: z.array(eventSchema).max(100),
});

export type LinePayload = z.output<typeof webhookPayloadSchema>;
export type LineEvent = z.output<typeof eventSchema>;
