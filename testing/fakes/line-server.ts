/**
 * A local fake of the LINE Messaging API (the endpoints the channel uses),
 * for end-to-end tests (`apiBaseURL` pointed here, the real SDK talking to
 * it). It speaks `POST /v2/bot/message/reply` (a reply token it issued,
 * unused, younger than its `replyTokenTtlMs`), `POST /v2/bot/message/push`
 * (honouring `X-Line-Retry-Key`: a key seen before answers 409) and `POST
 * /v2/bot/chat/loading/start`; it checks the bearer token, records every
 * call and can fail the next calls with a status (429 with `Retry-After`,
 * 500). It also builds webhook deliveries and POSTs them to the app signed
 * with the channel secret, as LINE does.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../wait.js';
import { readText, sendJson } from './http-io.js';
import { postJson } from './signed-post.js';

/** Test credentials the fake accepts by default. */
export const LINE_TEST = {
  channelAccessToken: 'fakeLineChannelAccessToken0123456789abcdef',
  channelSecret: 'fake-line-channel-secret-0123456789',
} as const;

/** One Messaging API call the fake received. */
export interface LineCall {
  /** `reply` (by reply token), `push` or `loading` (the loading animation). */
  kind: 'reply' | 'push' | 'loading';
  /** The JSON body it got. */
  body: Record<string, any>;
  /** `X-Line-Retry-Key` of a push, when given. */
  retryKey?: string;
  /** HTTP status the fake answered. */
  status: number;
}

/** A message the bot sent (one message object of a reply or push). */
export interface LineSentMessage {
  /** The message id the fake gave it. */
  id: string;
  /** The chat it went to (a reply's: the chat of the event its token came from). */
  to: string;
  /** How it was sent. */
  via: 'reply' | 'push';
  /** The message's type: `text`, or media LINE fetches by URL (`image`, `audio`). */
  type: 'text' | 'image' | 'audio';
  /** The message's text (`''` for media). */
  text: string;
  /** An image's or audio's `originalContentUrl`. */
  url?: string;
  /** An image's `previewImageUrl`. */
  previewUrl?: string;
  /** An audio's `duration`, in ms. */
  duration?: number;
  /** Quick reply items: label and the text a tap sends. */
  quickReplies?: Array<{ label: string; text: string }>;
}

/** A failure the fake answers with. */
export interface LineFailure {
  /** HTTP status (429, 500, …). */
  status: number;
  /** The `message` of LINE's error body. */
  message?: string;
  /** `Retry-After` header, in seconds. */
  retryAfterSeconds?: number;
}

/** Options of `startFakeLine`. */
export interface FakeLineOptions {
  /** The bearer token the fake accepts. Default `LINE_TEST.channelAccessToken`. */
  channelAccessToken?: string;
  /** The channel secret deliveries are signed with. Default `LINE_TEST.channelSecret`. */
  channelSecret?: string;
  /** How long an issued reply token is accepted, in ms. Default 60 000 (LINE: about a minute). */
  replyTokenTtlMs?: number;
}

/** A running fake. */
export interface FakeLine {
  /** Give this as `apiBaseURL`. */
  apiUrl: string;
  /** The bearer token it accepts. */
  channelAccessToken: string;
  /** The channel secret of the app's deliveries. */
  channelSecret: string;
  /** Every call, in order. */
  calls: LineCall[];
  /** Messages the bot sent, in order. */
  sent: LineSentMessage[];
  /** Chats the loading animation was shown in. */
  loading: string[];
  /** A fresh reply token for an event in chat `chatId` (valid for `replyTokenTtlMs`, once). */
  issueReplyToken(chatId: string): string;
  /** The next `n` calls of `kind` fail with `failure`. */
  failNext(kind: LineCall['kind'], failure: LineFailure, n?: number): void;
  /** Waits until `check` returns a value (not undefined or false). */
  waitUntil<T>(check: () => T | undefined | false, timeoutMs?: number, what?: string): Promise<T>;
  /** Stops the server. */
  close(): Promise<void>;
}

/** Whether `url` is one LINE fetches media from: HTTPS, at most 2000 characters. */
const mediaUrl = (url: unknown): boolean => typeof url === 'string' && url.startsWith('https://') && url.length <= 2000;

/**
 * Validates the message objects of a reply or push as LINE does (1 to 5 messages: text of at most 5000
 * characters, images with HTTPS `originalContentUrl` and `previewImageUrl`, audio with an HTTPS URL and a
 * positive `duration`); the problem, or undefined.
 */
