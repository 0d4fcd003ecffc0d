import type { ModelMessage } from 'ai';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import {
  Calibrator,
  ESTIMATE_MAX_OVERCOUNT,
  estimateMessages,
  estimateRequest,
  estimateTokens,
  MESSAGE_OVERHEAD_TOKENS,
} from '../../runner/compaction/estimate.js';
import { projectHistory } from '../../runner/projection.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { syntheticTurns } from './history.js';
import { SAMPLES } from './samples.js';

// o200k_base is the reference (GPT-4o, GPT-4.1, GPT-5, o-series); cl100k_base is printed for comparison.
const reference = new Tiktoken(o200k);
const older = new Tiktoken(cl100k);
const CJK = new Set(['chinese', 'japanese', 'korean', 'chinese-short', 'japanese-short', 'korean-short']);
const pct = (est: number, actual: number) => `${((est / actual - 1) * 100).toFixed(1)}%`;

describe('estimateTokens', () => {
  const rows = Object.entries(SAMPLES).map(([name, text]) => {
    const actual = reference.encode(text).length;
    const est = estimateTokens(text);
    return {
      name,
      chars: [...text].length,
      o200k: actual,
      cl100k: older.encode(text).length,
      estimate: est,
      'err vs o200k': pct(est, actual),
      'chars/4 err': pct(Math.ceil(text.length / 4), actual),
    };
  });
  console.log('token estimate vs js-tiktoken (o200k_base reference)');
  console.table(rows);

  it.each(rows)('never counts fewer tokens than o200k_base, and at most ESTIMATE_MAX_OVERCOUNT times as many, on $name', ({ o200k: actual, estimate }) => {
    expect(estimate).toBeGreaterThanOrEqual(actual);
    expect(estimate).toBeLessThanOrEqual(actual * ESTIMATE_MAX_OVERCOUNT);
  });

  it.each(rows.filter((r) => CJK.has(r.name)))('does not undercount CJK ($name), where chars/4 is 2-4× low', ({ o200k: actual, estimate, chars }) => {
    expect(estimate).toBeGreaterThanOrEqual(actual);
    expect(Math.ceil(chars / 4)).toBeLessThan(actual * 0.6);
  });

  it('charges machine-made strings (hashes, base64) by their pieces, not as words', () => {
    const key = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9';
    expect(estimateTokens(key)).toBeGreaterThanOrEqual(reference.encode(key).length);
    // A long ordinary word is not taken for one.
    expect(estimateTokens('internationalization')).toBeLessThan(estimateTokens(key));
  });

  it('counts nothing for empty text and something for every non-space character class', () => {
    expect(estimateTokens('')).toBe(0);
    for (const s of ['a', '7', '!', '中', 'か', '한', 'é', 'Я', '😀', '\n\n']) expect(estimateTokens(s), s).toBeGreaterThan(0);
  });
});

describe('estimateMessages', () => {
  it('counts text, tool calls and tool results (as JSON) at least as o200k_base plus framing, and at most ESTIMATE_MAX_OVERCOUNT times', () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: SAMPLES.english! },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: SAMPLES.markdown! },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'redis_info', input: { section: 'memory', host: 'cache-1' } },
        ],
      },
      {
        role: 'tool',
        content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'redis_info', output: { type: 'json', value: JSON.parse(SAMPLES.json!) } }],
      },
      { role: 'user', content: SAMPLES.chinese! },
    ];
    const texts = [
      SAMPLES.english!,
      SAMPLES.markdown!,
      'redis_info',
      JSON.stringify({ section: 'memory', host: 'cache-1' }),
      'redis_info',
      JSON.stringify({ type: 'json', value: JSON.parse(SAMPLES.json!) }),
      SAMPLES.chinese!,
    ];
    const actual = texts.reduce((n, t) => n + reference.encode(t).length, 0) + messages.length * MESSAGE_OVERHEAD_TOKENS;
    const est = estimateMessages(messages);
    console.log(`estimateMessages: ${est} vs o200k_base ${actual} (${pct(est, actual)})`);
    expect(est).toBeGreaterThanOrEqual(actual);
    expect(est).toBeLessThanOrEqual(actual * ESTIMATE_MAX_OVERCOUNT);
  });
});

