/**
 * Memory end to end on the Telegram and Discord fakes (real grammY and
 * discord.js clients) with the local agent on the real AI SDK provider
 * against the fake model server: the agent saves a note on Telegram through
 * its tool; the linked person's Discord run has it in its system prompt,
 * byte-identical from run to run; `/memory` and `/forget` answer on the
 * channel; a purge removes memory, links and usage; search blends in
 * embeddings from the fake embeddings endpoint.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { startRunner } from '../../runner/main.js';
import { createEmbedder } from '../../runner/model.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import type { CoreConfig } from '../../src/config/load.js';
import { identityUsageKey } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore, memoryKeys } from '../../src/people/memory.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { ALICE, FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { waitFor } from '../../testing/wait.js';
import { TOKEN as DISCORD_TOKEN, alice as discordAlice } from '../channels/discord-harness.js';
import { postUpdate } from '../channels/telegram-harness.js';
import { testHostFeatures } from '../helpers/host-features.js';
import { redisUrl } from '../helpers/redis.js';
import { fakeModel } from '../runner/harness.js';

const SECRET = 'memory_secret_0123456789';
const ALICE_DM = '510000000000000201';
const TG_ALICE = `telegram:${ALICE.id}`;

interface MemorySystem {
  h: RunnerHarness;
  tg: FakeTelegram;
  discord: FakeDiscord;
  model: FakeOpenAIServer;
  identities: IdentityStore;
  memory: MemoryStore;
  config: CoreConfig;
  /** POSTs a Telegram update to the webhook. */
  post(update: unknown): Promise<number>;
  close(): Promise<void>;
}

let sys: MemorySystem | undefined;
afterEach(async () => {
  await sys?.close();
  sys = undefined;
});

/** Both channels on a real channel host with memory on (and an identity budget, so usage is counted), the local agent on the fake model. */
async function startMemorySystem(): Promise<MemorySystem> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const model = await startFakeOpenAI();
  const config: CoreConfig = {
    ...h.ctx.config,
    memory: { ...h.ctx.config.memory, enabled: true },
    budgets: { identity: { tokensPerDay: 10_000_000 } },
  };
  const ctx = { ...h.ctx, config };
  const tg = await startFakeTelegram();
  const discord = await FakeDiscord.start({ token: DISCORD_TOKEN });
  const http: HttpServer = createHttpServer({ config, redis: ctx.redis, logger: ctx.logger });
  const deps = { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix };
  const channels: ChannelPlugin[] = [
    createTelegramPlugin({ token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: SECRET, registerCommands: false }, deps),
    createDiscordPlugin({ token: DISCORD_TOKEN, apiBase: discord.apiBase }, deps),
  ];
  const byId = new Map(channels.map((c) => [c.id, c]));
  const identities = new IdentityStore({ redis: ctx.redis, prefix: h.prefix });
  const host = createChannelHost({
    features: await testHostFeatures({ config, redis: ctx.redis, prefix: h.prefix, identities }),
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    settings: (id) => byId.get(id)?.settings,
    outbound: (id) => byId.get(id)?.outbound,
  });
  for (const c of channels) await c.start(host);
  await http.ready();
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({ model: fakeModel(model.url), maxRetries: 0 }),
    channels: [],
    resolveOutbound: (cid) => byId.get(cid.split(':', 1)[0]!)?.outbound,
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  return {
    h,
    tg,
    discord,
    model,
    identities,
    memory: new MemoryStore({ redis: ctx.redis, prefix: h.prefix }),
    config,
    async close() {
      for (const c of channels) await c.stop();
      await http.close();
      await h.close();
      await Promise.all([tg.close(), discord.close(), model.close()]);
    },
    post: (update) => postUpdate(http, SECRET, update),
  };
}

type Sys = MemorySystem;

