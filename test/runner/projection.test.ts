import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, type ModelMessage, modelMessageSchema } from 'ai';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CUT_OFF_MARKER, projectHistory } from '../../runner/projection.js';
import { RecordError } from '../../src/errors.js';
import type { MessageReceived, ModelStep, RecordEntry, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import { startFakeOpenAI } from '../../testing/fakes/openai-server.js';

// ── record builders: plain SeqEntry objects, seqs assigned in order ────────────

type StepMessage = ModelStep['messages'][number];
/** An entry without the fields the builder fills in (distributes over the union). */
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
    user: (text: string, more: Partial<MessageReceived> = {}) =>
      add({ kind: 'message.received', updateKey: `telegram:${entries.length + 1}`, sender: { id: 'u1', name: 'Ann' }, text, ...more }),
    command: (command: string) => add({ kind: 'command.received', updateKey: `telegram:${entries.length + 1}`, sender: { id: 'u1' }, command }),
    started: (run: string, inputs?: number[]) => add({ kind: 'run.started', run, attempt: 1, token: 1, owner: 'w1', ...(inputs ? { inputs } : {}) }),
    step: (run: string, messages: StepMessage[], more: Partial<ModelStep> = {}) => add({ kind: 'model.step', run, token: 1, step: 0, messages, ...more }),
    ended: (run: string, outcome: RunOutcome) => add({ kind: 'run.ended', run, attempt: 1, token: 1, outcome }),
    queued: (run: string, seqs: number[]) => add({ kind: 'steering.queued', run, seqs }),
    injected: (run: string, seqs: number[]) => add({ kind: 'steering.injected', run, seqs }),
    reset: () => add({ kind: 'conversation.reset' }),
    add,
  };
}

const text = (t: string) => ({ type: 'text' as const, text: t });
const call = (id: string, toolName = 'search', input: unknown = { q: id }) => ({ type: 'tool-call' as const, toolCallId: id, toolName, input });
const result = (id: string, value: unknown = `result of ${id}`, toolName = 'search') => ({
  type: 'tool-result' as const,
  toolCallId: id,
  toolName,
  output: { type: 'json' as const, value },
});
const assistant = (...content: unknown[]): StepMessage => ({ role: 'assistant', content });
const tools = (...content: unknown[]): StepMessage => ({ role: 'tool', content });
const user = (content: string): ModelMessage => ({ role: 'user', content });

const M = DEFAULT_CUT_OFF_MARKER;

// ── rules ─────────────────────────────────────────────────────────────────────

