/**
 * The core configuration schema: the sections every process reads, with
 * defaults from `defaults.ts`. Plugin sections (`channels.*`, `agents.*`) are
 * validated by each plugin's own schema; the composition (`app/config.ts`)
 * assembles the whole. Loading (file + environment overlay) is `config.ts`.
 */
import { z } from 'zod';
import { isAllowEntry } from '../http/address-policy.js';
import { DEFAULTS, MODEL_APIS, MODEL_CHOICE_NAME, MODEL_PROVIDERS } from './defaults.js';
import { INPUT_POLICIES } from './input-policies.js';
import { apiProblem, deriveModel, type ResolvedModel, resolveOrDiscover } from './model-catalogue.js';

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

/** An integer setting between `min` and `max`, with errors that name the bounds. */
export const int = (min: number, max: number) =>
  z
    .number({ error: 'expected a number' })
    .int({ error: 'expected an integer' })
    .min(min, { error: `expected an integer >= ${min}` })
    .max(max, { error: `expected an integer <= ${max}` });

/** One entry of a list of non-public hosts a guarded fetch may reach: a host name, an IP address or a CIDR range. */
export const allowEntry = z.string().trim().refine(isAllowEntry, { error: 'expected a host name, an IP address or a CIDR range like 10.1.0.0/16' });

/** A token that opens a page (the web chat, the console): 16-512 characters. */
export const pageToken = z
  .string({ error: 'expected a token of at least 16 characters' })
  .min(16, { error: 'expected at least 16 characters' })
  .max(512, { error: 'expected at most 512 characters' });

/** One of `values`, with an error that lists them. */
export const enumOf = <const T extends readonly [string, ...string[]]>(values: T) => z.enum(values, { error: `expected one of ${values.join(', ')}` });

