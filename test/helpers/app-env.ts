/**
 * The environment a whole steerbot (`loadConfig`, then `startApp`) runs on in
 * a test: the test's Redis and prefix, a queue of its own, Telegram against
 * the fake Bot API's token, and an OpenAI-compatible model at `modelUrl`.
 */
import { FAKE_TOKEN } from '../../testing/fakes/telegram-server.js';
import { redisUrl } from './redis.js';

export function telegramAppEnv(o: { prefix: string; modelUrl: string; model?: string; redisUrl?: string }): Record<string, string> {
  return {
    REDIS_URL: o.redisUrl ?? redisUrl(),
    STEERBOT_PREFIX: o.prefix,
    STEERBOT_QUEUE_NAME: `runs-${o.prefix}`,
    TELEGRAM_BOT_TOKEN: FAKE_TOKEN,
    STEERBOT_MODEL_PROVIDER: 'openai-compatible',
    OPENAI_BASE_URL: o.modelUrl,
    STEERBOT_MODEL: o.model ?? 'fake-model',
    STEERBOT_MODEL_CONTEXT_WINDOW: '100000',
  };
}
