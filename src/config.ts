/**
 * Loads the configuration: an optional JSON file, then environment variables
 * on top, then one validation that reports every bad field at once.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError, type ConfigIssue, redactSecrets } from './errors.js';
import { configSchema, type SteerbotConfig } from './config-schema.js';

export {
  configSchema,
  DEFAULT_CONFIG,
  INPUT_POLICIES,
  LOG_LEVELS,
  MODEL_PROVIDERS,
  type ChannelsConfig,
  type DispatchConfig,
  type HostPort,
  type HttpConfig,
  type InputPolicy,
  type ModelConfig,
  type RedisConfig,
  type RunnerConfig,
  type RunsConfig,
  type SteerbotConfig,
  type SteerbotConfigInput,
} from './config-schema.js';

/** How an environment variable's text becomes a config value. */
export type EnvKind = 'string' | 'int' | 'number' | 'bool' | 'list';

/** One environment variable and the setting it overrides. */
export interface EnvBinding {
  /** Variable name, e.g. `PORT`. */
  env: string;
  /** Dotted config path it sets, e.g. `http.port`. */
  path: string;
  /** How its text is parsed. */
  kind: EnvKind;
  /** Its value must never be echoed in errors or logs. */
  secret?: boolean;
  /**
   * Applied only when this section exists (from the file or an earlier
   * variable), e.g. `TELEGRAM_MODE` only for a channel that has a token:
   * a channel is enabled by its token, not by its other settings.
   */
  onlyWith?: string;
}