/** Log levels accepted by `log.level` (pino's, plus `silent`). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const redisSchema = z
  .strictObject({
    url: z
      .url({ protocol: /^rediss?$/, error: 'expected a redis:// or rediss:// URL' })
      .optional()
      .describe('Redis URL (`redis://` or `rediss://`) in `single` mode. Default: unset — the CLI finds or starts a local Redis.'),
    mode: enumOf(['single', 'sentinel', 'cluster']).default(DEFAULTS.redis.mode).describe('Topology. Default `single`.'),
    sentinels: z.array(hostPort).default([]).describe('Sentinel addresses, `sentinel` mode only. Default `[]`.'),
    sentinelName: z
      .string()
      .min(1, { error: 'expected a non-empty name' })
      .optional()
      .describe('Name of the master group the Sentinels watch, `sentinel` mode only.'),
    clusterNodes: z.array(hostPort).default([]).describe('Seed nodes, `cluster` mode only. Default `[]`.'),
    prefix: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, { error: 'expected 1-32 characters of [A-Za-z0-9_-]' })
      .default(DEFAULTS.redis.prefix)
      .describe('Prefix of every steerbot key, the BullMQ queue included. Default `sb`.'),
    password: z
      .string()
      .min(1, { error: 'expected a non-empty password' })
      .optional()
      .describe('Redis password (overrides one in `url`). Secret. Default: unset.'),
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
  host: z
    .string()
    .min(1, { error: 'expected a host name or address' })
    .default(DEFAULTS.http.host)
    .describe('Interface the HTTP server binds. Default `0.0.0.0`.'),
  port: int(1, 65535).default(DEFAULTS.http.port).describe('TCP port of the HTTP server, 1..65535. Default 8080.'),
  bodyLimitBytes: int(1024, 64 * 1024 * 1024)
    .default(DEFAULTS.http.bodyLimitBytes)
    .describe('Largest accepted request body, in bytes. Default 1 048 576 (1 MiB).'),
  requestTimeoutMs: int(1000, 3_600_000)
    .default(DEFAULTS.http.requestTimeoutMs)
    .describe(
      'How long a client has to send a whole request, headers and body, in ms; later the answer is `408` and the connection is closed. Default 60 000 (a minute: a client sending a 16 MiB body needs about 2.2 Mbit/s); raise it with `bodyLimitBytes` for slow clients sending large bodies.',
    ),
  metricsToken: pageToken
    .optional()
    .describe(
      'Token `GET /metrics` requires, as `Authorization: Bearer <token>` (Prometheus: `authorization: { credentials: <token> }`); a request without it gets `401`. Secret, at least 16 characters. Default: unset — `/metrics` answers only connections from loopback and private addresses; set it when a load balancer, an ingress or a port-forward sits in front (every client then looks private), since the metrics name your models, tools, MCP servers, channels and traffic.',
    ),
});

const tokenBucketSchema = z.strictObject({
  capacity: int(1, 1_000_000).describe('Most messages accepted in a burst. Required.'),
  refillPerMinute: z
    .number({ error: 'expected a number' })
    .gt(0, { error: 'expected a number above 0' })
    .max(1_000_000, { error: 'expected at most 1 000 000' })
    .describe('Messages the bucket regains per minute (fractions allowed). Required.'),
});

const dispatchSchema = z.strictObject({
  defaultPolicy: enumOf(INPUT_POLICIES)
    .default(DEFAULTS.dispatch.defaultPolicy)
    .describe('Input policy of a conversation that has no override. Default `steer`.'),
  steeringCap: int(1, 1000).default(DEFAULTS.dispatch.steeringCap).describe("Most messages a run's steering list holds; more go to `pending`. Default 20."),
  dedupeTtlSeconds: int(60, 30 * 86_400)
    .default(DEFAULTS.dispatch.dedupeTtlSeconds)
    .describe(
      'How long a platform update is remembered for dedupe, in seconds. Channels whose requests carry no signed time do not answer a message sent longer ago than this less 5 minutes (it could be a replay; see docs/channels.md). Default 86 400 (24 h).',
    ),
  maxMessageChars: int(1, 1_000_000).default(DEFAULTS.dispatch.maxMessageChars).describe('Longest accepted message text, in characters. Default 16 000.'),
  rateLimit: z
    .strictObject({
      user: tokenBucketSchema.optional().describe('Per sender, within one conversation. Default: unset (no limit).'),
      conversation: tokenBucketSchema.optional().describe('Per conversation, all senders together. Default: unset (no limit).'),
    })
    .prefault({})
    .describe(
      'Token buckets checked inside ingest (no extra round trip); a message over a limit is recorded as refused and answered once with a short notice. Default: off.',
    ),
  afterPurge: enumOf(['refuse', 'restart'])
    .default(DEFAULTS.dispatch.afterPurge)
    .describe(
      'What a message for a purged conversation (`/purge`) gets while its tombstone stands: `refuse` (a short notice, nothing recorded) or `restart` (a new, empty conversation). Default `refuse`.',
    ),
});

const runsSchema = z
  .strictObject({
    leaseMs: int(1000, 3_600_000).default(DEFAULTS.runs.leaseMs).describe('How long a runner owns a run without renewing, in ms. Default 30 000.'),
    heartbeatMs: int(100, 3_600_000)
      .default(DEFAULTS.runs.heartbeatMs)
      .describe('How often a runner renews its lease, in ms; must be below `leaseMs`. Default 10 000.'),
    reconcileIntervalMs: int(1000, 86_400_000)
      .default(DEFAULTS.runs.reconcileIntervalMs)
      .describe('How often the reconciler looks for runs left without a job, in ms. Default 60 000.'),
    queueName: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected 1-64 characters of [A-Za-z0-9_-]' })
      .default(DEFAULTS.runs.queueName)
      .describe('BullMQ queue name for runs (under the key prefix). Default `steerbot-runs`.'),
    followUpsOnFailure: int(0, 10)
      .default(DEFAULTS.runs.followUpsOnFailure)
      .describe(
        'When a run fails, the messages it took and did not answer go to a follow-up run; this many follow-ups in a row, then the person gets one message naming what was not answered. 0: none (that message at the first failure). Default 2.',
      ),
  })
  .superRefine((r, ctx) => {
    if (r.heartbeatMs >= r.leaseMs) {
      ctx.addIssue({ code: 'custom', path: ['heartbeatMs'], message: `must be less than runs.leaseMs (${r.leaseMs})` });
    }
  });

const runnerSchema = z.strictObject({
  enabled: z.boolean({ error: 'expected true or false' }).default(DEFAULTS.runner.enabled).describe('Run the runner in this process. Default true.'),
  // No default here: which runner a configuration that names none gets is the composition's choice (app/config.ts).
  plugin: z.string().trim().min(1, { error: 'expected a plugin id or module' }),
  concurrency: int(1, 1000).default(DEFAULTS.runner.concurrency).describe('Runs this process executes at once. Default 4.'),
  shutdownGraceMs: int(0, 600_000)
    .default(DEFAULTS.runner.shutdownGraceMs)
    .describe('How long active runs get to finish on shutdown before they are aborted, in ms. Default 10 000.'),
  outboxTtlSeconds: int(3600, 365 * 86_400)
    .default(DEFAULTS.runner.outboxTtlSeconds)
    .describe(
      "How long a conversation's outbox (delivery records) is kept after its last delivery, in seconds. A retried run needs the records only for as long as it can be retried (minutes); they are not history. Default 86 400 (1 day).",
    ),
});

const consoleSchema = z.strictObject({
  enabled: z.boolean({ error: 'expected true or false' }).default(true).describe('Serve the operator console at `/console`. Default true.'),
  token: pageToken
    .optional()
    .describe(
      'Token the console (and the browser chat channel, unless it is public) requires: open it once with `/console?token=<token>`, or send `Authorization: Bearer`. Secret. Default: unset — each start generates a random one and prints a one-time login link to stderr (never to the logs). Set it when several hosts share a load balancer, or when your process output is collected.',
    ),
  allowLoopback: z
    .boolean({ error: 'expected true or false' })
    .default(false)
    .describe(
      'Also let in, without the token, clients on this machine (peer 127.0.0.0/8 or ::1, no forwarding header, Host a loopback name). Dangerous behind a reverse proxy on the same machine: a default nginx `proxy_pass` makes every internet client look like that. Default false.',
    ),
  traceUrl: z
    .string()
    .regex(/^https?:\/\/\S*\{traceId\}\S*$/, { error: 'expected an http(s) URL containing {traceId}' })
    .optional()
    .describe(
      'Link to a trace in your trace UI, `{traceId}` replaced, e.g. `http://localhost:16686/trace/{traceId}`. Default: unset (trace ids shown as text).',
    ),
});

/** What an API token may do: send messages, wake agents with events, open a conversation that has no record yet. */
export const API_TOKEN_SCOPES = ['send', 'events', 'open'] as const;

