/**
 * Choices as native polls (MSC3381, the unstable `org.matrix.msc3381.poll.*`
 * events Element sends and shows: the stable `m.poll.*` ones need extensible
 * events, which no stable room version has). A message with buttons is
 * followed by a disclosed single-choice poll, one answer per button, each
 * answer's id made from its button's command; the poll's answers are kept in
 * Redis by its event id (`pollKey`) until it is answered or expires.
 *
 * A room member's response to such a poll becomes the command of the answer
 * chosen, from the responder, as a button click: the host's checks decide
 * whether that person may choose. A response to any other poll, with an
 * answer the poll does not have, an edit of a response, or the bot's own is
 * ignored before anything is written. Once a choice is taken (the host
 * answers with an `edit`), the poll is ended (`poll.end`, carrying that text)
 * and forgotten, so later responses to it are ignored too.
 */
import { createHash } from 'node:crypto';
import type { ChannelHost, ChannelOutbound, InboundMessage, MessageButton, ReceiveResult } from 'steerbot/channel';
import { InvalidInputError, type Logger, type RedisClient } from 'steerbot/plugin';
import type { MatrixClient } from './client.js';
import { pollKey } from './keys.js';
import { roomOf } from './normalize.js';
import { sendEvent, txnIdOf } from './send.js';
import type { TimelineEvent } from './sync-schema.js';

/** The event types and content keys of a poll, as Element sends them. */
const POLL = {
  start: 'org.matrix.msc3381.poll.start',
  response: 'org.matrix.msc3381.poll.response',
  end: 'org.matrix.msc3381.poll.end',
  disclosed: 'org.matrix.msc3381.poll.disclosed',
  text: 'org.matrix.msc1767.text',
} as const;

/** The stable response type (MSC3381's final form), read as well: its choice is in `m.selections`. */
const STABLE_RESPONSE = 'm.poll.response';

/** Most answers a poll holds (MSC3381). */
const MAX_POLL_ANSWERS = 20;

/** Longest poll question, in characters: the message's first line (the whole text is the message above the poll). */
const QUESTION_CHARS = 300;

/** How long a poll's answers are kept for its responses, in seconds (a week: longer than a question or an approval waits). */
const POLL_TTL_SECONDS = 7 * 24 * 3600;

type Content = Record<string, unknown>;

/** The answer id of a button: made from its command, so a resent poll has the same answers. */
export const answerIdOf = (command: string): string => `sb-${createHash('sha256').update(command).digest('base64url').slice(0, 16)}`;

/** What is kept of a poll the bot sent: its conversation, and each answer id's command. */
export interface KeptPoll {
  conversationId: string;
  answers: Record<string, string>;
}

/** The content of the poll that follows `text` with `buttons` (at most `MAX_POLL_ANSWERS` of them), and its answers' commands. */
function pollContent(text: string, buttons: readonly MessageButton[]): { content: Record<string, unknown>; answers: Record<string, string> } {
  const question = (text.split('\n').find((l) => l.trim() !== '') ?? text).slice(0, QUESTION_CHARS);
  const used = buttons.slice(0, MAX_POLL_ANSWERS);
  const answers = Object.fromEntries(used.map((b) => [answerIdOf(b.command), b.command]));
  const content = {
    [POLL.start]: {
      question: { [POLL.text]: question, body: question, msgtype: 'm.text' },
      kind: POLL.disclosed,
      max_selections: 1,
      answers: used.map((b) => ({ id: answerIdOf(b.command), [POLL.text]: b.label })),
    },
    // Clients without polls show this.
    [POLL.text]: [question, ...used.map((b, i) => `${i + 1}. ${b.label}`)].join('\n'),
  };
  return { content, answers };
}

/**
 * Sends the poll of `buttons` that follows the message `text` of
 * `conversationId` (with `relation`, a thread's), under `txnId`, and keeps
 * its answers for the responses.
 */
export async function sendPoll(
  o: { client: MatrixClient; redis: RedisClient; prefix: string },
  p: { roomId: string; conversationId: string; text: string; buttons: readonly MessageButton[]; txnId: string; relation?: Content | undefined },
): Promise<void> {
  const { content, answers } = pollContent(p.text, p.buttons);
  if (p.relation) content['m.relates_to'] = p.relation;
  const pollId = await sendEvent(o.client, p.roomId, POLL.start, p.txnId, content);
  await keepPoll(o.redis, o.prefix, pollId, { conversationId: p.conversationId, answers });
}

