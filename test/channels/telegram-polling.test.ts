import { Redis } from 'ioredis';
import { storage } from 'steerbot/plugin';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../host/http.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import type { ChannelPlugin, ReceiveResult } from '../../src/channel.js';
import { RedisUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { FAKE_TOKEN, type FakeTelegram, messageUpdate, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';
import { dispatchHost, MemoryLog } from './telegram-harness.js';

const LEASE_MS = 1500;

/** One "host" running the plugin in polling mode; counts its own getUpdates calls through an injected fetch. */
interface PollingHost {
  plugin: ChannelPlugin;
  host: ReturnType<typeof dispatchHost>;
  log: MemoryLog;
  getUpdates: number;
  /** Holder of the lease key at each getUpdates this host sent. */
  holdersAtPoll: Array<string | null>;
  /** Abort signals the given fetch got: the platform's own, and others. */
  signals: { native: number; other: number };
  stop(): Promise<void>;
}

function outcome(r: ReceiveResult): string {
  return r.kind === 'ingested' ? r.result.kind : r.kind;
}

describe('telegram long polling', () => {
  let fake: FakeTelegram;
  let redis: Redis;
  let prefix: string;
  const hosts: PollingHost[] = [];
  const leaseKey = () => storage.pluginStorage(prefix, 'telegram').key('poller');

  async function startHost(pollTimeoutSeconds = 1): Promise<PollingHost> {
    const log = new MemoryLog();
    const logger = createLogger({ level: 'debug', destination: log });
    const http = createHttpServer({ config: { http: { host: '127.0.0.1', port: 0, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 } }, redis, logger });
    const host = dispatchHost({ redis, prefix, http, logger });
    const me: PollingHost = {
      plugin: undefined as never,
      host,
      log,
      getUpdates: 0,
      holdersAtPoll: [],
      signals: { native: 0, other: 0 },
      async stop() {
        await me.plugin.stop();
        await http.close();
      },
    };
    const countingFetch: typeof fetch = async (input, init) => {
      if (init?.signal) me.signals[init.signal instanceof AbortSignal ? 'native' : 'other']++;
      if (String(input).endsWith('/getUpdates')) {
        me.getUpdates++;
        me.holdersAtPoll.push(await redis.get(leaseKey()));
      }
      return fetch(input, init);
    };
    me.plugin = createTelegramPlugin(
      { token: FAKE_TOKEN, apiRoot: fake.apiRoot, mode: 'polling', pollingLeaseMs: LEASE_MS, pollTimeoutSeconds, registerCommands: false },
      { logger, redis, prefix, fetch: countingFetch },
    );
    await me.plugin.start(host);
    hosts.push(me);
    return me;
  }

  beforeEach(async () => {
    fake = await startFakeTelegram();
    redis = new Redis(redisUrl());
    prefix = testPrefix();
  });
  afterEach(async () => {
    for (const h of hosts.splice(0)) await h.stop();
    await fake.close();
    await cleanupPrefix(redis, prefix);
    await redis.quit();
  });

  it("hands the given fetch the platform's AbortSignal (Node 24's fetch refuses grammY's own)", async () => {
    const a = await startHost();
    await fake.waitUntil(() => a.getUpdates > 0, 5000, 'host A polling');
    expect(a.signals.native).toBeGreaterThan(0);
    expect(a.signals.other).toBe(0);
  });

  it('polls from exactly one of two hosts; the other stands by', async () => {
    fake.webhook = { url: 'https://old.example.com/hook' };
    const a = await startHost();
    await fake.waitUntil(() => a.getUpdates > 0, 5000, 'host A polling');
    const b = await startHost();
    const owner = await redis.get(leaseKey());
    expect(owner).toBeTruthy();

    for (const text of ['one', 'two', 'three']) fake.pushUpdate(messageUpdate({ text }));
    await fake.waitUntil(() => a.host.received.length === 3, 5000, 'three updates received');
    // Let B's standby loop wake a few times (it checks every LEASE_MS / 3) while A keeps polling.
    const seen = a.getUpdates;
    await fake.waitUntil(() => a.getUpdates >= seen + 2, 5000, 'two more polls of A');

    expect(a.host.received.map((m) => m.text)).toEqual(['one', 'two', 'three']);
    expect(b.getUpdates).toBe(0);
    expect(b.host.received).toEqual([]);
    expect(fake.conflicts).toBe(0);
    expect(await redis.get(leaseKey())).toBe(owner);
    expect(new Set(a.holdersAtPoll)).toEqual(new Set([owner]));
    // getUpdates is refused while a webhook is set, so the poller removed it.
    expect(fake.webhook).toBeUndefined();
    expect(fake.callsOf('getUpdates').every((c) => c.outcome === 'ok')).toBe(true);
  });

  it('hands polling over to the standby host when the poller stops', async () => {
    const a = await startHost();
    await fake.waitUntil(() => a.getUpdates > 0, 5000, 'host A polling');
    const b = await startHost();
    await a.stop();
    hosts.splice(hosts.indexOf(a), 1);
    const frozen = a.getUpdates;

    await fake.waitUntil(() => b.getUpdates > 0, 5000, 'host B polling');
    expect(b.holdersAtPoll.every((h) => h !== null && !a.holdersAtPoll.includes(h))).toBe(true);
    fake.pushUpdate(messageUpdate({ text: 'after the handover' }));
    await fake.waitUntil(() => b.host.received.length === 1, 5000, 'update received by B');
    expect(b.host.received[0]?.text).toBe('after the handover');
    expect(a.getUpdates).toBe(frozen);
    expect(fake.conflicts).toBe(0);
  });

  it('takes over only once the lease of a dead poller expires', async () => {
    await redis.set(leaseKey(), 'dead-host', 'PX', LEASE_MS);
    const b = await startHost();
    // While the dead host's lease lives, B must not poll.
    expect(b.getUpdates).toBe(0);
    const ttl = await redis.pttl(leaseKey());
    expect(ttl).toBeGreaterThan(0);
    await fake.waitUntil(() => b.getUpdates > 0, 5000, 'host B polling');
    // Every poll of B was sent while B, not the dead host, held the lease.
    const holders = new Set(b.holdersAtPoll);
    expect(holders.size).toBe(1);
    expect([...holders][0]).toMatch(/:\d+:[0-9a-f]{8}$/);
    expect(b.log.text).toContain('took the telegram polling lease');
  });

  it('delivers each update to the host once, even when a takeover fetches unconfirmed updates again', async () => {
    const a = await startHost();
    await fake.waitUntil(() => a.getUpdates > 0, 5000, 'host A polling');
    const b = await startHost();

    // Hold A inside the second update, stop A meanwhile: it never confirms the batch to Telegram.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const receive = a.host.receive.bind(a.host);
    let entered!: () => void;
    const inSecond = new Promise<void>((r) => (entered = r));
    a.host.receive = async (channelId, message) => {
      if (message.text === 'two') {
        entered();
        await gate;
      }
      return receive(channelId, message);
    };
    fake.pushUpdates(['one', 'two', 'three'].map((text) => messageUpdate({ chatId: 5005, text })));
    await inSecond;
    const stopping = a.stop();
    hosts.splice(hosts.indexOf(a), 1);
    release();
    await stopping;

    await fake.waitUntil(() => b.host.results.length === 3, 5000, 'B handled the batch again');
    expect(a.host.results.map(outcome)).toEqual(['new-run', 'joined']);
    expect(b.host.results.map(outcome)).toEqual(['duplicate', 'duplicate', 'joined']);
    const log = (await redis.keys(`${prefix}:*:log`))[0]!;
    expect(await redis.xlen(log)).toBe(3);
  });

  it('stops without waiting out a long poll in flight, and gives the lease up', async () => {
    // A 50 s long poll: stop() must abort it (the test would time out otherwise).
    const a = await startHost(50);
    await fake.waitUntil(() => a.getUpdates > 0, 5000, 'host A polling');
    await a.stop();
    hosts.splice(hosts.indexOf(a), 1);
    expect(await redis.exists(leaseKey())).toBe(0);
    expect(a.log.text).not.toContain('telegram polling failed');
  });

  it('stops cleanly when stopped right after start', async () => {
    const a = await startHost(50);
    await a.stop();
    hosts.splice(hosts.indexOf(a), 1);
    expect(await redis.exists(leaseKey())).toBe(0);
  });

  it('fetches an update again when the host could not take it (Redis down), so nothing is lost', async () => {
    const a = await startHost();
    const receive = a.host.receive.bind(a.host);
    let attempts = 0;
    a.host.receive = async (channelId, message) => {
      if (message.text === 'keep me' && attempts++ === 0) throw new RedisUnavailableError('connect ECONNREFUSED');
      return receive(channelId, message);
    };
    fake.pushUpdates([messageUpdate({ text: 'keep me' }), messageUpdate({ text: 'and me' })]);
    await fake.waitUntil(() => a.host.results.length === 2, 5000, 'both updates ingested');
    expect(attempts).toBe(2);
    expect(a.host.received.map((m) => m.text)).toEqual(['keep me', 'and me']);
    expect(a.host.results.map(outcome)).toEqual(['new-run', 'joined']);
    expect(a.log.text).toContain('telegram polling failed; retrying');
  });

  it('waits retry_after on a 429 from getUpdates, then polls on; no token in the logs', async () => {
    fake.failNext('getUpdates', { error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } });
    const a = await startHost();
    await fake.waitUntil(() => fake.callsOf('getUpdates').filter((c) => c.outcome === 'ok').length > 0, 5000, 'a poll after the 429');
    const warning = a.log.lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'telegram polling failed; retrying');
    expect(warning).toMatchObject({ waitMs: 1000, err: { code: 'CHANNEL_API', status: 429, retryAfterMs: 1000 } });
    expect(a.log.text).not.toContain(FAKE_TOKEN.split(':')[1]);
  });
});
