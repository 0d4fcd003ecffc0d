/**
 * The reconciler: finds runs whose job went missing and re-enqueues them.
 * A run can be left `queued` without a job when a host dies between the
 * ingest script and the enqueue, or when Redis lost BullMQ's keys; a
 * `running` run whose lease expired and whose job is no longer live would
 * otherwise never be re-acquired. It scans `active` keys (one SCAN per
 * master in a Cluster), so it is cheap when idle and runs at start-up and
 * every `intervalMs`, and at once whenever the client reconnects: a Redis
 * restart is exactly when jobs go missing (an enqueue that failed while it
 * was down, BullMQ keys lost with it), so those runs are found within
 * seconds, not at the next interval. A pass that fails (Redis still coming
 * back) is retried after `retryMs`.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ConfigError } from '../src/errors.js';
import { bullPrefixFor, type RunQueue } from '../src/protocol/run-queue.js';
import { isRedisUnavailable } from '../src/redis/connection.js';
import { activeKeyPattern, conversationIdFromKey, conversationKeys } from '../src/redis/keys.js';
import { metrics } from '../src/telemetry/metrics.js';

/** Options of the reconciler. */
export interface ReconcilerOptions {
  client: Redis | Cluster;
  /** Key prefix (`redis.prefix`). Required: the queue and the keys scanned belong to one deployment. */
  prefix: string;
  /** The run queue; its `bullPrefix` must be `bullPrefixFor(prefix)`. */
  queue: RunQueue;
  logger?: Logger;
  /** SCAN batch size. Default 500. */
  scanCount?: number;
}

/** What one pass found and did. */
export interface ReconcileReport {
  /** Active runs looked at. */
  scanned: number;
  /** Queued runs whose job was missing and was re-added. */
  requeued: number;
  /** Running runs with an expired lease whose job was re-added. */
  expired: number;
}

function masters(client: Redis | Cluster): Redis[] {
  return 'nodes' in client && typeof (client as Cluster).nodes === 'function' && (client as Cluster).isCluster
    ? (client as Cluster).nodes('master')
    : [client as Redis];
}

/** Runs `commands` in one pipeline on `node`; a failed command fails the pass. */
async function pipelined(node: Redis, commands: Array<[string, ...string[]]>): Promise<unknown[]> {
  if (commands.length === 0) return [];
  const results = (await node.pipeline(commands).exec()) ?? [];
  return results.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

/** One reconcile pass. */
export async function reconcileOnce(opts: ReconcilerOptions): Promise<ReconcileReport> {
  const prefix = opts.prefix;
  assertQueueOfPrefix(opts);
  const report: ReconcileReport = { scanned: 0, requeued: 0, expired: 0 };
  const [sec, usec] = (await opts.client.time()) as [string | number, string | number];
  const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  for (const node of masters(opts.client)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', activeKeyPattern(prefix), 'COUNT', opts.scanCount ?? 500);
      cursor = next;
      // One pipeline per page for the run ids, one for their records: not two round trips per conversation.
      // They go to the master the page came from, which holds all of its keys (a Cluster pipeline must stay on one node).
      const found = keys.flatMap((key) => {
        const conversationId = conversationIdFromKey(prefix, key);
        return conversationId ? [{ key, conversationId }] : [];
      });
      const runIds = await pipelined(
        node,
        found.map(({ key }) => ['get', key]),
      );
      const active = found.flatMap((f, i) => (typeof runIds[i] === 'string' ? [{ ...f, runId: runIds[i] as string }] : []));
      const records = await pipelined(
        node,
        active.map((a) => ['hmget', conversationKeys(prefix, a.conversationId).run(a.runId), 'state', 'lease_until']),
      );
      for (const [i, { conversationId, runId }] of active.entries()) {
        report.scanned++;
        const [state, leaseUntil] = (records[i] ?? []) as Array<string | null>;
        const expired = state === 'running' && Number(leaseUntil ?? 0) <= nowMs;
        if (state !== 'queued' && !expired) continue;
        if (await opts.queue.ensureJob(conversationId, runId)) {
          if (expired) report.expired++;
          else report.requeued++;
          metrics.reconcilerReenqueued.inc();
          opts.logger?.warn({ conversationId, runId, state }, 'reconciler re-enqueued a run whose job was missing');
        }
      }
    } while (cursor !== '0');
  }
  return report;
}

/**
 * A reconciler of one deployment must never re-enqueue its runs into another
 * deployment's queue (its workers would take them).
 * @throws ConfigError when the queue is not under `bullPrefixFor(prefix)`.
 */
function assertQueueOfPrefix(opts: ReconcilerOptions): void {
  const want = bullPrefixFor(opts.prefix);
  if (opts.queue.bullPrefix !== want) {
    throw new ConfigError([{ path: 'runs', message: `reconciler of prefix ${opts.prefix} given a queue under ${opts.queue.bullPrefix}, expected ${want}` }]);
  }
}

/** Options of `startReconciler`. */
export interface StartReconcilerOptions extends ReconcilerOptions {
  /** Time between routine passes, in ms (`runs.reconcileIntervalMs`). */
  intervalMs: number;
  /** Delay before retrying a failed pass, in ms. Default 1000. */
  retryMs?: number;
  /** Called after each successful pass (tests, metrics); must not throw. */
  onPass?(report: ReconcileReport): void;
}

/**
 * Runs `reconcileOnce` now, every `intervalMs`, and at once after the client
 * reconnects; a failed pass is retried after `retryMs`. Passes never overlap:
 * a request while one runs queues one more. `stop()` ends it.
 */
export function startReconciler(opts: StartReconcilerOptions): { stop(): Promise<void> } {
  assertQueueOfPrefix(opts);
  const retryMs = opts.retryMs ?? 1000;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let failing = false;
  const pass = async (): Promise<void> => {
    try {
      const r = await reconcileOnce(opts);
      if (failing) opts.logger?.info('reconcile pass succeeded again');
      failing = false;
      opts.onPass?.(r);
      if (r.requeued || r.expired) opts.logger?.info(r, 'reconcile pass');
    } catch (err) {
      // While Redis is down every pass fails: say so once, at debug (the connection watcher reports the outage).
      if (!isRedisUnavailable(err)) opts.logger?.error({ err }, 'reconcile pass failed');
      else if (!failing) opts.logger?.debug({ err }, 'reconcile pass failed: redis unavailable; retrying');
      failing = true;
      if (!stopped) {
        clearTimeout(retryTimer);
        retryTimer = setTimeout(tick, retryMs);
        retryTimer.unref();
      }
    }
  };
  const tick = (): void => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = pass().finally(() => {
      running = undefined;
      if (again && !stopped) {
        again = false;
        tick();
      }
    });
  };
  // 'ready' follows every (re)connect (a pass more at start-up is cheap).
  const onReady = () => {
    opts.logger?.debug('redis (re)connected: reconcile pass now');
    tick();
  };
  opts.client.on('ready', onReady);
  tick();
  const timer = setInterval(tick, opts.intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(retryTimer);
      opts.client.off('ready', onReady);
      await running;
    },
  };
}
