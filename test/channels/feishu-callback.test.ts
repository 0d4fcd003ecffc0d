/**
 * The Feishu / Lark channel's edges with the store down and a card click as
 * an http-mode callback: the real plugin (the real SDK) against the fake
 * open platform, the real channel host ingesting through the real
 * `Dispatch` (runs recorded, not executed).
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpServer, type HttpServer, listen } from '../../host/http.js';
import { createFeishuPlugin, type FeishuConfigInput } from '../../plugins/feishu/channel.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { FEISHU_ANN, FEISHU_DM, FEISHU_TEST, feishuCardAction, feishuMessageEvent, postFeishuCallback } from '../../testing/fakes/feishu-events.js';
import { type FakeFeishu, startFakeFeishu } from '../../testing/fakes/feishu-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { dispatchHost } from './telegram-harness.js';

interface Started {
  feishu: FakeFeishu;
  plugin: ChannelPlugin;
  http: HttpServer;
  redis: Redis;
  prefix: string;
  url: string;
  host: ReturnType<typeof dispatchHost>;
}

const open: Started[] = [];

/** Starts the plugin with `config`; `hostRedis`: the Redis the host ingests into (an unreachable one tests 503). */
async function start(config: Partial<FeishuConfigInput>, hostRedis?: Redis): Promise<Started> {
  const feishu = await startFakeFeishu();
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const logger = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
  const plugin = createFeishuPlugin({ ...FEISHU_TEST, domain: feishu.url, ...config }, { logger, redis, prefix });
  const host = dispatchHost({ redis: hostRedis ?? redis, prefix, http, logger, outbound: () => plugin.outbound });
  await plugin.start(host);
  const address = await listen(http, { host: '127.0.0.1', port: 0 });
  const s = { feishu, plugin, http, redis, prefix, url: `${address}/feishu/events`, host };
  open.push(s);
  return s;
}

afterEach(async () => {
  for (const s of open.splice(0)) {
    await s.plugin.stop();
    await s.http.close();
    await s.feishu.close();
    await cleanupPrefix(s.redis, s.prefix);
    await s.redis.quit();
  }
});

/** A Redis that refuses every command. */
function deadRedis(): Redis {
  const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
  dead.on('error', () => undefined); // the refused connection is the point of the test
  return dead;
}

const keys = async (s: Started) => (await s.redis.keys(`${s.prefix}:*`)).sort();

describe('feishu with the store down', () => {
  it('answers a callback 503 when the host cannot reach Redis, so the platform retries, and writes nothing', async () => {
    const dead = deadRedis();
    try {
      const s = await start({ mode: 'http' }, dead);
      const res = await postFeishuCallback(s.url, feishuMessageEvent({ text: 'hi' }));
      expect(res).toEqual({ status: 503, body: { error: 'redis unreachable' } });
      expect(await keys(s)).toEqual([]);
    } finally {
      dead.disconnect();
    }
  });

  it('acknowledges an event over the long connection as failed (500) when the host cannot reach Redis, so it is sent again', async () => {
    const dead = deadRedis();
    try {
      const s = await start({}, dead);
      await s.feishu.connected();
      expect((await s.feishu.push(feishuMessageEvent({ text: 'hi' }))).code).toBe(500);
      expect(await keys(s)).toEqual([]);
    } finally {
      dead.disconnect();
    }
  });
});

describe('feishu over the long connection', () => {
  it('acknowledges a malformed event as handled (it would come back unchanged), writing nothing', async () => {
    const s = await start({});
    await s.feishu.connected();
    const bad = { schema: '2.0', header: { event_id: 'e-bad', event_type: 'im.message.receive_v1' }, event: { message: 42 } };
    const ack = await s.feishu.push(bad);
    expect(ack).toMatchObject({ code: 200, data: { ok: false, error: expect.stringContaining('bad message event') } });
    expect(s.host.received).toEqual([]);
    expect(await keys(s)).toEqual([]);
  });
});

describe('feishu card clicks as http callbacks', () => {
  it("turns a signed card callback into the clicker's command, answered with a toast, once when delivered twice", async () => {
    const s = await start({ mode: 'http' });
    const value = { command: '/choose qu_000000000000000000000000 1' };
    const click = feishuCardAction({ messageId: 'om_card1', chatId: FEISHU_DM, operator: FEISHU_ANN, value });
    const answers = [await postFeishuCallback(s.url, click), await postFeishuCallback(s.url, click)];
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(answers[0]!.body).toMatchObject({ toast: { type: 'info', content: expect.any(String) } });
    expect(s.host.received).toHaveLength(2);
    expect(s.host.received[0]).toMatchObject({ conversationId: `feishu:${FEISHU_DM}`, text: value.command, sender: { id: FEISHU_ANN }, interaction: 'button' });
    expect(s.host.results.map((r) => (r.kind === 'command' ? r.duplicate : r.kind))).toEqual([false, true]);
  });

  it('ignores a click on a button that is not ours', async () => {
    const s = await start({ mode: 'http' });
    const click = feishuCardAction({ messageId: 'om_card2', chatId: FEISHU_DM, operator: FEISHU_ANN, value: { other: 'app' } });
    expect(await postFeishuCallback(s.url, click)).toEqual({ status: 200, body: {} });
    expect(s.host.received).toEqual([]);
  });
});

describe('feishu start', () => {
  it('refuses to start with a wrong app secret, the secret nowhere in the error', async () => {
    const feishu = await startFakeFeishu();
    const redis = new Redis(redisUrl());
    const logger = createLogger({ level: 'silent' });
    const appSecret = 'a-wrong-secret-0123456789abcdef';
    const plugin = createFeishuPlugin({ ...FEISHU_TEST, appSecret, domain: feishu.url }, { logger, redis, prefix: testPrefix() });
    const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
    try {
      const err = await plugin.start(dispatchHost({ redis, prefix: testPrefix(), http, logger })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toMatch(/tenant_access_token.*app secret invalid/);
      expect((err as Error).message).not.toContain(appSecret);
      expect(plugin.ready?.()).toMatchObject({ ready: false });
    } finally {
      await http.close();
      await feishu.close();
      await redis.quit();
    }
  });
});