describe('Calibrator', () => {
  it('starts at 1 and moves toward the observed ratio', () => {
    const c = new Calibrator();
    expect(c.ratio('a')).toBe(1);
    c.observe('a', 1300, 1000);
    expect(c.ratio('a')).toBeCloseTo(1.3);
    for (let i = 0; i < 20; i++) c.observe('a', 1500, 1000);
    expect(c.ratio('a')).toBeCloseTo(1.5, 3);
    expect(c.calibrate('a', 1000)).toBe(1500);
    expect(c.ratio('b')).toBe(1);
  });

  it('by default never lowers the estimate: a provider counting fewer tokens keeps the ratio at 1', () => {
    const c = new Calibrator();
    c.observe('a', 600, 1000);
    expect(c.ratio('a')).toBe(1);
    expect(c.calibrate('a', 1000)).toBe(1000);
  });

  it('clamps the ratio and ignores empty observations', () => {
    const c = new Calibrator({ min: 0.5, max: 3 });
    c.observe('a', 100_000, 10);
    expect(c.ratio('a')).toBe(3);
    c.observe('b', 1, 1000);
    expect(c.ratio('b')).toBe(0.5);
    c.observe('c', 0, 1000);
    c.observe('c', 1000, 0);
    expect(c.ratio('c')).toBe(1);
  });

  it('forgets the least recently used conversation beyond its cap', () => {
    const c = new Calibrator({ maxConversations: 2 });
    c.observe('a', 2000, 1000);
    c.observe('b', 2000, 1000);
    c.observe('a', 2000, 1000);
    c.observe('c', 2000, 1000);
    expect(c.ratio('b')).toBe(1);
    expect(c.ratio('a')).toBe(2);
  });
});

describe('estimateRequest', () => {
  const project = (entries: SeqEntry[]) => projectHistory(entries, { unclaimed: 'exclude' }).messages;

  it('is the last reported input tokens plus an estimate of what came after that request', () => {
    const entries = syntheticTurns(3);
    const last = entries.findLast((e) => e.kind === 'model.step')!;
    const messages = project(entries);
    const r = estimateRequest({ entries, messages, project });
    const since = estimateMessages(project(entries.filter((e) => e.seq >= last.seq)));
    expect(r).toEqual({ tokens: 80 * 2 + 60 + since, basis: 'usage' });
  });

  it('adds messages not in the record yet, scaled by the ratio', () => {
    const entries = syntheticTurns(2);
    const added: ModelMessage[] = [{ role: 'user', content: SAMPLES.korean! }];
    const base = estimateRequest({ entries, messages: project(entries), project });
    const more = estimateRequest({ entries, messages: project(entries), project, added, ratio: 2 });
    expect(more.tokens - 140).toBe(Math.ceil((base.tokens - 140 + estimateMessages(added)) * 2));
  });

  it.each([
    ['compaction', { v: 1, at: 1, kind: 'compaction', covers_until: 4, tokens_before: 900, tokens_after: 300, summarizer: 'llm', seq: 9 }],
    ['reset', { v: 1, at: 1, kind: 'conversation.reset', seq: 9 }],
  ] as const)('ignores usage reported before a %s and estimates the prompt with its overhead', (_, marker) => {
    const entries: SeqEntry[] = [...syntheticTurns(2), marker, ...syntheticTurns(1, 10, 5).map((e) => (e.kind === 'model.step' ? { ...e, usage: {} } : e))];
    const messages = project(entries);
    expect(estimateRequest({ entries, messages, project, overheadTokens: 50, ratio: 1.5 })).toEqual({
      tokens: Math.ceil(estimateMessages(messages) * 1.5) + 50,
      basis: 'estimate',
    });
  });
});
