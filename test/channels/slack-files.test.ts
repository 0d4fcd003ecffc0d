/**
 * Files out on Slack: the real plugin's outbound side (unstarted, as a
 * runner uses it) with the real Web API client against the fake Slack,
 * through the upload flow (upload URL, POST of the bytes, complete), directly
 * and through a run's delivery.
 */
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSlackPlugin } from '../../plugins/slack/channel.js';
import { SLACK_MAX_FILE_BYTES } from '../../plugins/slack/files-out.js';
import { RunDelivery } from '../../runner/delivery/sink.js';
import type { ChannelOutbound } from '../../src/channel.js';
import { createLogger } from '../../src/logger.js';
import { type FakeSlack, SLACK_BOT_TOKEN, startFakeSlack } from '../../testing/fakes/slack-server.js';
import { PDF } from '../helpers/media.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const logger = createLogger({ level: 'silent' });
const DM = 'slack:D0000DM1';
const THREAD = 'slack:C0000CH1:1700000001.000100';

let h: { fake: FakeSlack; redis: Redis; prefix: string; outbound: ChannelOutbound };

beforeEach(async () => {
  const fake = await startFakeSlack();
  const redis = new Redis(redisUrl());
  const prefix = testPrefix();
  const plugin = createSlackPlugin({ botToken: SLACK_BOT_TOKEN, signingSecret: 'x'.repeat(32), apiUrl: fake.apiUrl }, { logger, redis, prefix });
  h = { fake, redis, prefix, outbound: plugin.outbound };
});
afterEach(async () => {
  await h.fake.close();
  await cleanupPrefix(h.redis, h.prefix);
  await h.redis.quit();
});

const report = { name: 'report.pdf', mimeType: 'application/pdf', bytes: PDF, caption: 'Q3 report' };

describe('slack files out', () => {
  it('uploads the bytes and shares the file in the thread with its caption', async () => {
    const { messageId } = await h.outbound.sendFile!(THREAD, report);

    expect(h.fake.calls.map((c) => c.method)).toEqual(['files.getUploadURLExternal', 'files.completeUploadExternal']);
    expect(h.fake.uploads).toHaveLength(1);
    const [up] = h.fake.uploads;
    expect(up).toMatchObject({
      id: messageId,
      filename: 'report.pdf',
      title: 'report.pdf',
      channel: 'C0000CH1',
      threadTs: '1700000001.000100',
      initialComment: 'Q3 report',
    });
    expect(up!.bytes.equals(PDF)).toBe(true);
    expect(h.outbound.maxFileBytes).toBe(SLACK_MAX_FILE_BYTES);
  });

  it('retries an upload refused with 429 through delivery and shares exactly one file', async () => {
    h.fake.failNext('files.getUploadURLExternal', { status: 429, retryAfter: 1 });
    const d = new RunDelivery({
      client: h.redis,
      prefix: h.prefix,
      conversationId: DM,
      runId: 'run1',
      resolve: () => h.outbound,
      logger,
      sleep: async () => undefined,
    });

    expect(await d.file(report, { key: 'k_1' })).toEqual({ outcome: 'sent' });
    expect(h.fake.calls.filter((c) => c.method === 'files.getUploadURLExternal').map((c) => c.outcome)).toEqual([429, 'ok']);
    expect(h.fake.uploads.map((u) => [u.channel, u.threadTs, u.filename])).toEqual([['D0000DM1', undefined, 'report.pdf']]);
  });

  it('does not share a file again for a takeover after the send was recorded', async () => {
    const make = () =>
      new RunDelivery({
        client: h.redis,
        prefix: h.prefix,
        conversationId: DM,
        runId: 'run2',
        resolve: () => h.outbound,
        logger,
        sleep: async () => undefined,
      });
    await make().file(report, { key: 'k_2' });
    await make().file(report, { key: 'k_2' });
    expect(h.fake.uploads).toHaveLength(1);
  });
});
