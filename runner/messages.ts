/** Turning record entries into model messages (the same rendering as the projection). */
import type { ModelMessage } from 'ai';
import type { MessageReceived, SeqEntry } from '../src/record/entries.js';
import { userMessage } from './projection.js';

/** A user model message for one received message, rendered exactly as the projection renders it. */
export function toUserMessage(entry: SeqEntry<MessageReceived> | MessageReceived, opts: { senderNames?: boolean } = {}): ModelMessage {
  return userMessage(entry, opts.senderNames === true);
}
