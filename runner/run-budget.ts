/**
 * The spending budgets of one run: checked before the run starts (which
 * also counts it against runs per hour) and before every model step, and
 * charged with each recorded step's provider usage. A spent budget ends the
 * run `failed` with reason `budget`; the person hears it once per window.
 */
import { type BudgetRefusal, type BudgetSubjects, type Budgets, budgetNotice } from '../src/budget.js';
import type { RunResult, StepRecord } from './plugin.js';

/** Terminal reason of a run a spent budget ended. Stable: dashboards and tests branch on it. */
export const BUDGET_REASON = 'budget';

/** The budgets one run spends from. */
export class RunBudget {
  constructor(
    private readonly budgets: Budgets,
    private readonly subjects: BudgetSubjects,
    private readonly now: () => number,
  ) {}

  /** Opens the run's budget: the identity of the person it answers (undefined: unknown) and its conversation. Undefined when no limit is set. */
  static open(budgets: Budgets | undefined, conversationId: string, identity: string | undefined, now: () => number = Date.now): RunBudget | undefined {
    if (!budgets?.enabled) return undefined;
    return new RunBudget(budgets, { identity, conversationId }, now);
  }

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
    return { outcome: 'failed', reason: BUDGET_REASON, ...(r.firstNotice && { notice: budgetNotice(r, this.now()) }) };
  }
}
