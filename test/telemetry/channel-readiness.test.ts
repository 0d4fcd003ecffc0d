/**
 * Channels report whether their inbound side works (`ChannelPlugin.ready`,
 * read by `/readyz`): the Discord gateway session, Telegram polling and
 * webhook registration. Real clients against the local fakes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { waitFor } from '../../testing/wait.js';
import { captureLogger, guild, RecordingHost, TOKEN } from '../channels/discord-harness.js';
import { startTelegramHarness, type TelegramHarness } from '../channels/telegram-harness.js';

describe('discord readiness', () => {
  let fake: FakeDiscord;
  beforeAll(async () => {
    fake = await FakeDiscord.start({ token: TOKEN });
    fake.addGuild(guild);
  });
  afterAll(() => fake?.close());

  it('is not ready before start or after stop, ready with a gateway session, not ready while it reconnects', async () => {
    const { logger } = captureLogger();
    const plugin = createDiscordPlugin(
      { token: TOKEN, apiBase: fake.apiBase, catchUpMaxAgeSeconds: 0 },
      { logger, redis: undefined as never, prefix: 'unused' },
    );
    expect(plugin.ready?.()).toEqual({ ready: false, detail: 'gateway not started' });
    await plugin.start(new RecordingHost(async () => ({ kind: 'ignored', reason: 'empty' })).asHost(logger));
    try {
      expect(plugin.ready?.()).toEqual({ ready: true });
      // Sample readiness while the gateway drops the connection and the client resumes.
      const seen: string[] = [];
      const sampler = setInterval(() => {
        const r = plugin.ready?.();
        if (r && !r.ready) seen.push(r.detail ?? '');
      }, 1);
      fake.dropConnection({ code: 4000 });
      await waitFor(() => seen.length > 0 || undefined, 10_000, 'readiness reporting the reconnect');
      await waitFor(() => plugin.ready?.().ready || undefined, 10_000, 'ready again after the resume');
      clearInterval(sampler);
      expect(seen[0]).toBe('gateway reconnecting');
    } finally {
      await plugin.stop();
    }
    expect(plugin.ready?.()).toEqual({ ready: false, detail: 'gateway not started' });
  });
});

describe('telegram readiness', () => {
  let h: TelegramHarness | undefined;
  afterAll(() => h?.close());

  it('is ready once the webhook route is registered, not after stop', async () => {
    const harness = await startTelegramHarness();
    try {
      expect(harness.plugin.ready?.()).toEqual({ ready: true });
      await harness.plugin.stop();
      expect(harness.plugin.ready?.()).toEqual({ ready: false, detail: 'webhook not registered' });
    } finally {
      await harness.close();
    }
  });

  it('in polling mode: not ready while getUpdates fails, ready again once it works', async () => {
    h = await startTelegramHarness({ mode: 'polling', pollTimeoutSeconds: 1, pollingLeaseMs: 1500, registerCommands: false });
    const plugin = h.plugin;
    await waitFor(() => plugin.ready?.().ready || undefined, 10_000, 'polling ready');
    h.fake.failNext('getUpdates', { error_code: 502, description: 'Bad Gateway' }, 3);
    const down = await waitFor(
      () => {
        const r = plugin.ready?.();
        return r && !r.ready ? r : undefined;
      },
      15_000,
      'polling reported failing',
    );
    expect(down).toEqual({ ready: false, detail: 'polling failing (HTTP 502)' });
    await waitFor(() => plugin.ready?.().ready || undefined, 15_000, 'polling ready again');
  }, 40_000);
});
