import type { ModelMessage } from 'ai';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { selectTurns, turnBoundaries } from '../../runner/compaction/select.js';
import { projectHistory } from '../../runner/projection.js';
import type { ModelStep, RecordEntry, RunOutcome, SeqEntry } from '../../src/record/entries.js';
import { syntheticTurns } from './history.js';

// ── a protocol simulator: histories shaped like the scripts write them ─────────

type Cmd =
  | { t: 'msg'; policy: 'steer' | 'followup' }
  | { t: 'start' }
  | { t: 'step'; tools: number; split: boolean; partial: boolean }
  | { t: 'pull' }
  | { t: 'end'; outcome: RunOutcome }
  | { t: 'reset' };

type EntryInput = RecordEntry extends infer E ? (E extends RecordEntry ? Omit<E, 'v' | 'at'> : never) : never;

interface Simulated {
  entries: SeqEntry[];
  /** Id of the run still running at the end, if any. */
  inProgress: string | undefined;
  /** Text of every answer of a superseded run. */
  supersededTexts: Set<string>;
}

function simulate(cmds: Cmd[]): Simulated {
  const entries: SeqEntry[] = [];
  const add = (e: EntryInput) => {
    const seq = entries.length + 1;
    entries.push({ v: 1, at: seq, ...e, seq } as SeqEntry);
    return seq;
  };
  let active: { id: string; running: boolean; inputs: number[]; steer: number[]; texts: string[] } | undefined;
  let pending: number[] = [];
  let runs = 0;
  let calls = 0;
  let followup = false;
  const supersededTexts = new Set<string>();
  const newRun = (inputs: number[]) => (active = { id: `r${++runs}`, running: false, inputs, steer: [], texts: [] });

  for (const c of cmds) {
    switch (c.t) {
      case 'msg': {
        followup = c.policy === 'followup';
        const seq = add({ kind: 'message.received', updateKey: `k:${entries.length + 1}`, sender: { id: 'u' }, text: `user says ${entries.length + 1}` });
        if (!active) newRun([seq]);
        else if (!active.running) active.inputs.push(seq);
        else if (c.policy === 'steer') {
          active.steer.push(seq);
          add({ kind: 'steering.queued', run: active.id, seqs: [seq] });
        } else pending.push(seq);
        break;
      }
      case 'start':
        if (!active) break;
        // A running run started again is a takeover after its worker died.
        add({ kind: 'run.started', run: active.id, attempt: active.running ? 2 : 1, token: 1, owner: 'w', inputs: active.inputs });
        active.running = true;
        break;
      case 'step': {
        if (!active?.running) break;
        const text = `answer ${entries.length + 1} of ${active.id}`;
        active.texts.push(text);
        const ids = Array.from({ length: c.tools }, () => `call-${++calls}`);
        const assistant = {
          role: 'assistant' as const,
          content: [{ type: 'text', text }, ...ids.map((id) => ({ type: 'tool-call', toolCallId: id, toolName: 't', input: {} }))],
        };
        const tool = {
          role: 'tool' as const,
          content: ids.map((id) => ({ type: 'tool-result', toolCallId: id, toolName: 't', output: { type: 'text', value: id } })),
        };
        const step = (messages: ModelStep['messages']) =>
          add({ kind: 'model.step', run: active!.id, token: 1, step: 0, messages, ...(c.partial && { partial: true }) });
        if (ids.length === 0) step([assistant]);
        else if (c.split) {
          step([assistant]);
          step([tool]);
        } else step([assistant, tool]);
        break;
      }
      case 'pull':
        if (active?.running && active.steer.length > 0) {
          add({ kind: 'steering.injected', run: active.id, seqs: active.steer });
          active.steer = [];
        }
        break;
      case 'end': {
        if (!active?.running) break;
        if (c.outcome === 'completed' && active.steer.length > 0) {
          add({ kind: 'steering.injected', run: active.id, seqs: active.steer, follow_up: true });
          active.steer = [];
          break;
        }
        add({ kind: 'run.ended', run: active.id, attempt: 1, token: 1, outcome: c.outcome });
        if (c.outcome === 'superseded') for (const t of active.texts) supersededTexts.add(t);
        if (active.steer.length > 0) {
          add({ kind: 'steering.requeued', run: active.id, seqs: active.steer });
          pending = [...active.steer, ...pending];
        }
        active = undefined;
        if (pending.length > 0) newRun(pending.splice(0, followup ? 1 : pending.length));
        break;
      }
      case 'reset':
        if (!active) add({ kind: 'conversation.reset' });
        break;
    }
  }
  return { entries, inProgress: active?.running ? active.id : undefined, supersededTexts };
}

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('msg' as const), policy: fc.constantFrom('steer' as const, 'followup' as const) }) },
  { weight: 4, arbitrary: fc.constant({ t: 'start' as const }) },
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant('step' as const),
      tools: fc.nat(3),
      split: fc.boolean(),
      partial: fc.constantFrom(false, false, false, false, true),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ t: 'pull' as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('end' as const),
      outcome: fc.constantFrom<RunOutcome>('completed', 'completed', 'failed', 'interrupted', 'superseded', 'stopped'),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'reset' as const }) },
);

