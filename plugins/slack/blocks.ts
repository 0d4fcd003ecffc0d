/**
 * Block Kit for messages with buttons (a tool approval's Approve / Deny):
 * the text in a section, the buttons in an actions block. A click comes
 * back as a `block_actions` payload whose action `value` is the command.
 */
import type { KnownBlock } from '@slack/web-api';
import type { MessageButton } from 'steerbot/channel';

/** Slack's limit on a section's text, in characters. */
const SECTION_MAX_CHARS = 3000;

/** Prefix of our buttons' `action_id`s, to tell our clicks from other apps' blocks. */
export const ACTION_PREFIX = 'steerbot_';

/** The text as a section block (cut to Slack's section limit; the message's `text` keeps it whole). */
export function textBlock(text: string): KnownBlock {
  const cut = text.length > SECTION_MAX_CHARS ? `${text.slice(0, SECTION_MAX_CHARS - 1)}…` : text;
  return { type: 'section', text: { type: 'mrkdwn', text: cut } };
}

/** Blocks of a message with buttons: its text, then one row of buttons (the first one primary). */
export function buttonBlocks(text: string, buttons: readonly MessageButton[]): KnownBlock[] {
  return [
    textBlock(text),
    {
      type: 'actions',
      elements: buttons.slice(0, 25).map((b, i) => ({
        type: 'button',
        action_id: `${ACTION_PREFIX}${i}`,
        text: { type: 'plain_text', text: b.label.slice(0, 75) },
        value: b.command.slice(0, 2000),
        ...(i === 0 && { style: 'primary' as const }),
      })),
    },
  ];
}
