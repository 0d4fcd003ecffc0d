/**
 * The system the prompt-boundary tests attack: the Telegram channel (real
 * grammY against the fake Bot API, updates posted to the webhook) on a real
 * channel host with memory on, and the local agent on the real AI SDK
 * provider against the fake OpenAI-compatible model server, so a test reads
 * exactly the request the model received.
 */
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { peopleParts } from '../../host/main.js';
import { createChannelHost } from '../../host/receive.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import type { AgentTool } from '../../runner/agent-tool.js';
import { startRunner } from '../../runner/main.js';
import type { CoreConfig } from '../../src/config.js';
import { IdentityStore } from '../../src/identity.js';
import { MemoryStore } from '../../src/memory.js';
import { loadProfiles, type ProfileBinding, type ProfileSettings } from '../../src/profiles.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { RunnerHarness } from '../../testing/runner-harness.js';
import { postUpdate } from '../channels/telegram-harness.js';
import { redisUrl } from '../helpers/redis.js';
import { fakeModel } from '../runner/harness.js';

const SECRET = 'prompt_boundary_secret_0123456789';

/** A running system; `close()` stops everything. */
export interface PromptSystem {
  h: RunnerHarness;
  tg: FakeTelegram;
  model: FakeOpenAIServer;
  memory: MemoryStore;
  /** POSTs a Telegram update to the webhook; returns the HTTP status. */
  post(update: unknown): Promise<number>;
  close(): Promise<void>;
}

/** Options of `startPromptSystem`. */
export interface PromptSystemOptions {
  /** Profiles and bindings (config `profiles`, `bindings`). Default: none. */
  profiles?: Record<string, ProfileSettings>;
  bindings?: ProfileBinding[];
  /** Extra agent tools. */
  tools?: AgentTool[];
}

/** Starts Telegram (groups answered without a mention), memory on, the local agent on the fake model. */
export async function startPromptSystem(o: PromptSystemOptions = {}): Promise<PromptSystem> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const model = await startFakeOpenAI();
  const config: CoreConfig = {
    ...h.ctx.config,
    memory: { ...h.ctx.config.memory, enabled: true },
    profiles: o.profiles ?? {},
    bindings: o.bindings ?? [],
  };
  const ctx = { ...h.ctx, config };
  const tg = await startFakeTelegram();
  const http: HttpServer = createHttpServer({ config, redis: ctx.redis, logger: ctx.logger });
  const telegram = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: SECRET, registerCommands: false, groups: 'always' },
    { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix },
  );
  const identities = new IdentityStore({ redis: ctx.redis, prefix: h.prefix });
  const people = await peopleParts(config, identities, ctx.redis, h.prefix);
  const host = createChannelHost({
    ...people,
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    settings: () => telegram.settings,
    outbound: (id) => (id === telegram.id ? telegram.outbound : undefined),
  });
  await telegram.start(host);
  await http.ready();
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({ model: fakeModel(model.url), maxRetries: 0, ...(o.tools && { tools: o.tools }) }),
    channels: [],
    resolveOutbound: (cid) => (cid.startsWith('telegram:') ? telegram.outbound : undefined),
    identities,
    profiles: await loadProfiles(config.model, config.profiles, config.bindings),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
  });
  h.runners.push(runner);
  return {
    h,
    tg,
    model,
    memory: new MemoryStore({ redis: ctx.redis, prefix: h.prefix, limits: config.memory }),
    post: (update) => postUpdate(http, SECRET, update),
    async close() {
      await telegram.stop();
      await http.close();
      await h.close();
      await Promise.all([tg.close(), model.close()]);
    },
  };
}

/** The system message of a chat-completions request body ('' when none). */
export const systemOf = (body: { messages: Array<{ role: string; content: unknown }> }): string => {
  const content = body.messages.find((m) => m.role === 'system')?.content;
  return typeof content === 'string' ? content : '';
};

/** The user messages' texts of a chat-completions request body, in order. */
export const userTextsOf = (body: { messages: Array<{ role: string; content: unknown }> }): string[] =>
  body.messages
    .filter((m) => m.role === 'user')
    .map((m) => (typeof m.content === 'string' ? m.content : (m.content as Array<{ type: string; text?: string }>).map((p) => p.text ?? '').join('')));
