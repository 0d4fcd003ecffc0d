/**
 * Prometheus metrics (prom-client), served as `GET /metrics` by every
 * process. Names follow Prometheus conventions: `steerbot_` prefix, the unit
 * in the name, `_total` on counters. docs/operations.md lists them with
 * their meanings; `metricNames()` keeps that list honest (a test compares).
 * Plugins add theirs with `pluginMetrics` (`plugin-metrics.ts`).
 *
 * One registry per process (`metrics`), not prom-client's global one, so an
 * embedder's own metrics never collide with steerbot's. Recording is a few
 * map lookups: cheap enough for the ingest hot path.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** Buckets for latencies in seconds: 5 ms … 2 min. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Buckets for whole runs in seconds: 100 ms … 30 min. */
const RUN_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];
/** Buckets for list depths. */
const DEPTH_BUCKETS = [1, 2, 3, 5, 8, 13, 20, 50, 100];

/** BullMQ job states reported by `steerbot_queue_jobs`. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed'] as const;

/** Counts of a run queue's jobs by state (BullMQ `getJobCounts`). */
export type QueueCounts = (states: readonly string[]) => Promise<Record<string, number>>;

/** Longest wait for the queue's job counts during a scrape, in ms (a Redis outage must not hang `/metrics`). */
const QUEUE_SCRAPE_TIMEOUT_MS = 500;

/** The metrics of one process. */
export class SteerbotMetrics {
  readonly registry = new Registry();
  private readonly queues = new Map<string, QueueCounts>();
  private defaultsOn = false;

  readonly updatesIngested = this.counter(
    'steerbot_updates_ingested_total',
    'Updates handed to ingest, by channel and dispatch result (new-run, joined, steered, pending, interrupting, duplicate, refused, purged, rejected) and reason.',
    ['channel', 'result', 'reason'],
  );
  readonly accessRefused = this.counter(
    'steerbot_access_refused_total',
    'Messages the access policy refused before ingest, by channel and reason (not-allowed, not-paired, group-not-allowed).',
    ['channel', 'reason'],
  );
  readonly httpRequests = this.counter('steerbot_http_requests_total', 'HTTP requests answered, by method, route pattern and status code.', [
    'method',
    'route',
    'status',
  ]);
  readonly httpDuration = this.histogram(
    'steerbot_http_request_duration_seconds',
    'Time to answer an HTTP request, by method and route pattern.',
    LATENCY_BUCKETS,
    ['method', 'route'],
  );
  readonly runsStarted = this.counter(
    'steerbot_runs_started_total',
    'Run attempts started (acquired) by this process; `takeover` is 1 for an attempt after another worker died.',
    ['takeover'],
  );
  readonly runsEnded = this.counter(
    'steerbot_runs_ended_total',
    'Run attempts ended, by outcome (completed, failed, interrupted, superseded, stopped, lost, aborted).',
    ['outcome'],
  );
  readonly runDuration = this.histogram('steerbot_run_duration_seconds', 'Duration of a run attempt from acquire to end, by outcome.', RUN_BUCKETS, [
    'outcome',
  ]);
  readonly runsActive = this.gauge('steerbot_runs_active', 'Runs executing in this process now.');
  readonly modelCallDuration = this.histogram(
    'steerbot_model_call_duration_seconds',
    'Duration of one model call (one step), by model and outcome (ok, error, aborted).',
    LATENCY_BUCKETS,
    ['model', 'outcome'],
  );
  readonly modelTtft = this.histogram(
    'steerbot_model_time_to_first_token_seconds',
    'Time from the start of a model call to its first streamed part, by model.',
    LATENCY_BUCKETS,
    ['model'],
  );
  readonly modelTokens = this.counter(
    'steerbot_model_tokens_total',
    'Tokens the provider reported, by model and kind (input, output, cached: input tokens read from the provider cache).',
    ['model', 'kind'],
  );
  readonly toolCalls = this.counter('steerbot_tool_calls_total', 'Tool calls, by tool and outcome (ok, error).', ['tool', 'outcome']);
  readonly toolDuration = this.histogram('steerbot_tool_call_duration_seconds', 'Duration of one tool call, by tool.', LATENCY_BUCKETS, ['tool']);
  readonly steeringInjected = this.counter('steerbot_steering_injected_total', 'Steered messages a run pulled at a turn boundary.');
  readonly steeringDelay = this.histogram(
    'steerbot_steering_delay_seconds',
    'Time from ingest of a steered message to its injection into the run.',
    LATENCY_BUCKETS,
  );
  readonly steeringDepth = this.histogram(
    'steerbot_steering_depth',
    "A run's steering list length right after a message was steered into it (observed at ingest; at the cap, more messages overflow to pending).",
    DEPTH_BUCKETS,
  );
  readonly pendingDepth = this.histogram(
    'steerbot_pending_depth',
    "A conversation's pending list length right after a message was queued on it (observed at ingest).",
    DEPTH_BUCKETS,
  );
  readonly compactions = this.counter(
    'steerbot_compactions_total',
    'Compactions attempted, by trigger (pressure, manual, overflow) and outcome (compacted, ineffective, skipped, conflict, failed).',
    ['trigger', 'outcome'],
  );
  readonly breakerOpened = this.counter(
    'steerbot_compaction_breaker_opened_total',
    "Times a conversation's compaction circuit breaker opened (three ineffective compactions in a row).",
  );
  readonly deliveries = this.counter(
    'steerbot_deliveries_total',
    'Outbound messages, by channel and outcome (sent, skipped: delivered by an earlier attempt, failed).',
    ['channel', 'outcome'],
  );
  readonly deliveryRetries = this.counter(
    'steerbot_delivery_retries_total',
    'Retried platform calls of deliveries, by channel and reason (rate_limit: a 429, server_error: a 5xx).',
    ['channel', 'reason'],
  );
  readonly rateLimitWait = this.counter(
    'steerbot_delivery_rate_limit_wait_seconds_total',
    'Time deliveries waited on platform rate limits (429 retry_after), by channel.',
    ['channel'],
  );
  readonly reconcilerReenqueued = this.counter(
    'steerbot_reconciler_reenqueued_total',
    'Queued runs the reconciler found without a live job and enqueued again.',
  );
  readonly leaseTakeovers = this.counter(
    'steerbot_lease_takeovers_total',
    'Runs this process acquired after the lease of an earlier attempt (a dead or stalled worker) expired.',
  );
  readonly schedulesChanged = this.counter(
    'steerbot_schedules_changed_total',
    'Schedules created or cancelled, by change (created, cancelled, done: a one-shot after its fire), kind (once, cron, every) and origin (schedule, heartbeat).',
    ['change', 'kind', 'origin'],
  );
  readonly scheduleFires = this.counter(
    'steerbot_schedule_fires_total',
    'Schedule fires handled, by origin (schedule, heartbeat) and result (ingested, duplicate: the tick was ingested before a crash, missed: skipped after downtime, busy: a heartbeat while the conversation works, orphan: no record, stale: a heartbeat whose setting changed or was removed, no-access: its owner or group lost access, cancelled, refused, failed).',
    ['origin', 'result'],
  );
  readonly scheduleFireLag = this.histogram(
    'steerbot_schedule_fire_lag_seconds',
    "Time from a fire's scheduled time to its ingest, by origin.",
    LATENCY_BUCKETS,
    ['origin'],
  );
  readonly budgetTokens = this.counter(
    'steerbot_budget_tokens_total',
    'Tokens (input + output) counted against budgets, by scope (identity, conversation); counted only while a limit of that scope is set.',
    ['scope'],
  );
  readonly budgetRefusals = this.counter(
    'steerbot_budget_refusals_total',
    'Runs or steps refused because a budget was spent, by scope (identity, conversation) and limit (tokensPerDay, tokensPerMonth, runsPerHour).',
    ['scope', 'limit'],
  );
  readonly memoryWrites = this.counter(
    'steerbot_memory_writes_total',
    "Changes to people's memory notes, by kind (created, updated, same: the text was stored already, deleted, refused: over a limit).",
    ['kind'],
  );
  readonly queueJobs = new Gauge({
    name: 'steerbot_queue_jobs',
    help: 'BullMQ jobs (runs, schedule fires) by queue and state (waiting, active, delayed), read at scrape time (a few O(1) reads per queue).',
    labelNames: ['queue', 'state'] as const,
    registers: [this.registry],
    collect: () => this.collectQueues(),
  });

