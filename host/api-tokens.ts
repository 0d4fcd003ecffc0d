/**
 * Bearer tokens of the send-and-wake API (`host.api.tokens`, and the single
 * `host.api.token` as one token with every scope): who a presented token is,
 * whether it may act on a conversation, and — one script per request —
 * whether it was revoked and whether its rate allows the request.
 *
 * Tokens are held as SHA-256 digests only and compared in constant time;
 * revocations are digests in a Redis set, so every host refuses a revoked
 * token at its next request, without a restart.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { channelResolver } from '../src/channel.js';
import type { CoreConfig } from '../src/config/load.js';
import { API_TOKEN_RATE_PER_MINUTE, API_TOKEN_SCOPES, LEGACY_API_TOKEN_NAME } from '../src/config/schema.js';
import { type RedisClient, runScript } from '../src/scripts/index.js';
import { checkReply } from '../src/scripts/results.js';

/** What a token may do: `send` messages, wake with `events`, `open` a conversation that has no record yet. */
export type ApiScope = (typeof API_TOKEN_SCOPES)[number];

/** One configured token, as the API checks it. */
export interface ApiToken {
  /** Its configured name (logs, its rate bucket, `steerbot revoke-token <name>`). */
  name: string;
  /** SHA-256 of the token (32 bytes). */
  digest: Buffer;
  scopes: ReadonlySet<ApiScope>;
  /** Channel ids it may reach; undefined: every channel. */
  channels?: readonly string[];
  /** Conversation entries it may reach (an id and its threads, or `<prefix>*`); undefined: every conversation. */
  conversations?: readonly string[];
  /** Requests per minute. */
  ratePerMinute: number;
  /** The identity its events' runs are charged to; undefined: the operator. */
  owner?: string;
}

/** What `admit` answers. */
export type ApiAdmission = { kind: 'ok' } | { kind: 'revoked' } | { kind: 'limited'; retryAfterMs: number };

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** The tokens `host.api` configures: `tokens`, and `token` (named `default`, every scope) when set. */
export function apiTokensFromConfig(api: CoreConfig['host']['api']): ApiToken[] {
  const out: ApiToken[] = api.tokens.map((t) => ({
    name: t.name,
    digest: t.token !== undefined ? sha256(t.token) : Buffer.from(t.tokenSha256 ?? '', 'hex'),
    scopes: new Set(t.scopes),
    ...(t.channels && { channels: t.channels }),
    ...(t.conversations && { conversations: t.conversations }),
    ratePerMinute: t.ratePerMinute,
    ...(t.owner !== undefined && { owner: t.owner }),
  }));
  if (api.token !== undefined) {
    out.push({ name: LEGACY_API_TOKEN_NAME, digest: sha256(api.token), scopes: new Set(API_TOKEN_SCOPES), ratePerMinute: API_TOKEN_RATE_PER_MINUTE });
  }
  return out;
}

/** The Redis keys of the API's tokens (one hash slot, so one script checks both). */
export function apiTokenKeys(prefix: string): { revoked: string; rate: string } {
  return { revoked: `${prefix}:{api}:revoked`, rate: `${prefix}:{api}:rate` };
}

/**
 * Whether `conversationId` matches one of `conversations`: an entry's id itself and its topics and threads (as bindings
 * cover them), or a `*` entry's prefix. Built once per token.
 */
function conversationMatcher(conversations: readonly string[]): (conversationId: string) => boolean {
  const prefixes = conversations.filter((e) => e.endsWith('*')).map((e) => e.slice(0, -1));
  const chats = channelResolver(conversations.filter((e) => !e.endsWith('*')));
  return (conversationId) => prefixes.some((p) => conversationId.startsWith(p)) || chats(conversationId) !== undefined;
}

/** The API's tokens, checked against Redis on every request. */
export class ApiTokens {
  private readonly keys: { revoked: string; rate: string };
  private readonly matchers: Map<ApiToken, (conversationId: string) => boolean>;

  constructor(
    private readonly tokens: readonly ApiToken[],
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.keys = apiTokenKeys(prefix);
    this.matchers = new Map(tokens.flatMap((t) => (t.conversations ? [[t, conversationMatcher(t.conversations)] as const] : [])));
  }

  /** The configured token `presented` is, or undefined. Every digest is compared (in constant time), so timing tells nothing. */
  find(presented: string): ApiToken | undefined {
    const d = sha256(presented);
    let found: ApiToken | undefined;
    for (const t of this.tokens) if (timingSafeEqual(d, t.digest) && !found) found = t;
    return found;
  }

  /** Whether `token` may act on `conversationId` (its channel is `channel`, when a configured channel serves it). */
  reaches(token: ApiToken, conversationId: string, channel: string | undefined): boolean {
    if (token.channels && (channel === undefined || !token.channels.includes(channel))) return false;
    return !token.conversations || (this.matchers.get(token) ?? conversationMatcher(token.conversations))(conversationId);
  }

  /** Whether `token` was revoked (`steerbot revoke-token`); reads, takes nothing from its bucket. */
  async revoked(token: ApiToken): Promise<boolean> {
    return (await this.redis.sismember(this.keys.revoked, token.digest.toString('hex'))) === 1;
  }

  /** Refuses a revoked token, then takes one request from its bucket (one script; a refusal takes nothing). */
  async admit(token: ApiToken): Promise<ApiAdmission> {
    const reply = checkReply(
      'api-admit',
      await runScript(this.redis, 'api-admit', [this.keys.revoked, this.keys.rate], [token.digest.toString('hex'), token.name, token.ratePerMinute]),
    );
    if (reply[0] === 'revoked') return { kind: 'revoked' };
    if (reply[0] === 'limited') return { kind: 'limited', retryAfterMs: Number(reply[1]) };
    return { kind: 'ok' };
  }
}

/**
 * Revokes the token configured as `name` (its current value: a new token
 * under the same name is not revoked). Every host refuses it from its next
 * request. Answers false when no token has that name.
 */
export async function revokeApiToken(redis: RedisClient, prefix: string, api: CoreConfig['host']['api'], name: string): Promise<boolean> {
  const token = apiTokensFromConfig(api).find((t) => t.name === name);
  if (!token) return false;
  checkReply('api-revoke', await runScript(redis, 'api-revoke', [apiTokenKeys(prefix).revoked], [token.digest.toString('hex')]));
  return true;
}
