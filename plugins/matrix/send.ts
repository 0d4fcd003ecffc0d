/**
 * One event sent into a room: `PUT …/send/{type}/{txnId}`. The transaction
 * id comes from a stable key where there is one (a delivery key), so the
 * homeserver answers a repeat with the event it already made.
 */
import { createHash } from 'node:crypto';
import { type MatrixClient, seg } from './client.js';
import { MatrixApiError } from './errors.js';

/** A transaction id made from `key` (URL-safe, the same on every retry). */
export const txnIdOf = (key: string): string => `sb-${createHash('sha256').update(key).digest('base64url').slice(0, 32)}`;

/** The `event_id` of a send's answer. */
export function eventIdOf(answer: Record<string, unknown>): string {
  if (typeof answer.event_id !== 'string' || answer.event_id === '') throw new MatrixApiError('matrix send: the answer named no event id', { status: 502 });
  return answer.event_id;
}

/**
 * Sends one event of `type` under `txnId`; returns its event id. The event
 * mentions nobody (`m.mentions: {}`, unless `content` names its own): with
 * it, servers and clients apply no body-based rule, so an `@room` or a
 * display name in text the model wrote notifies no one.
 */
export async function sendEvent(client: MatrixClient, roomId: string, type: string, txnId: string, content: Record<string, unknown>): Promise<string> {
  const body = { ...content, 'm.mentions': content['m.mentions'] ?? {} };
  return eventIdOf(await client.call(`send ${type}`, 'PUT', `rooms/${seg(roomId)}/send/${seg(type)}/${seg(txnId)}`, { body }));
}
