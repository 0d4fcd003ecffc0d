/**
 * Where the polls the bot sent are kept while they wait for a response
 * (`polls.ts`): in their conversation's `polls` hash (`pollsKey`, one of
 * `MATRIX_CONVERSATION_KEYS`), so `/purge` deletes them with the
 * conversation and idle retention expires them with it. A response names
 * only its room and the poll's event id, so a poll sent in a thread (a
 * conversation of its own) is kept in the thread's hash and pointed at from
 * its room's hash (the thread root, nothing of the poll's answers).
 *
 * Kept bounded: every entry expires `POLL_TTL_SECONDS` after it is kept (an
 * expired one is never read, and is deleted by the next keep), a hash holds
 * at most `MAX_KEPT_POLLS` (the oldest go first) and expires a week after
 * its newest entry; an answered poll's entries are deleted, and so are a
 * room's pointers at the polls of a thread purged with `/purge`.
 */
import { InvalidInputError, type RedisClient, storage } from 'steerbot/plugin';
import { z } from 'zod';
import { pollsKey } from './keys.js';
import { conversationIdOf, roomOf, threadOf } from './normalize.js';

/** How long a poll is kept for its responses, in seconds (a week: longer than a question or an approval waits). */
export const POLL_TTL_SECONDS = 7 * 24 * 3600;

/** Most polls kept per conversation (each message with buttons makes one); past it the oldest is forgotten. */
export const MAX_KEPT_POLLS = 100;

const keepScript = storage.defineScript(new URL('./poll-keep-1.lua', import.meta.url));
const markScript = storage.defineScript(new URL('./poll-mark-1.lua', import.meta.url));

/** A poll's entry in its conversation's hash: each answer id's command; `end`: the text its end shows, once a choice was taken. */
const pollEntrySchema = z.object({ answers: z.record(z.string(), z.string()), expiresAt: z.number(), end: z.string().optional() });

/** A thread poll's entry in its room's hash: the thread root, whose conversation keeps the poll. */
const threadPointerSchema = z.object({ thread: z.string(), expiresAt: z.number() });

/** An entry of a room's hash: a poll of the room, or a pointer to the thread of one. */
const roomEntrySchema = z.union([pollEntrySchema, threadPointerSchema]);

/** A poll the bot sent and still waits on. */
export interface KeptPoll {
  /** The conversation it was sent in (a room's, or a thread's). */
  conversationId: string;
  /** Each answer id's command. */
  answers: Record<string, string>;
  /** When it is no longer kept, ms since the epoch. */
  expiresAt: number;
  /** The text its end shows, once a choice was taken and its end not yet sent. */
  end?: string;
}

/** The entry `field` of `key` read as `schema`, or undefined when absent, unreadable or expired at `now`. */
async function readEntry<T extends { expiresAt: number }>(
  redis: RedisClient,
  key: string,
  field: string,
  schema: z.ZodType<T>,
  now: number,
): Promise<T | undefined> {
  const raw = await redis.hget(key, field);
  if (raw === null) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(json);
  return parsed.success && parsed.data.expiresAt > now ? parsed.data : undefined;
}

/**
 * Keeps the poll `pollId` of `conversationId` with its answers' commands,
 * until `now` + `POLL_TTL_SECONDS`; in a thread, its room's hash points at
 * the thread too. Keeping a poll again overwrites it.
 */
export async function keepPoll(
  redis: RedisClient,
  prefix: string,
  channelId: string,
  p: { conversationId: string; pollId: string; answers: Record<string, string> },
  now = Date.now(),
): Promise<void> {
  const expiresAt = now + POLL_TTL_SECONDS * 1000;
  const keep = (conversationId: string, entry: object) =>
    keepScript.run(redis, [pollsKey(prefix, conversationId)], [p.pollId, JSON.stringify(entry), now, POLL_TTL_SECONDS, MAX_KEPT_POLLS]);
  await keep(p.conversationId, { answers: p.answers, expiresAt });
  const thread = threadOf(channelId, p.conversationId);
  const roomId = roomOf(channelId, p.conversationId);
  if (thread !== undefined && roomId !== undefined) await keep(conversationIdOf(channelId, roomId), { thread, expiresAt });
}

