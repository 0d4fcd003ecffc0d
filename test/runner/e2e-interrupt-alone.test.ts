/**
 * End to end through a runner: an interrupting message is answered by a run
 * of its own (its inputs are only that message, its prompt does not carry the
 * ordinary messages that were waiting), and the waiting messages are answered
 * afterwards by the next run; every message is answered exactly once.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { CID, FetchTap, fakeModel, onStreamingChannel, RunnerHarness, waitFor } from './harness.js';

let fake: FakeOpenAIServer;
let tap: FetchTap;
let h: RunnerHarness | undefined;

const SLOW_ANSWER = 'PARTIAL-ALPHA PARTIAL-BRAVO charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa';

/** The user texts of a chat-completions request, in order. */
const userTexts = (body: { messages: Array<{ role: string; content: unknown }> }): string[] =>
  body.messages.filter((m) => m.role === 'user').map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));

beforeEach(async () => {
  fake = await startFakeOpenAI();
  tap = new FetchTap();
  // The first request streams slowly (the interrupt cuts it off); later ones answer by what they were asked last.
  fake.script((req: { messages: Array<{ role: string; content: unknown }> }, index) => {
    if (index === 0) return { text: SLOW_ANSWER, chunkDelayMs: 150 };
    const last = userTexts(req).at(-1) ?? '';
    return { text: last.includes('URGENT') ? 'Answer to the urgent one.' : `Answer to: ${last}` };
  });
  h = await RunnerHarness.start({ plugin: onStreamingChannel(createLocalAgentPlugin({ model: fakeModel(fake.url, tap), streaming: true })) });
});
afterEach(async () => {
  await h?.close();
  h = undefined;
  await fake.close();
});

describe('an interrupting message with ordinary messages waiting', () => {
  it('is answered by a run whose only input it is; the waiting messages are answered after it, each exactly once', async () => {
    const first = await h!.ingest('write me a long story');
    expect(first.kind).toBe('new-run');
    await tap.waitForText('PARTIAL-BRAVO');

    const ord1 = await h!.ingest('ordinary one', { policy: 'collect' });
    const ord2 = await h!.ingest('ordinary two', { policy: 'collect' });
    expect([ord1.kind, ord2.kind]).toEqual(['pending', 'pending']);
    const urgent = await h!.ingest('URGENT: stop and answer this', { policy: 'interrupt' });
    expect(urgent).toMatchObject({ kind: 'interrupting', stop: 'interrupt' });

    await h!.outbound.waitForMessages(2);
    await h!.idle();

    // Three runs: the interrupted one, the urgent message alone, then the two that waited.
    const started = await h!.entries('run.started');
    expect(started.map((e) => e.inputs)).toEqual([[first.seq], [urgent.seq], [ord1.seq, ord2.seq]]);
    const ended = await h!.entries('run.ended');
    expect(ended.map((e) => e.outcome)).toEqual(['interrupted', 'completed', 'completed']);

    // The urgent run's prompt does not carry the waiting messages; the next run's ends with them.
    expect(fake.requests).toHaveLength(3);
    const urgentPrompt = userTexts(fake.requests[1]!.body);
    expect(urgentPrompt).toEqual(['write me a long story', 'URGENT: stop and answer this']);
    expect(userTexts(fake.requests[2]!.body).slice(-2)).toEqual(['ordinary one', 'ordinary two']);

    // Each answer delivered once, the urgent one first; nothing else arrives later.
    expect(h!.outbound.texts).toEqual(['Answer to the urgent one.', 'Answer to: ordinary two']);
    const ack = await waitFor(
      async () => {
        const outbox = await h!.ctx.redis.hvals(conversationKeys(h!.prefix, CID).outbox);
        return outbox.length === 2 ? outbox : undefined;
      },
      5000,
      'two outbox records',
    );
    expect(ack.map((r) => JSON.parse(r).status)).toEqual(['acknowledged', 'acknowledged']);
    expect(h!.outbound.sent).toHaveLength(2);
  });
});
