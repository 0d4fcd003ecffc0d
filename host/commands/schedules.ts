/**
 * `/schedules` lists the conversation's schedules with their next fire;
 * `/unschedule <id>` cancels one. Deduped by the command's update key (its
 * dedupe key is set first, as for `/status`), so a redelivered command gets
 * no second reply and cancels nothing twice.
 */

import type { CommandSource, Dispatch } from '../../src/protocol/dispatch.js';
import type { ListedSchedule, Schedules } from '../../src/schedules/schedules.js';
import { describeWhen } from '../../src/schedules/spec.js';
import type { CommandTable } from './table.js';

/** What the commands need. */
interface Deps {
  dispatch: Dispatch;
  /** Undefined when schedules are off. */
  schedules?: Schedules | undefined;
}

const OFF = 'Schedules are turned off on this bot.';

/** One line per schedule: id, what, when, next fire. */
export function scheduleLine(s: ListedSchedule): string {
  const next = s.next[0] === undefined ? 'no fire due' : `next ${new Date(s.next[0]).toISOString().replace('.000Z', 'Z')}`;
  const prompt = s.prompt.length > 80 ? `${s.prompt.slice(0, 79)}…` : s.prompt;
  return `• ${s.id}${s.origin === 'heartbeat' ? ' (heartbeat)' : ''}: ${describeWhen(s.when)}, ${next} — ${prompt}`;
}

/** `/schedules` (anyone reads them) and `/unschedule <id>` (admins only in a group). */
export const scheduleCommands = {
  schedules: { run: (deps, args, source) => scheduleCommand(deps, 'schedules', args, source) },
  unschedule: { admin: true, run: (deps, args, source) => scheduleCommand(deps, 'unschedule', args, source) },
} satisfies CommandTable;

/** Runs `/schedules` or `/unschedule <id>` for `source`. */
async function scheduleCommand(
  deps: Deps,
  name: 'schedules' | 'unschedule',
  args: string,
  source: CommandSource,
): Promise<{ reply: string; duplicate: boolean }> {
  if (!(await deps.dispatch.claimUpdate(source.conversationId, source.updateKey))) return { reply: '', duplicate: true };
  if (!deps.schedules) return { reply: OFF, duplicate: false };
  if (name === 'schedules') {
    const all = await deps.schedules.list(source.conversationId);
    if (all.length === 0) return { reply: 'No schedules in this conversation.', duplicate: false };
    return { reply: `Schedules (${all.length}):\n${all.map(scheduleLine).join('\n')}\nCancel one with /unschedule <id>.`, duplicate: false };
  }
  const id = args.split(/\s+/)[0] ?? '';
  if (id === '') return { reply: 'Usage: /unschedule <id> (the ids are in /schedules).', duplicate: false };
  const cancelled = await deps.schedules.cancel(source.conversationId, id);
  return { reply: cancelled ? `Cancelled schedule ${id}.` : `No schedule ${id.slice(0, 40)} in this conversation (see /schedules).`, duplicate: false };
}
