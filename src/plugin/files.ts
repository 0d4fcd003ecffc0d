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
 *
 * A download holds its file's bytes until its response is done with (sent, or
 * its connection closed; the host closes one whose client stops reading).
 * Concurrent downloads of one file share one copy, and the process holds at
 * most `maxBytesInFlight` for downloads in progress: past it a download gets
 * 503 with `Retry-After`, holding nothing, so clients that never read cannot
 * make the process hold a copy per connection.
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
  /**
   * Refuses (503) a download that would take the bytes this process holds for downloads in progress, over every
   * store, past this many (a file shared by concurrent downloads counts once). Default 256 MiB.
   */
  maxBytesInFlight?: number;
}

/** Default of `maxBytesInFlight`: a dozen of the largest files a channel sends (20 MiB), sent at once. */
const MAX_BYTES_IN_FLIGHT = 256 * 1024 * 1024;
/** What a download refused for the bound is told to wait, in seconds. */
const RETRY_AFTER_SECONDS = 10;

/** Downloads in progress in this process, over every store, the files they hold and their bytes. */
const held = { downloads: 0, files: 0, bytes: 0 };

/** The downloads in progress in this process, the files they hold and their bytes (a file shared by concurrent downloads counts once). */
export function downloadsInFlight(): { downloads: number; files: number; bytes: number } {
  return { ...held };
}

/** A file being sent: its read from Redis, shared by the downloads sending it, how many they are, and its bytes. */
interface SentFile {
  read: Promise<(Buffer | null)[]>;
  users: number;
  bytes: number;
}

/** A download's hold on its file: the read (name, type, data) and `release`, to call once it is done with (more calls do nothing). */
interface Hold {
  read: Promise<(Buffer | null)[]>;
  release: () => void;
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
  const sending = new Sending(o.redis, o.maxBytesInFlight ?? MAX_BYTES_IN_FLIGHT);

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
    const fileKey = `${conversationKeys(o.prefix, conversationId).base}file:${id}`;
    // Asked at every download: a purged file is not served from a copy another download still holds.
    const size = await o.redis.hstrlen(fileKey, 'data');
    const hold = sending.hold(fileKey, size);
    if (!hold)
      return { status: 503, headers: { 'retry-after': String(RETRY_AFTER_SECONDS) }, json: { error: 'too many downloads in progress; try again later' } };
    const [name, type, data] = await hold.read.catch((err: unknown) => {
      hold.release();
      throw err;
    });
    if (!name || !type || !data) {
      hold.release();
      return { status: 404, json: { error: 'the file has expired' } };
    }
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
      onClose: hold.release,
    };
  }
}

/** The files one store is sending, by key: each read once for all its concurrent downloads, within the process's bound. */
class Sending {
  private readonly files = new Map<string, SentFile>();

  constructor(
    private readonly redis: RedisClient,
    private readonly maxBytes: number,
  ) {}

  /** A hold on the file at `fileKey` (`size` bytes of data); undefined when the process holds too much to take it. */
  hold(fileKey: string, size: number): Hold | undefined {
    // Empty or gone: nothing to hold or share.
    if (size === 0) return { read: this.read(fileKey), release: () => {} };
    const file = this.files.get(fileKey) ?? this.start(fileKey, size);
    if (!file) return undefined;
    file.users += 1;
    held.downloads += 1;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      file.users -= 1;
      held.downloads -= 1;
      if (file.users > 0) return;
      this.files.delete(fileKey);
      held.files -= 1;
      held.bytes -= file.bytes;
    };
    return { read: file.read, release };
  }

  private start(fileKey: string, size: number): SentFile | undefined {
    if (held.bytes + size > this.maxBytes) return undefined;
    const file: SentFile = { read: Promise.resolve([]), users: 0, bytes: size };
    // Counted at the size read: the file may have been kept again in between.
    file.read = this.read(fileKey).then((got) => {
      const bytes = got[2]?.length ?? 0;
      held.bytes += bytes - file.bytes;
      file.bytes = bytes;
      return got;
    });
    this.files.set(fileKey, file);
    held.files += 1;
    held.bytes += size;
    return file;
  }

  private read(fileKey: string): Promise<(Buffer | null)[]> {
    return this.redis.hmgetBuffer(fileKey, 'name', 'type', 'data');
  }
}

/** The key at `name`, made at random by the first process that asks. */
async function sharedKey(redis: RedisClient, name: string): Promise<string> {
  await redis.set(name, randomBytes(32).toString('hex'), 'NX');
  const value = await redis.get(name);
  if (!value) throw new Error('the file signing key could not be read back');
  return value;
}
