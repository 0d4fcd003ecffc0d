/**
 * End to end: spending budgets. A budget spent mid-run ends the run cleanly
 * with reason `budget` (the person is told once, with when it resets; their
 * message stays in the record and `/status` names it), and once the window
 * has passed (an injected clock) the next run answers.
 */

import { describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import { createImageModel } from '../../runner/model.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { OutboundFile } from '../../src/channel.js';
import type { BudgetSettings } from '../../src/people/budget.js';
import { Budgets } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { RecordingOutbound } from '../../testing/runner-harness.js';
import { CID, fakeModel, RunnerHarness as Harness, perTestModel, statusReply } from './harness.js';

const t = perTestModel();

/** An outbound that also takes files, recording their names. */
class FileOutbound extends RecordingOutbound {
  readonly maxFileBytes = 1_000_000;
  readonly files: string[] = [];
  async sendFile(_conversationId: string, file: OutboundFile): Promise<{ messageId: string }> {
    this.files.push(file.name);
    return { messageId: `f${this.files.length}` };
  }
}

/** Starts a harness and a runner with `budgets` and a clock the test moves (`outbound`: where replies go, default the harness's). */
async function start(budgets: BudgetSettings, clock: { now: number }, o: { plugin?: RunnerPlugin; outbound?: RecordingOutbound } = {}) {
  const h = await Harness.start();
  t.h = h;
  const outbound = o.outbound ?? h.outbound;
  const runner = await startRunner(
    { ...h.ctx, config: { ...h.ctx.config, budgets } },
    {
      plugin: o.plugin ?? createLocalAgentPlugin({ model: fakeModel(t.fake.url), maxRetries: 0 }),
      resolveOutbound: (cid) => (cid.startsWith('telegram:') ? outbound : undefined),
      lockDurationMs: 2000,
      stalledIntervalMs: 500,
      now: () => clock.now,
      features: runnerFeatures(),
    },
  );
  h.runners.push(runner);
  return h;
}

const runIdOf = (r: unknown) => (r as { runId: string }).runId;

describe('a token budget spent in the middle of a run', () => {
  it('ends the run with reason budget and one notice, keeps the message, and the next day answers', async () => {
    const clock = { now: Date.UTC(2026, 0, 15, 21, 30) };
    // Step 1 costs 80 + 40 = 120 tokens of the person's 100 a day: the tool runs, step 2 is never asked for.
    t.fake.script((_req, index) =>
      index === 0 ? { toolCalls: [{ name: 'current_time', args: {} }], usage: { prompt_tokens: 80, completion_tokens: 40 } } : { text: 'Here you go.' },
    );
    const h = await start({ identity: { tokensPerDay: 100 } }, clock);

    const first = runIdOf(await h.ingest('what time is it?'));
    expect(await h.runEnded(first)).toMatchObject({ outcome: 'failed', reason: 'budget' });
    await h.idle();
    expect(t.fake.requests).toHaveLength(1);
    expect(h.outbound.texts).toEqual([
      "You have used up today's usage allowance. It resets at 2026-01-16 00:00 UTC (in 2 h 30 min). Your message is kept: send a message after that to get an answer, or see /status.",
    ]);
    expect((await h.entries('message.received')).map((m) => m.text)).toEqual(['what time is it?']);
    expect(await statusReply(h)).toContain('Not answered (the run failed): “what time is it?”');

    // Later the same day: refused before the model is asked, and not told a second time.
    clock.now += 60 * 60_000;
    const second = runIdOf(await h.ingest('hello?'));
    expect(await h.runEnded(second)).toMatchObject({ outcome: 'failed', reason: 'budget' });
    await h.idle();
    expect(t.fake.requests).toHaveLength(1);
    expect(h.outbound.texts).toHaveLength(1);

    // The next day the budget is back: the run answers, and the model sees the messages that waited.
    clock.now += 2 * 60 * 60_000;
    const third = runIdOf(await h.ingest('still there?'));
    expect(await h.runEnded(third)).toMatchObject({ outcome: 'completed' });
    await h.idle();
    expect(h.outbound.texts.at(-1)).toBe('Here you go.');
    const users = t.fake.requests
      .at(-1)!
      .body.messages.filter((m: { role: string }) => m.role === 'user')
      .map((m: { content: string }) => m.content);
    expect(users).toEqual(['what time is it?', 'hello?', 'still there?']);
    expect(await statusReply(h)).not.toContain('Not answered');
  });
});

describe('runs per hour', () => {
  it('refuses the run over the limit before the model is asked, per conversation', async () => {
    const clock = { now: Date.UTC(2026, 0, 15, 10, 50) };
    const h = await start({ conversation: { runsPerHour: 1 } }, clock);
    const first = runIdOf(await h.ingest('one'));
    expect(await h.runEnded(first)).toMatchObject({ outcome: 'completed' });
    await h.idle();
    const second = runIdOf(await h.ingest('two'));
    expect(await h.runEnded(second)).toMatchObject({ outcome: 'failed', reason: 'budget' });
    await h.idle();
    expect(t.fake.requests).toHaveLength(1);
    expect(h.outbound.texts.at(-1)).toMatch(/^This chat has used up the number of requests allowed per hour\. It resets at 2026-01-15 11:00 UTC \(in 10 min\)/);
  });
});

describe('pictures per day', () => {
  it('makes the pictures imagesPerDay allows, refuses the next before the images API is asked, and the run still answers', async () => {
    const clock = { now: Date.UTC(2026, 0, 15, 10, 50) };
    const draw = (id: string) => ({ toolCalls: [{ id, name: 'generate_image', args: { prompt: `a fox ${id}` } }] });
    t.fake.script([draw('c1'), draw('c2'), { text: 'One fox; the second I can only describe.' }]);
    const settings = { provider: 'openai-compatible' as const, name: 'm', baseURL: t.fake.url, apiKey: 'k', contextWindow: 128_000, outputReserve: 4000 };
    const images = { model: createImageModel(settings, 'gpt-image-1', 'agents.local-agent.images.model') };
    const outbound = new FileOutbound();
    const plugin = createLocalAgentPlugin({ model: fakeModel(t.fake.url), maxRetries: 0, builtins: { currentTime: false, images } });
    const h = await start({ identity: { imagesPerDay: 1 } }, clock, { plugin, outbound });

    const run = runIdOf(await h.ingest('draw me two foxes'));
    expect(await h.runEnded(run)).toMatchObject({ outcome: 'completed' });
    await h.idle();
    expect(t.fake.images.map((i) => i.prompt)).toEqual(['a fox c1']);
    expect(outbound.files).toHaveLength(1);
    const refused = t.fake.requests[2]!.body.messages.filter((m: { role: string }) => m.role === 'tool').at(-1).content as string;
    expect(refused).toContain('the spending budget allows no more pictures for now');
    expect(outbound.texts).toEqual(['One fox; the second I can only describe.']);

    // The next day the picture budget is back.
    clock.now += 24 * 60 * 60_000;
    t.fake.script([draw('c3'), { text: 'Another fox.' }]);
    const next = runIdOf(await h.ingest('one more'));
    expect(await h.runEnded(next)).toMatchObject({ outcome: 'completed' });
    expect(t.fake.images.map((i) => i.prompt)).toEqual(['a fox c1', 'a fox c3']);
  });
});

describe('Budgets', () => {
  it("reports an identity's usage and forgets it on purge", async () => {
    const h = await Harness.start();
    t.h = h;
    const now = Date.UTC(2026, 5, 1, 12);
    const b = new Budgets({ client: h.redis, prefix: h.prefix, settings: { identity: { tokensPerMonth: 1000 } }, now: () => now });
    const who = { identity: 'telegram:u1', conversationId: CID };
    expect(await b.admit(who)).toBeUndefined();
    await b.charge(who, 300);
    await b.charge(who, 200);
    expect(await b.usage('telegram:u1')).toEqual({ tokensToday: 500, tokensThisMonth: 500, runsThisHour: 1 });
    await b.purge('telegram:u1');
    expect(await b.usage('telegram:u1')).toEqual({ tokensToday: 0, tokensThisMonth: 0, runsThisHour: 0 });
  });

  it('refuses an identity id that cannot name a key, writing nothing', async () => {
    const h = await Harness.start();
    t.h = h;
    const b = new Budgets({ client: h.redis, prefix: h.prefix, settings: { identity: { tokensPerDay: 10 } } });
    await expect(b.charge({ identity: 'a {b}', conversationId: CID }, 5)).rejects.toThrow(/identity id/);
    expect(await h.redis.keys(`${h.prefix}:*`)).toEqual([]);
  });
});

describe('a linked identity', () => {
  it('spends from one budget on both channels, and purging the identity deletes its usage', async () => {
    const h = await Harness.start();
    t.h = h;
    const identities = new IdentityStore({ redis: h.redis, prefix: h.prefix });
    const b = new Budgets({ client: h.redis, prefix: h.prefix, settings: { identity: { tokensPerDay: 100 } } });
    identities.onChange({ purged: (identity) => b.purge(identity) });
    await identities.link('discord:d1', 'telegram:u1');
    const onTelegram = { identity: await identities.resolve('telegram', 'u1'), conversationId: CID };
    const onDiscord = { identity: await identities.resolve('discord', 'd1'), conversationId: 'discord:9' };
    await b.charge(onTelegram, 60);
    await b.charge(onDiscord, 50);
    expect(await b.check(onDiscord)).toMatchObject({ scope: 'identity', limit: 'tokensPerDay' });
    await identities.purge(onTelegram.identity);
    expect(await b.usage(onTelegram.identity)).toEqual({ tokensToday: 0, tokensThisMonth: 0, runsThisHour: 0 });
  });
});
