/**
 * Every default value of steerbot, in one place: the configuration schema
 * and the code that runs without a configuration (protocol classes built in
 * tests, plugins created directly) read them from here.
 */

/** Model providers the runner's model factory can build. */
/** A name in `models`: what `/model <name>` names and stores. */
export const MODEL_CHOICE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const MODEL_PROVIDERS = ['openai', 'anthropic', 'google', 'openai-compatible'] as const;
/** A model provider. */
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];

/** The APIs the `openai` provider can call: chat completions, or the Responses API. */
export const MODEL_APIS = ['chat', 'responses'] as const;
/** An API of the `openai` provider (`model.api`). */
export type ModelApi = (typeof MODEL_APIS)[number];

/** The conventional API key variable of each provider (`openai-compatible` servers often need none). */
export const MODEL_PROVIDER_KEY_ENV: Readonly<Record<ModelProvider, string>> = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
  google: 'GOOGLE_GENERATIVE_AI_API_KEY',
  'openai-compatible': 'OPENAI_API_KEY',
};

/**
 * How long a delivery key is remembered, in seconds (1 day, the dedupe
 * window): outbox records and a channel's own dedupe of sends. A retried or
 * taken-over run needs them for minutes; they are not history.
 */
export const DEFAULT_DELIVERY_KEY_TTL_SECONDS = 86_400;

/** Defaults of the configuration, section by section. */
export const DEFAULTS = {
  redis: { mode: 'single', prefix: 'sb' },
  http: { host: '0.0.0.0', port: 8080, bodyLimitBytes: 1_048_576, requestTimeoutMs: 60_000 },
  dispatch: { defaultPolicy: 'steer', steeringCap: 20, dedupeTtlSeconds: 86_400, maxMessageChars: 16_000, afterPurge: 'refuse' },
  runs: { leaseMs: 30_000, heartbeatMs: 10_000, reconcileIntervalMs: 60_000, queueName: 'steerbot-runs', followUpsOnFailure: 2 },
  runner: {
    enabled: true,
    concurrency: 4,
    shutdownGraceMs: 10_000,
    outboxTtlSeconds: DEFAULT_DELIVERY_KEY_TTL_SECONDS,
  },
  host: { enabled: true },
  log: { level: 'info', format: 'auto' },
  model: { provider: 'openai', name: 'gpt-4o-mini', contextWindow: 128_000, outputReserve: 4096 },
  compaction: { threshold: 0.8, keepRecentTurns: 4, maxSummaryChars: 6000, tailEntries: 2000 },
  /**
   * Ended run hashes 1 day, a purged conversation's tombstone 7 days, the
   * newest 10 delivery records and ended runs per conversation (the record
   * keeps every run's history; these are the console's recent view);
   * trimming and idle expiry off.
   */
  retention: {
    endedRunTtlSeconds: 86_400,
    recordTrimAfterEntries: 0,
    recordTrimAfterDays: 0,
    idleTtlSeconds: 0,
    tombstoneTtlSeconds: 604_800,
    indexMaxEntries: 10,
  },
  schedules: {
    enabled: true,
    maxPerConversation: 20,
    minIntervalSeconds: 60,
    missedAfterSeconds: 60,
    concurrency: 16,
    queueName: 'steerbot-schedules',
  },
  memory: { enabled: false, maxNotes: 200, maxNoteChars: 1000, promptNotes: 20, promptChars: 4000 },
  subagents: { enabled: false, maxPerRun: 4, timeoutSeconds: 600 },
  agent: { streaming: true, httpFetch: false, currentTime: true, steeringMode: 'all', maxSteps: 24, maxRetries: 2 },
  /** Attempts of one outbound message before delivery gives it up. */
  deliveryMaxAttempts: 5,
  /** How often the typing indicator is refreshed while a run is active, in ms. */
  typingIntervalMs: 4000,
  /** How long a run works before typing first shows, in ms (a channel's `typingDelayMs` overrides it). */
  typingDelayMs: 500,
  /** Longest wait between two delivery attempts of one message (a platform's `retry_after` is cut to it), in ms. */
  deliveryMaxRetryDelayMs: 30_000,
  /** Time limit of one tool call when the tool names none, in ms. */
  toolTimeoutMs: 30_000,
  /** Largest JSON value of one conversation state key, in bytes. */
  maxStateBytes: 262_144,
} as const;

/** System prompt of the default agent when none is configured. */
export const DEFAULT_SYSTEM_PROMPT =
  'You are a helpful assistant in a chat. Users may send new messages while you work; when one arrives, take it into account and adjust course.';
