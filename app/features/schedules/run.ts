/**
 * Schedules' runner part: the runner's schedules service and its fire worker
 * (fires become inputs through each conversation's input policy); a run gets
 * its conversation's schedules (`RunContext.features.schedules`), created by
 * the agent and owned by the run's accountable identity, only while nobody
 * else's message is part of the run; cancelling another's follows the group
 * rule (src/schedules/run-rules.ts). A subagent's run gets none: text its
 * child reads cannot make schedules charged to the person, out of sight of
 * their chat.
 */
import type { FeatureRun, RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import type { ConversationSchedules } from '../../../runner/plugin.js';
import { DEFAULTS } from '../../../src/config/defaults.js';
import { ScheduleForbiddenError } from '../../../src/errors.js';
import { AccessRules } from '../../../src/people/access-rule.js';
import { bullPrefixFor } from '../../../src/protocol/run-queue.js';
import { ScheduleFireWorker } from '../../../src/schedules/fire-worker.js';
import { type ConfiguredSchedules, schedulesFromConfig } from '../../../src/schedules/from-config.js';
import { cancelRefusal, createRefusal, type RunRuleDeps } from '../../../src/schedules/run-rules.js';
import { type Schedules, scheduleIdFor } from '../../../src/schedules/schedules.js';

/** The runner's schedules and its fire worker, closed with the runner; with schedules off (`schedules.enabled`), a feature that adds nothing. */
export function schedulesRunner(kit: RunnerFeatureKit): RunnerFeature {
  const scheduling = schedulesFromConfig(kit, kit.channels.ids ?? [], 'steerbot-runner-schedules');
  if (!scheduling) return { name: 'schedules' };
  const fires = startFires(kit, scheduling);
  const { schedules } = scheduling;
  return {
    name: 'schedules',
    context: (run) => (run.parentConversationId !== undefined ? {} : { schedules: conversationSchedules(schedules, run, runRules(kit, run)) }),
    close: async () => {
      await fires.close();
      await scheduling.close();
    },
  };
}

/** The fire worker on its own connection (asking the access rule of each schedule's owner), and the conversations' configured heartbeats. */
function startFires(kit: RunnerFeatureKit, scheduling: ConfiguredSchedules): { close(): Promise<void> } {
  const { config, channels } = kit;
  const connection = kit.connectRedis({ forBullmq: true, connectionName: 'steerbot-runner-fires' });
  const worker = new ScheduleFireWorker({
    schedules: scheduling.schedules,
    dispatch: kit.ingest.dispatch,
    queue: kit.ingest.queue,
    client: kit.redis,
    prefix: kit.prefix,
    connection,
    bullPrefix: bullPrefixFor(kit.prefix),
    queueName: DEFAULTS.schedules.queueName,
    // The access rule of this runner's configuration: a person or group that lost access gets no more fires.
    access: new AccessRules({
      access: config.access,
      identities: kit.identities,
      redis: kit.redis,
      prefix: kit.prefix,
      channelIds: channels.ids ?? [],
      settingsOf: channels.settings,
    }),
    policyFor: (conversationId) => channels.settings(conversationId)?.policy,
    // Without its channels the runner cannot tell a channel-wide heartbeat from a stale one: it leaves heartbeats be.
    ...(channels.ids && { isStaleHeartbeat: (schedule) => scheduling.heartbeats.isStale(schedule) }),
    missedAfterMs: config.schedules.missedAfterSeconds * 1000,
    concurrency: config.schedules.concurrency,
    ...kit.workerTimings,
    logger: kit.logger.child({ part: 'schedules' }),
  });
  void scheduling.heartbeats.ensureConfigured(channels.ids ?? []);
  return {
    close: async () => {
      await worker.close();
      connection.disconnect();
    },
  };
}

/**
 * The schedules of one conversation, created by the agent and owned by the
 * run's accountable identity (their fires are charged to it) when only that
 * identity asked (`createRefusal`); a run no person's message started makes
 * one-shots no sooner than `minIntervalSeconds` ahead, so fires cannot chain
 * into a loop. Cancelling another's follows the group rule (`cancelRefusal`).
 */
function conversationSchedules(schedules: Schedules, run: FeatureRun, rule: RunRuleDeps): ConversationSchedules {
  const { conversationId } = run;
  // Only a person's message (or a private schedule's fire) says the chat is private. A run an event, a subagent's
  // result or a heartbeat started cannot tell: its schedules fire as group inputs, with no personal memory.
  const privateChat = !run.inputs.some((m) => m.group === true) && run.inputs.some((m) => m.origin === undefined || m.origin.kind === 'schedule');
  const group = !privateChat;
  // A fire's, a heartbeat's or an event's run: no person is there to have asked.
  const unattended = run.starter === undefined || run.starter.origin !== undefined;
  return {
    create: async (request, opts) => {
      // Fires are charged to the person: text no person of the conversation wrote (a subagent's result, an API event)
      // must not set them going, nor pass through a fire's run as the person's own (its notes, its subagents).
      if (run.answersEvent()) throw new ScheduleForbiddenError(EVENT_REFUSAL);
      const refusal = await createRefusal(rule);
      if (refusal) throw new ScheduleForbiddenError(refusal);
      return schedules.create(conversationId, request, {
        createdBy: 'agent',
        owner: run.identity,
        group,
        unattended,
        ...(opts?.idempotencyKey !== undefined && { id: scheduleIdFor(opts.idempotencyKey) }),
      });
    },
    list: (count) => schedules.list(conversationId, count),
    cancel: async (id) => {
      const s = await schedules.get(conversationId, id);
      if (!s) return false;
      const refusal = await cancelRefusal(s, rule);
      if (refusal) throw new ScheduleForbiddenError(refusal);
      return schedules.cancel(conversationId, id);
    },
  };
}

const EVENT_REFUSAL =
  "this run answers an event (a subagent's result or a message from another system), not the person it is charged to: nothing was scheduled. The person can ask for it in a message of their own";

/** What the rules of one run's schedule tools ask: who the run answers, their identities, whether they administer the chat. */
function runRules(kit: RunnerFeatureKit, run: FeatureRun): RunRuleDeps {
  const { conversationId } = run;
  const channel = kit.channels.channelOf(conversationId);
  return {
    runIdentity: run.identity,
    requesters: () => run.requesters(),
    identityOf: (userId) => kit.identities.tryResolve(channel, userId),
    current: (identity) => kit.identities.resolveAccount(identity),
    isAdmin: async (userId) => {
      if (kit.channels.settings(conversationId)?.admins?.includes(userId)) return true;
      const out = kit.channels.outbound(conversationId);
      return out?.isAdmin ? out.isAdmin(conversationId, userId) : false;
    },
  };
}
