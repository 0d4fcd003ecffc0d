/**
 * Choices as native polls (MSC3381, the unstable `org.matrix.msc3381.poll.*`
 * events Element sends and shows: the stable `m.poll.*` ones need extensible
 * events, which no stable room version has). A message with buttons is
 * followed by a disclosed single-choice poll, one answer per button, each
 * answer's id made from its button's command; the poll's answers are kept in
 * its conversation's Redis storage (`poll-store.ts`) until it is answered,
 * expires or the conversation is purged.
 *
 * A room member's response to such a poll becomes the command of the answer
 * chosen, from the responder, as a button click: the host's checks decide
 * whether that person may choose. A response to any other poll (or one no
 * longer kept), with an answer the poll does not have, an edit of a
 * response, or the bot's own is ignored before anything is written. Once a
 * choice is taken (the host answers with an `edit`), its text is recorded
 * with the poll, the poll is ended (`poll.end`, carrying that text, under a
 * transaction id made from the poll's id) and only then forgotten: when the
 * end fails for a passing reason or the host dies before it, the response
 * is handled again (the same `since`), finds the poll still kept with its
 * end text and ends it, the host's dedupe keeping the command from being
 * taken twice. (A host that dies between the host taking the choice and
 * that record leaves the poll open until it expires: the redelivered
 * response is then a duplicate, which carries no text to end it with.)
 * Later responses to a forgotten poll are ignored.
 */
import { createHash } from 'node:crypto';
import type { ChannelHost, ChannelOutbound, InboundMessage, MessageButton, ReceiveResult } from 'steerbot/channel';
import { ChannelApiError, InvalidInputError, type Logger, type RedisClient } from 'steerbot/plugin';
import type { MatrixClient } from './client.js';
import { findPoll, forgetPoll, type KeptPoll, keepPoll, markPollEnding } from './poll-store.js';
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

type Content = Record<string, unknown>;

/** The answer id of a button: made from its command, so a resent poll has the same answers. */
export const answerIdOf = (command: string): string => `sb-${createHash('sha256').update(command).digest('base64url').slice(0, 16)}`;

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
  o: { channelId: string; client: MatrixClient; redis: RedisClient; prefix: string },
  p: { roomId: string; conversationId: string; text: string; buttons: readonly MessageButton[]; txnId: string; relation?: Content | undefined },
): Promise<void> {
  const { content, answers } = pollContent(p.text, p.buttons);
  if (p.relation) content['m.relates_to'] = p.relation;
  const pollId = await sendEvent(o.client, p.roomId, POLL.start, p.txnId, content);
  await keepPoll(o.redis, o.prefix, o.channelId, { conversationId: p.conversationId, pollId, answers });
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

/** Whether a send failed for a passing reason (no answer, a 429, a 5xx), to be tried again. */
const isPassing = (err: unknown): boolean => !(err instanceof ChannelApiError) || err.status === undefined || err.status === 429 || err.status >= 500;

/**
 * Ends `pollId` in `roomId` with the text of the choice taken
 * (`poll.end`), then forgets it. The end's transaction id is made from the poll's id, so an end
 * sent again (its answer lost, the host died before forgetting) is the same
 * event. Throws when the end failed for a passing reason, the poll still
 * kept for the response's next handling; a refused end is logged and the
 * poll forgotten (it stays open in the room).
 */
async function endPoll(d: PollResponseDeps, roomId: string, pollId: string, poll: KeptPoll & { end: string }): Promise<void> {
  try {
    await sendEvent(d.client, roomId, POLL.end, txnIdOf(`end:${pollId}`), pollEndContent(pollId, poll.end));
  } catch (err) {
    if (isPassing(err)) throw err;
    d.logger.warn({ err, roomId, pollId }, 'matrix poll end refused; the poll is forgotten');
  }
  await forgetPoll(d.host.redis, d.host.prefix, d.channelId, poll.conversationId, pollId);
}

/** Hands the chosen `command` to the host as a click in the poll's conversation; undefined when the host rejects it as bad input (skipped). */
async function receiveChoice(
  d: PollResponseDeps,
  roomId: string,
  group: boolean,
  event: TimelineEvent,
  conversationId: string,
  command: string,
): Promise<ReceiveResult | undefined> {
  const message: InboundMessage = {
    conversationId,
    updateKey: `${d.channelId}:${event.event_id}`,
    chatId: roomId,
    sender: { id: event.sender },
    text: command,
    messageId: event.event_id,
    interaction: 'button',
    ...(group && { group: true }),
  };
  try {
    return await d.host.receive(d.channelId, message);
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    d.logger.warn({ err, eventId: event.event_id }, 'matrix poll response rejected; skipped');
    return undefined;
  }
}

/**
 * Hands a poll response in `roomId` to the host as the chosen answer's
 * command, when it answers a poll the bot sent in that room and still waits
 * on; ignores it otherwise, writing nothing. A choice taken ends the poll
 * (`endPoll`); a refused one is answered with the host's reply. A response
 * to a poll whose choice was taken but whose end was not sent ends it, the
 * host not asked again. Throws what `receive` throws, but InvalidInputError
 * (bad input stays bad: skipped), and when the end failed for a passing
 * reason: the response is handled again.
 */
export async function answerPoll(d: PollResponseDeps, roomId: string, group: boolean, event: TimelineEvent): Promise<void> {
  const response = event.sender === d.selfId ? undefined : responseOf(event.type, event.content ?? {});
  const poll = response && (await findPoll(d.host.redis, d.host.prefix, d.channelId, roomId, response.pollId));
  if (response && poll?.end !== undefined) return endPoll(d, roomId, response.pollId, { ...poll, end: poll.end });
  const command = response && poll?.answers[response.answerId];
  if (!response || !poll || command === undefined) {
    d.logger.debug({ roomId, eventId: event.event_id }, 'matrix poll response ignored (not an answer to a poll the bot waits on)');
    return;
  }
  const result = await receiveChoice(d, roomId, group, event, poll.conversationId, command);
  if (result?.kind !== 'command' || result.duplicate) return;
  if (result.edit !== undefined) {
    await markPollEnding(d.host.redis, d.host.prefix, response.pollId, poll, result.edit);
    await endPoll(d, roomId, response.pollId, { ...poll, end: result.edit });
  } else if (result.reply !== '') {
    await d.send(poll.conversationId, result.reply, { replyTo: event.event_id }).catch((err: unknown) => {
      d.logger.warn({ err, roomId, pollId: response.pollId }, 'could not answer a refused matrix poll choice');
    });
  }
}
