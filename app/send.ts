/**
 * `sendMessage`: the bot speaks first, from code. The message is recorded
 * in the conversation (the agent sees it in later prompts) and delivered on
 * its channel through the outbox, exactly once per idempotency key.
 */
import type { SendMessageRequest, SendMessageResult } from '../src/protocol/send.js';
import type { RunningApp } from './start.js';

export type { SendMessageRequest, SendMessageResult } from '../src/protocol/send.js';

/**
 * Sends `request.text` (and optional buttons) to `request.conversationId`
 * through `app`'s channels. A second call with the same `idempotencyKey`
 * within the key's window (`dispatch.dedupeTtlSeconds`) sends nothing new and
 * answers the first call's seq and message ids (`duplicate: true`), or
 * delivers the parts an earlier call could not. A conversation with no record is refused (`unknown-conversation`)
 * unless its channel can open one (Telegram: a chat id).
 *
 * ```ts
 * const r = await sendMessage(app, { conversationId: 'telegram:12345', text: 'Deploy finished.', idempotencyKey: 'deploy-812' });
 * if (r.kind !== 'sent') console.warn(r);
 * ```
 * @throws InvalidInputError (nothing written) on a bad request; RedisUnavailableError while Redis cannot be reached.
 */
export function sendMessage(app: Pick<RunningApp, 'sender'>, request: SendMessageRequest): Promise<SendMessageResult> {
  return app.sender.send(request, 'package');
}
