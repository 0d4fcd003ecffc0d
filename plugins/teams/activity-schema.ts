/**
 * The parts of a Bot Framework activity the Teams channel reads, validated
 * with zod at the edge. Objects are loose (Teams adds fields and activity
 * types); what the channel reads has to have its type. The Agents SDK's
 * `Activity` has its own (zod 3) schema, but it accepts far more than a bot
 * needs and would make every field optional here as well.
 */
import { z } from 'zod';

/** An id as Teams writes them (`29:…`, `a:…`, `19:…@thread.tacv2;messageid=…`): no whitespace, `/`, `?` or `#`. */
const teamsId = z.string().regex(/^[^\s/?#]{1,512}$/, { error: 'expected a Teams id' });

const account = z.looseObject({ id: teamsId, name: z.string().max(512).optional(), aadObjectId: z.string().max(64).optional() });

/** A mention entity: its text (`<at>Name</at>`) and who it names. */
const entity = z.looseObject({
  type: z.string().max(64),
  text: z.string().max(1024).optional(),
  mentioned: z.looseObject({ id: z.string().max(512) }).optional(),
});

/** One activity as Azure Bot Service POSTs it. */
export const activitySchema = z.looseObject({
  type: z.string().min(1).max(64),
  id: teamsId.optional(),
  serviceUrl: z.url({ protocol: /^https?$/, error: 'expected the serviceUrl' }).max(2048),
  channelId: z.string().max(64).optional(),
  from: account,
  recipient: account.optional(),
  conversation: z.looseObject({
    id: teamsId,
    conversationType: z.string().max(32).optional(),
    tenantId: z.string().max(64).optional(),
  }),
  text: z.string().max(100_000).optional(),
  value: z.unknown().optional(),
  replyToId: teamsId.optional(),
  entities: z.array(entity).max(100).optional(),
});

export type TeamsActivity = z.output<typeof activitySchema>;
