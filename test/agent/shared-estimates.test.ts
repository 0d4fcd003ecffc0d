/**
 * The local agent's shared token estimates: a run's request overhead
 * (system prompt, tool descriptions) is estimated once per text across
 * runs, with the estimator's own result, and the memo stays bounded.
 */
import { describe, expect, it } from 'vitest';
import { SharedEstimates } from '../../plugins/local-agent/loop-state.js';
import { estimateTokens } from '../../runner/compaction/estimate.js';

describe('shared estimates', () => {
  it("give the estimator's count, the first time and again", () => {
    const e = new SharedEstimates();
    const texts = ['You are a helpful assistant.', '日本語の説明文です。', 'current_time: the date and time in an IANA zone', ''];
    for (const t of texts) expect(e.tokens(t)).toBe(estimateTokens(t));
    // Built anew, as each run builds its prompt: the same text is found, not estimated again.
    for (const t of texts) expect(e.tokens(`${t}`.concat(''))).toBe(estimateTokens(t));
    expect(e.size).toBe(texts.length);
  });

  it('keep at most 256 texts, dropping the oldest first, and no text over 64 KiB', () => {
    const e = new SharedEstimates();
    for (let i = 0; i < 300; i++) e.tokens(`tool ${i} does one thing`);
    expect(e.size).toBe(256);
    const long = 'word '.repeat(20_000);
    expect(e.tokens(long)).toBe(estimateTokens(long));
    expect(e.size).toBe(256);
  });
});
