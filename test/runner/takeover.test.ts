/**
 * What a takeover reads from the record (pure): the recorded final answer
 * of the turn the run is on, the anchor of its delivery keys, and the
 * steered messages taken since the last answer; and the note that names
 * unanswered steered messages.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { answerText, isFinalStep } from '../../runner/projection.js';
import { readRunEntries, runProgress } from '../../runner/run/takeover.js';
import type { ModelStep, RecordEntry, SeqEntry } from '../../src/record/entries.js';
import { MAX_UNANSWERED_LISTED, parseUnanswered, unansweredNote, unansweredNotice, unansweredStatusLine } from '../../src/record/unanswered.js';
import { closeRedis, createRedis, type RedisClient } from '../../src/redis/connection.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

type EntryInput = RecordEntry extends infer E ? (E extends RecordEntry ? Omit<E, 'v' | 'at'> : never) : never;

function record() {
  const entries: SeqEntry[] = [];
  const add = (e: EntryInput): number => {
    const seq = entries.length + 1;
    entries.push({ v: 1, at: 1_700_000_000_000 + seq, ...e, seq } as SeqEntry);
    return seq;
  };
  return {
    entries,
    add,
    user: (text: string) => add({ kind: 'message.received', updateKey: `telegram:${entries.length + 1}`, sender: { id: 'u1' }, text }),
    started: (run: string, inputs: number[], attempt = 1) => add({ kind: 'run.started', run, attempt, token: attempt, owner: `w${attempt}`, inputs }),
    injected: (run: string, seqs: number[], followUp = false) => add({ kind: 'steering.injected', run, seqs, ...(followUp && { follow_up: true }) }),
    answer: (run: string, text: string) =>
      add({ kind: 'model.step', run, token: 1, step: 0, finishReason: 'stop', messages: [{ role: 'assistant', content: [{ type: 'text', text }] }] }),
    tools: (run: string) =>
      add({
        kind: 'model.step',
        run,
        token: 1,
        step: 0,
        finishReason: 'tool-calls',
        messages: [
          {
            role: 'assistant',
            content: [
              { type: 'text', text: 'Let me look. ' },
              { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: {} },
            ],
          },
          { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'json', value: 1 } }] },
        ],
      }),
    partial: (run: string, text: string) =>
      add({
        kind: 'model.step',
        run,
        token: 1,
        step: 0,
        partial: true,
        finishReason: 'aborted',
        messages: [{ role: 'assistant', content: [{ type: 'text', text }] }],
      }),
    ended: (run: string) => add({ kind: 'run.ended', run, attempt: 1, token: 1, outcome: 'completed' }),
  };
}

describe('runProgress', () => {
  it('finds the final answer an attempt recorded after taking its inputs, and anchors keys at the newest input', () => {
    const r = record();
    const a = r.user('first');
    const b = r.user('second');
    r.started('run1', [a, b]);
    r.tools('run1');
    const step = r.answer('run1', 'The answer.');
    r.started('run1', [a, b], 2); // the takeover's own start lists the same inputs: not a new turn
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: b, answer: { text: 'The answer.', stepSeq: step }, inputsAnswered: true, unansweredSteered: [] });
  });

  it('has no answer while the turn still needs the model: nothing recorded, or a tool step last', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    expect(runProgress(r.entries, 'run1').answer).toBeUndefined();
    r.tools('run1');
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: a, answer: undefined, inputsAnswered: false, unansweredSteered: [] });
  });

  it('drops an answer once the run took a newer message (a follow-up turn), and anchors at that message', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    r.answer('run1', 'The answer.');
    const b = r.user('steered');
    r.injected('run1', [b], true);
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: b, answer: undefined, inputsAnswered: true, unansweredSteered: [b] });
    const step = r.answer('run1', 'The second answer.');
    expect(runProgress(r.entries, 'run1')).toEqual({
      anchor: b,
      answer: { text: 'The second answer.', stepSeq: step },
      inputsAnswered: true,
      unansweredSteered: [],
    });
  });

  it('keeps the answer of the turn when a message arrived after it but was not taken yet (finish hands it back)', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    const step = r.answer('run1', 'The answer.');
    r.user('arrived while the answer streamed');
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: a, answer: { text: 'The answer.', stepSeq: step }, inputsAnswered: true, unansweredSteered: [] });
  });

  it('counts steered messages pulled since the last answer as unanswered, also across a partial step', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    r.tools('run1');
    const b = r.user('also this');
    r.injected('run1', [b]);
    r.tools('run1');
    const c = r.user('and this');
    r.injected('run1', [c]);
    r.partial('run1', 'half an ans');
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: c, answer: undefined, inputsAnswered: false, unansweredSteered: [b, c] });
  });

  it('has no answer to deliver when the final step is empty: the model is asked again', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    r.answer('run1', '  ');
    // An empty answer still ends the turn: the inputs are not handed to a follow-up run.
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: a, answer: undefined, inputsAnswered: true, unansweredSteered: [] });
  });

  it("has no answer to deliver when the record read does not reach the run's first start (the keys' anchor is unknown)", () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a], 2); // only a later attempt's start is in the entries read
    r.answer('run1', 'The real answer.');
    expect(runProgress(r.entries, 'run1').answer).toBeUndefined();
  });

  it('finds the tool calls the run recorded last without a step after them: the step its attempt died in', () => {
    const r = record();
    const a = r.user('first');
    r.started('run1', [a]);
    const calls = (run: string) =>
      r.add({
        kind: 'tool.calls',
        run,
        token: 1,
        step: 0,
        finishReason: 'tool-calls',
        messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: {} }] }],
      });
    calls('run1');
    r.tools('run1');
    expect(runProgress(r.entries, 'run1').unfinishedStep).toBeUndefined();
    const seq = calls('run1');
    calls('run0');
    r.started('run1', [a], 2);
    expect(runProgress(r.entries, 'run1').unfinishedStep?.seq).toBe(seq);
    expect(runProgress(r.entries, 'run1').answer).toBeUndefined();
  });

  it('ignores other runs', () => {
    const r = record();
    const a = r.user('old');
    r.started('run0', [a]);
    r.answer('run0', 'Old answer.');
    r.ended('run0');
    const b = r.user('new');
    r.started('run1', [b]);
    r.answer('run0', 'stray');
    expect(runProgress(r.entries, 'run1')).toEqual({ anchor: b, answer: undefined, inputsAnswered: false, unansweredSteered: [] });
  });
});

describe('answerText and isFinalStep', () => {
  const step = (over: Partial<ModelStep>): Pick<ModelStep, 'finishReason' | 'partial' | 'messages'> => ({ messages: [], ...over });

  it('joins the text parts of assistant messages (as the AI SDK reports a step text), skipping reasoning and tools', () => {
    expect(
      answerText([
        {
          role: 'assistant',
          content: [
            { type: 'reasoning', text: 'hmm' },
            { type: 'text', text: 'Hello ' },
            { type: 'text', text: 'world.' },
          ],
        },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'x', output: { type: 'text', value: 'no' } }] },
      ]),
    ).toBe('Hello world.');
    expect(answerText([{ role: 'assistant', content: 'plain' }])).toBe('plain');
  });

  it('is final unless cut off or a tool-call step; without a finish reason, unless it calls a tool', () => {
    expect(isFinalStep(step({ finishReason: 'stop' }))).toBe(true);
    expect(isFinalStep(step({ finishReason: 'length' }))).toBe(true);
    expect(isFinalStep(step({ finishReason: 'tool-calls' }))).toBe(false);
    expect(isFinalStep(step({ finishReason: 'stop', partial: true }))).toBe(false);
    expect(isFinalStep(step({ messages: [{ role: 'assistant', content: [{ type: 'text', text: 'x' }] }] }))).toBe(true);
    expect(isFinalStep(step({ messages: [{ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c', toolName: 't', input: {} }] }] }))).toBe(false);
  });
});

describe('the unanswered note', () => {
  const messages = (n: number) => Array.from({ length: n }, (_, i) => ({ seq: i + 1, text: `message ${i + 1}` }));

  it('quotes each message on one line, cut to a short length, and names the outcome', () => {
    const note = unansweredNote('run1', 'failed', [{ seq: 4, text: `also\nthis ${'x'.repeat(200)}` }], 1);
    expect(note.messages[0]!.text).toMatch(/^also this x+…$/);
    expect(note.messages[0]!.text.length).toBe(80);
    expect(unansweredNotice(note)).toMatch(/^The run failed before answering this message: “also this x+…”\. /);
    expect(unansweredStatusLine(unansweredNote('run1', 'stopped', messages(2), 1))).toBe('Not answered (the run was stopped): “message 1”, “message 2”');
  });

  it(`lists at most ${MAX_UNANSWERED_LISTED} messages and counts the rest`, () => {
    const note = unansweredNote('run1', 'stopped', messages(8), 1);
    expect(note.messages).toHaveLength(MAX_UNANSWERED_LISTED);
    expect(unansweredNotice(note)).toContain('“message 5” and 3 more.');
  });

  it('reads back what it stored, and treats anything unreadable as no note', () => {
    const note = unansweredNote('run1', 'failed', messages(1), 5);
    expect(parseUnanswered(JSON.stringify(note))).toEqual(note);
    expect(parseUnanswered(undefined)).toBeUndefined();
    expect(parseUnanswered('{not json')).toBeUndefined();
    expect(parseUnanswered(JSON.stringify({ ...note, schema_version: 2 }))).toBeUndefined();
  });
});

describe('readRunEntries', () => {
  let client: RedisClient;
  let prefix: string;
  beforeEach(() => {
    client = createRedis({ url: redisUrl() });
    prefix = testPrefix();
  });
  afterEach(async () => {
    await cleanupPrefix(client, prefix);
    await closeRedis(client);
  });

  /** Stores `entries` as a record stream (ids `<seq>-0`, body in field `e`, as the scripts write them). */
  async function store(entries: SeqEntry[]): Promise<string> {
    const log = `${prefix}:{c:t}:log`;
    for (const { seq, ...e } of entries) await client.xadd(log, `${seq}-0`, 'e', JSON.stringify(e));
    return log;
  }

  it("reads back page by page to the run's first start, and no further", async () => {
    const r = record();
    for (let i = 0; i < 30; i++) r.user(`old ${i}`);
    const a = r.user('question');
    const start = r.started('run1', [a]);
    for (let i = 0; i < 25; i++) r.user(`while running ${i}`);
    r.answer('run1', 'The answer.');
    r.started('run1', [a], 2);
    const log = await store(r.entries);

    const read = await readRunEntries(client, log, 'run1', 1000, 10);
    // Pages of 10 back from the end: the page holding the first start is the last one read.
    expect(read[0]!.seq).toBeLessThanOrEqual(start);
    expect(read[0]!.seq).toBeGreaterThan(start - 10);
    expect(read.map((e) => e.seq)).toEqual(Array.from({ length: r.entries.length - read[0]!.seq + 1 }, (_, i) => read[0]!.seq + i));
    expect(runProgress(read, 'run1').answer?.text).toBe('The answer.');
  });

  it('stops at the entry cap and at the start of the record', async () => {
    const r = record();
    for (let i = 0; i < 40; i++) r.user(`m ${i}`);
    const log = await store(r.entries);
    expect(await readRunEntries(client, log, 'missing', 25, 10)).toHaveLength(25);
    expect(await readRunEntries(client, log, 'missing', 1000, 10)).toHaveLength(40);
  });
});