const stepArb = fc.record({
  t: fc.constant('step' as const),
  tools: fc.nat(3),
  split: fc.boolean(),
  partial: fc.constantFrom(false, false, false, false, true),
});
/** One turn-shaped burst: a message, its run, steps with messages arriving meanwhile, and an end. */
const turnArb: fc.Arbitrary<Cmd[]> = fc
  .tuple(
    fc.constantFrom('steer' as const, 'followup' as const),
    fc.array(
      fc.oneof(
        stepArb,
        fc.constant({ t: 'pull' as const }),
        fc.record({ t: fc.constant('msg' as const), policy: fc.constantFrom('steer' as const, 'followup' as const) }),
      ),
      { minLength: 1, maxLength: 5 },
    ),
    fc.constantFrom<RunOutcome>('completed', 'completed', 'completed', 'failed', 'interrupted', 'superseded', 'stopped'),
  )
  .map(([policy, middle, outcome]) => [{ t: 'msg', policy }, { t: 'start' }, ...middle, { t: 'end', outcome }, { t: 'start' }]);
/** Histories: mostly turn-shaped bursts, with single commands in any order between them. */
const historyArb = (maxChunks: number) =>
  fc
    .array(fc.oneof({ weight: 4, arbitrary: turnArb }, { weight: 1, arbitrary: fc.array(cmdArb, { maxLength: 4 }) }), { minLength: 1, maxLength: maxChunks })
    .map((chunks) => chunks.flat());

const project = (entries: SeqEntry[]) => projectHistory(entries, { unclaimed: 'exclude' }).messages;
const partsOf = (m: ModelMessage) => (typeof m.content === 'string' ? [] : (m.content as Array<{ type: string; toolCallId?: string; text?: string }>));