/** Every environment variable steerbot reads, in documentation order. */
export const ENV_BINDINGS: readonly EnvBinding[] = [
  { env: 'REDIS_URL', path: 'redis.url', kind: 'string', secret: true },
  { env: 'REDIS_MODE', path: 'redis.mode', kind: 'string' },
  { env: 'REDIS_SENTINELS', path: 'redis.sentinels', kind: 'list' },
  { env: 'REDIS_SENTINEL_NAME', path: 'redis.sentinelName', kind: 'string' },
  { env: 'REDIS_CLUSTER_NODES', path: 'redis.clusterNodes', kind: 'list' },
  { env: 'STEERBOT_PREFIX', path: 'redis.prefix', kind: 'string' },
  { env: 'REDIS_PASSWORD', path: 'redis.password', kind: 'string', secret: true },
  { env: 'HOST', path: 'http.host', kind: 'string' },
  { env: 'PORT', path: 'http.port', kind: 'int' },
  { env: 'HTTP_BODY_LIMIT_BYTES', path: 'http.bodyLimitBytes', kind: 'int' },
  { env: 'STEERBOT_DEFAULT_POLICY', path: 'dispatch.defaultPolicy', kind: 'string' },
  { env: 'STEERBOT_STEERING_CAP', path: 'dispatch.steeringCap', kind: 'int' },
  { env: 'STEERBOT_DEDUPE_TTL_SECONDS', path: 'dispatch.dedupeTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_MAX_MESSAGE_CHARS', path: 'dispatch.maxMessageChars', kind: 'int' },
  { env: 'STEERBOT_LEASE_MS', path: 'runs.leaseMs', kind: 'int' },
  { env: 'STEERBOT_HEARTBEAT_MS', path: 'runs.heartbeatMs', kind: 'int' },
  { env: 'STEERBOT_RECONCILE_INTERVAL_MS', path: 'runs.reconcileIntervalMs', kind: 'int' },
  { env: 'STEERBOT_QUEUE_NAME', path: 'runs.queueName', kind: 'string' },
  { env: 'STEERBOT_RUNNER', path: 'runner.enabled', kind: 'bool' },
  { env: 'STEERBOT_RUNNER_CONCURRENCY', path: 'runner.concurrency', kind: 'int' },
  { env: 'STEERBOT_RUNNER_SHUTDOWN_GRACE_MS', path: 'runner.shutdownGraceMs', kind: 'int' },
  { env: 'STEERBOT_OUTBOX_TTL_SECONDS', path: 'runner.outboxTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_RUNNER_STEERING', path: 'runner.capabilities.steering', kind: 'bool' },
  { env: 'STEERBOT_SYSTEM_PROMPT', path: 'agent.systemPrompt', kind: 'string' },
  { env: 'STEERBOT_AGENT_STREAMING', path: 'agent.streaming', kind: 'bool' },
  { env: 'STEERBOT_AGENT_HTTP_FETCH', path: 'agent.httpFetch', kind: 'bool' },
  { env: 'STEERBOT_AGENT_CURRENT_TIME', path: 'agent.currentTime', kind: 'bool' },
  { env: 'STEERBOT_AGENT_STEERING_MODE', path: 'agent.steeringMode', kind: 'string' },
  { env: 'STEERBOT_AGENT_MAX_STEPS', path: 'agent.maxSteps', kind: 'int' },
  { env: 'STEERBOT_HOST', path: 'host.enabled', kind: 'bool' },
  { env: 'LOG_LEVEL', path: 'log.level', kind: 'string' },
  { env: 'STEERBOT_MODEL_PROVIDER', path: 'model.provider', kind: 'string' },
  { env: 'OPENAI_BASE_URL', path: 'model.baseURL', kind: 'string' },
  { env: 'OPENAI_API_KEY', path: 'model.apiKey', kind: 'string', secret: true },
  { env: 'STEERBOT_MODEL', path: 'model.name', kind: 'string' },
  { env: 'STEERBOT_MODEL_CONTEXT_WINDOW', path: 'model.contextWindow', kind: 'int' },
  { env: 'STEERBOT_MODEL_OUTPUT_RESERVE', path: 'model.outputReserve', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_THRESHOLD', path: 'compaction.threshold', kind: 'number' },
  { env: 'STEERBOT_COMPACTION_KEEP_TURNS', path: 'compaction.keepRecentTurns', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_MAX_SUMMARY_CHARS', path: 'compaction.maxSummaryChars', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_TAIL_ENTRIES', path: 'compaction.tailEntries', kind: 'int' },
  { env: 'TELEGRAM_BOT_TOKEN', path: 'channels.telegram.token', kind: 'string', secret: true },
  { env: 'TELEGRAM_MODE', path: 'channels.telegram.mode', kind: 'string', onlyWith: 'channels.telegram' },
  { env: 'TELEGRAM_WEBHOOK_SECRET', path: 'channels.telegram.webhookSecret', kind: 'string', secret: true, onlyWith: 'channels.telegram' },
  { env: 'TELEGRAM_API_ROOT', path: 'channels.telegram.apiRoot', kind: 'string', onlyWith: 'channels.telegram' },
  { env: 'DISCORD_BOT_TOKEN', path: 'channels.discord.token', kind: 'string', secret: true },
  { env: 'DISCORD_API_BASE', path: 'channels.discord.apiBase', kind: 'string', onlyWith: 'channels.discord' },
];

/** Environment variable naming the JSON config file. */
export const CONFIG_FILE_ENV = 'STEERBOT_CONFIG';

/** Where `loadConfig` reads from. */
export interface LoadConfigOptions {
  /** Environment to read. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** JSON config file. Default: `env.STEERBOT_CONFIG`, else none. Relative paths resolve against the working directory. */
  file?: string;
}

type Json = Record<string, unknown>;
type Parsed = { ok: true; value: unknown } | { ok: false; expected: string };

const BOOLS: Record<string, boolean> = { true: true, false: false, '1': true, '0': false, yes: true, no: false, on: true, off: false };

function parseEnv(kind: EnvKind, text: string): Parsed {
  switch (kind) {
    case 'string':
      return { ok: true, value: text };
    case 'int': {
      const n = Number(text);
      return /^[+-]?\d+$/.test(text) && Number.isSafeInteger(n) ? { ok: true, value: n } : { ok: false, expected: 'an integer' };
    }
    case 'number': {
      const n = Number(text);
      return text.trim() !== '' && Number.isFinite(n) ? { ok: true, value: n } : { ok: false, expected: 'a number' };
    }
    case 'bool': {
      const b = BOOLS[text.toLowerCase()];
      return b === undefined ? { ok: false, expected: 'true, false, 1 or 0' } : { ok: true, value: b };
    }
    case 'list':
      return { ok: true, value: text.split(',').map((s) => s.trim()).filter((s) => s.length > 0) };
  }
}

function describeEnv(b: EnvBinding, text: string): string {
  if (b.secret) return `env ${b.env}`;
  const shown = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  return `env ${b.env}=${JSON.stringify(shown)}`;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Sets `path` in `root`, creating sections; leaves a non-object section alone so the schema reports it. */
function setPath(root: Json, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = root;
  for (const part of parts.slice(0, -1)) {
    const next = node[part] ?? (node[part] = {});
    if (!isObject(next)) return;
    node = next;
  }
  node[parts[parts.length - 1] as string] = value;
}

function hasPath(root: Json, path: string): boolean {
  let node: unknown = root;
  for (const part of path.split('.')) {
    if (!isObject(node) || !(part in node)) return false;
    node = node[part];
  }
  return isObject(node);
}

function readConfigFile(file: string, issues: ConfigIssue[]): Json {
  const where = `config file ${file}`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown error';
    issues.push({ path: where, message: `cannot be read (${code})` });
    return {};
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    issues.push({ path: where, message: `is not valid JSON (${(err as Error).message})` });
    return {};
  }
  if (!isObject(parsed)) {
    issues.push({ path: where, message: 'expected a JSON object at the top level' });
    return {};
  }
  return parsed;
}

/** Which env var (with its text) set each dotted path. */
type EnvSources = Map<string, string>;

/** The config file's contents and name, when there is one. */
interface FileSource {
  name: string;
  json: Json;
}

function fileHas(json: Json, path: readonly PropertyKey[]): boolean {
  let node: unknown = json;
  for (const part of path) {
    if (typeof node !== 'object' || node === null || !(part in node)) return false;
    node = (node as Record<PropertyKey, unknown>)[part];
  }
  return true;
}

function sourceOf(path: readonly PropertyKey[], envSources: EnvSources, file: FileSource | undefined): string | undefined {
  const dotted = path.map(String).join('.');
  for (const [p, desc] of envSources) if (dotted === p || dotted.startsWith(`${p}.`)) return desc;
  return file && fileHas(file.json, path) ? `in ${file.name}` : undefined;
}

function toIssues(error: z.ZodError, envSources: EnvSources, file: FileSource | undefined): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const path = base ? `${base}.${key}` : key;
        out.push({ path, message: `unknown setting${file ? ` (in ${file.name})` : ''}` });
      }
      continue;
    }
    const src = sourceOf(issue.path, envSources, file);
    out.push({ path: base || '(root)', message: src ? `${issue.message} (${src})` : issue.message });
  }
  return out;
}

