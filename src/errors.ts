/**
 * The few typed errors steerbot throws. Branch on `instanceof` or `code`,
 * never on message text. Secrets are redacted when an error is built, so an
 * error is always safe to log.
 */
import { scrubbedSecrets } from './config/secrets.js';

/** Codes of every steerbot error. */
export type SteerbotErrorCode =
  | 'CONFIG'
  | 'SCRIPT'
  | 'STALE_RUN'
  | 'RUN_NOT_FOUND'
  | 'RUN_ENDED'
  | 'LEASE_HELD'
  | 'INVALID_INPUT'
  | 'SCHEDULE_LIMIT'
  | 'SCHEDULE_FORBIDDEN'
  | 'MEMORY_LIMIT'
  | 'FETCH_REFUSED'
  | 'RECORD'
  | 'CHANNEL_API'
  | 'REDIS_UNAVAILABLE';

/** Base class of every steerbot error. */
export class SteerbotError extends Error {
  /** Machine-readable code; stable across releases. */
  readonly code: SteerbotErrorCode;

  constructor(code: SteerbotErrorCode, message: string, options?: { cause?: unknown }) {
    super(redactSecrets(message), options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** One bad configuration field: its dotted path and what it expected. */
export interface ConfigIssue {
  /** Dotted path of the field, e.g. `redis.url` or `env REDIS_URL`. */
  path: string;
  /** What was expected, in words. */
  message: string;
}

/** The configuration is invalid; `issues` names every bad field. */
export class ConfigError extends SteerbotError {
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[]) {
    super('CONFIG', `invalid configuration:\n${issues.map((i) => `  - ${i.path}: ${i.message}`).join('\n')}`);
    this.issues = issues;
  }
}

/** A Lua script refused a call, or returned something this build cannot read. */
export class ScriptError extends SteerbotError {
  /** The script's name, e.g. `ingest`. */
  readonly script: string;
  constructor(script: string, message: string, code: SteerbotErrorCode = 'SCRIPT', options?: { cause?: unknown }) {
    super(code, `${script}: ${message}`, options);
    this.script = script;
  }
}

/** A fenced write carried a token that is no longer the run's: the caller lost the run and must stop. */
export class StaleRunError extends ScriptError {
  constructor(script: string, runId: string) {
    super(script, `run ${runId}: fencing token is stale (another attempt owns the run)`, 'STALE_RUN');
  }
}

/** The run does not exist (never created, or its conversation was deleted). */
export class RunNotFoundError extends ScriptError {
  constructor(script: string, runId: string) {
    super(script, `run ${runId} does not exist`, 'RUN_NOT_FOUND');
  }
}

/** The run has already ended; nothing more can be written for it. */
export class RunEndedError extends ScriptError {
  constructor(script: string, runId: string) {
    super(script, `run ${runId} has already ended`, 'RUN_ENDED');
  }
}

/** A compare-and-set lost to a concurrent writer; `current` is the value that won. */
export class CasConflictError extends ScriptError {
  /** The stored value that won, when there was one. */
  readonly current: string | undefined;
  constructor(script: string, current: string | undefined) {
    super(script, 'compare-and-set conflict: the value changed since it was read', 'SCRIPT');
    this.current = current;
  }
}

/** Another worker holds a live lease on the run; retry once `leaseUntilMs` has passed. */
export class LeaseHeldError extends ScriptError {
  /** When the current lease expires, ms since the epoch (Redis clock). */
  readonly leaseUntilMs: number;
  constructor(script: string, runId: string, leaseUntilMs: number) {
    super(script, `run ${runId} is leased until ${new Date(leaseUntilMs).toISOString()}`, 'LEASE_HELD');
    this.leaseUntilMs = leaseUntilMs;
  }
}

/** Caller input was rejected before anything was written. */
export class InvalidInputError extends SteerbotError {
  constructor(message: string, code: SteerbotErrorCode = 'INVALID_INPUT') {
    super(code, message);
  }
}

/** A conversation already has as many schedules as allowed (`schedules.maxPerConversation`); nothing was written. */
export class ScheduleLimitError extends InvalidInputError {
  constructor(message: string) {
    super(message, 'SCHEDULE_LIMIT');
  }
}

/** A schedule may not be created or cancelled by who asked (created in a run someone else is charged for; another person's, in a chat where they are not an admin); nothing was changed. */
export class ScheduleForbiddenError extends SteerbotError {
  constructor(message: string) {
    super('SCHEDULE_FORBIDDEN', message);
  }
}

/** Why a note was refused: the identity has as many notes as allowed (`count`), or the note is too long (`size`). */
export type MemoryLimit = 'count' | 'size';

/** A note was refused by a memory limit (`memory.maxNotes`, `memory.maxNoteChars`); nothing was written. */
export class MemoryLimitError extends InvalidInputError {
  /** Which limit. */
  readonly limit: MemoryLimit;
  constructor(limit: MemoryLimit, message: string) {
    super(message, 'MEMORY_LIMIT');
    this.limit = limit;
  }
}

/**
 * Why a guarded fetch refused a URL: `url` (not http(s), credentials in it, unreadable
 * redirect), `host` (not on the allow-list), `address` (resolves to a non-public address),
 * `redirects` (too many), `too_large` (body over the limit), `timeout` (over the time limit).
 */
export type FetchRefusal = 'url' | 'host' | 'address' | 'redirects' | 'too_large' | 'timeout';

/**
 * A URL fetched on a user's or a model's behalf (or a redirect it led to) was
 * refused; `reason` says why. Messages name the host, never the whole URL.
 */
export class FetchRefusedError extends InvalidInputError {
  /** Why the fetch was refused. */
  readonly reason: FetchRefusal;
  constructor(reason: FetchRefusal, message: string) {
    super(message, 'FETCH_REFUSED');
    this.reason = reason;
  }
}

/** A conversation record entry could not be read by this build (fail-closed). */
export class RecordError extends SteerbotError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('RECORD', message, options);
  }
}

