/**
 * The conversation's outbox as one run's delivery sees it: a delivery key is
 * claimed (recorded `possibly-dispatched` before the message is sent) and its
 * outcome written afterwards, both fenced by the run's token, so a retried
 * or re-acquired run never sends an acknowledged message twice.
 */

import { DEFAULTS } from '../../src/config/defaults.js';
import { DEFAULT_DELIVERY_KEY_TTL_SECONDS } from '../../src/plugin/kit.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { type RedisClient, runScript } from '../../src/scripts/index.js';
import { checkReply } from '../../src/scripts/results.js';

/** Outbox record states. */
export type OutboxStatus = 'not-dispatched' | 'possibly-dispatched' | 'acknowledged';

/** One outbox record (JSON in the conversation's outbox hash, field = delivery key). */
export interface OutboxRecord {
  status: OutboxStatus;
  /** Platform message id, once acknowledged. */
  messageId?: string;
  /** The message is a streaming preview that has not been edited to its final text yet. */
  streaming?: boolean;
  /** Why the last attempt failed, when it is known not to have been sent. */
  error?: string;
}

/** What a claim found: the key is this attempt's to send, or an earlier attempt got it acknowledged. */
export type Claim = { claimed: true; maybeSentSince?: number } | { claimed: false; record: OutboxRecord };

/** Where the outbox is and how writes to it are fenced. */
export interface OutboxOptions {
  client: RedisClient;
  prefix: string;
  conversationId: string;
  runId: string;
  /** The outbox expires this long after its last write, in seconds. Default 604 800 (7 days). */
  outboxTtlSeconds?: number;
  /** Acknowledged outbox records kept per conversation beyond this run's and the active run's; 0: no count bound. Default 100. */
  outboxMaxEntries?: number;
  /** The run's fencing token. Default: unfenced. */
  token?: number;
}

/** The outbox writes of one run. */
export class RunOutbox {
  private readonly outboxKey: string;
  private readonly outboxIndexKey: string;
  private readonly runKey: string;

  constructor(private readonly o: OutboxOptions) {
    const keys = conversationKeys(o.prefix, o.conversationId);
    this.outboxKey = keys.outbox;
    this.outboxIndexKey = keys.outboxIndex;
    this.runKey = keys.run(o.runId);
  }

  /**
   * Claims a delivery key in one script: `delivered` with the record when an
   * earlier attempt got it acknowledged, else records `status` and answers
   * `claimed`, with `maybeSentSince` when an earlier attempt may have sent it
   * (its claim said `possibly-dispatched` and nothing was recorded after the
   * send: the time of the key's first claim, ms, or 0 when that is no longer
   * known). Throws StaleRunError when the run's token moved on.
   */
  async claim(key: string, status: 'possibly-dispatched' | 'not-dispatched'): Promise<Claim> {
    const reply = checkReply(
      'outbox-claim',
      await runScript(
        this.o.client,
        'outbox-claim',
        [this.outboxKey, this.runKey, this.outboxIndexKey],
        [key, this.token, JSON.stringify({ status } satisfies OutboxRecord), this.outboxTtl, this.o.outboxMaxEntries ?? DEFAULTS.retention.indexMaxEntries],
      ),
      this.o.runId,
    );
    if (reply[0] === 'delivered') return { claimed: false, record: JSON.parse(String(reply[1])) as OutboxRecord };
    const earlier = reply[1] ? (JSON.parse(String(reply[1])) as OutboxRecord) : undefined;
    if (earlier?.status !== 'possibly-dispatched') return { claimed: true };
    return { claimed: true, maybeSentSince: Number(reply[2]) || 0 };
  }

  /** Records a message's outcome, fenced like the claim (a stale attempt's write throws StaleRunError). */
  async write(key: string, record: OutboxRecord): Promise<void> {
    checkReply(
      'outbox-set',
      await runScript(this.o.client, 'outbox-set', [this.outboxKey, this.runKey], [key, this.token, JSON.stringify(record), this.outboxTtl]),
      this.o.runId,
    );
  }

  /** The fencing token as the outbox scripts take it ('' for an unfenced sink). */
  private get token(): string {
    return this.o.token === undefined ? '' : String(this.o.token);
  }

  private get outboxTtl(): number {
    return this.o.outboxTtlSeconds ?? DEFAULT_DELIVERY_KEY_TTL_SECONDS;
  }
}
