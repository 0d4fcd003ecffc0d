/**
 * A tool call from an attempt that lost its run: its journal claim is fenced
 * by the attempt's token, so once another attempt took the run over the call
 * is refused (StaleRunError), nothing is recorded and the tool never runs;
 * the model of the stale attempt gets an `aborted` envelope, not a result.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Toolbox } from '../../plugins/local-agent/toolbox.js';
import type { AgentTool } from '../../plugins/local-agent/tools.js';
import type { RunContext } from '../../runner/plugin.js';
import { RunToolJournal } from '../../runner/tools/journal.js';
import { StaleRunError } from '../../src/errors.js';
import { waitFor } from '../../testing/wait.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

const fx = useProtocolFixture();

/** A tool's `execute` as the AI SDK calls it. */
type Execute = (input: unknown, opts: { toolCallId: string; messages: [] }) => Promise<unknown>;

/** A run taken over by worker-2 after worker-1's lease ran out: worker-1's ref is stale. */
async function takenOver() {
  const { dispatch, runs, run: stale, runId } = await fx.running({}, CID, 50);
  await waitFor(async () => (await fx.redisTime()) > (await dispatch.status(CID)).leaseUntilMs, 2000, 'lease expiry');
  const current = await runs.acquire(CID, runId, 'worker-2');
  expect(current.token).toBeGreaterThan(stale.token);
  return { runs, stale, current };
}

/** A tool that counts its executions. */
function countingTool() {
  const calls: unknown[] = [];
  const t: AgentTool = {
    name: 'pay',
    description: 'pays an invoice',
    inputSchema: z.object({ invoice: z.string() }),
    execute: async (input) => {
      calls.push(input);
      return { paid: true };
    },
  };
  return { t, calls };
}

/** What the toolbox needs of a run context (no model, no delivery). */
function toolContext(journal: RunToolJournal, runId: string, token: number): RunContext {
  return {
    run: { id: runId, conversationId: CID, attempt: 1 },
    agent: {},
    record: { fencingToken: token },
    history: [],
    features: { toolCalls: journal },
    stop: { signal: new AbortController().signal, requested: () => undefined },
    logger: pino({ level: 'silent' }),
  } as unknown as RunContext;
}

async function toolEntries(): Promise<string[]> {
  return (await fx.redis.xrange(fx.keys().log, '-', '+'))
    .map(([, f]) => JSON.parse(f[1]!) as { kind: string })
    .map((e) => e.kind)
    .filter((k) => k.startsWith('tool.'));
}

describe('a tool call from an attempt that lost its run', () => {
  it('is refused by the journal with StaleRunError and recorded nowhere', async () => {
    const { runs, stale } = await takenOver();
    const journal = new RunToolJournal(runs, stale);
    await expect(journal.claim({ callId: 'c1', tool: 'pay', input: { invoice: 'i-7' }, idempotent: false })).rejects.toBeInstanceOf(StaleRunError);
    expect(await toolEntries()).toEqual([]);
  });

  it('is not executed by the toolbox; the model gets an aborted envelope', async () => {
    const { runs, stale } = await takenOver();
    const { t, calls } = countingTool();
    const toolbox = new Toolbox();
    const set = await toolbox.toolSet(toolContext(new RunToolJournal(runs, stale), stale.runId, stale.token), [t]);
    const execute = set.pay!.execute as unknown as Execute;

    const out = await execute({ invoice: 'i-7' }, { toolCallId: 'c1', messages: [] });

    expect(calls).toEqual([]);
    expect(out).toMatchObject({ error: { tool: 'pay', category: 'aborted' } });
    expect(await toolEntries()).toEqual([]);
  });

  it('from the attempt that owns the run, runs and is journaled (the same toolbox and tool)', async () => {
    const { runs, current } = await takenOver();
    const { t, calls } = countingTool();
    const set = await new Toolbox().toolSet(toolContext(new RunToolJournal(runs, current), current.runId, current.token), [t]);
    const execute = set.pay!.execute as unknown as Execute;

    expect(await execute({ invoice: 'i-7' }, { toolCallId: 'c1', messages: [] })).toEqual({ paid: true });
    expect(calls).toEqual([{ invoice: 'i-7' }]);
    expect(await toolEntries()).toEqual(['tool.started', 'tool.completed']);
  });
});