  /** Reports the job counts of a run queue at each scrape (one registration per queue name). */
  watchQueue(name: string, counts: QueueCounts): () => void {
    this.queues.set(name, counts);
    return () => {
      if (this.queues.get(name) === counts) this.queues.delete(name);
    };
  }

  /** Adds prom-client's process metrics (`process_*`, `nodejs_*`) once. */
  withProcessMetrics(): this {
    if (!this.defaultsOn) collectDefaultMetrics({ register: this.registry });
    this.defaultsOn = true;
    return this;
  }

  /** The exposition text and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** A counter on this registry (plugins: `registerCounter`, which checks the name). */
  counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  private gauge<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.registry] });
  }

  private histogram<L extends string = string>(name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  private async collectQueues(): Promise<void> {
    await Promise.all(
      [...this.queues].map(async ([name, counts]) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<undefined>((r) => (timer = setTimeout(r, QUEUE_SCRAPE_TIMEOUT_MS, undefined)));
        try {
          // Unreadable (Redis down): the series keep their last values; /readyz reports the outage.
          const got = await Promise.race([counts(QUEUE_STATES).catch(() => undefined), late]);
          if (got) for (const state of QUEUE_STATES) this.queueJobs.set({ queue: name, state }, got[state] ?? 0);
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }
}

/** The process's metrics. */
export const metrics = new SteerbotMetrics();

/** Every steerbot metric registered now: the core's, and those of the plugins loaded so far (`pluginMetrics`); not the process metrics. For docs and tests. */
export function metricNames(): string[] {
  return metrics.registry
    .getMetricsAsArray()
    .map((m) => (m as unknown as { name: string }).name)
    .filter((name) => name.startsWith('steerbot_'));
}