/** Requests per minute an API token may make unless its `ratePerMinute` says (the single `host.api.token` too). */
export const API_TOKEN_RATE_PER_MINUTE = 60;

/** Name of the single `host.api.token` among the scoped tokens (its rate bucket, its revocation). */
export const LEGACY_API_TOKEN_NAME = 'default';

/** An identity id: `<channel>:<user id>`, or the identity linked accounts share. */
const identityIdSchema = z.string().regex(/^[^\s{}]{1,257}$/, { error: 'expected an identity id such as <channel>:<user id> (no whitespace or braces)' });

const apiTokenSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected 1-64 of A-Z a-z 0-9 _ -' })
      .describe('Name of the token: logs, its rate limit and `steerbot revoke-token <name>` use it. Required, unique.'),
    token: pageToken.optional().describe('The bearer token itself (16–512 characters). Secret. Give this or `tokenSha256`.'),
    tokenSha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, { error: 'expected 64 hex digits (SHA-256 of the token)' })
      .transform((h) => h.toLowerCase())
      .optional()
      .describe('Hex SHA-256 of the bearer token, so the token itself need not be in the file (`printf %s "$TOKEN" | sha256sum`). Give this or `token`.'),
    channels: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe('Channel ids the token may reach (a channel plugin id, or `<plugin>:<name>` for a named instance). Default: unset — every channel.'),
    conversations: z
      .array(z.string().min(1).max(300))
      .min(1)
      .optional()
      .describe(
        'Conversations the token may reach: an entry matches that conversation id and its threads (`<channel>:<chat>` matches `<channel>:<chat>:<thread>`); an entry ending in `*` matches every id that starts with the text before it. Default: unset — every conversation of its channels.',
      ),
    scopes: z
      .array(enumOf(API_TOKEN_SCOPES))
      .min(1, { error: 'expected at least one scope' })
      .describe('What the token may do: `send` (messages), `events` (wake the agent), `open` (reach a conversation that has no record yet). Required.'),
    owner: identityIdSchema
      .optional()
      .describe(
        "The identity the runs this token's events start are charged to (its budget; its memory), `<channel>:<user id>` or a linked identity. Default: the operator (only the conversation's budget applies, no person's memory).",
      ),
    ratePerMinute: int(1, 100_000)
      .default(API_TOKEN_RATE_PER_MINUTE)
      .describe('Requests per minute the token may make (a token bucket that holds as many; more get 429). Default 60.'),
  })
  .superRefine((t, ctx) => {
    if ((t.token === undefined) === (t.tokenSha256 === undefined)) ctx.addIssue({ code: 'custom', message: 'give exactly one of token and tokenSha256' });
  });

const apiSchema = z
  .strictObject({
    token: pageToken
      .optional()
      .describe(
        'One bearer token with every scope, on every conversation, at the default rate (kept for existing setups; `host.api.tokens` limits what each token may do). Secret. Default: unset.',
      ),
    tokens: z
      .array(apiTokenSchema)
      .max(1000)
      .default([])
      .describe(
        'Named bearer tokens of the send-and-wake API, each limited to scopes, channels or conversations, and a rate (docs/send-and-wake.md). Default `[]`; with neither this nor `token` the API is not served.',
      ),
  })
  .superRefine((a, ctx) => {
    const names = a.tokens.map((t) => t.name);
    if (a.token !== undefined) names.push(LEGACY_API_TOKEN_NAME);
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup !== undefined)
      ctx.addIssue({ code: 'custom', path: ['tokens'], message: `token name "${dup}" is used twice (\`token\` is named "${LEGACY_API_TOKEN_NAME}")` });
  });

const hostSchema = z.strictObject({
  enabled: z
    .boolean({ error: 'expected true or false' })
    .default(DEFAULTS.host.enabled)
    .describe('Run the host (HTTP ingress, channels, reconciler) in this process. Default true.'),
  console: consoleSchema.prefault({}).describe('The operator console (conversations, runs, actions, queue counts).'),
  api: apiSchema.prefault({}).describe('The send-and-wake API: `POST /api/conversations/:id/events` and `/messages` (docs/send-and-wake.md).'),
});

const heartbeatSchema = z.strictObject({
  everyMinutes: int(1, 7 * 24 * 60).describe('Minutes between two heartbeats (a heartbeat while the conversation works waits for the next one). Required.'),
  prompt: z
    .string()
    .trim()
    .min(1, { error: 'expected a prompt' })
    .max(4000, { error: 'expected at most 4000 characters' })
    .describe('What the agent is asked at each heartbeat, e.g. "look at the build; tell me only if it broke". Required.'),
  owner: identityIdSchema
    .optional()
    .describe(
      "The identity a heartbeat's runs are charged to (its budget; its memory), `<channel>:<user id>` or a linked identity; purging that person removes the heartbeat until the next start. Default: the operator (only the conversation's budget applies, no person's memory).",
    ),
});