function messagesProblem(messages: unknown): string | undefined {
  if (!Array.isArray(messages) || messages.length < 1 || messages.length > 5) return 'messages: must be 1 to 5 objects';
  for (const m of messages as Array<Record<string, any>>) {
    if (m.type === 'image') {
      if (!mediaUrl(m.originalContentUrl) || !mediaUrl(m.previewImageUrl)) return 'messages: an image needs HTTPS URLs';
      continue;
    }
    if (m.type === 'audio') {
      if (!mediaUrl(m.originalContentUrl) || !Number.isInteger(m.duration) || m.duration <= 0) return 'messages: an audio needs an HTTPS URL and a duration';
      continue;
    }
    if (m.type !== 'text' || typeof m.text !== 'string' || m.text.length === 0) return 'messages: must be non-empty text';
    if (m.text.length > 5000) return 'messages.text: must be at most 5000 characters';
  }
  return undefined;
}

/** What the fake keeps of one message object. */
function sentMessage(m: Record<string, any>): Pick<LineSentMessage, 'type' | 'text' | 'url' | 'previewUrl' | 'duration'> {
  if (m.type === 'image') return { type: 'image', text: '', url: m.originalContentUrl, previewUrl: m.previewImageUrl };
  if (m.type === 'audio') return { type: 'audio', text: '', url: m.originalContentUrl, duration: m.duration };
  return { type: 'text', text: m.text };
}

