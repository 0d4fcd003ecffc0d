/** Adaptive Cards the Teams channel sends: buttons under a message (`Action.Submit`) and a sent file (`Action.OpenUrl`). */

/** The content type of an Adaptive Card attachment. */
export const ADAPTIVE_CARD = 'application/vnd.microsoft.card.adaptive';

/** An Adaptive Card (schema 1.4, what Teams renders on every client) with `body` elements and `actions`. Pure. */
export function adaptiveCard(body: readonly Record<string, unknown>[], actions: readonly Record<string, unknown>[]): Record<string, unknown> {
  return { type: 'AdaptiveCard', $schema: 'http://adaptivecards.io/schemas/adaptive-card.json', version: '1.4', body, actions };
}