describe('projectHistory', () => {
  it('projects an empty record to nothing', () => {
    expect(projectHistory([])).toEqual({ messages: [], lastSeq: 0, userSeqs: [] });
  });

  describe('user messages', () => {
    it('become user text messages, and lastSeq is the last entry given', () => {
      const r = record();
      const q = r.user('hello');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('hi!'))]);
      const end = r.ended('r1', 'completed');
      expect(projectHistory(r.entries)).toEqual({
        messages: [user('hello'), { role: 'assistant', content: [text('hi!')] }],
        lastSeq: end,
        userSeqs: [q],
      });
    });

    it('render attachments as short text lines', () => {
      const r = record();
      r.user('look', {
        attachments: [
          { kind: 'image', ref: 'tg:file:1', name: 'photo.jpg', mime: 'image/jpeg' },
          { kind: 'file', ref: 'tg:file:2', mime: 'application/pdf' },
          { kind: 'sticker', ref: 'tg:file:3' },
        ],
      });
      r.user('', { attachments: [{ kind: 'audio', ref: 'tg:file:4', name: 'voice.ogg' }] });
      r.user('');
      expect(projectHistory(r.entries).messages).toEqual([
        user('look\n[attachment: image photo.jpg]\n[attachment: file application/pdf]\n[attachment: sticker]'),
        user('[attachment: audio voice.ogg]'),
        user('[empty message]'),
      ]);
    });

    it('carry their sender, framed and escaped, when senderNames is on', () => {
      const r = record();
      r.user('hi all', { sender: { id: 'u1', name: 'Ann' } });
      r.user('a < b & c', { sender: { id: 'u2' } });
      expect(projectHistory(r.entries, { senderNames: true }).messages).toEqual([
        user('<message from="Ann" id="u1">\nhi all\n</message>'),
        user('<message id="u2">\na &lt; b &amp; c\n</message>'),
      ]);
      expect(projectHistory(r.entries).messages).toEqual([user('hi all'), user('a < b & c')]);
    });

    it('carry their sender when they were sent in a group chat, whatever senderNames says', () => {
      const r = record();
      r.user('hi all', { sender: { id: 'u1', name: 'Ann' }, group: true });
      r.user('just me', { sender: { id: 'u2', name: 'Bob' } });
      expect(projectHistory(r.entries).messages).toEqual([user('<message from="Ann" id="u1">\nhi all\n</message>'), user('just me')]);
    });

    it('stay separate when consecutive', () => {
      const r = record();
      const a = r.user('one');
      const b = r.user('two');
      expect(projectHistory(r.entries)).toMatchObject({ messages: [user('one'), user('two')], userSeqs: [a, b] });
    });
  });

  describe('model steps', () => {
    it('are replayed as recorded, tool calls followed by their results', () => {
      const r = record();
      const q = r.user('weather in Paris?');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('Checking.'), call('c1', 'weather')), tools(result('c1', { tempC: 21 }, 'weather'))]);
      r.step('r1', [assistant(text('21 °C.'))], { step: 1 });
      r.ended('r1', 'completed');
      expect(projectHistory(r.entries).messages).toEqual([
        user('weather in Paris?'),
        { role: 'assistant', content: [text('Checking.'), call('c1', 'weather')] },
        { role: 'tool', content: [result('c1', { tempC: 21 }, 'weather')] },
        { role: 'assistant', content: [text('21 °C.')] },
      ]);
    });

    it('keep the steps of a run that has not ended, unmarked', () => {
      const r = record();
      const q = r.user('go');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('working'), call('c1')), tools(result('c1'))]);
      expect(projectHistory(r.entries).messages).toEqual([
        user('go'),
        { role: 'assistant', content: [text('working'), call('c1')] },
        { role: 'tool', content: [result('c1')] },
      ]);
    });

    it("keep a failed run's steps, its tool calls with their results (a follow-up continues from them, it does not call them again); a call without a result goes", () => {
      const r = record();
      const q = r.user('do it');
      r.started('r1', [q]);
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      r.step('r1', [assistant(text('half'), call('c2'))], { step: 1 });
      r.ended('r1', 'failed');
      const next = r.user('again?');
      expect(projectHistory(r.entries)).toMatchObject({
        messages: [
          user('do it'),
          { role: 'assistant', content: [call('c1')] },
          { role: 'tool', content: [result('c1')] },
          { role: 'assistant', content: [text('half')] },
          user('again?'),
        ],
        userSeqs: [q, next],
      });
    });

    it('keep what a failed run answered before it failed, and the tool step after it', () => {
      const r = record();
      const q = r.user('first');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('First answer.'))], { finishReason: 'stop' });
      // finish handed a steered message back; the continuation failed after its tool step.
      const b = r.user('and this');
      r.injected('r1', [b]);
      r.step('r1', [assistant(call('c1')), tools(result('c1'))], { step: 1, finishReason: 'tool-calls' });
      r.ended('r1', 'failed');
      expect(projectHistory(r.entries).messages).toEqual([
        user('first'),
        { role: 'assistant', content: [text('First answer.')] },
        user('and this'),
        { role: 'assistant', content: [call('c1')] },
        { role: 'tool', content: [result('c1')] },
      ]);
    });

    it('exclude the steps of a superseded run, without a marker', () => {
      const r = record();
      const q = r.user('write a poem');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('Roses are'))], { partial: true });
      r.ended('r1', 'superseded');
      r.user('no, a haiku');
      const messages = projectHistory(r.entries).messages;
      expect(messages).toEqual([user('write a poem'), user('no, a haiku')]);
      expect(JSON.stringify(messages)).not.toContain(M);
    });

    it('mark the last assistant message of an interrupted run as cut off', () => {
      const r = record();
      const q = r.user('explain');
      r.started('r1', [q]);
      r.step('r1', [assistant(text('First,'), call('c1')), tools(result('c1'))]);
      r.step('r1', [assistant(text('So the answer'), text('is'))], { step: 1 });
      r.ended('r1', 'interrupted');
      expect(projectHistory(r.entries).messages).toEqual([
        user('explain'),
        { role: 'assistant', content: [text('First,'), call('c1')] },
        { role: 'tool', content: [result('c1')] },
        { role: 'assistant', content: [text('So the answer'), text(`is ${M}`)] },
      ]);
    });

    it('mark a stopped run the same way, with a configured marker', () => {
      const r = record();
      r.user('count');
      r.started('r1');
      r.step('r1', [{ role: 'assistant', content: 'one, two, ' }]);
      r.ended('r1', 'stopped');
      expect(projectHistory(r.entries, { cutOffMarker: '[stopped]' }).messages).toEqual([user('count'), { role: 'assistant', content: 'one, two, [stopped]' }]);
    });

    it('mark a partial step once, even when its run was also interrupted', () => {
      const r = record();
      r.user('story');
      r.started('r1');
      r.step('r1', [assistant(text('Once upon'))], { partial: true });
      const inProgress = projectHistory(r.entries).messages;
      expect(inProgress[1]).toEqual({ role: 'assistant', content: [text(`Once upon ${M}`)] });
      r.ended('r1', 'interrupted');
      expect(projectHistory(r.entries).messages[1]).toEqual({ role: 'assistant', content: [text(`Once upon ${M}`)] });
    });

    it('add a marker text part when the last assistant message has no text', () => {
      const r = record();
      r.user('look it up');
      r.started('r1');
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      r.ended('r1', 'interrupted');
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [call('c1'), text(M)] },
        { role: 'tool', content: [result('c1')] },
      ]);
    });

    it('does not change the record it projects', () => {
      const r = record();
      r.user('q');
      r.started('r1');
      r.step('r1', [assistant(text('partial'), call('c1'))], { partial: true });
      r.ended('r1', 'interrupted');
      const before = structuredClone(r.entries);
      projectHistory(r.entries);
      expect(r.entries).toEqual(before);
    });

    it('refuses a step holding something that is not a response message', () => {
      const r = record();
      r.step('r1', [{ role: 'tool', content: 'not parts' }]);
      expect(() => projectHistory(r.entries)).toThrow(RecordError);
      const r2 = record();
      r2.step('r1', [assistant({ type: 'tool-call', toolName: 'x', input: {} })]);
      expect(() => projectHistory(r2.entries)).toThrow(/record entry 1 \(model.step\)/);
    });
  });

  describe('tool call pairing', () => {
    it('drops a tool call of an interrupted last step that has no result, keeping the marked text', () => {
      const r = record();
      r.user('search both');
      r.started('r1');
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      // The interrupt hit during the second tool batch: c2 ran, c3 never answered.
      r.step('r1', [assistant(text('Now the rest.'), call('c2'), call('c3')), tools(result('c2'))], { step: 1, partial: true });
      r.ended('r1', 'interrupted');
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [call('c1')] },
        { role: 'tool', content: [result('c1')] },
        { role: 'assistant', content: [text(`Now the rest. ${M}`), call('c2')] },
        { role: 'tool', content: [result('c2')] },
      ]);
    });

    it('drops an assistant message left empty and marks the previous one of the run', () => {
      const r = record();
      r.user('go');
      r.started('r1');
      r.step('r1', [assistant(text('Step one.'), call('c1')), tools(result('c1'))]);
      r.step('r1', [assistant(call('c2'))], { step: 1 });
      r.ended('r1', 'interrupted');
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [text(`Step one. ${M}`), call('c1')] },
        { role: 'tool', content: [result('c1')] },
      ]);
    });

    it('drops results without a call, duplicates, and results not right after their call', () => {
      const r = record();
      r.user('q');
      r.started('r1');
      r.step('r1', [tools(result('ghost'))]);
      r.step('r1', [assistant(call('c1')), tools(result('c1'), result('c1', 'again')), tools(result('stray'))]);
      r.step('r1', [assistant(call('c2')), assistant(text('between')), tools(result('c2'))]);
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [call('c1')] },
        { role: 'tool', content: [result('c1')] },
        { role: 'assistant', content: [text('between')] },
      ]);
    });

    it('pairs reused tool call ids by position', () => {
      const r = record();
      r.user('q');
      r.started('r1');
      r.step('r1', [assistant(call('call_0')), tools(result('call_0', 'first'))]);
      r.step('r1', [assistant(call('call_0')), tools(result('call_0', 'second'))], { step: 1 });
      r.ended('r1', 'completed');
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [call('call_0')] },
        { role: 'tool', content: [result('call_0', 'first')] },
        { role: 'assistant', content: [call('call_0')] },
        { role: 'tool', content: [result('call_0', 'second')] },
      ]);
    });

    it('keeps a provider-executed call answered inside the assistant message', () => {
      const r = record();
      r.user('q');
      r.started('r1');
      const executed = { ...call('p1', 'web_search'), providerExecuted: true };
      r.step('r1', [assistant(executed, result('p1', 'found', 'web_search'), text('Found it.'))]);
      expect(projectHistory(r.entries).messages[1]).toEqual({ role: 'assistant', content: [executed, result('p1', 'found', 'web_search'), text('Found it.')] });
    });

    it('keeps tool approval parts only with their call', () => {
      const r = record();
      r.user('q');
      r.started('r1');
      r.step('r1', [
        assistant(call('c1'), { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' }, call('c2'), {
          type: 'tool-approval-request',
          approvalId: 'a2',
          toolCallId: 'c2',
        }),
        tools(
          { type: 'tool-approval-response', approvalId: 'a1', approved: true },
          { type: 'tool-approval-response', approvalId: 'a2', approved: true },
          result('c1'),
        ),
      ]);
      expect(projectHistory(r.entries).messages.slice(1)).toEqual([
        { role: 'assistant', content: [call('c1'), { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' }] },
        { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: 'a1', approved: true }, result('c1')] },
      ]);
    });
  });

  describe('steering order', () => {
    it('places a steered message where it was injected, after the tool result of the step before', () => {
      const r = record();
      const q = r.user('research X');
      r.started('r1', [q]);
      // Arrives while the first tool batch runs, so before that step is recorded.
      const steer = r.user('also check Y');
      r.queued('r1', [steer]);
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      r.injected('r1', [steer]);
      r.step('r1', [assistant(text('X and Y done.'))], { step: 1 });
      const end = r.ended('r1', 'completed');
      expect(projectHistory(r.entries)).toEqual({
        messages: [
          user('research X'),
          { role: 'assistant', content: [call('c1')] },
          { role: 'tool', content: [result('c1')] },
          user('also check Y'),
          { role: 'assistant', content: [text('X and Y done.')] },
        ],
        lastSeq: end,
        userSeqs: [q, steer],
      });
    });

    it('places several messages of one injection in seq order', () => {
      const r = record();
      const q = r.user('q');
      r.started('r1', [q]);
      const a = r.user('a');
      const b = r.user('b');
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      r.injected('r1', [a, b]);
      expect(projectHistory(r.entries)).toMatchObject({
        messages: [user('q'), { role: 'assistant' }, { role: 'tool' }, user('a'), user('b')],
        userSeqs: [q, a, b],
      });
    });

    it('keeps a steered message at its injection point when the run then failed', () => {
      const r = record();
      const q = r.user('q');
      r.started('r1', [q]);
      const s = r.user('steer');
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      r.injected('r1', [s]);
      r.ended('r1', 'failed');
      expect(projectHistory(r.entries)).toMatchObject({ messages: [user('q'), { role: 'assistant' }, { role: 'tool' }, user('steer')], userSeqs: [q, s] });
    });

    it('places a message that waited for the next run after the run it arrived during', () => {
      const r = record();
      const q = r.user('long task');
      r.started('r1', [q]);
      const later = r.user('and then this');
      r.step('r1', [assistant(text('Done with the task.'))]);
      r.ended('r1', 'completed');
      r.started('r2', [later]);
      r.step('r2', [assistant(text('And this too.'))]);
      expect(projectHistory(r.entries)).toMatchObject({
        messages: [user('long task'), { role: 'assistant', content: [text('Done with the task.')] }, user('and then this'), { role: 'assistant' }],
        userSeqs: [q, later],
      });
    });

    it('places an interrupting message after the marked partial answer', () => {
      const r = record();
      const q = r.user('write an essay');
      r.started('r1', [q]);
      const stop = r.user('wait, shorter');
      r.add({ kind: 'run.control', run: 'r1', seqs: [stop], control: 'interrupt' });
      r.step('r1', [assistant(text('Essays are'))], { partial: true });
      r.ended('r1', 'interrupted');
      r.started('r2', [stop]);
      expect(projectHistory(r.entries).messages).toEqual([
        user('write an essay'),
        { role: 'assistant', content: [text(`Essays are ${M}`)] },
        user('wait, shorter'),
      ]);
    });

    it('leaves a claimed but not yet injected message at its own seq', () => {
      const r = record();
      const q = r.user('q');
      r.started('r1', [q]);
      r.step('r1', [assistant(call('c1')), tools(result('c1'))]);
      const s = r.user('pending steer');
      r.queued('r1', [s]);
      expect(projectHistory(r.entries)).toMatchObject({
        messages: [user('q'), { role: 'assistant' }, { role: 'tool' }, user('pending steer')],
        userSeqs: [q, s],
      });
    });
  });

  describe('conversation.reset', () => {
    it('cuts everything at or before the last reset', () => {
      const r = record();
      r.user('old one');
      r.started('r1');
      r.step('r1', [assistant(text('old answer'))]);
      r.ended('r1', 'completed');
      r.reset();
      r.user('old two');
      r.reset();
      const fresh = r.user('fresh');
      expect(projectHistory(r.entries)).toEqual({ messages: [user('fresh')], lastSeq: fresh, userSeqs: [fresh] });
    });

    it('projects nothing when the reset is the last entry', () => {
      const r = record();
      r.user('old');
      const reset = r.reset();
      expect(projectHistory(r.entries)).toEqual({ messages: [], lastSeq: reset, userSeqs: [] });
    });

    it('does not resurrect a pre-reset message named by a later entry', () => {
      const r = record();
      const old = r.user('old');
      r.reset();
      r.started('r1', [old]);
      expect(projectHistory(r.entries).messages).toEqual([]);
    });
  });

  it('projects nothing for audit, control, command and compaction entries', () => {
    const r = record();
    r.command('status');
    r.add({ kind: 'steering.queued', run: 'r1', seqs: [9] });
    r.add({ kind: 'steering.requeued', run: 'r1', seqs: [9] });
    r.add({ kind: 'steering.overflow', run: 'r1', seqs: [9], cap: 8 });
    r.add({ kind: 'run.control', run: 'r1', seqs: [9], control: 'stop' });
    r.started('r1');
    r.ended('r1', 'completed');
    r.add({ kind: 'compaction', covers_until: 3, tokens_before: 100, tokens_after: 10, summarizer: 'llm' });
    expect(projectHistory(r.entries)).toEqual({ messages: [], lastSeq: 8, userSeqs: [] });
  });
});

