/**
 * Budgets' runner part: the spending budgets of a run, checked before it
 * starts (which also counts it against runs per hour) and before every
 * model step, and charged with each recorded step's provider usage, the
 * estimate of each call that recorded none (`RunRecord.spent`) and each
 * compaction summarizer call's usage (`spent` too). A spent
 * budget ends the run `failed` with reason `budget`; the person hears it
 * once per window. A picture (`generate_image`) is admitted against
 * `imagesPerDay` before it is paid for. A run is charged to its accountable identity (the
 * operator's runs to no person; the conversation's budget still applies). A
 * subagent's run is charged to the conversation it works for (its parent's),
 * so delegating never escapes that conversation's budget; nobody is told of
 * its refusal there (it has no chat), and the person hears of it from the parent.
 */
import { BUDGET_REASON, type FeatureRun, type RunnerFeature, type RunnerFeatureKit } from '../../../runner/feature.js';
import type { RunResult } from '../../../runner/plugin.js';
import { type BudgetRefusal, Budgets, budgetNotice } from '../../../src/people/budget.js';

/** The budgets of `kit.config.budgets`; with no limit set, a feature that does nothing. */
export function budgetsRunner(kit: RunnerFeatureKit): RunnerFeature {
  const budgets = new Budgets({ client: kit.redis, prefix: kit.prefix, settings: kit.config.budgets, now: kit.now });
  if (!budgets.enabled) return { name: 'budgets' };
  const subjects = (run: FeatureRun) => ({ identity: run.identity, conversationId: run.parentConversationId ?? run.conversationId });
  const opts = (run: FeatureRun) => ({ quiet: run.parentConversationId !== undefined });
  const ended = (run: FeatureRun, refusal: BudgetRefusal | undefined) => refusal && budgetResult(refusal, kit.now(), run);
  return {
    name: 'budgets',
    // A new run counts against runs per hour; a takeover or a continuation only checks.
    before: async (run, newRun) => ended(run, await (newRun ? budgets.admit(subjects(run), opts(run)) : budgets.check(subjects(run), opts(run)))),
    context: (run) => ({
      spendingCheck: async (spend) => ended(run, await (spend === 'image' ? budgets.admitImage(subjects(run)) : budgets.check(subjects(run), opts(run)))),
    }),
    afterStep: (run, step) => budgets.charge(subjects(run), (step.usage?.inputTokens ?? 0) + (step.usage?.outputTokens ?? 0)),
    // A call that recorded no step (cut off before it said anything, silent, failed) is charged its estimate alike,
    // and a compaction summarizer call its usage.
    spent: (run, usage) => budgets.charge(subjects(run), (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)),
  };
}

/** The result a spent budget ends the run with; a fire's notice says the scheduled task was not run. */
function budgetResult(r: BudgetRefusal, now: number, run: FeatureRun): RunResult {
  const kind = run.starter?.origin?.kind;
  const scheduled = kind === 'schedule' || kind === 'heartbeat';
  // Final: a follow-up run would meet the same spent budget.
  return {
    outcome: 'failed',
    reason: BUDGET_REASON,
    final: true,
    ...(r.firstNotice && { notice: budgetNotice(r, now, { scheduled }) }),
  };
}
