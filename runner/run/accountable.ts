/**
 * The identity a run is charged to. Every run has one: the person whose
 * message started it, or the owner a schedule's fire or a heartbeat names
 * (the person who made the schedule), or for a `/compact` run without
 * inputs the person who sent the `/compact` (compact-only.ts), else the
 * operator (no person). A
 * fire's sender is never taken for a person. Budgets, profile bindings and
 * memory follow it.
 */
import type { MessageReceived } from '../../src/record/entries.js';

/**
 * The identity a run is charged to (budgets, profile, memory), from the input
 * that started it: a person's message → its sender's identity (`identityOf`);
 * an input with an origin (a fire, a heartbeat, an event) → the `owner` it
 * names, as that identity is now (`current`: a link may have merged it), else
 * undefined: the operator.
 */
export async function accountableIdentity(
  starter: Pick<MessageReceived, 'sender' | 'origin'> | undefined,
  identityOf: (userId: string) => Promise<string | undefined>,
  current: (identity: string) => Promise<string>,
): Promise<string | undefined> {
  if (!starter) return undefined;
  if (!starter.origin) return identityOf(starter.sender.id);
  return starter.origin.owner === undefined ? undefined : current(starter.origin.owner);
}
