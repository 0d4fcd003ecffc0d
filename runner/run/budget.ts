/**
 * The spending budgets of one run: checked before the run starts (which
 * also counts it against runs per hour) and before every model step, and
 * charged with each recorded step's provider usage. A spent budget ends the
 * run `failed` with reason `budget`; the person hears it once per window.
 *
 * Every run is charged to an accountable identity (`accountableIdentity`):
 * the person whose message started it, or the owner a schedule's fire or a
 * heartbeat names (the person who made the schedule), else the operator
 * (no person's budget; the conversation's still applies). A fire's sender
 * is never taken for a person.
 */
import { type BudgetRefusal, type BudgetSubjects, type Budgets, budgetNotice } from '../../src/people/budget.js';
import type { MessageReceived } from '../../src/record/entries.js';
import type { RunResult, StepRecord } from '../plugin.js';

/** Terminal reason of a run a spent budget ended. Stable: dashboards and tests branch on it. */
export const BUDGET_REASON = 'budget';

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

/** The budgets one run spends from. */
export class RunBudget {
  constructor(
    private readonly budgets: Budgets,
    private readonly subjects: BudgetSubjects,
    private readonly now: () => number,
  ) {}

  /**
   * Opens the run's budget: its accountable identity (undefined: the operator)
   * and its conversation; `scheduled` when a fire started the run (its notice
   * says the scheduled task was not run). Undefined when no limit is set.
   */
  static open(
    budgets: Budgets | undefined,
    conversationId: string,
    identity: string | undefined,
    now: () => number = Date.now,
    scheduled = false,
  ): RunBudget | undefined {
    if (!budgets?.enabled) return undefined;
    const run = new RunBudget(budgets, { identity, conversationId }, now);
    run.scheduled = scheduled;
    return run;
  }

  private scheduled = false;

  /** Before the run's first invocation: counts a new run (`countRun`), or only checks (a takeover, a continuation). */
  async before(countRun: boolean): Promise<RunResult | undefined> {
    const refusal = countRun ? await this.budgets.admit(this.subjects) : await this.budgets.check(this.subjects);
    return refusal && this.result(refusal);
  }

  /** Before a model step: the result that ends the run when a token budget is spent. */
  async check(): Promise<RunResult | undefined> {
    const refusal = await this.budgets.check(this.subjects);
    return refusal && this.result(refusal);
  }

  /** Charges a recorded step's input + output tokens. */
  charge(usage: StepRecord['usage']): Promise<void> {
    const tokens = (usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0);
    return this.budgets.charge(this.subjects, tokens);
  }

  private result(r: BudgetRefusal): RunResult {
    // Final: a follow-up run would meet the same spent budget.
    return {
      outcome: 'failed',
      reason: BUDGET_REASON,
      final: true,
      ...(r.firstNotice && { notice: budgetNotice(r, this.now(), { scheduled: this.scheduled }) }),
    };
  }
}
