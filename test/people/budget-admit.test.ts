/**
 * Budget admission is atomic per subject: runs of one identity starting at
 * once (each from its own connection) cannot all pass the hour's run limit or
 * the last of a token budget, and each window's refusal is noticed once.
 */
import { describe, expect, it } from 'vitest';
import { type BudgetRefusal, type BudgetSettings, Budgets } from '../../src/people/budget.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();
const NOW = Date.UTC(2026, 0, 15, 21, 30);
const N = 8;
const subjects = { identity: 'person-1', conversationId: 'telegram:42' };

/** `N` Budgets on their own connections, sharing one clock and prefix. */
const budgetsOn = (settings: BudgetSettings) => fx.connections(N).map((client) => new Budgets({ client, prefix: fx.prefix, settings, now: () => NOW }));

const admitted = (verdicts: Array<BudgetRefusal | undefined>) => verdicts.filter((v) => v === undefined).length;

describe('Budgets.admit under concurrency', () => {
  it('admits exactly one of N runs starting at once with runsPerHour 1, and notices the refusal once', async () => {
    const all = budgetsOn({ identity: { runsPerHour: 1 } });
    const verdicts = await Promise.all(all.map((b) => b.admit(subjects)));
    expect(admitted(verdicts)).toBe(1);
    const refusals = verdicts.filter((v) => v !== undefined);
    expect(refusals.every((r) => r.scope === 'identity' && r.limit === 'runsPerHour' && r.resetsAt === Date.UTC(2026, 0, 15, 22))).toBe(true);
    expect(refusals.filter((r) => r.firstNotice)).toHaveLength(1);
    expect((await all[0]!.usage('person-1')).runsThisHour).toBe(1);
  });

  it('admits exactly runsPerHour runs of one conversation when the identity allows more', async () => {
    const all = budgetsOn({ identity: { runsPerHour: 100 }, conversation: { runsPerHour: 3 } });
    const verdicts = await Promise.all(all.map((b) => b.admit(subjects)));
    expect(admitted(verdicts)).toBe(3);
    expect(verdicts.filter((v) => v !== undefined).every((r) => r.scope === 'conversation' && r.limit === 'runsPerHour')).toBe(true);
  });

  it('refuses every run and model step once a token budget is spent, identity first', async () => {
    const [b] = budgetsOn({ identity: { tokensPerDay: 100 }, conversation: { tokensPerMonth: 100 } });
    expect(await b!.admit(subjects)).toBeUndefined();
    expect(await b!.check(subjects)).toBeUndefined();
    await b!.charge(subjects, 120);
    expect(await b!.check(subjects)).toEqual({ scope: 'identity', limit: 'tokensPerDay', resetsAt: Date.UTC(2026, 0, 16), firstNotice: true });
    expect(await b!.admit(subjects)).toEqual({ scope: 'identity', limit: 'tokensPerDay', resetsAt: Date.UTC(2026, 0, 16), firstNotice: false });
    // A step check neither needs nor counts runs: only the admitted run is counted.
    expect(await b!.check({ conversationId: subjects.conversationId })).toMatchObject({
      scope: 'conversation',
      limit: 'tokensPerMonth',
      resetsAt: Date.UTC(2026, 1, 1),
    });
    expect((await b!.usage('person-1')).runsThisHour).toBe(1);
  });

  it('admits exactly imagesPerDay of N pictures asked for at once, and a refused picture counts no notice', async () => {
    const all = budgetsOn({ identity: { imagesPerDay: 2, tokensPerDay: 100 } });
    const verdicts = await Promise.all(all.map((b) => b.admitImage(subjects)));
    expect(admitted(verdicts)).toBe(2);
    const refusals = verdicts.filter((v) => v !== undefined);
    expect(refusals.every((r) => r.limit === 'imagesPerDay' && r.resetsAt === Date.UTC(2026, 0, 16) && !r.firstNotice)).toBe(true);
    // The person still hears once of a spent token budget: the pictures' refusals took no notice.
    await all[0]!.charge(subjects, 100);
    expect(await all[0]!.check(subjects)).toMatchObject({ limit: 'tokensPerDay', firstNotice: true });
    // A spent token budget refuses pictures too.
    expect(await all[0]!.admitImage(subjects)).toMatchObject({ limit: 'tokensPerDay', firstNotice: false });
  });
});