describe('projectHistory with the real OpenAI-compatible provider', () => {
  it('produces a prompt the provider sends as valid chat messages', async () => {
    const r = record();
    const q = r.user('research X', { sender: { id: 'u1', name: 'Ann' } });
    r.started('r1', [q]);
    const steer = r.user('also Y', { sender: { id: 'u2', name: 'Bob' } });
    r.step('r1', [assistant(call('c1', 'search', { q: 'X' })), tools(result('c1', { hits: 3 }))]);
    r.injected('r1', [steer]);
    r.step('r1', [assistant(call('c2', 'search', { q: 'Y' }))], { step: 1 });
    r.ended('r1', 'interrupted');
    const { messages } = projectHistory(r.entries, { senderNames: true });

    const server = await startFakeOpenAI();
    try {
      const model = createOpenAICompatible({ name: 'fake', baseURL: server.url, apiKey: 'k' })('m');
      await generateText({ model, messages: [...messages, user('Ann: go on')] });
      expect(server.requests[0]!.body.messages).toEqual([
        { role: 'user', content: '<message from="Ann" id="u1">\nresearch X\n</message>' },
        {
          role: 'assistant',
          content: M,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search', arguments: '{"q":"X"}' } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: '{"hits":3}' },
        { role: 'user', content: '<message from="Bob" id="u2">\nalso Y\n</message>' },
        { role: 'user', content: 'Ann: go on' },
      ]);
    } finally {
      await server.close();
    }
  });
});

// ── property: tool calls and results always pair up ──────────────────────────

const stepArb = fc.record({
  text: fc.option(fc.constantFrom('', 'ok', 'thinking '), { nil: undefined }),
  /** Per call: answered?, answered twice?, answer split into its own tool message? */
  calls: fc.array(fc.record({ answered: fc.boolean(), twice: fc.boolean(), split: fc.boolean() }), { maxLength: 3 }),
  orphanResult: fc.boolean(),
  steeredAfter: fc.nat(2),
  arrivesDuring: fc.boolean(),
});
const turnArb = fc.record({
  steps: fc.array(stepArb, { maxLength: 4 }),
  outcome: fc.constantFrom<RunOutcome | undefined>('completed', 'failed', 'interrupted', 'superseded', 'stopped', undefined),
  partialLast: fc.boolean(),
  resetBefore: fc.boolean(),
  followUp: fc.boolean(),
});

/** Builds a record from generated turns; tool call ids are unique. */
type Turn = typeof turnArb extends fc.Arbitrary<infer T> ? T : never;

function build(turns: Turn[]): SeqEntry[] {
  const r = record();
  let ids = 0;
  let pendingForNext: number[] = [];
  turns.forEach((turn, t) => {
    if (turn.resetBefore && t % 3 === 2) r.reset();
    const run = `run${t}`;
    const q = r.user(`turn ${t}`);
    r.started(run, [q, ...pendingForNext]);
    pendingForNext = [];
    turn.steps.forEach((s, i) => {
      const steered: number[] = [];
      for (let k = 0; k < s.steeredAfter; k++) steered.push(r.user(`steer ${t}.${i}.${k}`));
      if (s.arrivesDuring) pendingForNext.push(r.user(`late ${t}.${i}`));
      const content: unknown[] = s.text === undefined ? [] : [text(s.text)];
      const answers: unknown[] = [];
      const extra: StepMessage[] = [];
      for (const c of s.calls) {
        const id = `c${ids++}`;
        content.push(call(id));
        if (!c.answered) continue;
        if (c.split) extra.push(tools(result(id)));
        else answers.push(result(id));
        if (c.twice) answers.push(result(id, 'dup'));
      }
      if (s.orphanResult) answers.push(result(`orphan${ids++}`));
      const messages: StepMessage[] = [assistant(...content)];
      if (answers.length > 0) messages.push(tools(...answers));
      messages.push(...extra);
      const last = i === turn.steps.length - 1;
      r.step(run, messages, { step: i, ...(last && turn.partialLast ? { partial: true } : {}) });
      if (steered.length > 0) r.injected(run, steered);
    });
    if (turn.outcome) r.ended(run, turn.outcome);
  });
  return r.entries;
}

describe('projectHistory (property)', () => {
  it('pairs every tool call with exactly one later result right after it, and every result with one call', () => {
    fc.assert(
      fc.property(fc.array(turnArb, { maxLength: 6 }), (turns) => {
        const entries = build(turns);
        const { messages, userSeqs } = projectHistory(entries);

        const calls = new Map<string, number>();
        const results = new Map<string, number>();
        let lastAssistant = -1;
        messages.forEach((m, i) => {
          // Every message is a valid AI SDK model message, never empty.
          expect(modelMessageSchema.safeParse(m).success).toBe(true);
          expect(m.content.length).toBeGreaterThan(0);
          if (m.role === 'assistant') lastAssistant = i;
          if (m.role === 'tool') expect(messages[i - 1]?.role === 'assistant' || messages[i - 1]?.role === 'tool').toBe(true);
          if (typeof m.content === 'string') return;
          for (const p of m.content) {
            if (p.type === 'tool-call') {
              expect(calls.has(p.toolCallId)).toBe(false);
              calls.set(p.toolCallId, i);
            }
            if (p.type === 'tool-result') {
              expect(results.has(p.toolCallId)).toBe(false);
              results.set(p.toolCallId, i);
              // The call is in the nearest assistant message before the result.
              expect(calls.get(p.toolCallId)).toBe(lastAssistant);
            }
          }
        });
        expect([...calls.keys()].sort()).toEqual([...results.keys()].sort());

        // Every user message after the last reset is projected exactly once.
        const resetAt = entries.findLastIndex((e) => e.kind === 'conversation.reset');
        const expected = entries
          .slice(resetAt + 1)
          .filter((e) => e.kind === 'message.received')
          .map((e) => e.seq);
        expect([...userSeqs].sort((a, b) => a - b)).toEqual(expected);
        expect(messages.filter((m) => m.role === 'user')).toHaveLength(expected.length);
      }),
      { numRuns: 300 },
    );
  });
});