/** Keeps the answers of the poll `pollId` (one key, expiring). */
async function keepPoll(redis: RedisClient, prefix: string, pollId: string, poll: KeptPoll): Promise<void> {
  await redis.set(pollKey(prefix, pollId), JSON.stringify(poll), 'EX', POLL_TTL_SECONDS);
}

/** The kept answers of `pollId`; undefined when the bot sent no such poll, or it was answered or expired. */
export async function keptPoll(redis: RedisClient, prefix: string, pollId: string): Promise<KeptPoll | undefined> {
  const raw = await redis.get(pollKey(prefix, pollId));
  if (raw === null) return undefined;
  const poll = JSON.parse(raw) as KeptPoll;
  return typeof poll.conversationId === 'string' && typeof poll.answers === 'object' && poll.answers !== null ? poll : undefined;
}

/** Forgets `pollId` once it was answered. */
async function forgetPoll(redis: RedisClient, prefix: string, pollId: string): Promise<void> {
  await redis.del(pollKey(prefix, pollId));
}

/** Whether an event's type is a poll response. */
export const isPollResponse = (type: string): boolean => type === POLL.response || type === STABLE_RESPONSE;

/**
 * The poll and answer a response event names: `m.relates_to` an
 * `m.reference` to the poll, the first of its answers (a poll of one
 * choice). Undefined for an edit (`m.new_content`, or any other relation),
 * an empty choice (a vote taken back) or a malformed one. Pure.
 */
function responseOf(type: string, content: Content): { pollId: string; answerId: string } | undefined {
  if (content['m.new_content'] !== undefined) return undefined;
  const relation = content['m.relates_to'] as Content | undefined;
  if (relation?.rel_type !== 'm.reference' || typeof relation.event_id !== 'string') return undefined;
  const block = content[POLL.response] as Content | undefined;
  const chosen = type === POLL.response ? block?.answers : content['m.selections'];
  const answerId = Array.isArray(chosen) ? chosen[0] : undefined;
  return typeof answerId === 'string' && answerId !== '' ? { pollId: relation.event_id, answerId } : undefined;
}

/** The content of the event that ends `pollId`, saying `text` to clients without polls. */
function pollEndContent(pollId: string, text: string): Content {
  return { 'm.relates_to': { rel_type: 'm.reference', event_id: pollId }, [POLL.end]: {}, [POLL.text]: text };
}

/** What answering a poll response needs. */
export interface PollResponseDeps {
  channelId: string;
  selfId: string;
  client: MatrixClient;
  host: ChannelHost;
  /** Sends the host's reply to a refused choice (the outbound side's `send`). */
  send: ChannelOutbound['send'];
  logger: Logger;
}

/**
 * Hands a poll response in `roomId` to the host as the chosen answer's
 * command, when it answers a poll the bot sent in that room and is waiting
 * on; ignores it otherwise, writing nothing. A choice taken ends the poll;
 * a refused one is answered with the host's reply. Throws what `receive`
 * throws, but InvalidInputError (bad input stays bad: skipped).
 */
export async function answerPoll(d: PollResponseDeps, roomId: string, group: boolean, event: TimelineEvent): Promise<void> {
  const response = event.sender === d.selfId ? undefined : responseOf(event.type, event.content ?? {});
  const poll = response && (await keptPoll(d.host.redis, d.host.prefix, response.pollId));
  const command = response && poll?.answers[response.answerId];
  if (!response || !poll || command === undefined || roomOf(d.channelId, poll.conversationId) !== roomId) {
    d.logger.debug({ roomId, eventId: event.event_id }, 'matrix poll response ignored (not an answer to a poll the bot waits on)');
    return;
  }
  const message: InboundMessage = {
    conversationId: poll.conversationId,
    updateKey: `${d.channelId}:${event.event_id}`,
    chatId: roomId,
    sender: { id: event.sender },
    text: command,
    messageId: event.event_id,
    interaction: 'button',
    ...(group && { group: true }),
  };
  let result: ReceiveResult;
  try {
    result = await d.host.receive(d.channelId, message);
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    d.logger.warn({ err, eventId: event.event_id }, 'matrix poll response rejected; skipped');
    return;
  }
  if (result.kind !== 'command' || result.duplicate) return;
  try {
    if (result.edit !== undefined) {
      await forgetPoll(d.host.redis, d.host.prefix, response.pollId);
      await sendEvent(d.client, roomId, POLL.end, txnIdOf(`end:${response.pollId}`), pollEndContent(response.pollId, result.edit));
    } else if (result.reply !== '') {
      await d.send(poll.conversationId, result.reply, { replyTo: event.event_id });
    }
  } catch (err) {
    d.logger.warn({ err, roomId, pollId: response.pollId }, 'could not show the outcome of a matrix poll response');
  }
}