/**
 * Reads, overlays and validates the configuration.
 * @throws ConfigError naming every bad field (dotted path, env var when it came from one, what was expected).
 */
export function loadConfig(opts: LoadConfigOptions = {}): SteerbotConfig {
  const env = opts.env ?? process.env;
  const issues: ConfigIssue[] = [];
  const fileOpt = opts.file ?? (env[CONFIG_FILE_ENV] || undefined);
  const file = fileOpt === undefined ? undefined : resolve(fileOpt);
  const fileJson: Json = file === undefined ? {} : readConfigFile(file, issues);
  const raw = structuredClone(fileJson);

  const envSources: EnvSources = new Map();
  for (const b of ENV_BINDINGS) {
    const text = env[b.env]?.trim();
    if (text === undefined || text === '') continue; // empty means unset, as in most deploy tools
    if (b.onlyWith !== undefined && !hasPath(raw, b.onlyWith)) continue;
    const parsed = parseEnv(b.kind, text);
    if (!parsed.ok) {
      issues.push({ path: b.path, message: `expected ${parsed.expected} (${describeEnv(b, text)})` });
      continue;
    }
    envSources.set(b.path, describeEnv(b, text));
    setPath(raw, b.path, parsed.value);
  }

  const result = configSchema.safeParse(raw);
  if (!result.success) issues.push(...toIssues(result.error, envSources, file === undefined ? undefined : { name: file, json: fileJson }));
  else if (!result.data.host.enabled && !result.data.runner.enabled) {
    issues.push({ path: 'host.enabled', message: 'host and runner are both disabled; enable at least one (STEERBOT_HOST / STEERBOT_RUNNER)' });
  }
  if (issues.length > 0 || !result.success) throw new ConfigError(issues);
  return result.data;
}

/** A log-safe copy of the configuration: secrets shown only as `[set]`, channel settings reduced to their ids. */
export function configSummary(config: SteerbotConfig): Record<string, unknown> {
  const { url, password, ...redis } = config.redis;
  const { apiKey, ...model } = config.model;
  return {
    ...config,
    // Unset secrets are left out: a redacting logger would otherwise print `[redacted]` for a value that is not there.
    redis: { ...redis, ...(url && { url: redactSecrets(url) }), ...(password && { password: '[set]' }) },
    model: { ...model, ...(apiKey && { apiKey: '[set]' }) },
    channels: [
      ...(config.channels.telegram ? ['telegram'] : []),
      ...(config.channels.discord ? ['discord'] : []),
      ...Object.keys(config.channels.webhooks).map((name) => `webhook:${name}`),
    ],
  };
}
