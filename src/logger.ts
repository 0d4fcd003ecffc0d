/**
 * The pino logger: secrets redacted by key path, by pattern inside error
 * messages, stacks and log messages, Redis command arguments stripped from
 * errors (ioredis attaches the failed command: `HELLO 3 AUTH <user> <password>`),
 * and every configured secret value scrubbed from each line before it is
 * written, so a secret never reaches a log line at any level.
 */
import { type DestinationStream, type Logger, type LoggerOptions, pino, stdSerializers } from 'pino';
import { MIN_SCRUBBED_SECRET_CHARS, scrubbedSecrets } from './config/secrets.js';
import { redactSecrets } from './errors.js';
import { logTraceFields } from './telemetry/tracing.js';

/** The logger type used across steerbot (pino's). */
export type { Logger } from 'pino';

/** Keys whose values are secrets wherever they appear (pino censors them by path). */
const SECRET_KEYS = [
  'apiKey',
  'api_key',
  'token',
  'botToken',
  'accessToken',
  'refreshToken',
  'secret',
  'signingSecret',
  'clientSecret',
  'password',
  'sentinelPassword',
  'authorization',
  'cookie',
  'privateKey',
] as const;

/**
 * Paths pino censors. Secret keys are covered at the top level and up to three
 * levels deep; request/response headers and connection URLs (which may carry
 * a password) are covered explicitly. A plugin adds its own (`redact` in its
 * definition; `pluginRedactPaths`).
 */
export const REDACT_PATHS: readonly string[] = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]),
  'headers["set-cookie"]',
  '*.headers["set-cookie"]',
  // Plugin settings nest deeper than the generic paths reach.
  'channels.*.token',
  '*.channels.*.token',
  'redis.url',
  '*.redis.url',
  'redisUrl',
  '*.redisUrl',
];

/** What a plugin definition declares for the logger to censor (`PluginDefinition.redact`). */
export interface PluginRedaction {
  /** Request header names whose values are secrets (a platform's secret-token or signature header), lower case. */
  headers?: readonly string[];
  /**
   * Paths inside the plugin's own settings section whose values are secrets, in
   * pino's path syntax (`token`, `*.secret` for a map of named instances).
   */
  paths?: readonly string[];
}

