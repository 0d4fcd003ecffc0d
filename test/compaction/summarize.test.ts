import type { ModelMessage } from 'ai';
import { APICallError } from 'ai';
import { describe, expect, it } from 'vitest';
import { fallbackSummary, summarize } from '../../runner/compaction/summarize.js';
import { failingModel, hangingModel, textModel } from './models.js';

const turns: ModelMessage[] = [
  { role: 'user', content: 'What is the weather in Lisbon?' },
  { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: { city: 'Lisbon' } }] },
  { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'weather', output: { type: 'json', value: { tempC: 21 } } }] },
  { role: 'assistant', content: [{ type: 'text', text: 'It is 21 °C and sunny in Lisbon.' }] },
];

describe('summarize', () => {
  it('asks the model to merge the previous summary with the turns', async () => {
    const model = textModel('  Ann asked about Lisbon (21 °C).  ');
    const r = await summarize({ model, previousSummary: 'Ann lives in Porto.', turns, maxChars: 500 });
    expect(r).toEqual({ summary: 'Ann asked about Lisbon (21 °C).', summarizer: 'llm', usage: { inputTokens: 100, outputTokens: 20 } });
    expect(model.doGenerateCalls).toHaveLength(1);
    const prompt = JSON.stringify(model.doGenerateCalls[0]!.prompt);
    expect(prompt).toContain('Ann lives in Porto.');
    expect(prompt).toContain('User: What is the weather in Lisbon?');
    expect(prompt).toContain('Assistant called weather({\\"city\\":\\"Lisbon\\"})');
    expect(prompt).toContain('Tool weather returned: {\\"tempC\\":21}');
  });

  it('bounds what the model writes to maxChars', async () => {
    const r = await summarize({ model: textModel('x'.repeat(5000)), turns, maxChars: 300 });
    expect(r.summarizer).toBe('llm');
    expect(r.summary.length).toBeLessThanOrEqual(300);
  });

  it.each([
    ['throws', () => failingModel()],
    ['answers nothing', () => textModel('   ')],
  ])('writes the deterministic summary when the model %s', async (_, make) => {
    const r = await summarize({ model: make(), previousSummary: 'Ann lives in Porto.', turns, maxChars: 500 });
    expect(r).toMatchObject({ summary: fallbackSummary('Ann lives in Porto.', turns, 500), summarizer: 'fallback' });
  });

  it('reports the usage the provider reported, or the estimate of the prompt of a call that failed after it was sent', async () => {
    expect((await summarize({ model: textModel('   '), turns, maxChars: 500 })).usage).toEqual({ inputTokens: 100, outputTokens: 20 });
    const failed = await summarize({ model: failingModel(), turns, maxChars: 500 });
    expect(failed.usage?.inputTokens).toBeGreaterThan(100);
    expect(failed.usage?.outputTokens).toBe(0);
    // A request the provider refused with an error status is billed nothing.
    const refusal = new APICallError({ message: 'bad request', url: 'http://x', requestBodyValues: {}, statusCode: 400, isRetryable: false });
    expect((await summarize({ model: failingModel(refusal), turns, maxChars: 500 })).usage).toBeUndefined();
  });

  it('writes the deterministic summary when the call is aborted or times out', async () => {
    const ac = new AbortController();
    const aborted = summarize({ model: hangingModel(), turns, maxChars: 500, signal: ac.signal });
    setTimeout(() => ac.abort('stop'), 10); // while the call is in flight
    expect((await aborted).summarizer).toBe('fallback');
    expect((await summarize({ model: hangingModel(), turns, maxChars: 500, timeoutMs: 20 })).summarizer).toBe('fallback');
  });

  it('does not call the model when there is nothing new to merge', async () => {
    const model = textModel('unused');
    expect(await summarize({ model, previousSummary: 'Ann lives in Porto.', turns: [], maxChars: 500 })).toStrictEqual({
      summary: 'Ann lives in Porto.',
      summarizer: 'fallback',
    });
    expect(model.doGenerateCalls).toHaveLength(0);
  });

  it('writes the deterministic summary without a model', async () => {
    expect((await summarize({ turns, maxChars: 500 })).summarizer).toBe('fallback');
  });
});

describe('fallbackSummary', () => {
  it('says who said what, one line per message part', () => {
    expect(fallbackSummary('Ann lives in Porto.', turns, 1000)).toBe(
      [
        'Ann lives in Porto.',
        'User: What is the weather in Lisbon?',
        'Assistant called weather({"city":"Lisbon"})',
        'Tool weather returned: {"tempC":21}',
        'Assistant: It is 21 °C and sunny in Lisbon.',
      ].join('\n'),
    );
  });

  it('truncates long lines and keeps the newest lines within maxChars', () => {
    const long: ModelMessage[] = Array.from({ length: 50 }, (_, i) => ({ role: 'user', content: `message ${i} ${'blah '.repeat(100)}` }));
    const s = fallbackSummary(undefined, long, 1000, 80);
    expect(s.length).toBeLessThanOrEqual(1000);
    const lines = s.split('\n');
    expect(lines[0]).toBe('[… earlier conversation omitted]');
    expect(lines.at(-1)).toMatch(/^User: message 49 blah/);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(80);
  });

  it('is deterministic and does not split surrogate pairs', () => {
    const emoji: ModelMessage[] = [{ role: 'user', content: '😀'.repeat(100) }];
    const a = fallbackSummary(undefined, emoji, 1000, 11);
    expect(a).toBe(fallbackSummary(undefined, emoji, 1000, 11));
    expect(a).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
  });
});
