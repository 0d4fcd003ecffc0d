/**
 * Starts the host's parts other than the HTTP server itself: dispatch
 * (ingest), the run queue and the reconciler. Channel plugins register their
 * routes on `ctx.http`.
 */
import type { AppContext, Stoppable } from '../src/app-context.js';
import { Dispatch } from '../src/protocol/dispatch.js';
import { RunQueue } from '../src/run-queue.js';
import type { HttpServer } from './http.js';
import { IngestService } from './ingest.js';
import { startReconciler } from './reconciler.js';

/** The host's context: the app's, plus the HTTP server (not yet listening) to register webhook routes on. */
export interface HostContext extends AppContext {
  /** Register routes here; the entry starts listening after `startHost` resolves. */
  http: HttpServer;
}

/** A started host, with its services exposed for channel plugins and tests. */
export interface StartedHost extends Stoppable {
  dispatch: Dispatch;
  ingest: IngestService;
  queue: RunQueue;
}

/** Starts the host. */
export async function startHost(ctx: HostContext): Promise<StartedHost> {
  const { config, logger } = ctx;
  const dispatch = new Dispatch({
    client: ctx.redis,
    prefix: config.redis.prefix,
    dedupeTtlSeconds: config.dispatch.dedupeTtlSeconds,
    steeringCap: config.dispatch.steeringCap,
    defaultPolicy: config.dispatch.defaultPolicy,
    steeringCapable: config.runner.capabilities.steering,
    maxMessageChars: config.dispatch.maxMessageChars,
    leaseMs: config.runs.leaseMs,
  });
  const queueConn = ctx.connectRedis({ forBullmq: true, connectionName: 'steerbot-host-queue' });
  const queue = new RunQueue({ connection: queueConn, name: config.runs.queueName });
  const ingest = new IngestService(dispatch, queue, logger.child({ part: 'ingest' }));
  const reconciler = startReconciler({
    client: ctx.redis,
    prefix: config.redis.prefix,
    queue,
    logger: logger.child({ part: 'reconciler' }),
    intervalMs: config.runs.reconcileIntervalMs,
  });
  return {
    dispatch,
    ingest,
    queue,
    async stop() {
      await reconciler.stop();
      await queue.close();
      queueConn.disconnect();
    },
  };
}
