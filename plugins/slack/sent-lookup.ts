/**
 * Finding a reply an earlier attempt may already have posted. Every reply
 * carries its delivery key in Slack message metadata (event type
 * `steerbot_delivery`), so a send that repeats one whose outcome was never
 * recorded (`SendOptions.maybeSentSince`: the runner died between Slack's
 * answer and the outbox write) first reads the conversation's recent
 * messages — the thread's replies (`conversations.replies`), or a DM's
 * history (`conversations.history`), with `include_all_metadata` — and takes
 * the message that carries the key instead of posting it again. Only the
 * bot's own messages count: anyone in the conversation can post a message
 * with metadata of their choosing (a user token, an app of their own), and
 * the next keys of a run are guessed from one reply's. Bounded: messages
 * from a little before the key was first claimed, at most `MAX_PAGES` pages
 * of `PAGE_SIZE`.
 */
import type { KnownBlock, WebClient } from '@slack/web-api';
import { ChannelApiError, type Logger } from 'steerbot/plugin';
import { call } from './api.js';
import type { SlackTarget } from './conversation.js';

/** Metadata event type of the bot's replies; the payload is `{ key: <delivery key> }`. */
export const DELIVERY_EVENT_TYPE = 'steerbot_delivery';
/** Messages are read from this long before the key's first claim: Slack's clock and Redis's may differ a little. */
const CLOCK_SKEW_MS = 5 * 60_000;
/** Messages per page read. */
const PAGE_SIZE = 200;
/** Most pages read for one lookup (a busy channel's older messages are not looked at). */
const MAX_PAGES = 5;

/** The metadata a reply is posted with. */
export function deliveryMetadata(key: string): { event_type: string; event_payload: { key: string } } {
  return { event_type: DELIVERY_EVENT_TYPE, event_payload: { key } };
}

/** A posted message, as far as the lookup reads it. */
interface ListedMessage {
  ts?: string;
  text?: string;
  /** The poster: a user id (the bot's user for its own messages). */
  user?: string;
  /** The bot that posted it, if one did. */
  bot_id?: string;
  metadata?: { event_type?: string; event_payload?: unknown };
}

/** The bot itself, as `auth.test` names it: its user id and, for a bot token, its bot id. */
export interface SlackSelf {
  userId: string;
  botId?: string;
  /** The workspace it is installed in (`T…`): whose admins are the bot's (`admins.ts`). */
  teamId?: string;
  /** Its Enterprise Grid org (`E…`), when it is on one. */
  enterpriseId?: string;
}

/** One page of `conversations.history` or `conversations.replies`. */
interface Page {
  messages?: ListedMessage[];
  response_metadata?: { next_cursor?: string };
}

/** A message found by its delivery key: its ts and its text now. */
export interface FoundMessage {
  ts: string;
  text: string;
}

/** Whether the bot posted `m`: by its bot id when it has one (any app's messages name a user), else by its user id. */
const postedBy = (m: ListedMessage, self: SlackSelf) => (self.botId !== undefined ? m.bot_id === self.botId : m.bot_id === undefined && m.user === self.userId);

const carries = (m: ListedMessage, key: string, self: SlackSelf) =>
  postedBy(m, self) && m.metadata?.event_type === DELIVERY_EVENT_TYPE && (m.metadata.event_payload as { key?: unknown } | undefined)?.key === key;

/**
 * Looks for the message carrying `key`, posted at or after `sinceMs` (ms;
 * 0: not known, the page bound alone applies). Throws ChannelApiError as
 * every Web API call (429 with `retryAfterMs`; a platform error, such as a
 * missing `*:history` scope, with status 400).
 */
async function findSent(web: WebClient, target: SlackTarget, key: string, sinceMs: number, token: string, self: SlackSelf): Promise<FoundMessage | undefined> {
  const oldest = sinceMs > CLOCK_SKEW_MS ? ((sinceMs - CLOCK_SKEW_MS) / 1000).toFixed(6) : undefined;
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const args = { channel: target.channel, include_all_metadata: true, limit: PAGE_SIZE, ...(oldest && { oldest }), ...(cursor && { cursor }) };
    const threadTs = target.threadTs;
    const res: Page =
      threadTs === undefined
        ? await call('conversations.history', () => web.conversations.history(args), token)
        : await call('conversations.replies', () => web.conversations.replies({ ...args, ts: threadTs }), token);
    const hit = res.messages?.find((m) => carries(m, key, self));
    if (hit?.ts) return { ts: hit.ts, text: hit.text ?? '' };
    cursor = res.response_metadata?.next_cursor;
    if (!cursor) return undefined;
  }
  return undefined;
}

/** A reply about to be sent again: its key, when the key was first claimed (ms), what it should show. */
export interface Resend {
  key: string;
  sinceMs: number;
  /** The text as posted (mrkdwn). */
  body: string;
  blocks: KnownBlock[] | undefined;
}

/**
 * The ts of the message an earlier attempt posted under `r.key`, made to
 * show `r.body` (a streaming preview of it may show less); undefined when
 * there is none, or when Slack refuses to show the history (a missing
 * `*:history` scope: the reply is posted, and may show twice). A rate limit
 * or an outage throws, so delivery retries the whole send, lookup included.
 * `self`: who the bot is (`auth.test`), read when a lookup first needs it.
 */
export async function sentBefore(
  o: { web: WebClient; token: string; logger: Logger; self: () => Promise<SlackSelf> },
  target: SlackTarget,
  r: Resend,
): Promise<string | undefined> {
  let found: FoundMessage | undefined;
  try {
    found = await findSent(o.web, target, r.key, r.sinceMs, o.token, await o.self());
  } catch (err) {
    if (!(err instanceof ChannelApiError) || err.status !== 400) throw err;
    o.logger.warn({ err, deliveryKey: r.key }, 'slack: could not look for a reply an earlier attempt may have sent; sending it (it may show twice)');
    return undefined;
  }
  if (!found) return undefined;
  if (found.text !== r.body || r.blocks) {
    const update = { channel: target.channel, ts: found.ts, text: r.body, metadata: deliveryMetadata(r.key), ...(r.blocks && { blocks: r.blocks }) };
    await call('chat.update', () => o.web.chat.update(update), o.token);
  }
  return found.ts;
}
