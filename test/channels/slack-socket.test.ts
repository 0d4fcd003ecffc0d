/**
 * The Slack channel's Socket Mode side: the real `@slack/socket-mode`
 * client against the fake Slack's WebSocket, the real channel host
 * ingesting into Redis (runs recorded, not executed). Acks come after
 * ingest and only then; bad envelopes are acknowledged and write nothing;
 * a recycled connection is reopened.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import type { ChannelHost } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { eventCallback, SLACK_APP_TOKEN, SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { type SlackHarness, startSlackHarness } from './slack-harness.js';

const DM = 'D0000DM1';
const ANN = 'U0000ANN';

let h: SlackHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const socket = { appToken: SLACK_APP_TOKEN };
const dm = (text: string, ts: string) => eventCallback({ channel: DM, ts, user: ANN, text });

describe('slack socket mode', () => {
  it('acknowledges an envelope once its message was ingested, and is ready while connected', async () => {
    h = await startSlackHarness(socket);
    expect(h.plugin.ready!()).toEqual({ ready: true });
    const envelope = h.fake.deliver('events_api', dm('hello', '1700000001.000100'));
    await waitFor(() => h!.fake.acks.includes(envelope), 10_000, 'the ack');
    expect(h.host.results).toMatchObject([{ kind: 'ingested', result: { kind: 'new-run' } }]);
    expect(h.fake.connections).toBe(1);
  });

  it("hands envelopes over one at a time, so a user's quick messages keep their order", async () => {
    h = await startSlackHarness(socket);
    const texts = ['one', 'two', 'three', 'four', 'five', 'six'];
    const envelopes = texts.map((t, i) => h!.fake.deliver('events_api', dm(t, `170000001${i}.000100`)));
    await waitFor(() => envelopes.every((e) => h!.fake.acks.includes(e)), 10_000, 'every ack');
    expect(h.host.received.map((m) => m.text)).toEqual(texts);
    expect(h.host.results.map((r) => (r.kind === 'ingested' ? r.result.seq : 0))).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('leaves an envelope unacknowledged while the host cannot reach Redis, so Slack delivers it again, and writes nothing', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    dead.on('error', () => undefined); // the refused connection is the point of the test
    h = await startSlackHarness(socket, { hostRedis: dead });
    try {
      const unacked = h.fake.deliver('events_api', dm('hello', '1700000001.000100'));
      // A later bad envelope is acknowledged: once its ack is in, the first one was handled (and left unacknowledged).
      const bad = h.fake.deliver('events_api', { type: 'event_callback', event: { type: 'message', channel: DM, ts: 'soon', user: ANN } });
      await waitFor(() => h!.fake.acks.includes(bad), 10_000, 'the ack of the bad envelope');
      expect(h.fake.acks).not.toContain(unacked);
      expect(await h.keys()).toEqual([]);
      expect(h.log.text).toContain('slack envelope not acknowledged: redis unavailable');
    } finally {
      dead.disconnect();
    }
  });

  it('acknowledges envelopes it cannot read or does not handle, writing nothing', async () => {
    h = await startSlackHarness(socket);
    const envelopes = [
      h.fake.deliver('events_api', { type: 'event_callback', event: { type: 'message', channel: DM, ts: 'soon', user: ANN } }),
      h.fake.deliver('events_api', { type: 'event_callback', event: { type: 'app_mention', text: 'no channel' } }),
      h.fake.deliver('interactive', { type: 'view_submission', user: { id: ANN } }),
      h.fake.deliver('events_api', { type: 'event_callback', event: { type: 'reaction_added' } }),
    ];
    await waitFor(() => envelopes.every((e) => h!.fake.acks.includes(e)), 10_000, 'every ack');
    expect(h.host.received).toEqual([]);
    expect(await h.keys()).toEqual([]);
  });

  it('fails to start with a ChannelApiError, without the token, when Slack refuses the app token', async () => {
    const fake = await startFakeSlack();
    const redis = new Redis(redisUrl());
    const wrong = 'xapp-1-A111-9999-notTheRightAppToken';
    try {
      const plugin = createSlackPlugin(
        { botToken: SLACK_BOT_TOKEN, appToken: wrong, apiUrl: fake.apiUrl },
        { logger: createLogger({ level: 'silent' }), redis, prefix: 'tslack' },
      );
      const err = await plugin.start({} as ChannelHost).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ChannelApiError);
      expect((err as Error).message).toBe('slack apps.connections.open failed: invalid_auth');
      expect(fake.connections).toBe(0);
      await plugin.stop();
    } finally {
      await fake.close();
      await redis.quit();
    }
  });

  it('opens a new connection when Slack recycles one, and takes events over it', async () => {
    h = await startSlackHarness(socket);
    h.fake.dropConnections();
    await waitFor(() => h!.fake.connections === 2 && h!.fake.openSockets() === 1 && h!.plugin.ready!().ready, 20_000, 'a new connection');
    const envelope = h.fake.deliver('events_api', dm('after the reconnect', '1700000002.000100'));
    await waitFor(() => h!.fake.acks.includes(envelope), 10_000, 'the ack');
    expect(h.host.received.map((m) => m.text)).toEqual(['after the reconnect']);
  });
});
