/**
 * Interactive cards for messages with buttons (a tool approval's Approve /
 * Deny, `ask_user`'s choices): the text, then one row of buttons whose
 * `value` carries the command. A click comes back as `card.action.trigger`
 * (over the long connection, or the callback route), and its answer may
 * replace the card (the buttons removed once a decision was made).
 */
import type { InteractiveCard } from '@larksuiteoapi/node-sdk';
import type { MessageButton } from 'steerbot/channel';
import type { ButtonValue } from './normalize.js';

/** Most buttons in one card's action row used here. */
const MAX_BUTTONS = 20;
/** Longest button label, in characters. */
const LABEL_MAX = 40;

/** A card showing `text` only. `update_multi`: a click's answer may replace it for everyone in the chat. */
export function textCard(text: string): InteractiveCard {
  return { config: { wide_screen_mode: true, update_multi: true }, elements: [{ tag: 'div', text: { tag: 'plain_text', content: text } }] };
}

/** A card showing `text` and `buttons`; each button's value is its command and where the card was sent (`where`). */
export function buttonCard(text: string, buttons: readonly MessageButton[], where: Omit<ButtonValue, 'command'>): InteractiveCard {
  const card = textCard(text);
  card.elements?.push({
    tag: 'action',
    actions: buttons.slice(0, MAX_BUTTONS).map((b, i) => ({
      tag: 'button',
      text: { tag: 'plain_text', content: b.label.slice(0, LABEL_MAX) },
      type: i === 0 ? 'primary' : 'default',
      value: { command: b.command, ...where } satisfies ButtonValue,
    })),
  });
  return card;
}

/** The answer to a click: a toast with `reply` (seen by the clicker only), and the card replaced by `edit` when given. */
export function clickAnswer(reply: string | undefined, edit: string | undefined): Record<string, unknown> {
  return {
    ...(reply && { toast: { type: 'info', content: reply.slice(0, 500) } }),
    ...(edit !== undefined && { card: { type: 'raw', data: textCard(edit) } }),
  };
}