const schedulesSchema = z.strictObject({
  enabled: z
    .boolean({ error: 'expected true or false' })
    .default(DEFAULTS.schedules.enabled)
    .describe('Schedules and heartbeats: runners fire them, the agent gets its schedule tools, `/schedules` and `/unschedule` answer. Default true.'),
  maxPerConversation: int(1, 1000)
    .default(DEFAULTS.schedules.maxPerConversation)
    .describe('Most schedules one conversation may have (heartbeats included); one more is refused with an error. Default 20.'),
  minIntervalSeconds: int(1, 86_400)
    .default(DEFAULTS.schedules.minIntervalSeconds)
    .describe(
      'Shortest interval between two fires of a recurring schedule, in seconds; a shorter `every` or cron line is refused, and so is a one-shot sooner than this made by a run no person started (a fire, a heartbeat, an event). Default 60.',
    ),
  missedAfterSeconds: int(1, 86_400)
    .default(DEFAULTS.schedules.missedAfterSeconds)
    .describe(
      "A fire handled later than this after its time (every runner was down) is a missed fire: dropped or run once, by the schedule's `missed` choice. Default 60.",
    ),
  concurrency: int(1, 1000).default(DEFAULTS.schedules.concurrency).describe('Fires one runner process handles at once. Default 16.'),
  heartbeats: z
    .record(z.string().min(1), heartbeatSchema)
    .default({})
    .describe(
      'Heartbeats by channel id (every conversation of the channel, from its next message on) or conversation id (that conversation, from start-up): every N minutes while idle, the agent runs the prompt and stays silent unless there is something to say. Default `{}`.',
    ),
});

const logSchema = z.strictObject({
  level: enumOf(LOG_LEVELS).default(DEFAULTS.log.level).describe('Minimum level written. Default `info`.'),
  format: enumOf(['auto', 'pretty', 'json'])
    .default(DEFAULTS.log.format)
    .describe('Line format: `pretty` (human-readable), `json`, or `auto` (pretty when stdout is a terminal). Default `auto`.'),
});

/** `api` where a model is given as changes to `model` (a fallback, a profile's model, a `/model` choice). */
const changedApiField = enumOf(MODEL_APIS)
  .optional()
  .describe('API of the `openai` provider: `chat` or `responses` (as `model.api`). Default: `model.api` on the same provider, else `chat`.');

/** One entry of `model.fallbacks`: changes to `model`, as a profile's model is. */
const fallbackModelSchema = z.strictObject({
  provider: enumOf(MODEL_PROVIDERS).optional().describe('Provider. Default: `model.provider`.'),
  name: z.string().min(1, { error: 'expected a model name' }).describe('Model name.'),
  baseURL: z
    .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
    .optional()
    .describe("Base URL of the provider's API. Default: `model.baseURL` on the same provider, else the provider's own."),
  apiKey: z
    .string()
    .min(1, { error: 'expected a non-empty key' })
    .optional()
    .describe('API key. Secret. Default: `model.apiKey` on the same provider; required on another (but `openai-compatible`).'),
  api: changedApiField,
  contextWindow: int(1024, 10_000_000)
    .optional()
    .describe(
      "Context window, in tokens, at least `model.contextWindow`. Default: from the catalogue, else asked of the model's server at runner start (as `model.contextWindow`).",
    ),
  outputReserve: int(1, 1_000_000).optional().describe("Tokens kept free for the answer. Default: the catalogue's output limit, else 4096."),
});

/** Why `model.fallbacks[i]` cannot serve as a fallback of `base`, or undefined. */
function fallbackProblem(base: ResolvedModel, f: z.output<typeof fallbackModelSchema>): { path: string; message: string } | undefined {
  const resolved = deriveModel(base, f);
  if (!resolved) return { path: 'contextWindow', message: `unknown model "${f.name}": set its context window in tokens` };
  // A window still to be discovered is compared by the runner, once it knows it.
  if (!resolved.discoverWindow && !base.discoverWindow && resolved.contextWindow < base.contextWindow) {
    return {
      path: 'contextWindow',
      message: `a fallback needs at least the context window of model (${base.contextWindow}): a prompt that fits the model must fit it`,
    };
  }
  const api = apiProblem(resolved);
  if (api) return { path: 'api', message: api };
  if (resolved.provider === 'openai-compatible' && !resolved.baseURL) return { path: 'baseURL', message: 'required for the openai-compatible provider' };
  if (resolved.provider !== 'openai-compatible' && !resolved.apiKey)
    return { path: 'apiKey', message: `required for a fallback on the ${resolved.provider} provider` };
  return undefined;
}