const PLAIN_KEY_RE = /^[A-Za-z_$][\w$]*$/;
const pathSegment = (key: string) => (PLAIN_KEY_RE.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`);

/**
 * The pino paths that censor what `plugins` declare: each header in a logged
 * `headers` object (top level and one deep), each settings path under the
 * plugin's section (`channels.<id>` or `agents.<id>`, as logged whole or
 * inside one object). Give them to `createLogger({ redactPaths })`.
 */
export function pluginRedactPaths(plugins: ReadonlyArray<{ id: string; kind: 'channel' | 'runner'; redact?: PluginRedaction }>): string[] {
  const out = new Set<string>();
  for (const p of plugins) {
    for (const h of p.redact?.headers ?? []) {
      const header = `headers[${JSON.stringify(h.toLowerCase())}]`;
      out.add(header).add(`*.${header}`);
    }
    const section = `${p.kind === 'channel' ? 'channels' : 'agents'}${pathSegment(p.id)}`;
    for (const path of p.redact?.paths ?? []) {
      const full = `${section}${path.startsWith('[') ? '' : '.'}${path}`;
      out.add(full).add(`*.${full}`);
    }
  }
  return [...out];
}

/** Options of `createLogger`. */
export interface CreateLoggerOptions {
  /** Minimum level written (`fatal` … `trace`, or `silent`). Default `info`. */
  level?: string;
  /** Where lines go. Default: stdout. */
  destination?: DestinationStream;
  /** Fields on every line, e.g. `{ service: 'host' }`. Default: pino's (`pid`, `hostname`). */
  base?: Record<string, unknown>;
  /**
   * Secret values removed from every line wherever they appear (tokens,
   * passwords, keys; see `secretValues(config)`). Values shorter than
   * `MIN_SCRUBBED_SECRET_CHARS` are left to the other redactions: they would
   * match everywhere. Default: none.
   */
  secrets?: readonly string[];
  /** Pino paths censored besides `REDACT_PATHS` (the plugins' declarations: `pluginRedactPaths`). Default: none. */
  redactPaths?: readonly string[];
  /**
   * Paths of settings declared secret, as in the configuration
   * (`channels.acme.signingKey`): pino censors them in a logged configuration,
   * at the top level or under one key (`{ config }`). Default: none.
   */
  secretPaths?: readonly string[];
}

/** A dotted settings path as a pino redact path: segments that are not identifiers (`local-agent`) in brackets. */
function redactPath(path: string): string {
  return path
    .split('.')
    .map((seg, i) => (/^[A-Za-z_$][\w$]*$/.test(seg) ? `${i === 0 ? '' : '.'}${seg}` : `[${JSON.stringify(seg)}]`))
    .join('');
}

/** What a scrubbed secret value becomes. */
const SCRUBBED = '[redacted]';

type SerializedError = ReturnType<typeof stdSerializers.err>;

/**
 * Serializes an Error with pino's serializer, then redacts secrets from its
 * message and stack (causes included) and drops the arguments of Redis
 * commands it carries (`command.args`, also inside `previousErrors` and
 * causes): they hold passwords (`AUTH`, `HELLO … AUTH`) and user data.
 * `known`: secret values to remove as well.
 */
export function serializeError(err: unknown, known: readonly string[] = []): SerializedError | unknown {
  if (!(err instanceof Error)) return err;
  return redactErrorFields(stdSerializers.err(err), new WeakSet(), known);
}

function redactErrorFields<T>(value: T, seen: WeakSet<object>, known: readonly string[]): T {
  if (typeof value === 'string') return redactSecrets(value, ...known) as T;
  if (typeof value !== 'object' || value === null || seen.has(value)) return value;
  seen.add(value);
  if (value instanceof Error) return serializeError(value, known) as T; // e.g. inside `previousErrors`
  const out: Record<string, unknown> = Array.isArray(value) ? ([] as unknown as Record<string, unknown>) : {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'command' && isRedisCommand(v)) {
      // Keep what was called, not with what: `{ name: 'hello', args: '[3 redacted]' }`.
      out[k] = { name: v.name, args: `[${Array.isArray(v.args) ? v.args.length : 0} redacted]` };
      continue;
    }
    out[k] = redactErrorFields(v, seen, known);
  }
  return out as T;
}

function isRedisCommand(v: unknown): v is { name: unknown; args?: unknown } {
  return typeof v === 'object' && v !== null && 'name' in v && 'args' in v;
}

/**
 * Every secret value in a configuration (or any object): strings under a
 * secret-looking key (`token`, `password`, `apiKey`, `secret`, …, at any
 * depth) and the credentials of URLs (`redis://user:pass@…`,
 * `https://user:pass@…` anywhere). Give them to `createLogger({ secrets })`.
 */
export function secretValues(config: unknown): string[] {
  const out = new Set<string>();
  const walk = (value: unknown, key: string, depth: number): void => {
    if (depth > 12) return;
    if (typeof value === 'string') {
      if (isSecretKey(key) && value.length > 0) out.add(value);
      for (const c of urlCredentials(value)) out.add(c);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    // Header and environment maps (an MCP server's `headers` / `env`): every value may be a credential.
    const secretMap = SECRET_MAP_KEYS.has(key);
    for (const [k, v] of Object.entries(value)) walk(v, secretMap ? 'secret' : Array.isArray(value) ? key : k, depth + 1);
  };
  walk(config, '', 0);
  return [...out];
}

/** Keys whose values are maps of secrets: request headers and process environments given to a tool server. */
export const SECRET_MAP_KEYS: ReadonlySet<string> = new Set(['headers', 'env']);

// `token`, `botToken`, `callbackSecret`, `password`, `apiKey`, `api_key`, `privateKey`, …
const SECRET_KEY_RE = /(token|secret|passw(or)?d|api[_-]?key|private[_-]?key|credential)s?$/i;
const SECRET_KEY_SET: ReadonlySet<string> = new Set(SECRET_KEYS);

/** Whether a string under this key is a secret: a known secret key, or one named like one (`…Token`, `…Secret`, `…Password`). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY_SET.has(key) || SECRET_KEY_RE.test(key);
}

/** User name and password of a URL with credentials, raw and decoded. */
function urlCredentials(text: string): string[] {
  if (!text.includes('@') || !text.includes('://')) return [];
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const part of [url.password, url.password ? undefined : url.username]) {
    if (!part) continue;
    found.push(part);
    try {
      const decoded = decodeURIComponent(part);
      if (decoded !== part) found.push(decoded);
    } catch {
      // not %-encoded
    }
  }
  return found;
}

