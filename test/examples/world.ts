/**
 * An example used as its README says: a config file naming it, the app
 * started from that file with a Telegram channel polling the fake Bot API,
 * under a fresh key prefix; `stop()` cleans up.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type SteerbotConfig, startApp } from '../../app/index.js';
import { createLogger } from '../../src/logger.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

export interface ExampleWorld {
  tg: FakeTelegram;
  /** Writes `settings` (with a polling Telegram channel added) as the config file and loads it. */
  load(settings: Record<string, unknown>): Promise<SteerbotConfig>;
  /** Starts the app on any free port (a config file cannot ask for port 0). */
  start(config: SteerbotConfig): Promise<void>;
  stop(): Promise<void>;
}

export async function exampleWorld(): Promise<ExampleWorld> {
  const tg = await startFakeTelegram();
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-example-'));
  const prefix = testPrefix();
  let app: Awaited<ReturnType<typeof startApp>> | undefined;
  return {
    tg,
    async load(settings) {
      const file = join(dir, 'steerbot.json');
      const telegram = { apiRoot: tg.apiRoot, mode: 'polling', registerCommands: false, pollTimeoutSeconds: 1 };
      writeFileSync(file, JSON.stringify({ http: { host: '127.0.0.1' }, ...settings, channels: { telegram } }));
      return loadConfig({ file, env: { REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, TELEGRAM_BOT_TOKEN: FAKE_TOKEN } });
    },
    async start(config) {
      app = await startApp({
        config: { ...config, http: { ...config.http, port: 0 } },
        logger: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
      });
    },
    async stop() {
      const redis = app?.ctx.redis;
      if (redis) {
        await cleanupPrefix(redis, prefix);
        await cleanupPrefix(redis, bullPrefixFor(prefix));
      }
      await app?.stop();
      await tg.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