const modelSchema = z
  .strictObject({
    provider: enumOf(MODEL_PROVIDERS)
      .default(DEFAULTS.model.provider)
      .describe(
        "Provider of the runner's model: `openai`, `anthropic`, `google`, or `openai-compatible` (any OpenAI-style `baseURL`: Ollama, vLLM). Default `openai`.",
      ),
    baseURL: z
      .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
      .optional()
      .describe("Base URL of the provider's API. Default: the provider's own."),
    apiKey: z
      .string()
      .min(1, { error: 'expected a non-empty key' })
      .optional()
      .describe(
        "API key. Secret. Read from the selected provider's own variable: `OPENAI_API_KEY` (`openai`, `openai-compatible`), `ANTHROPIC_API_KEY` (`anthropic`), `GOOGLE_GENERATIVE_AI_API_KEY` (`google`). Default: unset.",
      ),
    api: enumOf(MODEL_APIS)
      .optional()
      .describe('API the `openai` provider calls: `chat` (chat completions) or `responses` (the Responses API; only with provider `openai`). Default `chat`.'),
    name: z.string().min(1, { error: 'expected a model name' }).default(DEFAULTS.model.name).describe('Model name. Default `gpt-4o-mini`.'),
    contextWindow: int(1024, 10_000_000)
      .optional()
      .describe(
        "The model's context window (prompt + answer), in tokens. Default: from the catalogue of common models (docs/agent.md), else asked of the model's server when the runner starts (`openai-compatible`, or `openai` with a `baseURL`: `/models`, Ollama's `/api/show`); required where neither knows it.",
      ),
    outputReserve: int(1, 1_000_000)
      .optional()
      .describe("Tokens kept free for the model's answer. Default: the model's output limit from the catalogue, else 4096."),
    fallbacks: z
      .array(fallbackModelSchema)
      .max(4, { error: 'expected at most 4 fallbacks' })
      .optional()
      .describe(
        'Models a model call fails over to, in order, when it fails with a rate limit, an overload, a 5xx, a timeout or a silent stream: the same step is asked again of the next one. Default: none.',
      ),
  })
  .superRefine((m, ctx) => {
    const api = apiProblem(m);
    if (api) ctx.addIssue({ code: 'custom', path: ['api'], message: api });
    const limits = resolveOrDiscover(m);
    if (!limits) {
      ctx.addIssue({
        code: 'custom',
        path: ['contextWindow'],
        message: `unknown model "${m.name}": set its context window in tokens (STEERBOT_MODEL_CONTEXT_WINDOW); the catalogue knows only common models, and the ${m.provider} provider${m.provider === 'openai' ? ' without a baseURL' : ''} names no window to discover`,
      });
      return;
    }
    if (!limits.discoverWindow && limits.outputReserve >= limits.contextWindow) {
      ctx.addIssue({ code: 'custom', path: ['outputReserve'], message: `must be less than model.contextWindow (${limits.contextWindow})` });
    }
    const { fallbacks: _fallbacks, ...base } = m;
    (m.fallbacks ?? []).forEach((f, i) => {
      const problem = fallbackProblem({ ...base, ...limits }, f);
      if (problem) ctx.addIssue({ code: 'custom', path: ['fallbacks', i, problem.path], message: problem.message });
    });
  })
  // Checked just above: an unknown model without a window (that cannot be discovered), or a fallback that cannot serve, never gets here.
  .transform(({ fallbacks, ...m }) => {
    const base = { ...m, ...resolveOrDiscover(m)! };
    return { ...base, ...(fallbacks?.length && { fallbacks: fallbacks.map((f) => ({ ...deriveModel(base, f)! })) }) };
  });

const compactionSchema = z.strictObject({
  threshold: z
    .number({ error: 'expected a number' })
    .gt(0, { error: 'expected a number above 0' })
    .max(1, { error: 'expected at most 1' })
    .default(DEFAULTS.compaction.threshold)
    .describe('Fraction of the usable context (window − output reserve) at which a run compacts. Default 0.8.'),
  keepRecentTurns: int(0, 1000).default(DEFAULTS.compaction.keepRecentTurns).describe('Complete turns kept verbatim after the summary. Default 4.'),
  maxSummaryChars: int(200, 200_000).default(DEFAULTS.compaction.maxSummaryChars).describe('Longest summary, in characters. Default 6000.'),
  tailEntries: int(10, 1_000_000)
    .default(DEFAULTS.compaction.tailEntries)
    .describe('Record entries read when there is no valid checkpoint (bounded tail). Default 2000.'),
});

