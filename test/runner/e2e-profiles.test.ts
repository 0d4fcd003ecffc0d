/**
 * Agent profiles: bindings choose a conversation's profile (identity, then
 * the longest chat, then channel, else the base settings), and two profiles
 * bound to two chats answer with two models (two fake servers).
 */

import { afterEach, describe, expect, it } from 'vitest';
import { runnerFeatures } from '../../app/features/index.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { startRunner } from '../../runner/main.js';
import { ConfigError } from '../../src/errors.js';
import { type BaseModelSettings, loadProfiles, offersTool, profileFor } from '../../src/people/profiles.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { RunnerHarness as Harness } from './harness.js';

const BASE: BaseModelSettings = { provider: 'openai', name: 'gpt-4o-mini', apiKey: 'base-key', contextWindow: 128_000, outputReserve: 4096 };

describe('loadProfiles', () => {
  it('picks the most specific binding: identity, then the longest chat, then channel, else the base settings', async () => {
    const p = await loadProfiles(
      BASE,
      { a: { systemPrompt: 'A' }, b: { systemPrompt: 'B' }, c: { systemPrompt: 'C' }, d: { systemPrompt: 'D', inputPolicy: 'followup' } },
      [
        { profile: 'a', channel: 'telegram' },
        { profile: 'b', chat: 'telegram:-100' },
        { profile: 'c', chat: 'telegram:-100:7' },
        { profile: 'd', identity: 'telegram:u9' },
      ],
    );
    expect(p.resolve('telegram:5').name).toBe('a');
    expect(p.resolve('telegram:-100').name).toBe('b');
    expect(p.resolve('telegram:-100:3').name).toBe('b');
    expect(p.resolve('telegram:-100:7').name).toBe('c');
    expect(p.resolve('telegram:-100:7', 'telegram:u9')).toMatchObject({ name: 'd', inputPolicy: 'followup', systemPrompt: 'D' });
    expect(p.resolve('discord:1')).toEqual({ name: 'default', model: BASE });
    expect(p.bindsIdentities).toBe(true);
  });

  it('changes only what a profile sets on the base model; another provider does not inherit the base key', async () => {
    const p = await loadProfiles(
      BASE,
      {
        big: { model: { name: 'gpt-4o' } },
        local: { model: { provider: 'openai-compatible', name: 'llama', baseURL: 'http://127.0.0.1:1/v1', contextWindow: 8192 } },
      },
      [
        { profile: 'big', channel: 'telegram' },
        { profile: 'local', channel: 'discord' },
      ],
    );
    expect(p.resolve('telegram:1').model).toMatchObject({ provider: 'openai', name: 'gpt-4o', apiKey: 'base-key' });
    const local = p.resolve('discord:1').model;
    expect(local).toMatchObject({ provider: 'openai-compatible', name: 'llama', baseURL: 'http://127.0.0.1:1/v1', contextWindow: 8192 });
    expect(local.apiKey).toBeUndefined();
  });

  it('resolves the /model choices on the base model; a profile allows all of them, the ones it names, or none', async () => {
    const models = {
      big: { name: 'gpt-4o' },
      local: { provider: 'openai-compatible' as const, name: 'llama', baseURL: 'http://127.0.0.1:1/v1', contextWindow: 8192 },
    };
    const p = await loadProfiles(
      BASE,
      { one: { models: ['local'] }, none: { models: [] }, all: { systemPrompt: 'A' } },
      [
        { profile: 'one', channel: 'telegram' },
        { profile: 'none', channel: 'discord' },
        { profile: 'all', channel: 'slack' },
      ],
      models,
    );
    expect(p.resolve('web:1').models).toEqual({
      big: { ...BASE, name: 'gpt-4o', contextWindow: 128_000, outputReserve: 16_384 },
      local: { provider: 'openai-compatible', name: 'llama', baseURL: 'http://127.0.0.1:1/v1', contextWindow: 8192, outputReserve: 4096 },
    });
    expect(Object.keys(p.resolve('telegram:1').models!)).toEqual(['local']);
    expect(p.resolve('discord:1').models).toBeUndefined();
    expect(Object.keys(p.resolve('slack:C1').models!)).toEqual(['big', 'local']);
  });

  it("gives a subagent's run its parent's profile; a subagent binding only narrows its tools and skills", async () => {
    const profiles = {
      kids: {
        model: { name: 'gpt-4o' },
        systemPrompt: 'K',
        tools: ['crm__*', 'current_time', 'read_skill'],
        skills: ['a', 'b'],
        toolPolicy: { default: 'deny' as const },
      },
      helpers: { systemPrompt: 'H', tools: ['crm__read', 'http_*', 'read_skill', 'current_*'], skills: ['b', 'c'] },
      adults: { systemPrompt: 'A' },
    };
    const bindings = [
      { profile: 'kids', chat: 'telegram:-100' },
      { profile: 'adults', identity: 'telegram:u9' },
    ];
    const plain = await loadProfiles(BASE, profiles, bindings);
    // No subagent binding: the parent's profile as it is, for the same person.
    expect(profileFor(plain, 'subagent:r1.abc.1', 'telegram:-100', 'telegram:u1')).toBe(plain.resolve('telegram:-100', 'telegram:u1'));
    expect(profileFor(plain, 'subagent:r1.abc.1', 'telegram:-100', 'telegram:u9').name).toBe('adults');

    const bound = await loadProfiles(BASE, profiles, [...bindings, { profile: 'helpers', channel: 'subagent' }]);
    expect(profileFor(bound, 'subagent:r1.abc.1', 'telegram:-100', undefined)).toEqual({
      ...bound.resolve('telegram:-100'),
      name: 'kids+helpers',
      tools: ['crm__read', 'current_time', 'read_skill'],
      skills: ['b'],
    });
    // A parent offering every tool and skill takes the subagent profile's lists, and keeps its own prompt and model.
    expect(profileFor(bound, 'subagent:r1.abc.1', 'telegram:5', 'telegram:u9')).toEqual({
      name: 'adults+helpers',
      model: BASE,
      systemPrompt: 'A',
      tools: profiles.helpers.tools,
      skills: ['b', 'c'],
    });
  });

  it('refuses a profile naming a model not in models, and a model named default', async () => {
    const err = await loadProfiles(BASE, { x: { models: ['big', 'nope'] } }, [], { big: { name: 'gpt-4o' }, Default: { name: 'gpt-4o' } }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.path)).toEqual(['models.Default', 'profiles.x.models.1']);
  });

  it('refuses a binding to an unknown profile, a binding with two targets, and an unknown model without a window', async () => {
    const err = await loadProfiles(BASE, { x: { model: { name: 'mystery' } } }, [
      { profile: 'nope', channel: 'telegram' },
      { profile: 'x', channel: 'discord', chat: 'discord:1' },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).issues.map((i) => i.path)).toEqual(['profiles.x.model.contextWindow', 'bindings.0.profile', 'bindings.1']);
  });
});

