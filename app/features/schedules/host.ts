/**
 * Schedules' host part: the host's schedules service (`schedules.*`), with
 * `/schedules` and `/unschedule`, the console's schedules API; a
 * conversation's first message starts the channel-wide heartbeats; `/purge`
 * disarms the purged conversation's schedules; purging or linking a person
 * cancels or hands over the schedules they own.
 */
import type { HostFeature, HostFeatureKit } from '../../../host/feature.js';
import { type ConfiguredSchedules, schedulesFromConfig } from '../../../src/schedules/from-config.js';
import { scheduleCommands } from './commands.js';
import { registerSchedulesApi } from './console-api.js';

/** The host part on the schedules service of the host's configuration (none when `schedules.enabled` is false), on a connection of its own. */
export function schedulesHost(kit: HostFeatureKit): HostFeature {
  return schedulesHostOn(kit, schedulesFromConfig(kit, kit.channelIds, 'steerbot-host-schedules', kit.identities));
}

/** The schedule commands and hooks on `scheduling`, closed with the host (commands say schedules are off when it is undefined). */
export function schedulesHostOn(kit: Pick<HostFeatureKit, 'config' | 'logger'>, scheduling: ConfiguredSchedules | undefined): HostFeature {
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
      close: () => scheduling.close(),
      purging: async (conversationId) => {
        // Read before the purge deletes them: their BullMQ side goes after it (a fire of one missed here finds no record and removes itself).
        const listed = await scheduling.schedules.list(conversationId, 0);
        return async () => void (await Promise.all(listed.map((s) => scheduling.schedules.disarm(s))));
      },
    }),
  };
}
