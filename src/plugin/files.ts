/**
 * Signed downloads of files a channel sends by URL (a callback that names
 * it, a page that shows it, a platform that fetches media by URL). A kept file is a
 * hash `<base>file:<id>` (name, type, bytes) in its conversation's slot,
 * expiring with its URL, and its id is in the conversation's index
 * `<base>files` (a sorted set scored by expiry, ms), so `/purge` deletes the
 * files with the rest of the conversation. Its URL is
 * `<baseUrl><path>/<conversation id>/<id>[.<ext>]?expires=<unix s>&sig=<hex>`, where
 * `sig` is HMAC-SHA256 over `<conversation id>.<id>.<expires>`: a guessed,
 * altered or unsigned URL is refused (403), an expired or purged file is
 * gone (404). The id comes from the delivery key, so a retried send keeps the
 * same file.
 */
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { HttpRoute, RouteRequest, RouteResponse } from '../http/routes.js';
import type { RedisClient } from '../redis/connection.js';
import { conversationKeys } from '../redis/keys.js';

/** Options of `signedFileStore`. */
export interface SignedFileStoreOptions {
  /** The connection files are kept on (a channel's `deps.redis`). */
  redis: RedisClient;
  /** Key prefix (config `redis.prefix`). */
  prefix: string;
  /** Route prefix the files are served under, e.g. `/webhooks/crm/files`: the route is `<path>/:conversation/:id`. */
  path: string;
  /** Origin the URLs are reached at from outside, e.g. `https://bot.example.com`. Default `''`: URLs relative to the host (same origin). */
  baseUrl?: string;
  /** How long a kept file can be downloaded, in seconds (its bytes expire from Redis then). */
  ttlSeconds: number;
  /** HMAC key of the URLs. Secret. Default: a random key made once and kept in Redis (`<prefix>:file_signing_key`), shared by every process on it. */
  secret?: string;
  /** Checked before anything else on a download (a private page's login): a response refuses the request, undefined lets it on. Default: none. */
  guard?: (req: RouteRequest) => RouteResponse | undefined;
  /**
   * End each URL's path with the file name's extension (`…/<id>.m4a`), for a
   * platform that tells a medium's format by its URL (the signature covers
   * the id alone; the type served is the kept one). Default false.
   */
  extensionInUrl?: boolean;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** A file id in a URL path, with the extension `extensionInUrl` adds. */
const ID_RE = /^([0-9a-f]{32})(?:\.[a-z0-9]{1,8})?$/;
/** The extension of a file name a URL may end with. */
const EXTENSION_RE = /\.([A-Za-z0-9]{1,8})$/;

/** Keeps files for signed download and serves them; see `signedFileStore`. */
export interface SignedFileStore {
  /**
   * Keeps `file` (an `OutboundFile`) of `conversationId` for `ttlSeconds`; the same `deliveryKey` keeps the
   * same file (default: a new one). Returns its URL, when it expires and its size in bytes.
   */
  keep(
    conversationId: string,
    file: { name: string; mimeType: string; bytes: Uint8Array },
    deliveryKey?: string,
  ): Promise<{ url: string; expiresAt: Date; size: number }>;
  /** The download route (GET): 200 with the bytes, 403 for a bad signature, 404 once expired or purged. Register it on a host. */
  route(): HttpRoute;
}

/** A store of files for signed, expiring download URLs. `keep` throws InvalidInputError for a bad conversation id, and Redis errors as they come. */
export function signedFileStore(o: SignedFileStoreOptions): SignedFileStore {
  const now = o.now ?? Date.now;
  const path = o.path.replace(/\/$/, '');
  let key: Promise<string> | undefined;
  const secret = (): Promise<string> => {
    if (o.secret !== undefined) return Promise.resolve(o.secret);
    key ??= sharedKey(o.redis, `${o.prefix}:file_signing_key`).catch((err) => {
      key = undefined;
      throw err;
    });
    return key;
  };
  const sign = (s: string, conversationId: string, id: string, expires: number) =>
    createHmac('sha256', s).update(`${conversationId}.${id}.${expires}`).digest('hex');

  return {
    async keep(conversationId, file, deliveryKey) {
      const k = conversationKeys(o.prefix, conversationId);
      const id = createHash('sha256')
        .update(`${conversationId}\n${deliveryKey ?? randomUUID()}`)
        .digest('hex')
        .slice(0, 32);
      const expiresMs = (Math.floor(now() / 1000) + o.ttlSeconds) * 1000;
      const fileKey = `${k.base}file:${id}`;
      const index = `${k.base}files`;
      // One slot: one transaction. The index forgets expired files, and lives as long as its newest.
      await o.redis
        .multi()
        .hset(fileKey, { name: file.name, type: file.mimeType, data: Buffer.from(file.bytes) })
        .pexpireat(fileKey, expiresMs)
        .zremrangebyscore(index, '-inf', now())
        .zadd(index, expiresMs, id)
        .pexpireat(index, expiresMs, 'NX')
        .pexpireat(index, expiresMs, 'GT')
        .exec();
      const expires = expiresMs / 1000;
      const sig = sign(await secret(), conversationId, id, expires);
      const ext = o.extensionInUrl ? EXTENSION_RE.exec(file.name)?.[1]?.toLowerCase() : undefined;
      const url = `${(o.baseUrl ?? '').replace(/\/$/, '')}${path}/${encodeURIComponent(conversationId)}/${id}${ext ? `.${ext}` : ''}?expires=${expires}&sig=${sig}`;
      return { url, expiresAt: new Date(expiresMs), size: file.bytes.byteLength };
    },
    route: () => ({ method: 'GET', path: `${path}/:conversation/:id`, handle: (req) => download(req) }),
  };

  async function download(req: RouteRequest): Promise<RouteResponse> {
    const refused = o.guard?.(req);
    if (refused) return refused;
    const conversationId = req.params.conversation ?? '';
    const id = ID_RE.exec(req.params.id ?? '')?.[1];
    const expires = Number(req.query.expires);
    const sig = Buffer.from(req.query.sig ?? '', 'hex');
    const want = id !== undefined && Number.isInteger(expires) ? Buffer.from(sign(await secret(), conversationId, id, expires), 'hex') : undefined;
    if (!want || sig.length !== want.length || !timingSafeEqual(sig, want)) return { status: 403, json: { error: 'bad signature' } };
    if (expires * 1000 <= now()) return { status: 404, json: { error: 'the file has expired' } };
    const [name, type, data] = await o.redis.hmgetBuffer(`${conversationKeys(o.prefix, conversationId).base}file:${id}`, 'name', 'type', 'data');
    if (!name || !type || !data) return { status: 404, json: { error: 'the file has expired' } };
    return {
      status: 200,
      headers: {
        'content-type': type.toString('utf8'),
        // A download when opened; <img> and <audio> show it all the same. Never a page of this origin.
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name.toString('utf8'))}`,
        'content-security-policy': "default-src 'none'; sandbox",
        'x-content-type-options': 'nosniff',
        'cache-control': 'private, no-store',
      },
      body: data,
    };
  }
}

/** The key at `name`, made at random by the first process that asks. */
async function sharedKey(redis: RedisClient, name: string): Promise<string> {
  await redis.set(name, randomBytes(32).toString('hex'), 'NX');
  const value = await redis.get(name);
  if (!value) throw new Error('the file signing key could not be read back');
  return value;
}