const tgTexts = (s: Sys) => s.tg.sent.filter((m) => m.chatId === ALICE.id).map((m) => m.text);
const tgReplies = (s: Sys, n: number) => waitFor(() => tgTexts(s).length >= n && tgTexts(s), 10_000, `${n} Telegram replies`);
const dcTexts = (s: Sys) =>
  s.discord
    .callsTo('POST', new RegExp(`^/channels/${ALICE_DM}/messages$`))
    .filter((c) => c.status === 200)
    .map((c) => String(c.body.content));
const dcReplies = (s: Sys, n: number) => waitFor(() => dcTexts(s).length >= n && dcTexts(s), 10_000, `${n} Discord replies`);
const dcSay = (s: Sys, text: string) => s.discord.messageCreate({ channelId: ALICE_DM, author: discordAlice, content: text });
const systemOf = (body: any): string => body.messages.find((m: { role: string }) => m.role === 'system')?.content ?? '';
const toolNames = (body: any): string[] => (body.tools ?? []).map((t: { function: { name: string } }) => t.function.name);

describe('memory across linked channels', () => {
  it('a note the agent saves on Telegram is in the system prompt of the linked Discord run, the same bytes every run', async () => {
    const s = (sys = await startMemorySystem());
    await s.identities.link(`discord:${discordAlice.id}`, TG_ALICE);
    // Telegram: the model saves a note with its tool, then answers.
    s.model.script([{ toolCalls: [{ name: 'memory_save', args: { text: 'Likes green tea.' } }] }, { text: 'Noted.' }]);
    expect(await s.post(messageUpdate({ from: ALICE, text: 'remember that I like green tea' }))).toBe(200);
    expect((await tgReplies(s, 1))[0]).toBe('Noted.');
    expect(toolNames(s.model.requests[0]!.body)).toEqual(expect.arrayContaining(['memory_save', 'memory_search', 'memory_delete']));
    expect(systemOf(s.model.requests[0]!.body)).not.toContain('<memory>');
    expect((await s.memory.list(TG_ALICE)).map((n) => n.text)).toEqual(['Likes green tea.']);

    // Discord, the same person: the note is in the system prompt.
    s.model.script([{ text: 'Green tea, I remember.' }, { text: 'Still green tea.' }]);
    dcSay(s, 'what do I like to drink?');
    expect((await dcReplies(s, 1))[0]).toBe('Green tea, I remember.');
    const first = systemOf(s.model.requests[2]!.body);
    expect(first).toContain('<memory>');
    expect(first).toContain('- [1] Likes green tea.');

    // Unchanged notes: the next run's system prompt is byte-identical (the cached prefix holds).
    dcSay(s, 'and again?');
    expect((await dcReplies(s, 2))[1]).toBe('Still green tea.');
    expect(systemOf(s.model.requests[3]!.body)).toBe(first);
  });

  it('`/memory` lists the notes on the channel and `/forget` deletes one, then all', async () => {
    const s = (sys = await startMemorySystem());
    await s.identities.link(`discord:${discordAlice.id}`, TG_ALICE);
    await s.memory.save(TG_ALICE, 'Likes green tea.');
    await s.memory.save(TG_ALICE, 'Lives in Lyon.');
    dcSay(s, '/memory');
    expect((await dcReplies(s, 1))[0]).toBe(
      'What I remember about you (2 notes):\n• 1: Likes green tea.\n• 2: Lives in Lyon.\nDelete one with /forget <id>, or all with /forget all.',
    );
    expect(await s.post(messageUpdate({ from: ALICE, text: '/forget 1' }))).toBe(200);
    expect((await tgReplies(s, 1))[0]).toBe('Forgot note 1.');
    expect(await s.post(messageUpdate({ from: ALICE, text: '/forget 1' }))).toBe(200);
    expect((await tgReplies(s, 2))[1]).toBe('No note 1 (see /memory).');
    expect((await s.memory.list(TG_ALICE)).map((n) => n.text)).toEqual(['Lives in Lyon.']);
    dcSay(s, '/forget all');
    expect((await dcReplies(s, 2))[1]).toBe('Forgot everything I remembered about you (1 note).');
    dcSay(s, '/memory');
    expect((await dcReplies(s, 3))[2]).toBe('I remember nothing about you.');
    // Commands never reached the model.
    expect(s.model.requests).toHaveLength(0);
  });

  it('purging the identity removes its memory, its links and its usage', async () => {
    const s = (sys = await startMemorySystem());
    await s.identities.link(`discord:${discordAlice.id}`, TG_ALICE);
    s.model.script([{ toolCalls: [{ name: 'memory_save', args: { text: 'Allergic to peanuts.' } }] }, { text: 'Noted.' }]);
    dcSay(s, 'remember my peanut allergy');
    expect((await dcReplies(s, 1))[0]).toBe('Noted.');
    const k = memoryKeys(s.h.prefix, TG_ALICE);
    const usage = identityUsageKey(s.h.prefix, TG_ALICE);
    expect(await s.h.redis.exists(k.notes, k.seq, usage)).toBe(3);

    expect(await s.identities.purge(TG_ALICE)).toEqual(expect.arrayContaining([`discord:${discordAlice.id}`]));
    expect(await s.h.redis.exists(k.notes, k.seq, usage)).toBe(0);
    expect(await s.identities.resolve('discord', discordAlice.id)).toBe(`discord:${discordAlice.id}`);
    expect(await s.h.redis.keys(`${s.h.prefix}:{i:*`)).toEqual([]);
  });
});