/** A channel platform API call failed. */
export class ChannelApiError extends SteerbotError {
  /** How long the platform asked us to wait before retrying (429), in ms. */
  readonly retryAfterMs: number | undefined;
  /** HTTP status, when there was one. */
  readonly status: number | undefined;
  constructor(message: string, opts: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super('CHANNEL_API', message, { cause: opts.cause });
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/** Redis could not be reached; callers at ingress answer 503 so the platform retries. */
export class RedisUnavailableError extends SteerbotError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('REDIS_UNAVAILABLE', message, options);
  }
}

// Telegram bot tokens, `Bearer x`, `key=...`, redis://user:pass@ URLs. Each takes time linear in the text (it may be a
// stranger's: a tool call's arguments, an error quoting a body): a URL's scheme is a lookbehind checked only at a `:`,
// not a run scanned from every word start (`a.a.a.…`), and a password runs to its `@` but not past the next `://`.
const SECRET_PATTERNS: Array<[RegExp, string]> = [
  [/\b\d{6,12}:[A-Za-z0-9_-]{30,}\b/g, '[redacted-token]'],
  [/(bot)\d{6,12}:[A-Za-z0-9_-]{20,}/gi, '$1[redacted-token]'],
  [/(Bearer|Bot)\s+[A-Za-z0-9._~+/=-]{8,}/g, '$1 [redacted]'],
  [/\b(sk|pk|rk)-[A-Za-z0-9_-]{8,}/g, '[redacted-key]'],
  [/:(?<=\b[a-z][a-z0-9+.-]*:)(\/\/[^:/@\s]*:)(?:[^@\s:]|:(?!\/\/))+@/gi, ':$1[redacted]@'],
  // A URL whose credentials are a user name alone (`https://<token>@host`).
  [/:(?<=\b[a-z][a-z0-9+.-]*:)\/\/[^:/@\s[\]]+@/gi, '://[redacted]@'],
  // `token=…` (queries, env dumps) and `"token": "…"` (JSON); not prose such as `secret: expected a string`.
  [/((?:api[_-]?key|token|secret|password)(?:=|["']\s*:\s*["']))[^"'\s,&]+/gi, '$1[redacted]'],
];

/**
 * Removes anything that looks like a credential from a string, every occurrence
 * of the `known` secrets, and every declared secret value (`declareSecrets`).
 */
export function redactSecrets(text: string, ...known: string[]): string {
  let out = text;
  // Secrets this caller knows (a bot token) and declared ones go first, whatever they look like.
  for (const secret of known) if (secret.length > 0) out = out.split(secret).join('[redacted-token]');
  for (const secret of scrubbedSecrets()) if (out.includes(secret)) out = out.split(secret).join('[redacted]');
  for (const [re, repl] of SECRET_PATTERNS) out = out.replace(re, repl);
  return out;
}