/** Starts the fake on a random local port. */
export async function startFakeLine(opts: FakeLineOptions = {}): Promise<FakeLine> {
  const token = opts.channelAccessToken ?? LINE_TEST.channelAccessToken;
  const ttl = opts.replyTokenTtlMs ?? 60_000;
  const tokens = new Map<string, { chatId: string; issuedAt: number }>();
  const retryKeys = new Map<string, string>();
  const failures: Record<LineCall['kind'], LineFailure[]> = { reply: [], push: [], loading: [] };

  const fake: FakeLine = {
    apiUrl: '',
    channelAccessToken: token,
    channelSecret: opts.channelSecret ?? LINE_TEST.channelSecret,
    calls: [],
    sent: [],
    loading: [],
    issueReplyToken(chatId) {
      const t = randomBytes(16).toString('hex');
      tokens.set(t, { chatId, issuedAt: Date.now() });
      return t;
    },
    failNext(kind, failure, n = 1) {
      for (let i = 0; i < n; i++) failures[kind].push(failure);
    },
    waitUntil: (check, timeoutMs = 5000, what = 'condition') => waitFor(() => check(), timeoutMs, what),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const record = (call: LineCall) => fake.calls.push(call);

  /** Stores the messages as sent to `to` and answers with their ids. */
  const deliver = (res: ServerResponse, to: string, via: 'reply' | 'push', messages: Array<Record<string, any>>, headers: Record<string, string> = {}) => {
    const ids = messages.map((m) => {
      const id = String(BigInt(`0x${randomBytes(7).toString('hex')}`));
      const items = m.quickReply?.items as Array<{ action: { label: string; text: string } }> | undefined;
      fake.sent.push({ id, to, via, ...sentMessage(m), ...(items && { quickReplies: items.map((i) => ({ label: i.action.label, text: i.action.text })) }) });
      return id;
    });
    sendJson(res, 200, { sentMessages: ids.map((id) => ({ id, quoteToken: randomBytes(8).toString('hex') })) }, headers);
  };

  const handle = (kind: LineCall['kind'], body: Record<string, any>, retryKey: string | undefined, res: ServerResponse) => {
    const failure = failures[kind].shift();
    if (failure) {
      record({ kind, body, status: failure.status, ...(retryKey && { retryKey }) });
      const headers: Record<string, string> = failure.retryAfterSeconds !== undefined ? { 'retry-after': String(failure.retryAfterSeconds) } : {};
      return sendJson(res, failure.status, { message: failure.message ?? `error ${failure.status}` }, headers);
    }
    const refuse = (status: number, message: string, headers: Record<string, string> = {}) => {
      record({ kind, body, status, ...(retryKey && { retryKey }) });
      sendJson(res, status, { message }, headers);
    };
    if (kind === 'loading') {
      if (typeof body.chatId !== 'string') return refuse(400, 'chatId: required');
      fake.loading.push(body.chatId);
      record({ kind, body, status: 202 });
      return sendJson(res, 202, {});
    }
    const problem = messagesProblem(body.messages);
    if (problem) return refuse(400, 'The request body has 1 error(s)', {});
    if (kind === 'reply') {
      const issued = typeof body.replyToken === 'string' ? tokens.get(body.replyToken) : undefined;
      if (!issued || Date.now() - issued.issuedAt > ttl) return refuse(400, 'Invalid reply token');
      tokens.delete(body.replyToken);
      record({ kind, body, status: 200 });
      return deliver(res, issued.chatId, 'reply', body.messages);
    }
    if (typeof body.to !== 'string') return refuse(400, 'to: required');
    if (retryKey !== undefined) {
      if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(retryKey)) return refuse(400, 'X-Line-Retry-Key: not a UUID');
      const accepted = retryKeys.get(retryKey);
      if (accepted) return refuse(409, 'The retry key is already accepted', { 'x-line-accepted-request-id': accepted });
      retryKeys.set(retryKey, randomUUID());
    }
    record({ kind, body, status: 200, ...(retryKey && { retryKey }) });
    deliver(res, body.to, 'push', body.messages, retryKey ? { 'x-line-request-id': retryKeys.get(retryKey)! } : {});
  };

  const ROUTES: Record<string, LineCall['kind']> = {
    '/v2/bot/message/reply': 'reply',
    '/v2/bot/message/push': 'push',
    '/v2/bot/chat/loading/start': 'loading',
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readText(req);
    if (req.headers.authorization !== `Bearer ${token}`)
      return sendJson(res, 401, { message: 'Authentication failed. Confirm that the access token in the authorization header is valid.' });
    const kind = ROUTES[url.pathname];
    if (req.method !== 'POST' || !kind) return sendJson(res, 404, { message: 'Not found' });
    let body: Record<string, any>;
    try {
      body = JSON.parse(raw);
    } catch {
      return sendJson(res, 400, { message: 'The request body could not be parsed as JSON' });
    }
    const retryKey = req.headers['x-line-retry-key'];
    handle(kind, body, typeof retryKey === 'string' ? retryKey : undefined, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

// ---- webhook deliveries, as LINE sends them ----

/** Test ids in LINE's shape: a user (`U` + 32 hex) and a group (`C` + 32 hex). */
export const LINE_ALICE = 'U4af4980629a0b1c2d3e4f5a6b7c8d9e0';
/** A test group id. */
export const LINE_GROUP = 'C1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d';

/** A fresh webhook event id in LINE's shape (26 characters, ULID-like). */
export const webhookEventId = (): string => randomBytes(16).toString('hex').slice(0, 26).toUpperCase();

/** Options of `lineTextEvent`. */
export interface LineTextEventOptions {
  /** The message's text. Default `hello`. */
  text?: string;
  /** Default: a fresh one. */
  webhookEventId?: string;
  /** The sender's user id. Default `LINE_ALICE`. */
  userId?: string;
  /** Sent in this group instead of a one-to-one chat. */
  groupId?: string;
  /** The event's reply token (e.g. `fake.issueReplyToken(chat)`); absent: none. */
  replyToken?: string;
  /** Event time, ms since the epoch. Default now. */
  timestamp?: number;
  /** `deliveryContext.isRedelivery`. Default false. */
  isRedelivery?: boolean;
}

/** One text message event. */
export function lineTextEvent(o: LineTextEventOptions = {}): Record<string, unknown> {
  const userId = o.userId ?? LINE_ALICE;
  return {
    type: 'message',
    mode: 'active',
    timestamp: o.timestamp ?? Date.now(),
    webhookEventId: o.webhookEventId ?? webhookEventId(),
    deliveryContext: { isRedelivery: o.isRedelivery ?? false },
    source: o.groupId ? { type: 'group', groupId: o.groupId, userId } : { type: 'user', userId },
    ...(o.replyToken && { replyToken: o.replyToken }),
    message: { type: 'text', id: String(BigInt(`0x${randomBytes(7).toString('hex')}`)), quoteToken: randomBytes(8).toString('hex'), text: o.text ?? 'hello' },
  };
}

/** A delivery of `events` (the callback request body). */
export const lineDelivery = (...events: Array<Record<string, unknown>>): Record<string, unknown> => ({
  destination: 'Ubotdestination0000000000000000000',
  events,
});

/** `x-line-signature` of `body` under `channelSecret`. */
export function signLineDelivery(channelSecret: string, body: string): string {
  return createHmac('sha256', channelSecret).update(body).digest('base64');
}

/** POSTs `payload` to the app's webhook `url`, signed with `channelSecret` (override `headers` to test others). Resolves with the status and JSON body. */
export async function postLineDelivery(
  url: string,
  payload: unknown,
  channelSecret: string = LINE_TEST.channelSecret,
  headers?: Record<string, string>,
): Promise<{ status: number; body: any }> {
  return postJson(url, payload, (body) => headers ?? { 'x-line-signature': signLineDelivery(channelSecret, body) });
}