describe('selectTurns', () => {
  it('selects the oldest whole turns and keeps the recent ones', () => {
    const entries = syntheticTurns(10);
    const s = selectTurns(entries, { keepRecentTurns: 4 })!;
    expect(s.coversUntil).toBe(24); // the run.ended of turn 5 (6 turns of 4 entries)
    expect(s.turns).toBe(6);
    expect(s.keptTurns).toBe(4);
    expect(s.entries.map((e) => e.seq)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    expect(s.kept[0]!.seq).toBe(25);
    expect(s.messages[0]).toEqual({ role: 'user', content: expect.stringContaining('question 0') });
  });

  it('selects nothing when no more than keepRecentTurns turns are complete', () => {
    expect(selectTurns(syntheticTurns(4), { keepRecentTurns: 4 })).toBeUndefined();
    expect(selectTurns([], { keepRecentTurns: 0 })).toBeUndefined();
  });

  it('never summarizes the run in progress, even with keepRecentTurns 0', () => {
    const entries: SeqEntry[] = [
      ...syntheticTurns(2),
      { v: 1, at: 9, kind: 'message.received', updateKey: 'k:9', sender: { id: 'u' }, text: 'now', seq: 9 },
      { v: 1, at: 10, kind: 'run.started', run: 'current', attempt: 1, token: 1, owner: 'w', inputs: [9], seq: 10 },
    ];
    expect(selectTurns(entries, { keepRecentTurns: 0 })!.coversUntil).toBe(8);
  });

  it('does not cut before a message that a later run takes as input', () => {
    // Message 3 arrives during run-0 and waits in pending for the successor run-1.
    const e: SeqEntry[] = [
      { v: 1, at: 1, kind: 'message.received', updateKey: 'k1', sender: { id: 'u' }, text: 'a', seq: 1 },
      { v: 1, at: 2, kind: 'run.started', run: 'run-0', attempt: 1, token: 1, owner: 'w', inputs: [1], seq: 2 },
      { v: 1, at: 3, kind: 'message.received', updateKey: 'k3', sender: { id: 'u' }, text: 'b', seq: 3 },
      { v: 1, at: 4, kind: 'run.ended', run: 'run-0', attempt: 1, token: 1, outcome: 'completed', seq: 4 },
      { v: 1, at: 5, kind: 'run.started', run: 'run-1', attempt: 1, token: 1, owner: 'w', inputs: [3], seq: 5 },
      { v: 1, at: 6, kind: 'run.ended', run: 'run-1', attempt: 1, token: 1, outcome: 'completed', seq: 6 },
    ];
    expect(turnBoundaries(e)).toEqual([6]);
  });

  it('considers nothing before the last reset', () => {
    const before = syntheticTurns(5);
    const entries: SeqEntry[] = [...before, { v: 1, at: 21, kind: 'conversation.reset', seq: 21 }, ...syntheticTurns(3, 22, 100)];
    const s = selectTurns(entries, { keepRecentTurns: 1 })!;
    expect(s.entries[0]!.seq).toBe(22);
    expect(s.turns).toBe(2);
  });

  describe('on generated histories', () => {
    it('cuts at a turn boundary, never splits a tool call from its result, never touches the run in progress, and changes nothing the model sees', () => {
      let selected = 0;
      fc.assert(
        fc.property(historyArb(25), fc.nat(5), (cmds, keep) => {
          const sim = simulate(cmds);
          const s = selectTurns(sim.entries, { keepRecentTurns: keep });
          if (!s) return;
          selected++;
          const B = s.coversUntil;
          const lastReset = sim.entries.findLast((e) => e.kind === 'conversation.reset')?.seq ?? 0;
          const live = sim.entries.filter((e) => e.seq > lastReset);

          // covers_until is a run.ended with no run open and no message waiting to be placed after it.
          expect(live.find((e) => e.seq === B)?.kind).toBe('run.ended');
          for (const e of live.filter((x) => x.kind === 'run.started' && x.seq <= B)) {
            const run = (e as { run: string }).run;
            expect(
              live.some((x) => x.kind === 'run.ended' && x.run === run && x.seq <= B),
              `run ${run} ended by ${B}`,
            ).toBe(true);
          }
          // Nothing of the run in progress.
          if (sim.inProgress) expect(s.entries.filter((e) => 'run' in e && e.run === sim.inProgress)).toEqual([]);
          // A tool call and its result lie on the same side.
          const side = new Map<string, Set<boolean>>();
          for (const e of live) {
            if (e.kind !== 'model.step') continue;
            for (const m of e.messages)
              for (const p of partsOf(m as ModelMessage)) if (p.toolCallId) side.set(p.toolCallId, (side.get(p.toolCallId) ?? new Set()).add(e.seq <= B));
          }
          for (const [id, sides] of side) expect(sides.size, `tool call ${id}`).toBe(1);
          // Enough complete turns kept.
          expect(live.filter((e) => e.kind === 'run.ended' && e.seq > B).length).toBeGreaterThanOrEqual(keep);
          // Superseded answers are not summarized.
          for (const m of s.messages) for (const p of partsOf(m)) if (p.text) expect(sim.supersededTexts.has(p.text)).toBe(false);
          // Summarized part + kept part = what the model saw before.
          expect([...s.messages, ...project(s.kept)]).toEqual(project(sim.entries));
        }),
        { numRuns: 500 },
      );
      expect(selected, 'histories that had something to select').toBeGreaterThan(150);
    });

    it('every turn boundary is one', () => {
      fc.assert(
        fc.property(historyArb(15), (cmds) => {
          const { entries } = simulate(cmds);
          for (const b of turnBoundaries(entries)) {
            expect([...project(entries.filter((e) => e.seq <= b)), ...project(entries.filter((e) => e.seq > b))]).toEqual(project(entries));
          }
        }),
        { numRuns: 300 },
      );
    });
  });
});
