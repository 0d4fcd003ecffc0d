/**
 * The callback route of http mode, `POST <path>`, for events and card
 * clicks alike. The platform signs every callback when an Encrypt Key is
 * set: `X-Lark-Signature` is the hex SHA-256 of `timestamp + nonce +
 * encrypt key + raw body`, checked on the raw bytes in constant time before
 * anything is parsed, with `X-Lark-Request-Timestamp` inside the replay
 * window (401 otherwise). The body `{ encrypt }` is decrypted with the SDK's
 * `AESCipher`, and its verification token compared in constant time (401).
 * The console's URL verification (encrypted, unsigned) is answered with its
 * challenge and nothing else: an unsigned request gets no further. A
 * malformed body is 400; a RedisUnavailableError becomes 503 in the
 * server's error handler, so the platform retries, and the retry is deduped
 * by message id.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { AESCipher, type EventDispatcher } from '@larksuiteoapi/node-sdk';
import { json, parseJson, type RouteRegistry, type RouteRequest, type RouteResponse } from 'steerbot/plugin';
import { type Callback, callbackSchema } from './event-schema.js';

/** Headers of a signed callback. */
export const FEISHU_SIGNATURE_HEADER = 'x-lark-signature';
const TIMESTAMP_HEADER = 'x-lark-request-timestamp';
const NONCE_HEADER = 'x-lark-request-nonce';

/** Callback bodies are small; the platform caps events well below this. */
const BODY_LIMIT_BYTES = 1_048_576;

/** Options of `registerCallbackRoute`. */
export interface CallbackRouteOptions {
  path: string;
  encryptKey: string;
  verificationToken: string;
  /** Oldest `X-Lark-Request-Timestamp` accepted, in seconds from now. */
  maxSkewSeconds: number;
  dispatcher: EventDispatcher;
  /** Clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

/** The `X-Lark-Signature` of `body` sent at `timestamp` with `nonce`. */
export function feishuSignature(encryptKey: string, timestamp: string, nonce: string, body: Buffer | string): string {
  return createHash('sha256').update(`${timestamp}${nonce}${encryptKey}`).update(body).digest('hex');
}

const sameText = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Why a request's signature was refused; undefined when it checks out, or `unsigned` when it carries none. */
function signatureProblem(req: RouteRequest, o: CallbackRouteOptions): string | undefined {
  const [ts, nonce, sig] = [req.headers[TIMESTAMP_HEADER], req.headers[NONCE_HEADER], req.headers[FEISHU_SIGNATURE_HEADER]];
  if (ts === undefined && nonce === undefined && sig === undefined) return 'unsigned';
  if (typeof ts !== 'string' || !/^\d{1,12}$/.test(ts)) return 'missing or malformed X-Lark-Request-Timestamp';
  if (typeof nonce !== 'string' || nonce.length > 128 || typeof sig !== 'string' || sig.length > 128) return 'missing X-Lark-Request-Nonce or X-Lark-Signature';
  if (Math.abs((o.now ?? Date.now)() / 1000 - Number(ts)) > o.maxSkewSeconds) return 'X-Lark-Request-Timestamp is too far from now (a replay?)';
  if (!sameText(sig, feishuSignature(o.encryptKey, ts, nonce, req.body))) return 'bad X-Lark-Signature';
  return undefined;
}

/** The body as the platform meant it: JSON (within the nesting limit), decrypted when it is `{ encrypt }`; undefined when unreadable. */
function readBody(raw: Buffer, cipher: AESCipher): Record<string, unknown> | undefined {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  const outer = parseJson(raw.toString('utf8'));
  if (!outer.ok || !isObject(outer.value)) return undefined;
  const { encrypt } = outer.value;
  if (typeof encrypt !== 'string') return outer.value;
  let plain: string;
  try {
    plain = cipher.decrypt(encrypt);
  } catch {
    return undefined;
  }
  const inner = parseJson(plain);
  return inner.ok && isObject(inner.value) ? inner.value : undefined;
}

/** The verification token a callback carries (the header's in v2, the body's in a URL verification). */
const tokenOf = (c: Callback): string => c.header?.token ?? c.token ?? '';

/** Registers `POST <path>` with the host's routes (before it listens). */
export function registerCallbackRoute(routes: RouteRegistry, o: CallbackRouteOptions): void {
  const cipher = new AESCipher(o.encryptKey);
  routes.add({
    method: 'POST',
    path: o.path,
    bodyLimitBytes: BODY_LIMIT_BYTES,
    async handle(req): Promise<RouteResponse> {
      const problem = signatureProblem(req, o);
      if (problem !== undefined && problem !== 'unsigned') return json(401, { error: problem });
      const body = readBody(req.body, cipher);
      if (body === undefined) return json(400, { error: 'bad callback body: not JSON, nested too deep, or not decryptable with the Encrypt Key' });
      const typed = callbackSchema.safeParse(body);
      if (!typed.success) return json(400, { error: 'bad callback body: unexpected shape' });
      if (!sameText(tokenOf(typed.data), o.verificationToken)) return json(401, { error: 'wrong verification token' });
      if (typed.data.type === 'url_verification') return json(200, { challenge: typed.data.challenge ?? '' });
      if (problem === 'unsigned') return json(401, { error: 'missing X-Lark-Signature' });
      if (typed.data.schema !== '2.0' || !typed.data.header) return json(400, { error: 'bad callback body: expected a 2.0 event' });
      // Checked above: the dispatcher's own check re-serializes the body and compares in variable time.
      const answer: unknown = await o.dispatcher.invoke(body, { needCheck: false });
      return json(200, typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : { ok: true });
    },
  });
}
