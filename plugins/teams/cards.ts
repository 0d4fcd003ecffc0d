/** Adaptive Cards the Teams channel sends: buttons under a message (`Action.Submit`) and a sent file (`Action.OpenUrl`). */

/** The content type of an Adaptive Card attachment. */
export const ADAPTIVE_CARD = 'application/vnd.microsoft.card.adaptive';

/** An Adaptive Card (schema 1.4, what Teams renders on every client) with `body` elements and `actions`. Pure. */
export function adaptiveCard(body: readonly Record<string, unknown>[], actions: readonly Record<string, unknown>[]): Record<string, unknown> {
  return { type: 'AdaptiveCard', $schema: 'http://adaptivecards.io/schemas/adaptive-card.json', version: '1.4', body, actions };
}

/** A code span of one line. */
const CODE_SPAN = /`([^`\n]+)`/;

/**
 * The card elements showing `text`. A TextBlock reads a Markdown of its own
 * (bold, italic, lists and links, but no code spans: a link inside backticks
 * still shows only its text), so a line holding a code span (a tool
 * approval's arguments) is a RichTextBlock, whose runs Teams shows as
 * written, the code in monospace. The other lines stay TextBlocks. Pure.
 */
export function textElements(text: string): Record<string, unknown>[] {
  if (!CODE_SPAN.test(text)) return [{ type: 'TextBlock', text, wrap: true }];
  const out: Record<string, unknown>[] = [];
  let plain: string[] = [];
  const flush = () => {
    if (plain.join('').trim() !== '') out.push({ type: 'TextBlock', text: plain.join('\n'), wrap: true });
    plain = [];
  };
  for (const line of text.split('\n')) {
    if (!CODE_SPAN.test(line)) {
      plain.push(line);
      continue;
    }
    flush();
    // `split` with a group: the code spans' contents at the odd indices.
    const inlines = line
      .split(/`([^`\n]+)`/)
      .map((part, i) => (i % 2 === 1 ? { type: 'TextRun', text: part, fontType: 'Monospace' } : { type: 'TextRun', text: part }))
      .filter((run) => run.text !== '');
    out.push({ type: 'RichTextBlock', inlines });
  }
  flush();
  return out;
}
