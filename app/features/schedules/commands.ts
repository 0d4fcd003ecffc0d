/**
 * `/schedules` lists the conversation's schedules with their next fire;
 * `/unschedule <id>` cancels one. Deduped by the command's update key (its
 * dedupe key is set first, as for `/status`), so a redelivered command gets
 * no second reply and cancels nothing twice.
 */

import type { CommandDeps, CommandTable } from '../../../host/commands/index.js';
import type { CommandSource } from '../../../src/protocol/dispatch.js';
import type { ListedSchedule, Schedules } from '../../../src/schedules/schedules.js';
import { describeWhen } from '../../../src/schedules/spec.js';

const OFF = 'Schedules are turned off on this bot.';

/** One line per schedule: id, what, when, next fire. */
export function scheduleLine(s: ListedSchedule): string {
  const next = s.next[0] === undefined ? 'no fire due' : `next ${new Date(s.next[0]).toISOString().replace('.000Z', 'Z')}`;
  const prompt = s.prompt.length > 80 ? `${s.prompt.slice(0, 79)}…` : s.prompt;
  return `• ${s.id}${s.origin === 'heartbeat' ? ' (heartbeat)' : ''}: ${describeWhen(s.when)}, ${next} — ${prompt}`;
}

/** `/schedules` (anyone reads them) and `/unschedule <id>` (admins only in a group); `schedules` undefined: schedules are off. */
export function scheduleCommands(schedules: Schedules | undefined): CommandTable {
  return {
    schedules: { run: (deps, args, source) => scheduleCommand(schedules, deps, 'schedules', args, source) },
    unschedule: { admin: true, run: (deps, args, source) => scheduleCommand(schedules, deps, 'unschedule', args, source) },
  };
}

/** Runs `/schedules` or `/unschedule <id>` for `source`. */
async function scheduleCommand(
  schedules: Schedules | undefined,
  deps: CommandDeps,
  name: 'schedules' | 'unschedule',
  args: string,
  source: CommandSource,
): Promise<{ reply: string; duplicate: boolean }> {
  if (!(await deps.dispatch.claimUpdate(source.conversationId, source.updateKey))) return { reply: '', duplicate: true };
  if (!schedules) return { reply: OFF, duplicate: false };
  if (name === 'schedules') {
    const all = await schedules.list(source.conversationId);
    if (all.length === 0) return { reply: 'No schedules in this conversation.', duplicate: false };
    return { reply: `Schedules (${all.length}):\n${all.map(scheduleLine).join('\n')}\nCancel one with /unschedule <id>.`, duplicate: false };
  }
  const id = args.split(/\s+/)[0] ?? '';
  if (id === '') return { reply: 'Usage: /unschedule <id> (the ids are in /schedules).', duplicate: false };
  const cancelled = await schedules.cancel(source.conversationId, id);
  return { reply: cancelled ? `Cancelled schedule ${id}.` : `No schedule ${id.slice(0, 40)} in this conversation (see /schedules).`, duplicate: false };
}
