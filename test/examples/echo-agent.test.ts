/**
 * examples/echo-agent, used as its README says: a config selects it by module
 * path, the app loads it at start, and a Telegram user (the real grammY
 * plugin, polling the fake Bot API) gets its answers. The same module also
 * passes the runner plugin contract from the test kit, given as a definition.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, startApp } from '../../app/index.js';
import type { RunnerPluginDefinition } from '../../runner/index.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/run-queue.js';
import { ALICE, FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { runnerPluginContract } from '../../testing/runner-contract.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const MODULE = resolve('examples/echo-agent/index.js');
const echoAgent = ((await import(MODULE)) as { default: RunnerPluginDefinition }).default;

describe('examples/echo-agent', () => {
  let tg: FakeTelegram;
  let dir: string;
  let prefix: string;
  let app: Awaited<ReturnType<typeof startApp>> | undefined;

  beforeEach(async () => {
    tg = await startFakeTelegram();
    dir = mkdtempSync(join(tmpdir(), 'steerbot-echo-'));
    prefix = testPrefix();
  });
  afterEach(async () => {
    const redis = app?.ctx.redis;
    if (redis) {
      await cleanupPrefix(redis, prefix);
      await cleanupPrefix(redis, bullPrefixFor(prefix));
    }
    await app?.stop();
    app = undefined;
    await tg.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers Telegram messages with their text behind the configured prefix, once each', async () => {
    const file = join(dir, 'steerbot.json');
    writeFileSync(
      file,
      JSON.stringify({
        http: { host: '127.0.0.1' },
        runner: { plugin: MODULE },
        agents: { 'echo-agent': { prefix: 'echo> ' } },
        channels: { telegram: { apiRoot: tg.apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1 } },
      }),
    );
    const config = await loadConfig({ file, env: { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, TELEGRAM_BOT_TOKEN: FAKE_TOKEN } });
    // Selected by path; its section is validated by its own schema (defaults applied).
    expect(config.agents['echo-agent']).toEqual({ prefix: 'echo> ' });
    // Any free port (a config file cannot ask for port 0).
    app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } }, logger: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }) });

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