describe('offersTool', () => {
  it('offers a tool a list names, or one a name ending in `*` covers as a prefix; every tool when there is no list', () => {
    const tools = ['crm__*', 'current_time'];
    expect(['crm__read', 'crm__', 'current_time'].every((t) => offersTool(tools, t))).toBe(true);
    expect(['crm_read', 'current_times', 'http_get', '*'].some((t) => offersTool(tools, t))).toBe(false);
    expect(offersTool(undefined, 'http_get')).toBe(true);
    expect(offersTool([], 'http_get')).toBe(false);
  });
});

describe('two profiles bound to two chats', () => {
  let h: Harness | undefined;
  const fakes: FakeOpenAIServer[] = [];
  afterEach(async () => {
    await h?.close();
    h = undefined;
    await Promise.all(fakes.splice(0).map((f) => f.close()));
  });

  it('answer with two models, each with its own system prompt', async () => {
    const [one, two] = await Promise.all([startFakeOpenAI(), startFakeOpenAI()]);
    fakes.push(one!, two!);
    one!.script(() => ({ text: 'from one' }));
    two!.script(() => ({ text: 'from two' }));
    h = await Harness.start();
    const model = (url: string, name: string) => ({ provider: 'openai-compatible' as const, baseURL: url, name, contextWindow: 32_000 });
    const config = {
      ...h.ctx.config,
      profiles: {
        sales: { model: model(one!.url, 'model-one'), systemPrompt: 'You sell.' },
        support: { model: model(two!.url, 'model-two'), systemPrompt: 'You help.' },
      },
      bindings: [
        { profile: 'sales', chat: 'telegram:1' },
        { profile: 'support', chat: 'telegram:2' },
      ],
    };
    const harness = h;
    h.runners.push(
      await startRunner(
        { ...h.ctx, config },
        {
          plugin: createLocalAgentPlugin({ builtins: { currentTime: false }, maxRetries: 0 }),
          resolveOutbound: (cid) => (cid.startsWith('telegram:') ? harness.outbound : undefined),
          lockDurationMs: 2000,
          stalledIntervalMs: 500,
          features: runnerFeatures(),
        },
      ),
    );
    const a = await h.ingest('hi sales', { conversationId: 'telegram:1' });
    const b = await h.ingest('hi support', { conversationId: 'telegram:2' });
    await h.runEnded((a as { runId: string }).runId, 10_000, 'telegram:1');
    await h.runEnded((b as { runId: string }).runId, 10_000, 'telegram:2');
    expect(one!.requests.map((r) => r.body.model)).toEqual(['model-one']);
    expect(two!.requests.map((r) => r.body.model)).toEqual(['model-two']);
    expect(one!.requests[0]!.body.messages[0]).toEqual({ role: 'system', content: 'You sell.' });
    expect(two!.requests[0]!.body.messages[0]).toEqual({ role: 'system', content: 'You help.' });
    expect(h.outbound.sent.map((m) => [m.conversationId, m.text]).sort()).toEqual([
      ['telegram:1', 'from one'],
      ['telegram:2', 'from two'],
    ]);
  });
});