describe('memory search with an embedding model', () => {
  it('embeds notes at save and the query at search through the real provider, finding a note no keyword matches', async () => {
    // Food words point one way, everything else the other.
    const model = await startFakeOpenAI({ embed: (t) => (/peanut|cook|dinner|tea/i.test(t) ? [1, 0, 0] : [0, 1, 0]) });
    const h = await RunnerHarness.start({ redisUrl: redisUrl() });
    try {
      const embedder = createEmbedder(
        { provider: 'openai-compatible', name: 'm', baseURL: model.url, contextWindow: 128_000, outputReserve: 4096 },
        'embed-small',
      );
      const m = new MemoryStore({ redis: h.redis, prefix: h.prefix, embedder });
      await m.save(TG_ALICE, 'Allergic to peanuts.');
      await m.save(TG_ALICE, 'Works night shifts as a nurse.');
      expect(model.embeddings).toEqual([['Allergic to peanuts.'], ['Works night shifts as a nurse.']]);
      const hits = await m.search(TG_ALICE, 'what should I cook for dinner?');
      expect(hits[0]?.text).toBe('Allergic to peanuts.');
      expect(model.embeddings.at(-1)).toEqual(['what should I cook for dinner?']);
      // Keywords alone find nothing for this query.
      expect(await new MemoryStore({ redis: h.redis, prefix: h.prefix }).search(TG_ALICE, 'what should I cook for dinner?')).toEqual([]);
    } finally {
      await h.close();
      await model.close();
    }
  });
});

describe('which runs get memory', () => {
  it('a run with a person gets it; a profile with `memory: false` and a run without an identity do not', async () => {
    const h = await RunnerHarness.start({ redisUrl: redisUrl() });
    try {
      const seen: string[] = [];
      const plugin: RunnerPlugin = {
        manifest: { name: 'probe', version: '1.0.0', capabilities: { steering: false, state: false } },
        async run(ctx) {
          seen.push(`${ctx.run.conversationId} ${ctx.features.memory ? 'memory' : 'none'}`);
          return { outcome: 'completed' };
        },
      };
      const config: CoreConfig = {
        ...h.ctx.config,
        memory: { ...h.ctx.config.memory, enabled: true },
        profiles: { quiet: { memory: false } },
        bindings: [{ profile: 'quiet', chat: 'telegram:quiet' }],
      };
      h.runners.push(
        await startRunner(
          { ...h.ctx, config },
          { plugin, resolveOutbound: () => undefined, lockDurationMs: 2000, stalledIntervalMs: 500, features: runnerFeatures() },
        ),
      );
      const runOf = async (conversationId: string, senderId: string) => {
        const r = await h.ingestService.ingest({ conversationId, updateKey: `telegram:${conversationId}:1`, sender: { id: senderId }, text: 'hi' });
        await h.runEnded((r as { runId: string }).runId, 10_000, conversationId);
      };
      await runOf('telegram:42', '42');
      await runOf('telegram:quiet', '43');
      await runOf('telegram:44', 'no identity here');
      expect(seen).toEqual(['telegram:42 memory', 'telegram:quiet none', 'telegram:44 none']);
    } finally {
      await h.close();
    }
  });
});

