/**
 * End to end: `/purge stop` while a real runner streams a model answer. The
 * runner is told to stop, its fenced writes are refused, nothing more is
 * delivered, and nothing of the conversation is left but its tombstone (and
 * the dedupe keys, which hold only seqs).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { purgeConversation } from '../../src/protocol/purge.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { CID, FetchTap, fakeModel, onStreamingChannel, RunnerHarness, waitFor } from '../runner/harness.js';

let fake: FakeOpenAIServer;
let tap: FetchTap;
let h: RunnerHarness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  tap = new FetchTap();
  fake.script(() => ({ text: 'PARTIAL-ALPHA PARTIAL-BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima mike', chunkDelayMs: 150 }));
  h = await RunnerHarness.start({ plugin: onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(fake.url, tap), streaming: true })) });
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fake.close();
});

describe('purge while a runner is mid-answer', () => {
  it('stops the run, delivers nothing, and leaves only the tombstone', async () => {
    const first = await h!.ingest('write me a long story');
    if (first.kind !== 'new-run') throw new Error(first.kind);
    await tap.waitForText('PARTIAL-BRAVO');

    const r = await purgeConversation(h!.ctx.redis, h!.prefix, CID, { stopActive: true });
    expect(r).toMatchObject({ kind: 'purged', stoppedRunId: first.runId });

    await waitFor(() => fake.requests[0]!.aborted === true, 5000, 'model request aborted');
    // The job ends (its run is gone: "skipped"), not retried: a completed run job is removed at once, while a
    // failed or retried one would still be there (failed, waiting or delayed).
    await waitFor(async () => (await h!.queue.queue.getJob(first.runId)) === undefined, 10_000, 'job completed and removed');
    expect(h!.outbound.texts).toEqual([]);

    const k = conversationKeys(h!.prefix, CID);
    const left = (await h!.ctx.redis.keys(`${h!.prefix}:*`)).filter((key) => !key.includes(':dedupe:'));
    expect(left).toEqual([k.tombstone]);

    expect(await h!.ingest('hello again?')).toEqual({ kind: 'purged', seq: 0 });
    expect(fake.requests).toHaveLength(1);
  });
});
