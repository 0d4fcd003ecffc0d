/**
 * Harness of the Telegram channel tests: the real plugin (real grammY
 * client) against the fake Bot API server, a host HTTP server, the real
 * channel host ingesting through the real `Dispatch` on a random Redis
 * prefix, and every log line captured in memory.
 */

import { Api } from 'grammy';
import { Redis } from 'ioredis';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import type { ChannelSettings } from '../../host/receive.js';
import { createTelegramPlugin, type TelegramConfigInput } from '../../plugins/telegram/channel.js';
import { telegramConfigSchema } from '../../plugins/telegram/config.js';
import { createTelegramOutbound } from '../../plugins/telegram/outbound.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelHost, ChannelOutbound, ChannelPlugin, InboundMessage, ReceiveResult } from '../../src/channel.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { ingestOnlyHost } from '../../testing/channel-host.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { hostChannel, runnerFor } from './system.js';

/** The webhook secret the harness configures. */
export const WEBHOOK_SECRET = 'whsec_0123456789abcdef';

/** Log lines kept in memory. */
export class MemoryLog {
  readonly lines: string[] = [];
  write(line: string): void {
    this.lines.push(line);
  }
  get text(): string {
    return this.lines.join('');
  }
}

/**
 * The real channel host (`createChannelHost`: allow-lists, commands, policy)
 * over the real `Dispatch` on Redis; runs are recorded, not enqueued (no
 * runner here). Records what `receive` was given and returned.
 */
export function dispatchHost(opts: {
  redis: Redis;
  prefix: string;
  http: HttpServer;
  logger: Logger;
  settings?: ChannelSettings;
  outbound?: () => ChannelOutbound | undefined;
}): ChannelHost & { received: InboundMessage[]; results: ReceiveResult[] } {
  return recordingHost(ingestOnlyHost({ ...opts, settings: () => opts.settings, outbound: () => opts.outbound?.() }).host);
}

/** `inner`, recording the messages it received and what it answered. */
export function recordingHost(inner: ChannelHost): ChannelHost & { received: InboundMessage[]; results: ReceiveResult[] } {
  const received: InboundMessage[] = [];
  const results: ReceiveResult[] = [];
  return {
    ...inner,
    received,
    results,
    async receive(channelId, message) {
      received.push(message);
      const result = await inner.receive(channelId, message);
      results.push(result);
      return result;
    },
  };
}

/** A started harness. */
export interface TelegramHarness {
  fake: FakeTelegram;
  plugin: ChannelPlugin;
  host: ReturnType<typeof dispatchHost>;
  http: HttpServer;
  redis: Redis;
  prefix: string;
  log: MemoryLog;
  logger: Logger;
  /** POSTs an update to the webhook with the right secret (override `headers` to test others). */
  post(update: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

/**
 * Starts the plugin in webhook mode (default) with `config` merged over the
 * harness defaults. `hostRedis`: the Redis the host ingests into (default the
 * harness's; pass an unreachable one to test 503).
 */
export async function startTelegramHarness(config: Partial<TelegramConfigInput> = {}, opts: { hostRedis?: Redis } = {}): Promise<TelegramHarness> {
  const prefix = testPrefix();
  const redis = new Redis(redisUrl());
  const fake = await startFakeTelegram();
  const log = new MemoryLog();
  const logger = createLogger({ level: 'debug', destination: log });
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const cfg = telegramConfigSchema.parse({ token: FAKE_TOKEN, apiRoot: fake.apiRoot, mode: 'webhook', webhookSecret: WEBHOOK_SECRET, ...config });
  const plugin = createTelegramPlugin(cfg, { logger, redis, prefix });
  const settings = plugin.settings ?? {};
  const host = dispatchHost({ redis: opts.hostRedis ?? redis, prefix, http, logger, settings, outbound: () => plugin.outbound });
  await plugin.start(host);
  await http.ready();
  const path = config.webhookPath ?? '/telegram/webhook';
  return {
    fake,
    plugin,
    host,
    http,
    redis,
    prefix,
    log,
    logger,
    async post(update, headers = { 'x-telegram-bot-api-secret-token': WEBHOOK_SECRET }) {
      const res = await http.inject({
        method: 'POST',
        url: path,
        headers: { 'content-type': 'application/json', ...headers },
        payload: typeof update === 'string' ? update : JSON.stringify(update),
      });
      return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
    },
    async close() {
      await plugin.stop();
      await http.close();
      await fake.close();
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/** POSTs one update to the Telegram webhook route of `http` with the secret header; resolves with the status code. */
export async function postUpdate(http: HttpServer, secret: string, update: unknown): Promise<number> {
  const res = await http.inject({
    method: 'POST',
    url: '/telegram/webhook',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
    payload: JSON.stringify(update),
  });
  return res.statusCode;
}

/** What `startTelegramSystem` started: stop `plugin`, then close `http`, when done. */
export interface TelegramSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
}

/**
 * The Telegram channel wired end to end on `h`: a host HTTP server, the real
 * plugin in webhook mode (`secret`) against `tg`, the real channel host
 * enqueueing runs on `h`'s queue, and a runner with `agent` that delivers
 * through the plugin (added to `h.runners`, so `h.close()` stops it).
 */
export async function startTelegramSystem(o: {
  h: RunnerHarness;
  tg: FakeTelegram;
  secret: string;
  agent: RunnerPlugin;
  /** Plugin settings over the defaults (e.g. `streaming: true`). */
  telegram?: Partial<TelegramConfigInput>;
  /** The channel's host settings (access, admins). Default: the harness's. */
  settings?: () => ChannelSettings;
}): Promise<TelegramSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: o.tg.apiRoot, mode: 'webhook', webhookSecret: o.secret, registerCommands: false, ...o.telegram },
    { logger, redis, prefix: h.prefix },
  );
  await hostChannel(h, http, plugin, o.settings);
  await http.ready();
  await runnerFor(h, o.agent, plugin);
  return { http, plugin };
}

/** Lets `h`'s outbound fetch attachments (photos, voice notes) from `tg` the way the Telegram channel does. */
export function fetchFromTelegram(h: RunnerHarness, tg: FakeTelegram): void {
  const telegram = createTelegramOutbound({
    channelId: 'telegram',
    api: new Api(tg.token, { apiRoot: tg.apiRoot }),
    token: tg.token,
    streaming: false,
    logger: h.ctx.logger,
    apiRoot: tg.apiRoot,
  });
  (h.outbound as ChannelOutbound).fetchAttachment = telegram.fetchAttachment!;
}

/** Stops a test's Telegram system (the plugin, then its HTTP server), then closes each of `rest` in order. */
export async function stopTelegramSystem(system: TelegramSystem, ...rest: Array<{ close(): Promise<unknown> }>): Promise<void> {
  await system.plugin.stop();
  await system.http.close();
  for (const part of rest) await part.close();
}
