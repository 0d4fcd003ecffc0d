/**
 * A web chat visitor's two ids. The page keeps a secret (128 random bits,
 * base64url, in localStorage) and presents it on every request: whoever
 * knows it reads the visitor's conversation and writes as them. Everything
 * downstream — conversation id, sender id, chat id, update keys, Redis key
 * names, log lines, spans, the console, file links — names the visitor by a
 * public id derived from the secret with SHA-256, which does not lead back
 * to it. The public id is `h.` + base64url of the first 18 bytes of
 * SHA-256(domain label ‖ secret); the `.` is outside the secret's alphabet,
 * so a public id presented as a secret is refused (400), and no secret can
 * name another visitor's conversation.
 *
 * A plain hash, not an HMAC with a server key: the page's secrets have 128
 * random bits, so the hash cannot be inverted by search, and a public id
 * then needs no key that every host must share and no operator may ever
 * lose or rotate (a changed key would move every visitor to a new, empty
 * conversation). A client that picks a weak secret of its own weakens only
 * its own conversation.
 *
 * Upgrades: conversations started before public ids live under
 * `web:<secret>`. A visitor whose secret names such a record, and who has
 * none under the public id yet, stays in it (`legacy`), with the old ids,
 * until it is purged or expires; the next message then starts the public
 * id's conversation.
 */
import { createHash } from 'node:crypto';
import { type RedisClient, storage } from 'steerbot/plugin';
import { WEB_CHANNEL_ID } from './outbound.js';

/** A visitor's secret as the page makes it (and as any client may): URL-safe, no `:` or `.`. */
export const VISITOR_SECRET_RE = /^[A-Za-z0-9_-]{8,64}$/;

/** Marks a public id; `.` cannot occur in a secret, so the two never meet. */
const PUBLIC_TAG = 'h.';
/** Keeps this hash apart from any other use of SHA-256 on the same text. */
const DOMAIN = 'steerbot.web.visitor\0';
/** Bytes of the digest kept: 144 bits, 24 base64url characters. */
const PUBLIC_BYTES = 18;

/** The public chat id (and sender id) of `secret`: `h.<24 characters>`. Pure. */
export function publicChatId(secret: string): string {
  return PUBLIC_TAG + createHash('sha256').update(DOMAIN).update(secret).digest().subarray(0, PUBLIC_BYTES).toString('base64url');
}

/** The public conversation id of `secret`: `web:h.<24 characters>`. Pure. */
export function publicConversationId(secret: string): string {
  return `${WEB_CHANNEL_ID}:${publicChatId(secret)}`;
}

/** The conversation a request's secret opens, and the ids it goes by. */
export interface VisitorConversation {
  /** `web:<chatId>`. */
  conversationId: string;
  /** The chat id, also the visitor's sender id and the middle of its update keys. */
  chatId: string;
  /** A conversation started before public ids: its ids are the secret (see the file comment). */
  legacy: boolean;
}

/** Resolves a visitor's secret to the conversation it opens. */
export class VisitorIds {
  private readonly keys: storage.PluginStorage;

  constructor(private readonly o: { redis: RedisClient; prefix: string }) {
    this.keys = storage.pluginStorage(o.prefix, WEB_CHANNEL_ID);
  }

  /**
   * The conversation of `secret` (matching `VISITOR_SECRET_RE`): its public
   * id's, unless a record stands under `web:<secret>` and none under the public id.
   * @throws RedisUnavailableError when Redis cannot be reached.
   */
  async resolve(secret: string): Promise<VisitorConversation> {
    const current = visitor(publicChatId(secret), false);
    const old = visitor(secret, true);
    // Two slots: two commands, sent together.
    const [oldRecord, currentRecord] = await storage.redisCall(() =>
      Promise.all([this.o.redis.exists(this.keys.core(old.conversationId).log), this.o.redis.exists(this.keys.core(current.conversationId).log)]),
    );
    return oldRecord > 0 && currentRecord === 0 ? old : current;
  }
}

function visitor(chatId: string, legacy: boolean): VisitorConversation {
  return { conversationId: `${WEB_CHANNEL_ID}:${chatId}`, chatId, legacy };
}
