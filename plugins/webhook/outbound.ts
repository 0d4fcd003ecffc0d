/**
 * The webhook channel's outbound side. Every reply is appended to the
 * conversation's reply stream in Redis (read by the event stream) and, when
 * a callback URL is configured, POSTed there signed like requests
 * (`X-Steerbot-Timestamp`, `X-Steerbot-Signature`), retried with
 * exponential backoff until a 2xx answer, at most `callbackMaxAttempts` times.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChannelOutbound, SendOptions } from '../../src/channel.js';
import { ChannelApiError } from '../../src/errors.js';
import type { RedisClient } from '../../src/redis.js';
import type { WebhookChannelConfig } from './config.js';
import { repliesKey } from './events.js';
import { signedHeaders } from './signature.js';

/** The JSON body of a callback (and the `data` of an event-stream event). */
export interface WebhookReply {
  /** The conversation, as the sender named it in requests. */
  conversation: string;
  text: string;
  /** Stable id of this reply (the delivery key); the same on every retry of one reply. */
  messageId: string;
  /** The `id` of the request this reply answers, when known. */
  inReplyTo?: string;
}

export interface WebhookOutboundOptions {
  channelId: string;
  config: WebhookChannelConfig;
  redis: RedisClient;
  prefix: string;
  logger: Logger;
  fetch: typeof fetch;
  /** Aborted on plugin stop: pending callback retries give up. */
  signal: AbortSignal;
}

/** A status worth retrying: the receiver may accept the same request later. */
const retryable = (status: number) => status === 408 || status === 425 || status === 429 || status >= 500;

/** Wait asked by a `Retry-After` header (seconds or an HTTP date), in ms. */
function retryAfterMs(res: Response, now: number): number | undefined {
  const h = res.headers.get('retry-after');
  if (!h) return undefined;
  if (/^\d+$/.test(h)) return Number(h) * 1000;
  const at = Date.parse(h);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export function createWebhookOutbound(o: WebhookOutboundOptions): ChannelOutbound {
  const cfg = o.config;
  const callbackSecret = cfg.callbackSecret ?? cfg.secret;

  async function postCallback(url: string, reply: WebhookReply): Promise<void> {
    const body = JSON.stringify(reply);
    let last = 'no attempt';
    for (let attempt = 1; attempt <= cfg.callbackMaxAttempts; attempt++) {
      let wait = Math.min(cfg.callbackRetryBaseMs * 2 ** (attempt - 1), cfg.callbackMaxDelayMs);
      try {
        const res = await o.fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': reply.messageId, ...signedHeaders(callbackSecret, body) },
          body,
          signal: AbortSignal.any([o.signal, AbortSignal.timeout(cfg.callbackTimeoutMs)]),
        });
        await res.arrayBuffer().catch(() => undefined);
        if (res.ok) return;
        last = `HTTP ${res.status}`;
        if (!retryable(res.status)) throw new ChannelApiError(`webhook callback refused: HTTP ${res.status}`, { status: res.status });
        wait = Math.min(retryAfterMs(res, Date.now()) ?? wait, cfg.callbackMaxDelayMs);
      } catch (err) {
        if (err instanceof ChannelApiError) throw err;
        last = (err as Error).name === 'TimeoutError' ? 'timeout' : `network error (${(err as Error).message})`;
      }
      if (o.signal.aborted) break;
      if (attempt < cfg.callbackMaxAttempts) {
        o.logger.warn({ attempt, waitMs: wait, last, messageId: reply.messageId }, 'webhook callback failed; retrying');
        await sleep(wait, o.signal);
      }
    }
    // No status: the callback may have been received; delivery must not retry it again on its own.
    throw new ChannelApiError(`webhook callback failed after ${cfg.callbackMaxAttempts} attempts (last: ${last})`);
  }

  return {
    channelId: o.channelId,
    maxMessageChars: cfg.maxMessageChars,
    async send(conversationId: string, text: string, opts: SendOptions = {}) {
      if (!conversationId.startsWith(`${o.channelId}:`)) throw new ChannelApiError(`conversation ${conversationId} is not on channel ${o.channelId}`, { status: 400 });
      const reply: WebhookReply = {
        conversation: conversationId.slice(o.channelId.length + 1),
        text,
        messageId: opts.deliveryKey ?? randomUUID(),
        ...(opts.replyTo !== undefined && { inReplyTo: opts.replyTo }),
      };
      await o.redis.xadd(repliesKey(o.prefix, conversationId), 'MAXLEN', '~', cfg.replyStreamMaxLen, '*', 'data', JSON.stringify(reply));
      if (cfg.callbackUrl) await postCallback(cfg.callbackUrl, reply);
      return { messageId: reply.messageId };
    },
  };
}