/** Retention: what is removed, and when. Everything that would lose history a user expects is off by default. */
const retentionSchema = z.strictObject({
  endedRunTtlSeconds: int(0, 365 * 86_400)
    .default(DEFAULTS.retention.endedRunTtlSeconds)
    .describe(
      "How long an ended run's record (hash, about 440 B) is kept, in seconds; 0 keeps it forever. The conversation record keeps the run's history either way. Default 86 400 (1 day).",
    ),
  recordTrimAfterEntries: int(0, 1_000_000_000)
    .default(DEFAULTS.retention.recordTrimAfterEntries)
    .describe(
      'Trim conversation record entries behind the compaction checkpoint once this many newer entries exist; 0: off. Entries from the checkpoint on, and messages a live run or a waiting message needs, always stay. Default 0 (the whole record is kept).',
    ),
  recordTrimAfterDays: int(0, 36_500)
    .default(DEFAULTS.retention.recordTrimAfterDays)
    .describe(
      'Trim conversation record entries behind the compaction checkpoint once older than this many days; 0: off. Same guarantees as `recordTrimAfterEntries`. Default 0.',
    ),
  idleTtlSeconds: int(0, 10 * 365 * 86_400)
    .default(DEFAULTS.retention.idleTtlSeconds)
    .describe(
      'An idle conversation (no active run, nothing waiting) is deleted this long after its last run ended, in seconds; a new message before then keeps it. 0: never. Default 0.',
    ),
  tombstoneTtlSeconds: int(60, 365 * 86_400)
    .default(DEFAULTS.retention.tombstoneTtlSeconds)
    .describe(
      "How long a purged conversation's tombstone stands (`dispatch.afterPurge` applies meanwhile), in seconds; never shorter than `dispatch.dedupeTtlSeconds`. Default 604 800 (7 days).",
    ),
  indexMaxEntries: int(0, 1_000_000)
    .default(DEFAULTS.retention.indexMaxEntries)
    .describe(
      "Per conversation, the outbox keeps the newest this many acknowledged delivery records and the run index the newest this many ended runs (older ones go, run hashes with them), so a conversation that never goes quiet does not grow until the TTLs catch up. Records not acknowledged and the active run's are always kept; ended runs kept forever (`endedRunTtlSeconds` 0) are not counted. 0: off. Default 10 (the record keeps every run's history; these are the console's recent view).",
    ),
});

const budgetLimitsSchema = z.strictObject({
  tokensPerDay: int(1, 1_000_000_000_000).optional().describe('Most tokens (input + output, as providers report them) per UTC day. Default: unset (no limit).'),
  tokensPerMonth: int(1, 1_000_000_000_000).optional().describe('Most tokens per UTC month. Default: unset (no limit).'),
  runsPerHour: int(1, 1_000_000).optional().describe('Most runs started per hour (on the hour, UTC). Default: unset (no limit).'),
  imagesPerDay: int(1, 1_000_000)
    .optional()
    .describe('Most pictures `generate_image` makes per UTC day; one over it is refused before it is paid for. Default: unset (no limit).'),
});

/** Spending budgets: checked before a run starts and before every model step. */
const budgetsSchema = z.strictObject({
  identity: budgetLimitsSchema
    .optional()
    .describe('Per person: their identity (`<channel id>:<user id>`, or the identity their linked accounts share). Default: unset (no limit).'),
  conversation: budgetLimitsSchema.optional().describe('Per conversation, everyone in it together. Default: unset (no limit).'),
});

/** Subagents: child runs the agent delegates tasks to (docs/subagents.md). */
const subagentsSchema = z.strictObject({
  enabled: z
    .boolean({ error: 'expected true or false' })
    .default(DEFAULTS.subagents.enabled)
    .describe(
      'The agent gets `delegate`, `steer_subagent` and `subagent_results`: tasks run as child runs on any runner, each in a child conversation of its own. Default false.',
    ),
  maxPerRun: int(1, 16)
    .default(DEFAULTS.subagents.maxPerRun)
    .describe('Most subagents one run starts; more are refused with an error the model reads. Default 4.'),
  timeoutSeconds: int(10, 3600)
    .default(DEFAULTS.subagents.timeoutSeconds)
    .describe('Longest wait for subagents in one tool call; unfinished ones are reported running (read them later with `subagent_results`). Default 600.'),
});

/** Long-term memory per person (docs/people.md#memory). */
const memorySchema = z.strictObject({
  enabled: z
    .boolean({ error: 'expected true or false' })
    .default(DEFAULTS.memory.enabled)
    .describe(
      "Long-term memory per person: the agent gets its memory tools and the person's notes in its system prompt, `/memory` and `/forget` answer. Default false.",
    ),
  maxNotes: int(1, 10_000).default(DEFAULTS.memory.maxNotes).describe('Most notes per person; one more is refused with an error. Default 200.'),
  maxNoteChars: int(10, 10_000)
    .default(DEFAULTS.memory.maxNoteChars)
    .describe('Most characters of one note; a longer one is refused with an error. Default 1000.'),
  promptNotes: int(0, 1000)
    .default(DEFAULTS.memory.promptNotes)
    .describe('Most notes in the system prompt (the most recently saved or edited that fit, in the order they were saved). Default 20.'),
  promptChars: int(0, 100_000).default(DEFAULTS.memory.promptChars).describe('Most characters of the notes in the system prompt together. Default 4000.'),
  embeddingModel: z
    .string()
    .trim()
    .min(1, { error: 'expected a model name' })
    .optional()
    .describe(
      'Embedding model (`text-embedding-3-small`) on the `model` provider (openai, or openai-compatible with an embeddings API): memory search blends in embedding similarity. Default: unset (keywords only).',
    ),
});

const toolModeSchema = enumOf(['allow', 'deny', 'require_approval']);

/** One entry of `models`: a model a conversation may switch to with `/model`, as changes to `model` (a fallback's fields). */
const namedModelSchema = fallbackModelSchema.extend({
  contextWindow: int(1024, 10_000_000)
    .optional()
    .describe("Context window, in tokens. Default: from the catalogue, else asked of the model's server at runner start (as `model.contextWindow`)."),
});

