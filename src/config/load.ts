/**
 * Configuration loading mechanics: a JSON file, environment variables on top
 * (each binding names the setting it overrides), then one validation that
 * reports every bad field at once. The composition supplies the schema and
 * the bindings (core ones here, plugin ones from each plugin definition).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { z } from 'zod';
import { ConfigError, type ConfigIssue } from '../errors.js';
import { DEFAULTS, MODEL_PROVIDER_KEY_ENV } from './defaults.js';

export { type CoreConfig, coreConfigSchema } from './schema.js';

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
  /** Applied only when the setting at `path` (or its default) is one of `values`, e.g. a provider's key variable. */
  onlyWhen?: { path: string; values: readonly string[]; default: string };
}

/** A provider's conventional key variable, applied when that provider is selected. */
const keyBinding = (env: string): EnvBinding => ({
  env,
  path: 'model.apiKey',
  kind: 'string',
  secret: true,
  onlyWhen: {
    path: 'model.provider',
    values: Object.entries(MODEL_PROVIDER_KEY_ENV)
      .filter(([, v]) => v === env)
      .map(([p]) => p),
    default: DEFAULTS.model.provider,
  },
});

/** The environment variables of the core sections, in documentation order. Plugins declare their own. */
export const CORE_ENV_BINDINGS: readonly EnvBinding[] = [
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
  { env: 'HTTP_REQUEST_TIMEOUT_MS', path: 'http.requestTimeoutMs', kind: 'int' },
  { env: 'STEERBOT_METRICS_TOKEN', path: 'http.metricsToken', kind: 'string', secret: true },
  { env: 'STEERBOT_DEFAULT_POLICY', path: 'dispatch.defaultPolicy', kind: 'string' },
  { env: 'STEERBOT_STEERING_CAP', path: 'dispatch.steeringCap', kind: 'int' },
  { env: 'STEERBOT_DEDUPE_TTL_SECONDS', path: 'dispatch.dedupeTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_MAX_MESSAGE_CHARS', path: 'dispatch.maxMessageChars', kind: 'int' },
  { env: 'STEERBOT_RATE_LIMIT_USER_CAPACITY', path: 'dispatch.rateLimit.user.capacity', kind: 'int' },
  { env: 'STEERBOT_RATE_LIMIT_USER_PER_MINUTE', path: 'dispatch.rateLimit.user.refillPerMinute', kind: 'number' },
  { env: 'STEERBOT_RATE_LIMIT_CONVERSATION_CAPACITY', path: 'dispatch.rateLimit.conversation.capacity', kind: 'int' },
  { env: 'STEERBOT_RATE_LIMIT_CONVERSATION_PER_MINUTE', path: 'dispatch.rateLimit.conversation.refillPerMinute', kind: 'number' },
  { env: 'STEERBOT_LEASE_MS', path: 'runs.leaseMs', kind: 'int' },
  { env: 'STEERBOT_HEARTBEAT_MS', path: 'runs.heartbeatMs', kind: 'int' },
  { env: 'STEERBOT_RECONCILE_INTERVAL_MS', path: 'runs.reconcileIntervalMs', kind: 'int' },
  { env: 'STEERBOT_QUEUE_NAME', path: 'runs.queueName', kind: 'string' },
  { env: 'STEERBOT_FOLLOW_UPS_ON_FAILURE', path: 'runs.followUpsOnFailure', kind: 'int' },
  { env: 'STEERBOT_RUNNER', path: 'runner.enabled', kind: 'bool' },
  { env: 'STEERBOT_RUNNER_PLUGIN', path: 'runner.plugin', kind: 'string' },
  { env: 'STEERBOT_RUNNER_CONCURRENCY', path: 'runner.concurrency', kind: 'int' },
  { env: 'STEERBOT_RUNNER_SHUTDOWN_GRACE_MS', path: 'runner.shutdownGraceMs', kind: 'int' },
  { env: 'STEERBOT_OUTBOX_TTL_SECONDS', path: 'runner.outboxTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_HOST', path: 'host.enabled', kind: 'bool' },
  { env: 'STEERBOT_CONSOLE', path: 'host.console.enabled', kind: 'bool' },
  { env: 'STEERBOT_CONSOLE_TOKEN', path: 'host.console.token', kind: 'string', secret: true },
  { env: 'STEERBOT_CONSOLE_ALLOW_LOOPBACK', path: 'host.console.allowLoopback', kind: 'bool' },
  { env: 'STEERBOT_API_TOKEN', path: 'host.api.token', kind: 'string', secret: true },
  { env: 'STEERBOT_TRACE_URL', path: 'host.console.traceUrl', kind: 'string' },
  { env: 'LOG_LEVEL', path: 'log.level', kind: 'string' },
  { env: 'LOG_FORMAT', path: 'log.format', kind: 'string' },
  { env: 'STEERBOT_MODEL_PROVIDER', path: 'model.provider', kind: 'string' },
  {
    env: 'OPENAI_BASE_URL',
    path: 'model.baseURL',
    kind: 'string',
    onlyWhen: { path: 'model.provider', values: ['openai', 'openai-compatible'], default: DEFAULTS.model.provider },
  },
  keyBinding('OPENAI_API_KEY'),
  keyBinding('ANTHROPIC_API_KEY'),
  keyBinding('GOOGLE_GENERATIVE_AI_API_KEY'),
  { env: 'STEERBOT_MODEL', path: 'model.name', kind: 'string' },
  { env: 'STEERBOT_MODEL_API', path: 'model.api', kind: 'string' },
  { env: 'STEERBOT_MODEL_CONTEXT_WINDOW', path: 'model.contextWindow', kind: 'int' },
  { env: 'STEERBOT_MODEL_OUTPUT_RESERVE', path: 'model.outputReserve', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_THRESHOLD', path: 'compaction.threshold', kind: 'number' },
  { env: 'STEERBOT_COMPACTION_KEEP_TURNS', path: 'compaction.keepRecentTurns', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_MAX_SUMMARY_CHARS', path: 'compaction.maxSummaryChars', kind: 'int' },
  { env: 'STEERBOT_COMPACTION_TAIL_ENTRIES', path: 'compaction.tailEntries', kind: 'int' },
  { env: 'STEERBOT_AFTER_PURGE', path: 'dispatch.afterPurge', kind: 'string' },
  { env: 'STEERBOT_ENDED_RUN_TTL_SECONDS', path: 'retention.endedRunTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_RECORD_TRIM_AFTER_ENTRIES', path: 'retention.recordTrimAfterEntries', kind: 'int' },
  { env: 'STEERBOT_RECORD_TRIM_AFTER_DAYS', path: 'retention.recordTrimAfterDays', kind: 'int' },
  { env: 'STEERBOT_IDLE_TTL_SECONDS', path: 'retention.idleTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_TOMBSTONE_TTL_SECONDS', path: 'retention.tombstoneTtlSeconds', kind: 'int' },
  { env: 'STEERBOT_INDEX_MAX_ENTRIES', path: 'retention.indexMaxEntries', kind: 'int' },
  { env: 'STEERBOT_PLUGINS', path: 'plugins', kind: 'list' },
];

/** Environment variable naming the JSON config file. */
export const CONFIG_FILE_ENV = 'STEERBOT_CONFIG';

/** Where configuration is read from. */
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
      return {
        ok: true,
        value: text
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s.length > 0),
      };
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

function readJsonFile(file: string, issues: ConfigIssue[]): Json {
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
export type EnvSources = Map<string, string>;

/** The config file's contents and name, when there is one. */
export interface FileSource {
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

function getPath(root: Json, path: string): unknown {
  let node: unknown = root;
  for (const part of path.split('.')) {
    if (!isObject(node)) return undefined;
    node = node[part];
  }
  return node;
}

/** A configuration being assembled: the file's contents with environment variables applied on top. */
export interface ConfigLayers {
  /** The raw settings (file, then env). */
  raw: Json;
  /** Problems found so far (unreadable file, unparsable variables). */
  issues: ConfigIssue[];
  /** Which variable set each dotted path (for error messages). */
  envSources: EnvSources;
  /** The config file, when there is one. */
  file: FileSource | undefined;
  /** Directory module specifiers in the file resolve against: the file's own, else the working directory. */
  baseDir: string;
}

/** Reads the config file (`opts.file`, else `STEERBOT_CONFIG`, else none). */
export function readConfigFile(opts: LoadConfigOptions = {}): ConfigLayers {
  const env = opts.env ?? process.env;
  const issues: ConfigIssue[] = [];
  const fileOpt = opts.file ?? (env[CONFIG_FILE_ENV] || undefined);
  const file = fileOpt === undefined ? undefined : resolve(fileOpt);
  const json: Json = file === undefined ? {} : readJsonFile(file, issues);
  return {
    raw: structuredClone(json),
    issues,
    envSources: new Map(),
    file: file === undefined ? undefined : { name: file, json },
    baseDir: file === undefined ? process.cwd() : dirname(file),
  };
}

/** Applies the variables of `bindings` found in `env` to `layers.raw` (in order: a later binding sees earlier ones). */
export function applyEnv(layers: ConfigLayers, bindings: readonly EnvBinding[], env: NodeJS.ProcessEnv = process.env): void {
  for (const b of bindings) {
    const text = env[b.env]?.trim();
    if (text === undefined || text === '') continue; // empty means unset, as in most deploy tools
    if (b.onlyWith !== undefined && !isObject(getPath(layers.raw, b.onlyWith))) continue;
    if (b.onlyWhen !== undefined) {
      const current = getPath(layers.raw, b.onlyWhen.path) ?? b.onlyWhen.default;
      if (!b.onlyWhen.values.includes(String(current))) continue;
    }
    if (layers.envSources.has(b.path)) continue; // the first variable that sets a path wins
    const parsed = parseEnv(b.kind, text);
    if (!parsed.ok) {
      layers.issues.push({ path: b.path, message: `expected ${parsed.expected} (${describeEnv(b, text)})` });
      continue;
    }
    layers.envSources.set(b.path, describeEnv(b, text));
    setPath(layers.raw, b.path, parsed.value);
  }
}

/**
 * Validates the assembled settings with `schema`.
 * @throws ConfigError naming every bad field (dotted path, the variable or file it came from, what was expected).
 */
export function validateConfig<S extends z.ZodType>(schema: S, layers: ConfigLayers): z.output<S> {
  const result = schema.safeParse(layers.raw);
  const issues = [...layers.issues];
  if (!result.success) issues.push(...toIssues(result.error, layers.envSources, layers.file));
  if (issues.length > 0 || !result.success) throw new ConfigError(issues);
  return result.data;
}
