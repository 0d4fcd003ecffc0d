/**
 * The system the prompt, group and accountability attacks run against: the
 * Telegram channel (real grammY against the fake Bot API, updates posted to
 * the webhook, groups answered without a mention) on a real channel host with
 * memory on, the local agent on the real AI SDK provider against the fake
 * OpenAI-compatible model server (a test reads exactly the request the model
 * received), and, when asked, schedules fired by the runner's real BullMQ fire worker.
 */
import { z } from 'zod';
import { runnerFeatures } from '../../app/features/index.js';
import { createHttpServer, type HttpServer, routeRegistry } from '../../host/http.js';
import { createChannelHost } from '../../host/receive.js';
import type { AttachmentSettings } from '../../plugins/local-agent/attachments.js';
import { createLocalAgentPlugin } from '../../plugins/local-agent/index.js';
import { createTelegramPlugin } from '../../plugins/telegram/channel.js';
import { startRunner } from '../../runner/main.js';
import { createTranscriptionModel } from '../../runner/model.js';
import type { ModelSettings } from '../../runner/plugin.js';
import type { AgentTool } from '../../runner/tools/agent-tool.js';
import type { CoreConfig } from '../../src/config/load.js';
import { accessSchema } from '../../src/config/schema.js';
import { AccessRules } from '../../src/people/access-rule.js';
import type { BudgetSettings } from '../../src/people/budget.js';
import { IdentityStore } from '../../src/people/identity.js';
import { MemoryStore } from '../../src/people/memory.js';
import type { ProfileBinding, ProfileSettings } from '../../src/people/profiles.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { ScheduleFireWorker } from '../../src/schedules/fire-worker.js';
import { type ConfiguredSchedules, schedulesFromConfig } from '../../src/schedules/from-config.js';
import type { HeartbeatSettings } from '../../src/schedules/heartbeats.js';
import { type FakeOpenAIServer, startFakeOpenAI } from '../../testing/fakes/openai-server.js';
import { FAKE_TOKEN, type FakeTelegram, startFakeTelegram } from '../../testing/fakes/telegram-server.js';
import { deferred, RunnerHarness } from '../../testing/runner-harness.js';
import { postUpdate } from '../channels/telegram-harness.js';
import { testHostFeatures } from '../helpers/host-features.js';
import { redisUrl } from '../helpers/redis.js';
import { fakeModel } from '../runner/harness.js';

const SECRET = 'telegram_system_secret_0123456789';

/** A running system; `close()` stops everything. */
export interface TelegramSystem {
  h: RunnerHarness;
  tg: FakeTelegram;
  model: FakeOpenAIServer;
  memory: MemoryStore;
  identities: IdentityStore;
  /** The host's schedules service (purging a person disarms their schedules); undefined unless `schedules` was asked for. */
  scheduling: ConfiguredSchedules | undefined;
  /**
   * A fire worker of the runner's kind on a queue of its own, for handling a fire now (`handle`: the tick the
   * runner's fire worker would get from BullMQ); undefined unless `schedules` was asked for.
   */
  readonly fires: ScheduleFireWorker | undefined;
  /** POSTs a Telegram update to the webhook; returns the HTTP status. */
  post(update: unknown): Promise<number>;
  /**
   * Stops the host (webhook, channel host) and the runner, and starts them again on the same Redis with the
   * configuration's `access` section replaced by `access` (as an operator restarts with an edited file).
   */
  restart(o: { access: z.input<typeof accessSchema> }): Promise<void>;
  close(): Promise<void>;
}

/** Options of `startTelegramSystem`. */
export interface TelegramSystemOptions {
  /** Profiles and bindings (config `profiles`, `bindings`). Default: none. */
  profiles?: Record<string, ProfileSettings>;
  bindings?: ProfileBinding[];
  /** Extra agent tools. */
  tools?: AgentTool[];
  /** Config `budgets`. Default: none. */
  budgets?: BudgetSettings;
  /** The host's schedules service, with these configured heartbeats. Default: none on the host (the runner's as configured). */
  schedules?: { heartbeats?: Record<string, HeartbeatSettings> };
  /** Subagents on (`subagents.enabled`). Default: as the harness configures them. */
  subagents?: boolean;
  /** Config `access` (as written in a file). Default: every channel open. */
  access?: z.input<typeof accessSchema>;
  /** The local agent's `attachments` settings. Default: its defaults. */
  attachments?: AttachmentSettings;
  /** The local agent's `transcriptionModel`, at the fake model server. Default: none (voice notes stay placeholders). */
  transcriptionModel?: string;
}

/** What the system shares across restarts. */
interface Shared {
  h: RunnerHarness;
  tg: FakeTelegram;
  model: FakeOpenAIServer;
  identities: IdentityStore;
  scheduling: ConfiguredSchedules | undefined;
}

/** The processes a restart replaces: the host (webhook and channel host), the runner, the by-hand fire worker. */
interface Processes {
  http: HttpServer;
  fires: ScheduleFireWorker | undefined;
  stop(): Promise<void>;
}