/** A key of `models`: what `/model <name>` names. */
const modelChoiceName = z.string().regex(MODEL_CHOICE_NAME, { error: 'expected 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit' });

const profileSchema = z.strictObject({
  model: z
    .strictObject({
      provider: enumOf(MODEL_PROVIDERS).optional().describe('Provider. Default: `model.provider`.'),
      name: z.string().min(1, { error: 'expected a model name' }).optional().describe('Model name. Default: `model.name`.'),
      baseURL: z
        .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
        .optional()
        .describe("Base URL of the provider's API. Default: `model.baseURL` on the same provider, else the provider's own."),
      apiKey: z.string().min(1, { error: 'expected a non-empty key' }).optional().describe('API key. Secret. Default: `model.apiKey` on the same provider.'),
      api: changedApiField,
      contextWindow: int(1024, 10_000_000)
        .optional()
        .describe("Context window, in tokens. Default: from the catalogue, else asked of the model's server at runner start (as `model.contextWindow`)."),
      outputReserve: int(1, 1_000_000).optional().describe("Tokens kept free for the answer. Default: the catalogue's output limit, else 4096."),
    })
    .optional()
    .describe('The model, as changes to `model`. Default: `model`.'),
  systemPrompt: z
    .string()
    .trim()
    .min(1, { error: 'expected a non-empty prompt' })
    .max(100_000, { error: 'expected at most 100 000 characters' })
    .optional()
    .describe("System prompt. Default: the runner plugin's own (its `systemPrompt` setting, personas)."),
  systemPromptFile: z.string().trim().min(1, { error: 'expected a file path' }).optional().describe('Or a file holding it (read at start).'),
  tools: z
    .array(z.string().min(1).max(129))
    .max(256)
    .optional()
    .describe('Names of the tools offered to the model (a name ending in `*` matches a prefix: `crm__*`). Default: every tool.'),
  toolPolicy: z
    .strictObject({
      default: toolModeSchema.optional().describe('Mode of tools not named in `tools`.'),
      tools: z.record(z.string().min(1).max(129), toolModeSchema).optional().describe('Mode per tool name (`*` suffix: a prefix).'),
    })
    .optional()
    .describe("Tool policy of the profile's conversations, between a conversation's own entries and the channel's (the runner plugin's `toolPolicy`)."),
  inputPolicy: enumOf(INPUT_POLICIES).optional().describe("Input policy of the profile's conversations. Default: the channel's."),
  models: z
    .array(modelChoiceName)
    .max(32)
    .optional()
    .describe("Names of `models` the profile's conversations may switch to with `/model`. Default: every one of `models`."),
  skills: z
    .array(z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, { error: 'expected a skill name: 1-64 characters of a-z, 0-9 and -' }))
    .max(256)
    .optional()
    .describe("Names of the skills the profile's runs see (the local agent's `skills`, docs/agent.md#skills). Default: every skill."),
  memory: z
    .union([z.boolean(), z.strictObject({ inGroups: z.boolean().optional().describe('Memory in group chats too. Default false.') })], {
      error: 'expected true, false or { "inGroups": true }',
    })
    .optional()
    .describe(
      'Long-term memory in the profile\'s runs (when `memory.enabled`): true, memory in private chats only; false, no memory tools and no notes in the prompt; `{ "inGroups": true }`, in group chats too (the notes of the person who started the run). Default true.',
    ),
  voice: z
    .enum(['off', 'always', 'when-spoken-to'], { error: 'expected off, always or when-spoken-to' })
    .optional()
    .describe(
      "Spoken replies in the profile's runs (the runner plugin's speech settings): `off`, `always`, or `when-spoken-to` (a message the run answers is a voice note). Default: the runner plugin's default (docs/agent.md#spoken-replies).",
    ),
});

const bindingSchema = z.strictObject({
  profile: z.string().min(1, { error: 'expected a profile name' }).describe('The profile (a key of `profiles`).'),
  channel: z.string().min(1).optional().describe("A channel id: a channel plugin's id, or `<plugin>:<name>` for a named instance."),
  chat: z.string().min(1).optional().describe("A conversation id or a prefix of one (a group's id covers its topics)."),
  identity: z.string().min(1).optional().describe('A person: their identity (`<channel>:<user id>`, or the identity linked accounts share).'),
});
// Access (who may talk, per channel): applied by the host at ingest (host/access/).
/** Access policies of a channel. */
const ACCESS_POLICIES = ['open', 'allowlist', 'pairing'] as const;

// Platform ids are strings; Telegram's are numbers in JSON too.
const accessIdList = z
  .array(z.union([z.string().trim().min(1).max(128), z.number().int()], { error: 'expected a platform id (string or integer)' }))
  .transform((ids) => ids.map(String))
  .default([]);

