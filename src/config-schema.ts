/**
 * The configuration schema: one zod schema for every setting, with defaults.
 * Loading (file + environment overlay, error reporting) lives in `config.ts`.
 */
import { z } from 'zod';
// First: channel schemas below import INPUT_POLICIES from this module while it is still loading.
import { DEFAULT_DELIVERY_KEY_TTL_SECONDS } from './channel.js';
import { INPUT_POLICIES } from './input-policies.js';
export { INPUT_POLICIES, type InputPolicy } from './input-policies.js';
import { discordConfigSchema } from '../plugins/discord/config.js';
import { telegramConfigSchema } from '../plugins/telegram/config.js';
import { WEBHOOK_NAME_RE, webhookChannelConfigSchema } from '../plugins/webhook/config.js';

/** A `host:port` address, parsed. */
export interface HostPort {
  /** Host name or IP address (IPv6 without brackets). */
  host: string;
  /** TCP port, 1..65535. */
  port: number;
}

// `host:port` or `[v6]:port`.
const HOST_PORT_RE = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/;

const hostPort = z.string().transform((text, ctx): HostPort => {
  const m = HOST_PORT_RE.exec(text.trim());
  const port = m ? Number(m[3]) : 0;
  if (!m || port < 1 || port > 65535) {
    ctx.addIssue({ code: 'custom', message: `expected host:port, got "${text}"` });
    return z.NEVER;
  }
  return { host: (m[1] ?? m[2]) as string, port };
});

const int = (min: number, max: number) =>
  z
    .number({ error: 'expected a number' })
    .int({ error: 'expected an integer' })
    .min(min, { error: `expected an integer >= ${min}` })
    .max(max, { error: `expected an integer <= ${max}` });

const enumOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z.enum(values, { error: `expected one of ${values.join(', ')}` });

/** Log levels accepted by `log.level` (pino's, plus `silent`). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Model providers the default runner plugin can talk to. */
export const MODEL_PROVIDERS = ['openai-compatible', 'anthropic', 'google'] as const;

const redisSchema = z
  .strictObject({
    /** Redis URL (`redis://` or `rediss://`) in `single` mode. Default: unset — the CLI finds or starts a local Redis. */
    url: z.url({ protocol: /^rediss?$/, error: 'expected a redis:// or rediss:// URL' }).optional(),
    /** Topology. Default `single`. */
    mode: enumOf(['single', 'sentinel', 'cluster']).default('single'),
    /** Sentinel addresses, `sentinel` mode only. Default `[]`. */
    sentinels: z.array(hostPort).default([]),
    /** Name of the master group the Sentinels watch, `sentinel` mode only. */
    sentinelName: z.string().min(1, { error: 'expected a non-empty name' }).optional(),
    /** Seed nodes, `cluster` mode only. Default `[]`. */
    clusterNodes: z.array(hostPort).default([]),
    /** Prefix of every steerbot key. Default `sb`. */
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, { error: 'expected 1-32 characters of [A-Za-z0-9_-]' })
      .default('sb'),
    /** Redis password (overrides one in `url`). Secret. Default: unset. */
    password: z.string().min(1, { error: 'expected a non-empty password' }).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.mode === 'sentinel') {
      if (r.sentinels.length === 0) ctx.addIssue({ code: 'custom', path: ['sentinels'], message: 'sentinel mode needs at least one host:port' });
      if (!r.sentinelName) ctx.addIssue({ code: 'custom', path: ['sentinelName'], message: 'sentinel mode needs the master name' });
    }
    if (r.mode === 'cluster' && r.clusterNodes.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['clusterNodes'], message: 'cluster mode needs at least one host:port' });
    }
    if (r.mode !== 'single' && r.url !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['url'], message: `only used in single mode (mode is ${r.mode})` });
    }
  });

const httpSchema = z.strictObject({
  /** Interface the HTTP server binds. Default `0.0.0.0`. */
  host: z.string().min(1, { error: 'expected a host name or address' }).default('0.0.0.0'),
  /** TCP port of the HTTP server, 1..65535. Default 8080. */
  port: int(1, 65535).default(8080),
  /** Largest accepted request body, in bytes. Default 1 048 576 (1 MiB). */
  bodyLimitBytes: int(1024, 64 * 1024 * 1024).default(1_048_576),
});