describe('the memory tools and the tool policy', () => {
  it('a tool the policy denies is not offered, and the others still are', async () => {
    const h = await RunnerHarness.start({ redisUrl: redisUrl() });
    const model = await startFakeOpenAI();
    try {
      const config: CoreConfig = { ...h.ctx.config, memory: { ...h.ctx.config.memory, enabled: true } };
      const plugin = createLocalAgentPlugin({ model: fakeModel(model.url), maxRetries: 0, toolbox: { policy: { tools: { memory_save: 'deny' } } } });
      h.runners.push(
        await startRunner(
          { ...h.ctx, config },
          { plugin, resolveOutbound: () => h.outbound, lockDurationMs: 2000, stalledIntervalMs: 500, features: runnerFeatures() },
        ),
      );
      const r = await h.ingest('hello');
      await h.runEnded((r as { runId: string }).runId);
      const offered = toolNames(model.requests[0]!.body);
      expect(offered).toEqual(expect.arrayContaining(['memory_search', 'memory_delete']));
      expect(offered).not.toContain('memory_save');
    } finally {
      await h.close();
      await model.close();
    }
  });

  it('a note over the size limit from the model is refused with an error it reads, and nothing is written', async () => {
    const h = await RunnerHarness.start({ redisUrl: redisUrl() });
    const model = await startFakeOpenAI();
    try {
      const config: CoreConfig = { ...h.ctx.config, memory: { ...h.ctx.config.memory, enabled: true, maxNoteChars: 50 } };
      const plugin = createLocalAgentPlugin({ model: fakeModel(model.url), maxRetries: 0 });
      h.runners.push(
        await startRunner(
          { ...h.ctx, config },
          { plugin, resolveOutbound: () => h.outbound, lockDurationMs: 2000, stalledIntervalMs: 500, features: runnerFeatures() },
        ),
      );
      model.script([{ toolCalls: [{ name: 'memory_save', args: { text: 'x'.repeat(51) } }] }, { text: 'Could not save that.' }]);
      const r = await h.ingest('remember this long thing');
      await h.runEnded((r as { runId: string }).runId);
      const toolMessage = model.requests[1]!.body.messages.find((m: { role: string }) => m.role === 'tool');
      expect(String(toolMessage?.content)).toMatch(/50/);
      expect(await h.redis.keys(`${h.prefix}:{i:*`)).toEqual([]);
    } finally {
      await h.close();
      await model.close();
    }
  });
});

describe('linking merges memory', () => {
  it("the joining account's notes move into the identity it joins (the host's link hook)", async () => {
    const h = await RunnerHarness.start({ redisUrl: redisUrl() });
    try {
      const identities = new IdentityStore({ redis: h.redis, prefix: h.prefix });
      const config: CoreConfig = { ...h.ctx.config, memory: { ...h.ctx.config.memory, enabled: true } };
      await testHostFeatures({ config, redis: h.redis, prefix: h.prefix, identities });
      const m = new MemoryStore({ redis: h.redis, prefix: h.prefix });
      await m.save(TG_ALICE, 'Likes green tea.');
      await m.save(`discord:${discordAlice.id}`, 'Plays chess on Sundays.');
      await identities.link(`discord:${discordAlice.id}`, TG_ALICE);
      expect((await m.list(TG_ALICE)).map((n) => n.text)).toEqual(['Likes green tea.', 'Plays chess on Sundays.']);
      expect(await h.redis.exists(...Object.values(memoryKeys(h.prefix, `discord:${discordAlice.id}`)))).toBe(0);
    } finally {
      await h.close();
    }
  });
});