const channelAccessSchema = z.strictObject({
  policy: enumOf(ACCESS_POLICIES)
    .default('open')
    .describe(
      "`open`: everyone (the default); `allowlist`: only `users`; `pairing`: `users` and people an admin approved: an unknown user's first direct message gets a pairing code, nothing reaches the agent until an admin sends `/pair <code>`.",
    ),
  users: accessIdList.describe('Platform user ids always allowed (`allowlist`, `pairing`). Default `[]`.'),
  groups: accessIdList.describe('Group chat ids the bot answers in under `allowlist` or `pairing`; a group not listed is refused. Default `[]`.'),
  members: z
    .boolean({ error: 'expected true or false' })
    .default(false)
    .describe(
      'In allowed groups, also check each member like a direct message (listed or approved); false lets every member of an allowed group talk. Default false.',
    ),
  admins: accessIdList.describe(
    "Platform user ids the operator makes admins of this channel: they may always talk, approve pairing codes (`/pair`), and run group-wide commands (`/stop`, `/new`, `/queue`, `/compact`, `/purge`) besides the platform's own chat admins. Default `[]`.",
  ),
});

/** One channel's access settings. */
export type ChannelAccess = z.output<typeof channelAccessSchema>;

/** The `access` section. */
export const accessSchema = z.strictObject({
  channels: z
    .record(z.string().min(1), channelAccessSchema)
    .default({})
    .describe("Access settings by channel id (the id a channel's conversation ids start with); a channel not listed is `open`. Default `{}`."),
  codeTtlSeconds: int(60, 7 * 86_400)
    .default(3600)
    .describe('How long a pairing code (and a `/link` code) stays valid, in seconds. Default 3600.'),
  noticeWindowSeconds: int(1, 7 * 86_400)
    .default(3600)
    .describe('A refused user is answered once per this window, in seconds; later messages in it get no answer. Default 3600.'),
  maxPendingCodes: int(1, 100_000)
    .default(1000)
    .describe('Most pairing codes waiting for approval at once; more requests are refused until some expire. Default 1000.'),
  maxGuesses: int(1, 1000).default(5).describe('Wrong `/pair` or `/link` codes one person may send per `guessWindowSeconds`. Default 5.'),
  guessWindowSeconds: int(10, 86_400).default(900).describe('The window of `maxGuesses`, in seconds. Default 900.'),
});

/** The `access` section after defaults. */
export type AccessConfig = z.output<typeof accessSchema>;

/** Module specifiers: a relative path (against the working directory) or a package name. */
const moduleList = z.array(z.string().trim().min(1, { error: 'expected a module path or package name' })).default([]);

const baseSchema = z.strictObject({
  redis: redisSchema.prefault({}),
  http: httpSchema.prefault({}),
  dispatch: dispatchSchema.prefault({}),
  runs: runsSchema.prefault({}),
  // Required here: the composition gives `runner.plugin` its default and the section its prefault.
  runner: runnerSchema,
  host: hostSchema.prefault({}),
  log: logSchema.prefault({}),
  model: modelSchema.prefault({}),
  compaction: compactionSchema.prefault({}),
  retention: retentionSchema.prefault({}),
  schedules: schedulesSchema.prefault({}),
  budgets: budgetsSchema
    .prefault({})
    .describe(
      'Spending budgets per person and per conversation; a run that finds one spent ends with reason `budget` and the person is told once when it resets (docs/people.md). Default: none.',
    ),
  memory: memorySchema.prefault({}),
  subagents: subagentsSchema.prefault({}),
  models: z
    .record(modelChoiceName, namedModelSchema)
    .default({})
    .describe(
      'Models a conversation may switch to with `/model <name>` (admins in groups), by name, each as changes to `model`; a profile may allow fewer (`profiles.<name>.models`). Default `{}`: `/model` only names the model in use.',
    ),
  profiles: z
    .record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'expected 1-64 characters of [A-Za-z0-9_-]' }), profileSchema)
    .default({})
    .describe('Agent profiles by name: model, system prompt, tools and tool policy, input policy (docs/people.md#agent-profiles). Default `{}`.'),
  bindings: z
    .array(bindingSchema)
    .max(10_000)
    .default([])
    .describe(
      'Which profile a conversation uses: each binding names a profile and one `identity`, `chat` or `channel`; the most specific wins (identity, then the longest chat, then channel), else the base settings. Default `[]`.',
    ),
  access: accessSchema
    .prefault({})
    .describe(
      "Who may talk to the bot, per channel: `open`, `allowlist` or `pairing`, and the channel's admins; the only place that says so (docs/access.md).",
    ),
  plugins: moduleList.describe('Extra plugin modules loaded at start (channels and runners), e.g. `["./my-channel.js"]`. Default `[]`.'),
});

/**
 * The core sections. The composition extends it with `channels` and `agents`,
 * each plugin's section validated by that plugin's schema.
 */
export const coreConfigSchema = baseSchema.extend({
  channels: z.record(z.string(), z.unknown()).default({}).describe('Channel plugin settings by plugin id; a channel runs when its section is present.'),
  agents: z.record(z.string(), z.unknown()).default({}).describe('Runner plugin settings by plugin id.'),
});

/** The configuration every process part reads (plugin sections unparsed). */
export type CoreConfig = z.output<typeof coreConfigSchema>;
/** The `redis` section. */
export type RedisConfig = CoreConfig['redis'];
