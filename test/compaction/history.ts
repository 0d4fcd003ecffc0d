/**
 * Builders for compaction tests: synthetic records of whole turns (as plain
 * SeqEntry objects), written straight into a conversation's stream so that
 * records of thousands of entries take milliseconds to build.
 */
import type { Redis } from 'ioredis';
import type { SeqEntry } from '../../src/record/entries.js';

/** Entries per synthetic turn: message, run.started, model.step, run.ended. */
export const ENTRIES_PER_TURN = 4;

/**
 * `turns` complete turns starting at `startSeq`: a user message, the run that
 * takes it, one step with a tool call, its result and the answer, and the end.
 * Turn `i` says `question <i>` and answers `answer <i>`.
 */
export function syntheticTurns(turns: number, startSeq = 1, first = 0): SeqEntry[] {
  const out: SeqEntry[] = [];
  let seq = startSeq;
  for (let t = first; t < first + turns; t++) {
    const run = `run-${t}`;
    const msg = seq;
    out.push({
      v: 1,
      at: 1_700_000_000_000 + seq,
      kind: 'message.received',
      updateKey: `telegram:${t}`,
      sender: { id: 'u1', name: 'Ann' },
      text: `question ${t}: what is the weather like in city number ${t}?`,
      seq: seq++,
    });
    out.push({ v: 1, at: 1_700_000_000_000 + seq, kind: 'run.started', run, attempt: 1, token: 1, owner: 'w1', inputs: [msg], seq: seq++ });
    out.push({
      v: 1,
      at: 1_700_000_000_000 + seq,
      kind: 'model.step',
      run,
      token: 1,
      step: 0,
      messages: [
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId: `c${t}`, toolName: 'weather', input: { city: `city ${t}` } }] },
        {
          role: 'tool',
          content: [{ type: 'tool-result', toolCallId: `c${t}`, toolName: 'weather', output: { type: 'json', value: { tempC: t % 30, sky: 'clear' } } }],
        },
        { role: 'assistant', content: [{ type: 'text', text: `answer ${t}: it is ${t % 30} degrees and clear in city ${t}.` }] },
      ],
      finishReason: 'stop',
      usage: { inputTokens: 80 * (t - first) + 60, outputTokens: 20 }, // about what this prompt would measure
      seq: seq++,
    });
    out.push({ v: 1, at: 1_700_000_000_000 + seq, kind: 'run.ended', run, attempt: 1, token: 1, outcome: 'completed', seq: seq++ });
  }
  return out;
}

/** Writes entries into the conversation's stream (ids `<seq>-0`) and moves the meta seq counter to the last one. */
export async function writeRecord(redis: Redis, keys: { log: string; meta: string }, entries: SeqEntry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += 1000) {
    const p = redis.pipeline();
    for (const e of entries.slice(i, i + 1000)) {
      const { seq, ...body } = e;
      p.xadd(keys.log, `${seq}-0`, 'e', JSON.stringify(body));
    }
    await p.exec();
  }
  const last = entries.at(-1);
  if (last) await redis.hset(keys.meta, 'seq', last.seq);
}

/** A pino logger that keeps its lines, for asserting on what was logged. */
export async function memoryLogger(): Promise<{ logger: import('pino').Logger; lines: Array<Record<string, unknown>> }> {
  const { pino } = await import('pino');
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { logger, lines };
}
