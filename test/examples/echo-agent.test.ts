/**
 * examples/echo-agent, used as its README says: a config selects it by module
 * path, the app loads it at start, and a Telegram user (the real grammY
 * plugin, polling the fake Bot API) gets its answers. The same module also
 * passes the runner plugin contract from the test kit, given as a definition.
 */
import { resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunnerPluginDefinition } from '../../runner/index.js';
import { ALICE, type FakeTelegram, messageUpdate } from '../../testing/fakes/telegram-server.js';
import { runnerPluginContract } from '../../testing/runner-contract.js';
import { redisUrl } from '../helpers/redis.js';
import { type ExampleWorld, exampleWorld } from './world.js';

const MODULE = resolve('examples/echo-agent/index.js');
const echoAgent = ((await import(MODULE)) as { default: RunnerPluginDefinition }).default;

describe('examples/echo-agent', () => {
  let world: ExampleWorld;
  let tg: FakeTelegram;
  beforeEach(async () => {
    world = await exampleWorld();
    tg = world.tg;
  });
  afterEach(() => world.stop());

  it('answers Telegram messages with their text behind the configured prefix, once each', async () => {
    const config = await world.load({ runner: { plugin: MODULE }, agents: { 'echo-agent': { prefix: 'echo> ' } } });
    // Selected by path; its section is validated by its own schema (defaults applied).
    expect(config.agents['echo-agent']).toEqual({ prefix: 'echo> ' });
    await world.start(config);

    const first = messageUpdate({ text: 'hello echo', from: ALICE });
    tg.pushUpdate(first);
    tg.pushUpdate(first); // delivered twice (a redelivery): answered once
    await tg.waitUntil(() => tg.sent.length >= 1, 10_000, 'the first reply');
    tg.pushUpdate(messageUpdate({ text: 'second one', from: ALICE }));
    await tg.waitUntil(() => tg.sent.length >= 2, 10_000, 'the second reply');

    expect(tg.sent.map((m) => ({ chat: String(m.chatId), text: m.text }))).toEqual([
      { chat: String(ALICE.id), text: 'echo> hello echo' },
      { chat: String(ALICE.id), text: 'echo> second one' },
    ]);
  });
});

runnerPluginContract({ name: 'examples/echo-agent', definition: echoAgent, redisUrl: redisUrl() });