const dispatchSchema = z.strictObject({
  /** Input policy of a conversation that has no override. Default `steer`. */
  defaultPolicy: enumOf(INPUT_POLICIES).default('steer'),
  /** Most messages a run's steering list holds; more go to `pending`. Default 20. */
  steeringCap: int(1, 1000).default(20),
  /** How long a platform update is remembered for dedupe, in seconds. Default 86 400 (24 h). */
  dedupeTtlSeconds: int(60, 30 * 86_400).default(86_400),
  /** Longest accepted message text, in characters. Default 16 000. */
  maxMessageChars: int(1, 1_000_000).default(16_000),
});

const runsSchema = z
  .strictObject({
    /** How long a runner owns a run without renewing, in ms. Default 30 000. */
    leaseMs: int(1000, 3_600_000).default(30_000),
    /** How often a runner renews its lease, in ms; must be below `leaseMs`. Default 10 000. */
    heartbeatMs: int(100, 3_600_000).default(10_000),
    /** How often the reconciler looks for runs left without a job, in ms. Default 60 000. */
    reconcileIntervalMs: int(1000, 86_400_000).default(60_000),
    /** BullMQ queue name for runs. Default `steerbot-runs`. */
    queueName: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected 1-64 characters of [A-Za-z0-9_-]' })
      .default('steerbot-runs'),
  })
  .superRefine((r, ctx) => {
    if (r.heartbeatMs >= r.leaseMs) {
      ctx.addIssue({ code: 'custom', path: ['heartbeatMs'], message: `must be less than runs.leaseMs (${r.leaseMs})` });
    }
  });

const runnerSchema = z.strictObject({
  /** Run the runner in this process. Default true. */
  enabled: z.boolean({ error: 'expected true or false' }).default(true),
  /** Runs this process executes at once. Default 4. */
  concurrency: int(1, 1000).default(4),
  /** How long active runs get to finish on shutdown before they are aborted, in ms. Default 10 000. */
  shutdownGraceMs: int(0, 600_000).default(10_000),
  /**
   * How long a conversation's outbox (delivery records) is kept after its last
   * delivery, in seconds. A retried run needs the records only for as long as
   * it can be retried (minutes); they are not history. Default 604 800 (7 days).
   */
  outboxTtlSeconds: int(3600, 365 * 86_400).default(DEFAULT_DELIVERY_KEY_TTL_SECONDS),
  /** What this runner declares to the host. */
  capabilities: z
    .strictObject({
      /** Runner pulls steering messages at turn boundaries; without it the host uses `collect`. Default true. */
      steering: z.boolean({ error: 'expected true or false' }).default(true),
    })
    .prefault({}),
});

const agentSchema = z.strictObject({
  /** System prompt of the default agent (`plugins/local-agent`). Default: a short helpful-assistant prompt. */
  systemPrompt: z.string().trim().min(1, { error: 'expected a non-empty prompt' }).max(100_000, { error: 'expected at most 100 000 characters' }).optional(),
  /**
   * Send the answer as it is written to channels that stream (their own
   * `streaming` setting); other channels get whole messages either way. Default true.
   */
  streaming: z.boolean({ error: 'expected true or false' }).default(true),
  /** The built-in `http_fetch` tool (HTTP GET of a URL; it lets the model reach the network). Default false. */
  httpFetch: z.boolean({ error: 'expected true or false' }).default(false),
  /** The built-in `current_time` tool. Default true. */
  currentTime: z.boolean({ error: 'expected true or false' }).default(true),
  /** Steering taken per turn boundary: `all` waiting messages or `one`. Default `all`. */
  steeringMode: z.enum(['all', 'one'], { error: 'expected all or one' }).default('all'),
  /** Most model steps per run invocation. Default 24. */
  maxSteps: int(1, 1000).default(24),
});

const hostSchema = z.strictObject({
  /** Run the host (HTTP ingress, channels, reconciler) in this process. Default true. */
  enabled: z.boolean({ error: 'expected true or false' }).default(true),
});

const logSchema = z.strictObject({
  /** Minimum level written. Default `info`. */
  level: enumOf(LOG_LEVELS).default('info'),
});

const modelSchema = z
  .strictObject({
    /** Provider of the default agent's model. Default `openai-compatible`. */
    provider: enumOf(MODEL_PROVIDERS).default('openai-compatible'),
    /** Base URL of the provider's API. Default: the provider's own. */
    baseURL: z.url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' }).optional(),
    /** API key. Secret. Default: unset. */
    apiKey: z.string().min(1, { error: 'expected a non-empty key' }).optional(),
    /** Model name. Default `gpt-4o-mini`. */
    name: z.string().min(1, { error: 'expected a model name' }).default('gpt-4o-mini'),
    /** The model's context window, in tokens. Default 128 000. */
    contextWindow: int(1024, 10_000_000).default(128_000),
    /** Tokens kept free for the model's answer, in tokens. Default 4096. */
    outputReserve: int(1, 1_000_000).default(4096),
  })
  .superRefine((m, ctx) => {
    if (m.outputReserve >= m.contextWindow) {
      ctx.addIssue({ code: 'custom', path: ['outputReserve'], message: `must be less than model.contextWindow (${m.contextWindow})` });
    }
  });