export async function startTelegramSystem(o: TelegramSystemOptions = {}): Promise<TelegramSystem> {
  const h = await RunnerHarness.start({ redisUrl: redisUrl() });
  const model = await startFakeOpenAI();
  const config: CoreConfig = {
    ...h.ctx.config,
    memory: { ...h.ctx.config.memory, enabled: true },
    budgets: o.budgets ?? {},
    profiles: o.profiles ?? {},
    bindings: o.bindings ?? [],
    schedules: o.schedules
      ? { ...h.ctx.config.schedules, enabled: true, missedAfterSeconds: 3600, heartbeats: o.schedules.heartbeats ?? {} }
      : h.ctx.config.schedules,
    ...(o.subagents && { subagents: { enabled: true, maxPerRun: 2, timeoutSeconds: 60 } }),
    ...(o.access && { access: accessSchema.parse(o.access) }),
  };
  const ctx = { ...h.ctx, config };
  const tg = await startFakeTelegram();
  const identities = new IdentityStore({ redis: ctx.redis, prefix: h.prefix });
  const scheduling = o.schedules ? schedulesFromConfig(ctx, ['telegram'], 'test-host-schedules', identities) : undefined;
  const shared: Shared = { h, tg, model, identities, scheduling };
  let procs = await startProcesses(shared, config, o);
  return {
    h,
    tg,
    model,
    memory: new MemoryStore({ redis: ctx.redis, prefix: h.prefix, limits: config.memory }),
    identities,
    scheduling,
    get fires() {
      return procs.fires;
    },
    post: (update) => postUpdate(procs.http, SECRET, update),
    async restart(r) {
      await procs.stop();
      procs = await startProcesses(shared, { ...config, access: accessSchema.parse(r.access) }, o);
    },
    async close() {
      await procs.stop();
      await h.close();
      await scheduling?.close();
      await Promise.all([tg.close(), model.close()]);
    },
  };
}

/** Starts the host and the runner of `config` on the shared Redis, fake Telegram and fake model. */
async function startProcesses(shared: Shared, config: CoreConfig, o: TelegramSystemOptions): Promise<Processes> {
  const { h, tg, model, identities, scheduling } = shared;
  const ctx = { ...h.ctx, config };
  const http: HttpServer = createHttpServer({ config, redis: ctx.redis, logger: ctx.logger });
  const telegram = createTelegramPlugin(
    { token: FAKE_TOKEN, apiRoot: tg.apiRoot, mode: 'webhook', webhookSecret: SECRET, registerCommands: false, groups: 'always' },
    { logger: ctx.logger, redis: ctx.redis, prefix: h.prefix },
  );
  const host = createChannelHost({
    features: await testHostFeatures({ config, redis: ctx.redis, prefix: h.prefix, identities, ...(scheduling && { schedules: scheduling }) }),
    routes: routeRegistry(http),
    redis: ctx.redis,
    prefix: h.prefix,
    logger: ctx.logger,
    dispatch: h.dispatch,
    ingest: h.ingestService,
    enqueue: (c, r) => h.queue.enqueue(c, r),
    // As the host's composition: the channel's operator-made admins are `access.channels.telegram.admins`.
    settings: () => ({ ...telegram.settings, admins: [...(telegram.settings?.admins ?? []), ...(config.access.channels.telegram?.admins ?? [])] }),
    outbound: (id) => (id === telegram.id ? telegram.outbound : undefined),
  });
  await telegram.start(host);
  await http.ready();
  const runner = await startRunner(ctx, {
    plugin: createLocalAgentPlugin({
      model: fakeModel(model.url),
      maxRetries: 0,
      ...(o.tools && { tools: o.tools }),
      ...(o.attachments && { attachments: o.attachments }),
      ...(o.transcriptionModel && { transcriptionModel: (s: ModelSettings) => createTranscriptionModel({ ...s, baseURL: model.url }, o.transcriptionModel!) }),
    }),
    channels: [],
    resolveOutbound: (cid) => (cid.startsWith('telegram:') ? telegram.outbound : undefined),
    lockDurationMs: 2000,
    stalledIntervalMs: 500,
    features: runnerFeatures(),
  });
  h.runners.push(runner);
  const firesConn = scheduling && ctx.connectRedis({ forBullmq: true, connectionName: 'test-fires' });
  const fires =
    scheduling &&
    firesConn &&
    new ScheduleFireWorker({
      schedules: scheduling.schedules,
      dispatch: h.dispatch,
      queue: h.queue,
      client: ctx.redis,
      prefix: h.prefix,
      connection: firesConn,
      bullPrefix: bullPrefixFor(h.prefix),
      queueName: 'test-fires-by-hand',
      access: new AccessRules({ access: config.access, identities, redis: ctx.redis, prefix: h.prefix, channelIds: ['telegram'] }),
      logger: ctx.logger,
    });
  return {
    http,
    fires,
    async stop() {
      await telegram.stop();
      await http.close();
      await fires?.close();
      firesConn?.disconnect();
      h.runners.splice(h.runners.indexOf(runner), 1);
      await runner.close(1000);
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

/** A tool that waits, once called, until `release` resolves: a message sent meanwhile is steered into the run. */
export function holdingTool() {
  const entered = deferred();
  const release = deferred();
  const tool: AgentTool<Record<string, never>> = {
    name: 'look_up',
    description: 'Looks something up.',
    inputSchema: z.object({}),
    async execute() {
      entered.resolve();
      await release.promise;
      return { found: 'nothing' };
    },
  };
  return { tool, entered, release };
}
