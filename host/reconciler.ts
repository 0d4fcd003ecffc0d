/**
 * The reconciler: finds runs whose job went missing and re-enqueues them.
 * A run can be left `queued` without a job when a host dies between the
 * ingest script and the enqueue, or when Redis lost BullMQ's keys; a
 * `running` run whose lease expired and whose job is no longer live would
 * otherwise never be re-acquired. It scans `active` keys (one SCAN per
 * master in a Cluster), so it is cheap when idle and runs at start-up and
 * every `intervalMs`.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { activeKeyPattern, conversationIdFromKey, conversationKeys } from '../src/keys.js';
import type { RunQueue } from '../src/run-queue.js';

/** Options of the reconciler. */
export interface ReconcilerOptions {
  client: Redis | Cluster;
  /** Key prefix. Default `sb`. */
  prefix?: string;
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

/** One reconcile pass. */
export async function reconcileOnce(opts: ReconcilerOptions): Promise<ReconcileReport> {
  const prefix = opts.prefix ?? 'sb';
  const report: ReconcileReport = { scanned: 0, requeued: 0, expired: 0 };
  const [sec, usec] = (await opts.client.time()) as [string | number, string | number];
  const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
  for (const node of masters(opts.client)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', activeKeyPattern(prefix), 'COUNT', opts.scanCount ?? 500);
      cursor = next;
      for (const key of keys) {
        const conversationId = conversationIdFromKey(prefix, key);
        if (!conversationId) continue;
        const runId = await opts.client.get(key);
        if (!runId) continue;
        report.scanned++;
        const [state, leaseUntil] = await opts.client.hmget(conversationKeys(prefix, conversationId).run(runId), 'state', 'lease_until');
        const expired = state === 'running' && Number(leaseUntil ?? 0) <= nowMs;
        if (state !== 'queued' && !expired) continue;
        if (await opts.queue.ensureJob(conversationId, runId)) {
          if (expired) report.expired++;
          else report.requeued++;
          opts.logger?.warn({ conversationId, runId, state }, 'reconciler re-enqueued a run whose job was missing');
        }
      }
    } while (cursor !== '0');
  }
  return report;
}

/** Runs `reconcileOnce` now and every `intervalMs`; `stop()` ends it. */
export function startReconciler(opts: ReconcilerOptions & { intervalMs: number }): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = () => {
    running = reconcileOnce(opts)
      .then((r) => {
        if (r.requeued || r.expired) opts.logger?.info(r, 'reconcile pass');
      })
      .catch((err: unknown) => opts.logger?.error({ err }, 'reconcile pass failed'));
  };
  tick();
  const timer = setInterval(() => {
    if (!stopped) tick();
  }, opts.intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
