/**
 * The Telegram (webhook, real grammY) and Discord (gateway, real discord.js)
 * channels on one real channel host with the access gate, over a runner
 * harness whose runner echoes what it is asked: a message that reaches the
 * agent is answered `echo: <text>`.
 */

import { runnerFeatures } from '../../app/features/index.js';
import { AccessGate } from '../../host/access/gate.js';
import { accessAdmission } from '../../host/access/step.js';
import { type AccessLimits, AccessStore } from '../../host/access/store.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import { createDiscordPlugin } from '../../plugins/discord/channel.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { startRunner } from '../../runner/main.js';
import type { RunnerPlugin } from '../../runner/plugin.js';
import type { ChannelPlugin } from '../../src/channel.js';
import { accessSchema } from '../../src/config/schema.js';
import { IdentityStore } from '../../src/people/identity.js';
import { FakeDiscord } from '../../testing/fakes/discord-server.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { TOKEN as DISCORD_TOKEN } from '../channels/discord-harness.js';
import { postUpdate } from '../channels/telegram-harness.js';
import { redisUrl } from '../helpers/redis.js';

export const SECRET = 'access_secret_0123456789';
/** The Telegram user id the channel names as an admin. */
export const TG_ADMIN = 9001;
/** The Discord user id the channel names as an admin. */
export const DISCORD_ADMIN = '400000000000000009';

/** Replies `echo: <inputs>`. */
function echoPlugin(): RunnerPlugin {
  return {
    manifest: { name: 'echo', version: '1.0.0', capabilities: { steering: false, state: false } },
    async run(ctx) {
      if (ctx.stop.signal.aborted) return { outcome: 'completed' };
      await ctx.delivery.message(`echo: ${ctx.inputs.map((m) => m.text).join(' / ')}`);
      return { outcome: 'completed' };
    },
  };
}

/** A started system. */
export interface AccessSystem {
  h: RunnerHarness;
  tg: FakeTelegram;
  discord: FakeDiscord;
  http: HttpServer;
  store: AccessStore;
  identities: IdentityStore;
  /** POSTs a Telegram update to the webhook. */
  post(update: unknown): Promise<number>;
  close(): Promise<void>;
}

/** Starts it with `access` (the config section, raw) and limits over the parsed ones (e.g. a 1 s code TTL). */
export async function startAccessSystem(access: unknown, limits: Partial<AccessLimits> = {}): Promise<AccessSystem> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const { ctx } = h;
  const tg = await startFakeTelegram();
  const discord = await FakeDiscord.start({ token: DISCORD_TOKEN });
  const http = createHttpServer({ config: ctx.config, redis: ctx.redis, logger: ctx.logger });
  const telegram = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: SECRET, registerCommands: false, admins: [String(TG_ADMIN)] },
    { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix },
  );
  const discordPlugin = createDiscordPlugin(
    { token: DISCORD_TOKEN, apiBase: discord.apiBase, admins: [DISCORD_ADMIN] },
    { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix },
  );
  const channels: ChannelPlugin[] = [telegram, discordPlugin];
  const byId = new Map(channels.map((c) => [c.id, c]));
  const config = accessSchema.parse(access);
  const identities = new IdentityStore({ redis: ctx.redis, prefix: h.prefix });
  const store = new AccessStore(ctx.redis, h.prefix, { ...config, ...limits }, identities);
  const host = createChannelHost({
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    settings: (id) => byId.get(id)?.settings,
    outbound: (id) => byId.get(id)?.outbound,
    features: [accessAdmission(new AccessGate(config, store, ctx.logger))],
  });
  for (const c of channels) await c.start(host);
  await http.ready();
  const runner = await startRunner(ctx, {
    plugin: echoPlugin(),
    channels: [],
    resolveOutbound: (cid) => byId.get(cid.split(':', 1)[0]!)?.outbound,
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  return {
    h,
    tg,
    discord,
    http,
    store,
    identities,
    post: (update) => postUpdate(http, SECRET, update),
    async close() {
      for (const c of channels) await c.stop();
      await http.close();
      await h.close();
      await tg.close();
      await discord.close();
    },
  };
}
