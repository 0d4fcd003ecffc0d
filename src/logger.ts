/**
 * The pino logger: secrets redacted by key path, and by pattern inside error
 * messages, stacks and log messages, so a token never reaches a log line.
 */
import { pino, stdSerializers, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { redactSecrets } from './errors.js';

/** The logger type used across steerbot (pino's). */
export type { Logger } from 'pino';

/** Keys whose values are secrets wherever they appear. */
const SECRET_KEYS = [
  'apiKey',
  'api_key',
  'token',
  'botToken',
  'accessToken',
  'refreshToken',
  'secret',
  'signingSecret',
  'webhookSecret',
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
 * a password) are covered explicitly.
 */
export const REDACT_PATHS: readonly string[] = [
  ...SECRET_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]),
  'headers["x-telegram-bot-api-secret-token"]',
  '*.headers["x-telegram-bot-api-secret-token"]',
  'headers["x-signature-ed25519"]',
  '*.headers["x-signature-ed25519"]',
  'headers["set-cookie"]',
  '*.headers["set-cookie"]',
  'headers["x-steerbot-signature"]',
  '*.headers["x-steerbot-signature"]',
  // Channel settings nest deeper than the generic paths reach: `config.channels.webhooks.<name>.secret`.
  'channels.*.token',
  '*.channels.*.token',
  'channels.*.webhookSecret',
  '*.channels.*.webhookSecret',
  'channels.webhooks.*.secret',
  '*.channels.webhooks.*.secret',
  'channels.webhooks.*.callbackSecret',
  '*.channels.webhooks.*.callbackSecret',
  'redis.url',
  '*.redis.url',
  'redisUrl',
  '*.redisUrl',
];

/** Options of `createLogger`. */
export interface CreateLoggerOptions {
  /** Minimum level written (`fatal` … `trace`, or `silent`). Default `info`. */
  level?: string;
  /** Where lines go. Default: stdout. */
  destination?: DestinationStream;
  /** Fields on every line, e.g. `{ service: 'host' }`. Default: pino's (`pid`, `hostname`). */
  base?: Record<string, unknown>;
}

type SerializedError = ReturnType<typeof stdSerializers.err>;

/** Serializes an Error with pino's serializer, then redacts secrets from its message and stack (causes included). */
export function serializeError(err: unknown): SerializedError | unknown {
  if (!(err instanceof Error)) return err;
  return redactErrorStrings(stdSerializers.err(err), new WeakSet());
}

function redactErrorStrings<T>(value: T, seen: WeakSet<object>): T {
  if (typeof value === 'string') return redactSecrets(value) as T;
  if (typeof value !== 'object' || value === null || seen.has(value)) return value;
  seen.add(value);
  const out: Record<string, unknown> = Array.isArray(value) ? ([] as unknown as Record<string, unknown>) : {};
  for (const [k, v] of Object.entries(value)) out[k] = redactErrorStrings(v, seen);
  return out as T;
}

/** Creates the process logger. Never throws on a bad level: config validation catches those first. */
export function createLogger(opts: CreateLoggerOptions = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    ...(opts.base ? { base: opts.base } : {}),
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    serializers: { err: serializeError, error: serializeError },
    hooks: {
      // A secret can also arrive inside the message text (`log.info('sent %s', url)`).
      logMethod(args, method) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactSecrets(a) : a)) as Parameters<typeof method>);
      },
    },
  };
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger whose lines carry `conversationId`. */
export function conversationLogger(logger: Logger, conversationId: string): Logger {
  return logger.child({ conversationId });
}

/** A child logger whose lines carry `conversationId` and `runId`. */
export function runLogger(logger: Logger, conversationId: string, runId: string): Logger {
  return logger.child({ conversationId, runId });
}
