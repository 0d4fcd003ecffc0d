/**
 * Files out on the webhook channel. A file the agent sends is kept in Redis
 * for `fileTtlSeconds` (its key expires then; at most `maxFileBytes`), and
 * the reply carries a download URL under the channel's path, signed with the
 * callback secret and expiring with the file:
 * `<filesUrl><path>/files/<id>?expires=<unix s>&sig=<hex HMAC-SHA256(secret, "<id>.<expires>")>`.
 * The file's id comes from its delivery key, so a retried send keeps the
 * same file and URL. A URL that is unsigned, altered or expired is refused.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { OutboundFile } from 'steerbot/channel';
import type { HttpRoute, RedisClient } from 'steerbot/plugin';
import type { WebhookChannelConfig } from './config.js';
import type { WebhookFile } from './events.js';
import { fileKey } from './keys.js';

/** What the files of one webhook channel need. */
export interface WebhookFilesOptions {
  channelId: string;
  config: WebhookChannelConfig;
  /** The channel's route (`/webhooks/<name>`). */
  path: string;
  redis: RedisClient;
  prefix: string;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

const ID_RE = /^[0-9a-f]{32}$/;

/** The HMAC of a download URL. */
function urlSignature(secret: string, id: string, expires: number): string {
  return createHmac('sha256', secret).update(`${id}.${expires}`).digest('hex');
}

/** Keeps `file` for download and returns what the reply says of it. */
export async function keepFile(o: WebhookFilesOptions, conversationId: string, file: OutboundFile, deliveryKey: string): Promise<WebhookFile> {
  const cfg = o.config;
  const id = createHash('sha256').update(`${o.channelId}\n${conversationId}\n${deliveryKey}`).digest('hex').slice(0, 32);
  const key = fileKey(o.prefix, id);
  await o.redis
    .multi()
    .hset(key, { name: file.name, type: file.mimeType, conversation: conversationId, data: Buffer.from(file.bytes) })
    .expire(key, cfg.fileTtlSeconds)
    .exec();
  const expires = Math.floor((o.now ?? Date.now)() / 1000) + cfg.fileTtlSeconds;
  const sig = urlSignature(cfg.callbackSecret ?? cfg.secret, id, expires);
  const url = `${cfg.filesUrl!.replace(/\/$/, '')}${o.path}/files/${id}?expires=${expires}&sig=${sig}`;
  return { name: file.name, mimeType: file.mimeType, size: file.bytes.byteLength, url, expiresAt: new Date(expires * 1000).toISOString() };
}

/** The download route: 200 with the bytes for a valid, unexpired signature; 403 for a bad one; 404 once the file is gone. */
export function fileRoute(o: WebhookFilesOptions): HttpRoute {
  const secret = o.config.callbackSecret ?? o.config.secret;
  return {
    method: 'GET',
    path: `${o.path}/files/:id`,
    async handle(req) {
      const id = req.params.id ?? '';
      const expires = Number(req.query.expires);
      const sig = Buffer.from(req.query.sig ?? '', 'hex');
      const want = ID_RE.test(id) && Number.isInteger(expires) ? Buffer.from(urlSignature(secret, id, expires), 'hex') : undefined;
      if (!want || sig.length !== want.length || !timingSafeEqual(sig, want)) return { status: 403, json: { error: 'bad signature' } };
      if (expires * 1000 <= (o.now ?? Date.now)()) return { status: 404, json: { error: 'the file has expired' } };
      const [name, type, data] = await o.redis.hmgetBuffer(fileKey(o.prefix, id), 'name', 'type', 'data');
      if (!name || !type || !data) return { status: 404, json: { error: 'the file has expired' } };
      return {
        status: 200,
        headers: {
          'content-type': type.toString('utf8'),
          'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name.toString('utf8'))}`,
          'x-content-type-options': 'nosniff',
          'cache-control': 'private, no-store',
        },
        body: data,
      };
    },
  };
}