const compactionSchema = z.strictObject({
  /** Fraction of the usable context (window − output reserve) at which a run compacts. Default 0.8. */
  threshold: z.number({ error: 'expected a number' }).gt(0, { error: 'expected a number above 0' }).max(1, { error: 'expected at most 1' }).default(0.8),
  /** Complete turns kept verbatim after the summary. Default 4. */
  keepRecentTurns: int(0, 1000).default(4),
  /** Longest summary, in characters. Default 6000. */
  maxSummaryChars: int(200, 200_000).default(6000),
  /** Record entries read when there is no valid checkpoint (bounded tail). Default 2000. */
  tailEntries: int(10, 1_000_000).default(2000),
});

// Lazy: the channel schemas' modules import this one (INPUT_POLICIES); whichever loads first, neither is read before both exist.
const channelsSchema = z.strictObject({
  /** The Telegram channel (see plugins/telegram/config.ts). Default: unset (off). */
  telegram: z.lazy(() => telegramConfigSchema).optional(),
  /** The Discord channel (see plugins/discord/config.ts). Default: unset (off). */
  discord: z.lazy(() => discordConfigSchema).optional(),
  /** Generic webhook channels by name; channel id `webhook:<name>` (see plugins/webhook/config.ts). Default `{}`. */
  webhooks: z
    .record(z.string(), z.lazy(() => webhookChannelConfigSchema))
    .default({})
    .superRefine((hooks, ctx) => {
      for (const name of Object.keys(hooks)) {
        if (!WEBHOOK_NAME_RE.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'bad webhook name: expected 1-32 characters of a-z 0-9 _ - (starting with a letter or digit)' });
      }
    }),
});

const baseSchema = z.strictObject({
  redis: redisSchema.prefault({}),
  http: httpSchema.prefault({}),
  dispatch: dispatchSchema.prefault({}),
  runs: runsSchema.prefault({}),
  runner: runnerSchema.prefault({}),
  agent: agentSchema.prefault({}),
  host: hostSchema.prefault({}),
  log: logSchema.prefault({}),
  model: modelSchema.prefault({}),
  compaction: compactionSchema.prefault({}),
});

/** The whole configuration. Unknown keys are errors (a typo must not be silently ignored). */
export const configSchema = baseSchema
  .extend({
    /** Channel instances; each channel's schema belongs to its plugin. Default: no channels. */
    channels: channelsSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    // Discord catch-up hands the host messages up to this old again; older than the dedupe keys, an
    // answered message would no longer be a duplicate and would be answered twice.
    const catchUp = c.channels.discord?.catchUpMaxAgeSeconds ?? 0;
    if (catchUp > c.dispatch.dedupeTtlSeconds) {
      ctx.addIssue({
        code: 'custom',
        path: ['channels', 'discord', 'catchUpMaxAgeSeconds'],
        message: `must not exceed dispatch.dedupeTtlSeconds (${c.dispatch.dedupeTtlSeconds}): older messages would no longer be recognised as answered`,
      });
    }
  });

/** The validated configuration, defaults applied. */
export type SteerbotConfig = z.output<typeof configSchema>;
/** What a config file may contain: every key optional. */
export type SteerbotConfigInput = z.input<typeof configSchema>;
/** The `redis` section. */
export type RedisConfig = SteerbotConfig['redis'];
/** The `http` section. */
export type HttpConfig = SteerbotConfig['http'];
/** The `dispatch` section. */
export type DispatchConfig = SteerbotConfig['dispatch'];
/** The `runs` section. */
export type RunsConfig = SteerbotConfig['runs'];
/** The `runner` section. */
export type RunnerConfig = SteerbotConfig['runner'];
/** The `model` section. */
export type ModelConfig = SteerbotConfig['model'];
/** The `channels` section. */
export type ChannelsConfig = SteerbotConfig['channels'];

/** The configuration with every default and nothing set. */
// Built without parsing `channels`: that would read the lazy channel schemas while their modules may still be loading.
export const DEFAULT_CONFIG: Readonly<SteerbotConfig> = Object.freeze({ ...baseSchema.parse({}), channels: { webhooks: {} } });
