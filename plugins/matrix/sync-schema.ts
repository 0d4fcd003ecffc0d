/**
 * The parts of a `/sync` answer the channel reads, validated with zod at the
 * edge. Objects are loose (the spec grows, servers add fields); what the
 * channel reads has to have its type. An event the channel cannot read is
 * not an error of the whole answer: `timeline.events` items are checked one
 * by one in `normalize.ts`.
 */
import { z } from 'zod';

/** One event of a room's timeline, as far as the channel reads it. */
export const timelineEventSchema = z.looseObject({
  type: z.string().max(255),
  event_id: z.string().min(1).max(255),
  sender: z.string().min(1).max(255),
  origin_server_ts: z.number().optional(),
  content: z.looseObject({}).optional(),
});

/** A stripped state event of an invite (`invite_state.events[]`). */
const strippedStateSchema = z.looseObject({
  type: z.string().max(255),
  state_key: z.string().max(255).optional(),
  sender: z.string().max(255).optional(),
  content: z.looseObject({}).optional(),
});

const joinedRoomSchema = z.looseObject({
  summary: z.looseObject({ 'm.joined_member_count': z.number().int().nonnegative().optional() }).optional(),
  timeline: z.looseObject({ events: z.array(z.unknown()).optional() }).optional(),
});

const invitedRoomSchema = z.looseObject({
  invite_state: z.looseObject({ events: z.array(strippedStateSchema.catch({ type: '' })).optional() }).optional(),
});

/** A `/sync` answer. */
export const syncResponseSchema = z.looseObject({
  next_batch: z.string().min(1).max(1024),
  rooms: z
    .looseObject({
      join: z.record(z.string(), joinedRoomSchema).optional(),
      invite: z.record(z.string(), invitedRoomSchema).optional(),
    })
    .optional(),
});

export type SyncResponse = z.output<typeof syncResponseSchema>;
export type JoinedRoom = z.output<typeof joinedRoomSchema>;
export type InvitedRoom = z.output<typeof invitedRoomSchema>;
export type TimelineEvent = z.output<typeof timelineEventSchema>;