/** What is kept of a poll entry of `conversationId`. */
const keptOf = (conversationId: string, entry: z.infer<typeof pollEntrySchema>): KeptPoll => ({
  conversationId,
  answers: entry.answers,
  expiresAt: entry.expiresAt,
  ...(entry.end !== undefined && { end: entry.end }),
});

/** The kept poll `pollId` of `conversationId` (not following a thread pointer); undefined when not kept (never, answered, expired or purged). */
export async function keptPoll(redis: RedisClient, prefix: string, conversationId: string, pollId: string, now = Date.now()): Promise<KeptPoll | undefined> {
  const entry = await readEntry(redis, pollsKey(prefix, conversationId), pollId, pollEntrySchema, now);
  return entry && keptOf(conversationId, entry);
}

/**
 * The kept poll `pollId` that a response in `roomId` names: the room's own,
 * or one of its threads' through the room's pointer. Undefined when the bot
 * waits on no such poll in that room (a room id no conversation can have
 * included).
 */
export async function findPoll(
  redis: RedisClient,
  prefix: string,
  channelId: string,
  roomId: string,
  pollId: string,
  now = Date.now(),
): Promise<KeptPoll | undefined> {
  const room = conversationIdOf(channelId, roomId);
  try {
    const entry = await readEntry(redis, pollsKey(prefix, room), pollId, roomEntrySchema, now);
    if (entry === undefined) return undefined;
    if ('thread' in entry) return await keptPoll(redis, prefix, conversationIdOf(channelId, roomId, entry.thread), pollId, now);
    return keptOf(room, entry);
  } catch (err) {
    if (err instanceof InvalidInputError) return undefined;
    throw err;
  }
}

/**
 * Records that a choice was taken on `poll` and its end says `end`, before
 * the end is sent: a response handled again after a failure ends the poll
 * with that text. Writes nothing when the poll is no longer kept.
 */
export async function markPollEnding(redis: RedisClient, prefix: string, pollId: string, poll: KeptPoll, end: string): Promise<void> {
  const entry = { answers: poll.answers, expiresAt: poll.expiresAt, end };
  await markScript.run(redis, [pollsKey(prefix, poll.conversationId)], [pollId, JSON.stringify(entry)]);
}

/**
 * When `conversationId` is a thread's, deletes its room's pointers at polls
 * the thread no longer keeps: purging a thread deletes the thread's hash but
 * not its room's, another conversation's. A pointer at a poll the thread
 * still keeps stays, so a refused purge, or a poll kept after it, loses
 * nothing. Returns how many pointers were deleted.
 */
export async function dropThreadPointers(redis: RedisClient, prefix: string, channelId: string, conversationId: string): Promise<number> {
  const thread = threadOf(channelId, conversationId);
  const roomId = roomOf(channelId, conversationId);
  if (thread === undefined || roomId === undefined) return 0;
  const roomKey = pollsKey(prefix, conversationIdOf(channelId, roomId));
  const pointed = Object.entries(await redis.hgetall(roomKey))
    .filter(([, raw]) => pointerOf(raw)?.thread === thread)
    .map(([pollId]) => pollId);
  if (pointed.length === 0) return 0;
  const kept = await redis.hmget(pollsKey(prefix, conversationId), ...pointed);
  const gone = pointed.filter((_, i) => kept[i] === null);
  return gone.length === 0 ? 0 : await redis.hdel(roomKey, ...gone);
}

/** A room hash entry read as a thread pointer (whatever its expiry), or undefined. */
function pointerOf(raw: string): z.infer<typeof threadPointerSchema> | undefined {
  try {
    const parsed = threadPointerSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Forgets `pollId` of `conversationId` (ended), and its room's pointer when it is a thread's. */
export async function forgetPoll(redis: RedisClient, prefix: string, channelId: string, conversationId: string, pollId: string): Promise<void> {
  const roomId = roomOf(channelId, conversationId);
  // Two slots (a thread's conversation and its room's): sent together, not one script.
  const room = threadOf(channelId, conversationId) !== undefined && roomId !== undefined ? [pollsKey(prefix, conversationIdOf(channelId, roomId))] : [];
  await Promise.all([pollsKey(prefix, conversationId), ...room].map((key) => redis.hdel(key, pollId)));
}
