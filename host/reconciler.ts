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
  const prefix = opts.prefix ?? 'sb';
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
      const runIds = await pipelined(node, found.map(({ key }) => ['get', key]));
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
