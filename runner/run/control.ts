/**
 * Listens on the control channel and aborts the local run a stop request
 * names. One subscriber connection per runner process. Heartbeats also
 * report stop requests, as a fallback when a publish was missed.
 */
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { StopKind } from '../../src/protocol/types.js';
import { controlChannel } from '../../src/redis/keys.js';

type StopHandler = (kind: StopKind) => void;

/** Routes control messages to the runs this process executes. */
export class ControlListener {
  private readonly handlers = new Map<string, StopHandler>();
  private readonly channel: string;

  constructor(
    private readonly subscriber: Redis,
    prefix: string,
    private readonly logger?: Logger,
  ) {
    this.channel = controlChannel(prefix);
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      try {
        const m = JSON.parse(message) as { run?: string; kind?: StopKind };
        if (m.run && m.kind) this.handlers.get(m.run)?.(m.kind);
      } catch (err) {
        this.logger?.warn({ err }, 'unreadable control message');
      }
    });
  }

  /** Subscribes; resolves once Redis confirmed the subscription. */
  async start(): Promise<void> {
    await this.subscriber.subscribe(this.channel);
  }

  /** Calls `onStop` when a stop request for `runId` arrives. */
  register(runId: string, onStop: StopHandler): () => void {
    this.handlers.set(runId, onStop);
    return () => {
      if (this.handlers.get(runId) === onStop) this.handlers.delete(runId);
    };
  }

  async close(): Promise<void> {
    this.handlers.clear();
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
  }
}