/**
 * Replaces each secret (as written, and as JSON escapes it) in a serialized line:
 * the logger's own `secrets` and every declared one (`declareSecrets`, read again when one is added).
 */
function lineScrubber(secrets: readonly string[]): (line: string) => string {
  let declared: readonly string[] | undefined;
  let list: string[] = [];
  const forms = (): string[] => {
    const now = scrubbedSecrets();
    if (now === declared) return list;
    declared = now;
    const all = new Set<string>();
    for (const s of [...secrets, ...now]) {
      if (s.length < MIN_SCRUBBED_SECRET_CHARS) continue;
      all.add(s);
      all.add(JSON.stringify(s).slice(1, -1));
    }
    // Longest first: a secret that contains another is replaced whole.
    list = [...all].sort((a, b) => b.length - a.length);
    return list;
  };
  return (line) => {
    let out = line;
    for (const f of forms()) if (out.includes(f)) out = out.split(f).join(SCRUBBED);
    return out;
  };
}

/** Creates the process logger. Never throws on a bad level: config validation catches those first. */
export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const known = (opts.secrets ?? []).filter((s) => s.length >= MIN_SCRUBBED_SECRET_CHARS);
  const errSerializer = (err: unknown) => serializeError(err, known);
  const scrub = lineScrubber(known);
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    ...(opts.base ? { base: opts.base } : {}),
    redact: {
      paths: [
        ...new Set([
          ...REDACT_PATHS,
          ...(opts.redactPaths ?? []),
          ...(opts.secretPaths ?? []).map(redactPath).flatMap((p) => [p, p.startsWith('[') ? `*${p}` : `*.${p}`]),
        ]),
      ],
      censor: '[redacted]',
    },
    serializers: { err: errSerializer, error: errSerializer },
    // Lines written inside a run or a request carry its `trace_id` and `span_id` (nothing without a tracing SDK).
    mixin: logTraceFields,
    formatters: {
      // An Error under any other key (`{ cause: err }`) is serialized like `err`: JSON alone would keep its
      // enumerable fields (an ioredis error's `command.args`) and lose its message.
      log(object) {
        let out: Record<string, unknown> | undefined;
        for (const [k, v] of Object.entries(object)) {
          if (v instanceof Error && k !== 'err' && k !== 'error') (out ??= { ...object })[k] = errSerializer(v);
        }
        return out ?? object;
      },
    },
    hooks: {
      // A secret can also arrive inside the message text (`log.info('sent %s', url)`).
      logMethod(args, method) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactSecrets(a, ...known) : a)) as Parameters<typeof method>);
      },
      // Last line of defence: a configured or declared secret anywhere in the line (any field, any depth).
      streamWrite: scrub,
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger whose lines carry `conversationId`. */
export function conversationLogger(logger: Logger, conversationId: string): Logger {
  return logger.child({ conversationId });
}

/**
 * A child logger whose lines carry `conversationId`, `runId` and any `more`
 * fields: one child, since each costs its bindings' redaction.
 */
export function runLogger(logger: Logger, conversationId: string, runId: string, more: Record<string, unknown> = {}): Logger {
  return logger.child({ conversationId, runId, ...more });
}
