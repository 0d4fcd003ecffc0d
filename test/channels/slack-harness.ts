/**
 * Harness of the Slack channel tests: the real plugin (the real Slack
 * clients) against the fake Slack, a host HTTP server, and either the real
 * channel host ingesting through the real `Dispatch` (runs recorded, not
 * executed) or the whole system with a runner.
 */

import { Redis } from 'ioredis';
import { createHttpServer, type HttpServer } from '../../host/http.js';
import { createSlackPlugin, type SlackConfigInput } from '../../plugins/slack/channel.js';
import { slackConfigSchema } from '../../plugins/slack/config.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger, type Logger } from '../../src/logger.js';
import {
  type FakeSlack,
  type FakeSlackOptions,
  SLACK_APP_TOKEN,
  SLACK_BOT_TOKEN,
  SLACK_SIGNING_SECRET,
  signedSlackHeaders,
  startFakeSlack,
} from '../../testing/fakes/slack-server.js';
import type { RunnerHarness } from '../../testing/runner-harness.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { hostChannel, runnerFor } from './system.js';
import { dispatchHost, MemoryLog } from './telegram-harness.js';

/** A POST answered by the host's server. */
export interface Answer {
  status: number;
  body: any;
}

/** POSTs a signed Events API body (`headers` replace the signature headers when given). */
export async function postEvent(http: HttpServer, body: unknown, headers?: Record<string, string>): Promise<Answer> {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await http.inject({
    method: 'POST',
    url: '/slack/events',
    headers: { 'content-type': 'application/json', ...(headers ?? signedSlackHeaders(raw)) },
    payload: raw,
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

/** POSTs a signed click (a form with the JSON `payload`) to the interactivity route. */
export async function postClick(http: HttpServer, payload: unknown, headers?: Record<string, string>): Promise<Answer> {
  const raw = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  const res = await http.inject({
    method: 'POST',
    url: '/slack/interactivity',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(headers ?? signedSlackHeaders(raw)) },
    payload: raw,
  });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

/** A started ingest-only harness (Events API mode). */
export interface SlackHarness {
  fake: FakeSlack;
  plugin: ChannelPlugin;
  host: ReturnType<typeof dispatchHost>;
  http: HttpServer;
  redis: Redis;
  prefix: string;
  log: MemoryLog;
  logger: Logger;
  post(body: unknown, headers?: Record<string, string>): Promise<Answer>;
  /** Keys written under the prefix, sorted. */
  keys(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Starts the plugin in Events API mode with `config` over the defaults; `hostRedis`: the Redis the host ingests into (an
 * unreachable one tests 503); `fake`: the fake Slack's options (its workspace's admins, Slack Connect members).
 */
export async function startSlackHarness(
  config: Partial<SlackConfigInput> = {},
  opts: { hostRedis?: Redis; fake?: FakeSlackOptions } = {},
): Promise<SlackHarness> {
  const prefix = testPrefix();
  const redis = new Redis(redisUrl());
  const fake = await startFakeSlack(opts.fake);
  const log = new MemoryLog();
  const logger = createLogger({ level: 'debug', destination: log });
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const cfg = slackConfigSchema.parse({ botToken: SLACK_BOT_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: fake.apiUrl, ...config });
  const plugin = createSlackPlugin(cfg, { logger, redis, prefix });
  const settings = plugin.settings ?? {};
  const host = dispatchHost({ redis: opts.hostRedis ?? redis, prefix, http, logger, settings, outbound: () => plugin.outbound });
  await plugin.start(host);
  await http.ready();
  return {
    fake,
    plugin,
    host,
    http,
    redis,
    prefix,
    log,
    logger,
    post: (body, headers) => postEvent(http, body, headers),
    keys: async () => (await redis.keys(`${prefix}:*`)).sort(),
    async close() {
      await plugin.stop();
      await http.close();
      await fake.close();
      await cleanupPrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/** What `startSlackSystem` started: stop `plugin`, then close `http`, when done. */
export interface SlackSystem {
  http: HttpServer;
  plugin: ChannelPlugin;
}

/**
 * The Slack channel wired end to end on `h`: a host HTTP server, the real
 * plugin (Socket Mode by default) against `slack`, the real channel host
 * enqueueing runs on `h`'s queue, and a runner with `agent` that delivers
 * through the plugin (added to `h.runners`, so `h.close()` stops it).
 */
export async function startSlackSystem(o: {
  h: RunnerHarness;
  slack: FakeSlack;
  agent: RunnerPlugin;
  config?: Partial<SlackConfigInput>;
}): Promise<SlackSystem> {
  const { h } = o;
  const { logger, redis } = h.ctx;
  const http = createHttpServer({ config: h.ctx.config, redis, logger });
  const plugin = createSlackPlugin(
    { botToken: SLACK_BOT_TOKEN, appToken: SLACK_APP_TOKEN, signingSecret: SLACK_SIGNING_SECRET, apiUrl: o.slack.apiUrl, ...o.config },
    { logger, redis, prefix: h.prefix },
  );
  await hostChannel(h, http, plugin, () => ({ admins: o.config?.admins ?? [] }));
  await http.ready();
  await runnerFor(h, o.agent, plugin);
  return { http, plugin };
}
