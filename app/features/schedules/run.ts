/**
 * Schedules' runner part: a run gets its conversation's schedules
 * (`RunContext.features.schedules`), created by the agent and owned by the run's
 * accountable identity; cancelling another's follows the group rule.
 */
import type { FeatureRun, RunnerFeature, RunnerFeatureKit } from '../../../runner/feature.js';
import type { ConversationSchedules } from '../../../runner/plugin.js';
import { ScheduleForbiddenError } from '../../../src/errors.js';
import { type CancelRuleDeps, cancelRefusal } from '../../../src/schedules/cancel-rule.js';
import { type Schedules, scheduleIdFor } from '../../../src/schedules/schedules.js';

/** The schedule members of a run's context; with schedules off (`kit.schedules` undefined), a feature that adds nothing. */
export function schedulesRunner(kit: RunnerFeatureKit): RunnerFeature {
  const { schedules } = kit;
  if (!schedules) return { name: 'schedules' };
  return { name: 'schedules', context: (run) => ({ schedules: conversationSchedules(schedules, run, cancelRule(kit, run)) }) };
}

/**
 * The schedules of one conversation, created by the agent and owned by the
 * run's accountable identity (their fires are charged to it); cancelling
 * another's follows the group rule (`cancelRefusal`).
 */
function conversationSchedules(schedules: Schedules, run: FeatureRun, rule: CancelRuleDeps): ConversationSchedules {
  const { conversationId } = run;
  const group = run.inputs.some((m) => m.group === true);
  return {
    create: (request, opts) =>
      schedules.create(conversationId, request, {
        createdBy: 'agent',
        owner: run.identity,
        group,
        ...(opts?.idempotencyKey !== undefined && { id: scheduleIdFor(opts.idempotencyKey) }),
      }),
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

/** What the group rule of one run's schedule tools asks: who the run answers, their identities, whether they administer the chat. */
function cancelRule(kit: RunnerFeatureKit, run: FeatureRun): CancelRuleDeps {
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
