/** Turning record entries into model messages. */
import type { ModelMessage } from 'ai';
import type { MessageReceived, SeqEntry } from '../src/record/entries.js';

/** Renders a received message as the user turn the model sees. */
export function userMessageText(entry: MessageReceived, opts: { senderNames?: boolean } = {}): string {
  const lines: string[] = [];
  if (entry.text) lines.push(entry.text);
  for (const a of entry.attachments ?? []) lines.push(`[attachment: ${a.kind}${a.name ? ` ${a.name}` : ''}]`);
  const body = lines.join('\n');
  return opts.senderNames && entry.sender.name ? `${entry.sender.name}: ${body}` : body;
}

/** A user model message for one received message. */
export function toUserMessage(entry: SeqEntry<MessageReceived> | MessageReceived, opts: { senderNames?: boolean } = {}): ModelMessage {
  return { role: 'user', content: userMessageText(entry, opts) };
}
