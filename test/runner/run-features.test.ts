/** What the runner features add to an invocation's `RunContext.features` (runner/run/features.ts). */
import { describe, expect, it } from 'vitest';
import type { RunnerFeature } from '../../runner/feature.js';
import type { RunMemory, RunResult } from '../../runner/plugin.js';
import { featuresContext, InvocationRun } from '../../runner/run/features.js';

const run = new InvocationRun({ conversationId: 'telegram:1', runId: 'run-1', identity: 'telegram:u1', profile: undefined, starter: undefined, inputs: [] });

const memory = (maxNoteChars: number): RunMemory => ({
  maxNoteChars,
  save: async () => Promise.reject(new Error('not called')),
  search: async () => [],
  delete: async () => false,
  promptNotes: async () => ({ notes: [], total: 0 }),
});

const spent = (reason: string): RunResult => ({ outcome: 'failed', reason });

describe('featuresContext', () => {
  it("gives each feature's member under its own name, a later feature's replacing an earlier one's", () => {
    const first = memory(100);
    const later = memory(200);
    const features: RunnerFeature[] = [{ name: 'a', context: () => ({ memory: first }) }, { name: 'b', context: () => ({ memory: later }) }, { name: 'd' }];

    const added = featuresContext(features, run);

    expect(added.memory).toBe(later);
    expect(Object.keys(added)).toEqual(['memory']);
  });

  it('keeps a member when a later feature leaves it undefined', () => {
    const first = memory(100);
    // The types forbid it; a feature written in JavaScript can still return it.
    const leavesUndefined: RunnerFeature = { name: 'b', context: () => ({ memory: undefined }) as unknown as { memory: RunMemory } };
    expect(featuresContext([{ name: 'a', context: () => ({ memory: first }) }, leavesUndefined], run).memory).toBe(first);
    expect(featuresContext([leavesUndefined], run)).toEqual({});
  });

  it('adds nothing when no feature adds a member', () => {
    expect(featuresContext([{ name: 'a' }, { name: 'b', context: () => ({}) }], run)).toEqual({});
  });

  it("runs every feature's spendingCheck in order, and the first result ends it", async () => {
    const calls: string[] = [];
    const check =
      (name: string, result: RunResult | undefined) =>
      async (spend?: 'image'): Promise<RunResult | undefined> => {
        calls.push(`${name}:${spend ?? 'step'}`);
        return result;
      };
    const features: RunnerFeature[] = [
      { name: 'a', context: () => ({ spendingCheck: check('a', undefined) }) },
      { name: 'b', context: () => ({ spendingCheck: check('b', spent('b')) }) },
      { name: 'c', context: () => ({ spendingCheck: check('c', spent('c')) }) },
    ];

    const { spendingCheck } = featuresContext(features, run);

    expect(await spendingCheck!('image')).toEqual(spent('b'));
    expect(calls).toEqual(['a:image', 'b:image']);
  });

  it("calls a feature's spendingCheck on the object the feature returned", async () => {
    const added = {
      limit: 'spent',
      spendingCheck(this: { limit: string }) {
        return Promise.resolve(spent(this.limit));
      },
    };
    const { spendingCheck } = featuresContext([{ name: 'a', context: () => added }], run);

    expect(await spendingCheck!()).toEqual(spent('spent'));
  });
});
