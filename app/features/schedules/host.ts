/**
 * Schedules' host part: `/schedules` and `/unschedule`, the console's
 * schedules API; a conversation's
 * first message starts the channel-wide heartbeats; `/purge` disarms the
 * purged conversation's schedules.
 */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { scheduleCommands } from './commands.js';
import { registerSchedulesApi } from './console-api.js';

/** The schedule commands and hooks on `kit.schedules` (commands that say schedules are off when it is undefined). */
export function schedulesHost(kit: Pick<HostFeatureKit, 'config' | 'schedules' | 'logger'>): HostFeature {
  const scheduling = kit.schedules;
  const heartbeats = scheduling && Object.keys(kit.config.schedules.heartbeats).length > 0 ? scheduling.heartbeats : undefined;
  return {
    name: 'schedules',
    commands: scheduleCommands(scheduling?.schedules),
    console: { api: (route) => registerSchedulesApi(route, scheduling?.schedules, kit.logger) },
    ...(heartbeats && {
      recorded: async (input) => {
        // A channel-wide heartbeat starts with a conversation's first message this host sees.
        if (input.fresh) void heartbeats.ensure(input.conversationId);
      },
    }),
    ...(scheduling && {
      purging: async (conversationId) => {
        // Read before the purge deletes them: their BullMQ side goes after it (a fire of one missed here finds no record and removes itself).
        const listed = await scheduling.schedules.list(conversationId, 0);
        return async () => void (await Promise.all(listed.map((s) => scheduling.schedules.disarm(s))));
      },
    }),
  };
}
