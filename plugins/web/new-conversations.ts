/**
 * How many new conversations one client address may start: a conversation id
 * follows from whatever secret the browser picks, so without this a client
 * could take a fresh one per message and pass every per-conversation and per-sender limit (each
 * fresh id is a fresh sender too: on a pairing channel, a fresh pairing code).
 * A conversation is new until its first admitted message marks it (`visitor`,
 * a key of the conversation, refreshed by every message); admitting one takes
 * a token from the address's bucket in Redis (`admit-conversation-1.lua`), so
 * the limit holds across hosts. A refused message writes nothing.
 */
import { type RedisClient, storage } from 'steerbot/plugin';
import { WEB_CHANNEL_ID } from './outbound.js';

/** The conversation key that marks a conversation as admitted (declared in the plugin's storage). */
export const VISITOR_KEY = 'visitor';

/** How long an admitted conversation stays known after its last message, in seconds: one idle longer takes a token again when it resumes. */
const VISITOR_TTL_SECONDS = 86_400;

const admitScript = storage.defineScript(new URL('./admit-conversation-1.lua', import.meta.url));

/** Whether a message may go on: admitted, or its client address started too many conversations (`retryAfterMs` until the next). */
export type Admission = { kind: 'admitted' } | { kind: 'limited'; retryAfterMs: number };

/** Options of the limit. */
export interface NewConversationLimitOptions {
  redis: RedisClient;
  prefix: string;
  /** New conversations one client address may start an hour (burst and hourly refill); 0 turns the limit off. */
  perHour: number;
}

const ADMITTED: Admission = { kind: 'admitted' };

/** The per-address limit on new web chat conversations. */
export class NewConversationLimit {
  private readonly keys: storage.PluginStorage;

  constructor(private readonly o: NewConversationLimitOptions) {
    this.keys = storage.pluginStorage(o.prefix, WEB_CHANNEL_ID);
  }

  /**
   * Whether `conversationId` was admitted before (its mark's TTL renewed):
   * true when the limit is off.
   * @throws RedisUnavailableError when Redis cannot be reached.
   */
  async marked(conversationId: string): Promise<boolean> {
    if (this.o.perHour === 0) return true;
    return (await storage.redisCall(() => this.o.redis.getex(this.keys.conversationKey(conversationId, VISITOR_KEY), 'EX', VISITOR_TTL_SECONDS))) !== null;
  }

  /**
   * Admits a message of `conversationId` from `client` (a `ClientAddresses`
   * key): a known conversation always, a new one when the client's bucket has
   * a token (taken, and the conversation marked). `marked`: what `marked`
   * answered for it already (read beside other reads), else it is asked here.
   * @throws RedisUnavailableError when Redis cannot be reached.
   */
  async admit(client: string, conversationId: string, marked?: boolean): Promise<Admission> {
    if (this.o.perHour === 0) return ADMITTED;
    const visitor = this.keys.conversationKey(conversationId, VISITOR_KEY);
    try {
      if (marked ?? (await this.marked(conversationId))) return ADMITTED;
      const r = await admitScript.run(this.o.redis, [this.keys.key(`new:${client}`)], [this.o.perHour]);
      if (r[0] === 'limited') return { kind: 'limited', retryAfterMs: Number(r[1]) };
      // NX: a first message racing this one may have marked it already (both took a token: the client pays one more).
      await this.o.redis.set(visitor, '1', 'EX', VISITOR_TTL_SECONDS, 'NX');
      return ADMITTED;
    } catch (err) {
      throw storage.asRedisUnavailable(err);
    }
  }
}
