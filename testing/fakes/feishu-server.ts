/**
 * A local fake of the Feishu / Lark open platform (what the channel uses),
 * for end-to-end tests (`domain` pointed here, the real SDK talking to it):
 * the tenant access token (`/open-apis/auth/v3/tenant_access_token/internal`),
 * the bot's info, `POST /open-apis/im/v1/messages` and `…/:message_id/reply`
 * (bearer checked, idempotent per `uuid`, recorded, scripted 429 / 500; text,
 * cards, and image / file / audio messages naming an upload), the multipart
 * uploads `POST /open-apis/im/v1/images` and `/open-apis/im/v1/files`, the
 * reactions `POST` / `DELETE /open-apis/im/v1/messages/:id/reactions[/:id]`
 * (each call recorded, any of them scripted to fail), an armed call done
 * and its answer held back (`holdAnswer`), and
 * the long connection: `/callback/ws/endpoint` hands out the URL of its own
 * WebSocket server, which speaks the SDK's protobuf frames (`feishu-frame.ts`):
 * it answers pings, and `push` sends an event and resolves with the SDK's
 * acknowledgement. Events and http-mode callbacks are built in `feishu-events.ts`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';
import { waitFor } from '../wait.js';
import { FEISHU_BOT_OPEN_ID, FEISHU_TEST, feishuId } from './feishu-events.js';
import { decodeFrame, encodeFrame, headerOf } from './feishu-frame.js';
import { AnswerHolds, type HeldAnswer } from './held-answers.js';
import { readBody, sendJson } from './http-io.js';
import { multipartBoundary, parseMultipart } from './multipart.js';

/** The tenant access token the fake issues. */
const TENANT_TOKEN = 't-fake-feishu-tenant-access-token-0123';
/** The long connection's service id (the SDK sends it back in pings). */
const SERVICE_ID = 7;

/** A file or image the bot uploaded. */
export interface FeishuUpload {
  /** `image_key` or `file_key`. */
  key: string;
  kind: 'image' | 'file';
  /** A file's `file_type` (`pdf`, `opus`, `stream`, …). */
  fileType?: string;
  /** A file's `file_name`. */
  fileName?: string;
  /** A file's `duration`, in ms, when it named one. */
  duration?: number;
  /** An image's `image_type`. */
  imageType?: string;
  data: Buffer;
}

/** A message the bot sent. */
export interface FeishuSentMessage {
  id: string;
  chatId: string;
  /** `text`, `interactive` (a card), `image`, `file` or `audio`. */
  msgType: string;
  /** The text (a card's first element's; empty for media). */
  text: string;
  /** The upload an image, file or audio message names. */
  media?: FeishuUpload;
  /** A card's buttons: label and value. */
  buttons: Array<{ label: string; value: Record<string, any> }>;
  /** Who a text message mentions, as the platform reads its `<at user_id="…">` tags: user ids, `all` for everyone in the chat. */
  mentions: string[];
  /** The message it replied to, when sent with `reply`. */
  replyTo?: string;
  inThread?: boolean;
  uuid?: string;
}

/** One IM call: its kind and the status the fake answered. */
export interface FeishuCall {
  kind: 'send' | 'reply' | 'upload' | 'react' | 'unreact';
  status: number;
  uuid?: string;
}

/** A failure the fake answers with: HTTP status, platform code, and `x-ogw-ratelimit-reset` in seconds. */
export interface FeishuFailure {
  /** Which calls fail: messages (send and reply, the default), uploads or reactions (add and delete). */
  on?: 'message' | 'upload' | 'reaction';
  status: number;
  code?: number;
  resetSeconds?: number;
}

/** What the SDK acknowledged for a pushed event: its `code` (200, or 500 when the handler threw) and its answer. */
export interface FeishuAck {
  code: number;
  data?: any;
}

/** Options of `startFakeFeishu`. */
export interface FakeFeishuOptions {
  appId?: string;
  appSecret?: string;
}

/** A running fake. */
export interface FakeFeishu {
  /** Give this as `domain`. */
  url: string;
  /** Messages the bot sent, in order. */
  sent: FeishuSentMessage[];
  /** IM calls, in order. */
  calls: FeishuCall[];
  /** Files and images uploaded, in order (a retried upload is two). */
  uploads: FeishuUpload[];
  /** The bot's reactions on message `messageId`: their emoji types, in the order added. */
  reactionsOn(messageId: string): string[];
  /** Tenant access tokens handed out. */
  tokensIssued: number;
  /** The next `n` calls of `failure.on` (default: messages, send and reply) fail with `failure`. */
  failNext(failure: FeishuFailure, n?: number): void;
  /**
   * Does the next successful `method` call to a path `path` matches (a
   * message is stored, an upload kept) and holds its answer until
   * `release()`: the platform has it, the client does not know.
   */
  holdAnswer(method: string, path: RegExp): HeldAnswer;
  /**
   * Makes the person's message an event carries one a reply may answer
   * (`push` does it; call it for an event posted as an http-mode callback).
   */
  rememberMessage(event: unknown): void;
  /** Pushes `event` (a v2 body) over the long connection; resolves with the SDK's acknowledgement. */
  push(event: unknown): Promise<FeishuAck>;
  /** Resolves once the SDK's long connection is open. */
  connected(timeoutMs?: number): Promise<void>;
  /** Waits until `check` returns a value (not undefined or false). */
  waitUntil<T>(check: () => T | undefined | false, timeoutMs?: number, what?: string): Promise<T>;
  close(): Promise<void>;
}

/** The kinds of message the fake takes. */
const MSG_TYPES = ['text', 'interactive', 'image', 'file', 'audio'];

/** The text, buttons and mentions of a message's `content` (a card's `plain_text` mentions nobody). */
function contentOf(msgType: string, content: string): Pick<FeishuSentMessage, 'text' | 'buttons' | 'mentions'> {
  const c = JSON.parse(content);
  if (msgType === 'text') {
    const text = String(c.text ?? '');
    return { text, buttons: [], mentions: [...text.matchAll(/<at\b[^>]*?\buser_id\s*=\s*"([^"]*)"[^>]*>/g)].map((m) => m[1]!) };
  }
  if (msgType !== 'interactive') return { text: '', buttons: [], mentions: [] };
  const elements: any[] = c.elements ?? [];
  const text = String(elements.find((e) => e.tag === 'div')?.text?.content ?? '');
  const actions: any[] = elements.find((e) => e.tag === 'action')?.actions ?? [];
  return { text, buttons: actions.map((a) => ({ label: String(a.text?.content ?? ''), value: a.value ?? {} })), mentions: [] };
}

/** Starts the fake on a random local port. */
export async function startFakeFeishu(opts: FakeFeishuOptions = {}): Promise<FakeFeishu> {
  const appId = opts.appId ?? FEISHU_TEST.appId;
  const appSecret = opts.appSecret ?? FEISHU_TEST.appSecret;
  const sent: FeishuSentMessage[] = [];
  const calls: FeishuCall[] = [];
  const failures: FeishuFailure[] = [];
  const uploads: FeishuUpload[] = [];
  const reactions = new Map<string, Array<{ id: string; emojiType: string }>>();
  const chatOfMessage = new Map<string, string>();
  const byUuid = new Map<string, string>();
  const sockets = new Set<WebSocket>();
  const acks = new Map<string, (ack: FeishuAck) => void>();
  const holds = new AnswerHolds();
  const wss = new WebSocketServer({ noServer: true });
  let seq = 0;
  const fake: FakeFeishu = {
    url: '',
    sent,
    calls,
    uploads,
    reactionsOn: (messageId) => (reactions.get(messageId) ?? []).map((r) => r.emojiType),
    tokensIssued: 0,
    failNext: (failure, n = 1) => {
      for (let i = 0; i < n; i++) failures.push(failure);
    },
    holdAnswer: (method, path) => holds.arm((call) => call.startsWith(`${method} `) && path.test(call.slice(method.length + 1))),
    rememberMessage: (event) => rememberMessage(event),
    push(event) {
      rememberMessage(event);
      const socket = [...sockets].at(-1);
      if (!socket) return Promise.reject(new Error('no long connection open'));
      const id = randomUUID();
      const headers = [
        { key: 'type', value: 'event' },
        { key: 'message_id', value: id },
        { key: 'sum', value: '1' },
        { key: 'seq', value: '0' },
        { key: 'trace_id', value: id },
      ];
      const payload = new TextEncoder().encode(JSON.stringify(event));
      return new Promise<FeishuAck>((resolve) => {
        acks.set(id, resolve);
        socket.send(encodeFrame({ seqId: ++seq, logId: seq, service: SERVICE_ID, method: 1, headers, payload }));
      });
    },
    connected: (timeoutMs = 10_000) => waitFor(() => sockets.size > 0, timeoutMs, 'the long connection').then(() => undefined),
    waitUntil: (check, timeoutMs = 10_000, what = 'condition') => waitFor(check, timeoutMs, what),
    close: async () => {
      for (const s of sockets) s.terminate();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  /** A person's message an event carries becomes one a reply may answer. */
  function rememberMessage(event: any): void {
    const m = event?.event?.message;
    if (typeof m?.message_id === 'string' && typeof m.chat_id === 'string') chatOfMessage.set(m.message_id, m.chat_id);
  }

  function onSocket(ws: WebSocket): void {
    sockets.add(ws);
    ws.on('close', () => sockets.delete(ws));
    ws.on('message', (data: Buffer) => {
      const frame = decodeFrame(new Uint8Array(data));
      const type = headerOf(frame, 'type');
      if (frame.method === 0 && type === 'ping') {
        const pong = JSON.stringify({ PingInterval: 120, ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0 });
        ws.send(encodeFrame({ ...frame, headers: [{ key: 'type', value: 'pong' }], payload: new TextEncoder().encode(pong) }));
        return;
      }
      const id = headerOf(frame, 'message_id');
      const resolve = id === undefined ? undefined : acks.get(id);
      if (!resolve || !frame.payload) return;
      acks.delete(id as string);
      const ack = JSON.parse(new TextDecoder().decode(frame.payload)) as { code: number; data?: string };
      resolve({ code: ack.code, ...(ack.data !== undefined && { data: JSON.parse(Buffer.from(ack.data, 'base64').toString('utf8')) }) });
    });
  }

  /** Answers the next scripted failure of `on`, recording the call; false when none is due. */
  function failed(res: ServerResponse, on: NonNullable<FeishuFailure['on']>, kind: FeishuCall['kind'], uuid?: string): boolean {
    const i = failures.findIndex((f) => (f.on ?? 'message') === on);
    if (i < 0) return false;
    const [failure] = failures.splice(i, 1) as [FeishuFailure];
    calls.push({ kind, status: failure.status, ...(uuid !== undefined && { uuid }) });
    const headers: Record<string, string> = failure.resetSeconds === undefined ? {} : { 'x-ogw-ratelimit-reset': String(failure.resetSeconds) };
    sendJson(res, failure.status, { code: failure.code ?? (failure.status === 429 ? 99991400 : 1), msg: 'scripted failure' }, headers);
    return true;
  }

  /** The upload a media message's content names, when it names one of the right kind. */
  function mediaOf(msgType: string, content: string): FeishuUpload | undefined {
    const c = JSON.parse(content);
    const key = msgType === 'image' ? c.image_key : c.file_key;
    const upload = uploads.find((u) => u.key === key && u.kind === (msgType === 'image' ? 'image' : 'file'));
    // An audio message plays an Opus upload only.
    return msgType === 'audio' && upload?.fileType !== 'opus' ? undefined : upload;
  }

  async function im(res: ServerResponse, url: URL, body: any): Promise<void> {
    const reply = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/reply$/.exec(url.pathname);
    const kind = reply ? 'reply' : 'send';
    if (failed(res, 'message', kind, body.uuid)) return;
    const chatId = reply
      ? chatOfMessage.get(decodeURIComponent(reply[1] as string))
      : url.searchParams.get('receive_id_type') === 'chat_id'
        ? body.receive_id
        : undefined;
    const media =
      MSG_TYPES.includes(body.msg_type) && typeof body.content === 'string' && !['text', 'interactive'].includes(body.msg_type)
        ? mediaOf(body.msg_type, body.content)
        : undefined;
    const known = ['text', 'interactive'].includes(body.msg_type) || media !== undefined;
    if (typeof chatId !== 'string' || typeof body.content !== 'string' || !known) {
      calls.push({ kind, status: 400, uuid: body.uuid });
      return sendJson(res, 400, { code: 230001, msg: 'invalid receive_id, message_id or content' });
    }
    calls.push({ kind, status: 200, uuid: body.uuid });
    const earlier = typeof body.uuid === 'string' ? byUuid.get(body.uuid) : undefined;
    if (earlier) return sendJson(res, 200, { code: 0, msg: 'success', data: { message_id: earlier, chat_id: chatId } });
    const id = feishuId('om_');
    chatOfMessage.set(id, chatId);
    if (typeof body.uuid === 'string') byUuid.set(body.uuid, id);
    sent.push({
      id,
      chatId,
      msgType: body.msg_type,
      ...contentOf(body.msg_type, body.content),
      ...(media && { media }),
      ...(reply && { replyTo: decodeURIComponent(reply[1] as string), inThread: body.reply_in_thread === true }),
      ...(typeof body.uuid === 'string' && { uuid: body.uuid }),
    });
    return sendJson(res, 200, { code: 0, msg: 'success', data: { message_id: id, chat_id: chatId, msg_type: body.msg_type } });
  }

  /** `POST /open-apis/im/v1/images` and `/open-apis/im/v1/files`: a multipart upload, answered with its key. */
  function upload(res: ServerResponse, kind: 'image' | 'file', parts: ReturnType<typeof parseMultipart>): void {
    if (failed(res, 'upload', 'upload')) return;
    const field = (name: string) => parts.find((p) => p.name === name);
    const text = (name: string) => field(name)?.data.toString('utf8');
    const data = field(kind)?.data;
    const valid =
      kind === 'image'
        ? text('image_type') === 'message'
        : ['opus', 'mp4', 'pdf', 'doc', 'xls', 'ppt', 'stream'].includes(text('file_type') ?? '') && !!text('file_name');
    if (!data || data.length === 0 || !valid) {
      calls.push({ kind: 'upload', status: 400 });
      return sendJson(res, 400, { code: 234001, msg: 'Invalid request param.' });
    }
    calls.push({ kind: 'upload', status: 200 });
    const key = kind === 'image' ? `img_v3_${randomUUID()}` : `file_v3_${randomUUID()}`;
    const duration = text('duration');
    uploads.push({
      key,
      kind,
      data,
      ...(kind === 'image' ? { imageType: text('image_type') as string } : { fileType: text('file_type') as string, fileName: text('file_name') as string }),
      ...(duration !== undefined && { duration: Number(duration) }),
    });
    sendJson(res, 200, { code: 0, msg: 'success', data: kind === 'image' ? { image_key: key } : { file_key: key } });
  }

  /** `POST …/messages/:id/reactions` (adds one; the platform keeps every reaction) and `DELETE …/reactions/:reaction_id`. */
  function reaction(res: ServerResponse, method: string, messageId: string, reactionId: string | undefined, body: any): void {
    const kind = method === 'DELETE' ? 'unreact' : 'react';
    if (failed(res, 'reaction', kind)) return;
    const list = reactions.get(messageId) ?? [];
    if (!chatOfMessage.has(messageId)) {
      calls.push({ kind, status: 400 });
      return sendJson(res, 400, { code: 231003, msg: 'message not found' });
    }
    if (kind === 'unreact') {
      const i = list.findIndex((r) => r.id === reactionId);
      if (i < 0) {
        calls.push({ kind, status: 400 });
        return sendJson(res, 400, { code: 231001, msg: 'reaction not found' });
      }
      const [gone] = list.splice(i, 1);
      calls.push({ kind, status: 200 });
      return sendJson(res, 200, { code: 0, msg: 'success', data: { reaction_id: reactionId, reaction_type: { emoji_type: gone?.emojiType } } });
    }
    const emojiType = body?.reaction_type?.emoji_type;
    if (typeof emojiType !== 'string' || emojiType === '') {
      calls.push({ kind, status: 400 });
      return sendJson(res, 400, { code: 231001, msg: 'reaction type is invalid' });
    }
    const id = `ZCaCIjUBVVWSrm5L-${randomUUID()}`;
    list.push({ id, emojiType });
    reactions.set(messageId, list);
    calls.push({ kind, status: 200 });
    sendJson(res, 200, {
      code: 0,
      msg: 'success',
      data: { reaction_id: id, reaction_type: { emoji_type: emojiType }, operator: { operator_id: appId, operator_type: 'app' } },
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const boundary = multipartBoundary(req.headers['content-type']);
    const parts = boundary ? parseMultipart(raw, boundary) : [];
    const body = boundary || raw.length === 0 ? {} : JSON.parse(raw.toString('utf8'));
    if (url.pathname === '/open-apis/auth/v3/tenant_access_token/internal') {
      if (body.app_id !== appId || body.app_secret !== appSecret) return sendJson(res, 400, { code: 10014, msg: 'app secret invalid' });
      fake.tokensIssued++;
      return sendJson(res, 200, { code: 0, msg: 'ok', tenant_access_token: TENANT_TOKEN, expire: 7200 });
    }
    if (url.pathname === '/callback/ws/endpoint') {
      if (body.AppID !== appId || body.AppSecret !== appSecret) return sendJson(res, 200, { code: 514, msg: 'auth failed', data: {} });
      const URL_ = `${fake.url.replace(/^http/, 'ws')}/ws/v2?fpid=1&device_id=fake-device&service_id=${SERVICE_ID}&ticket=${randomUUID()}`;
      const ClientConfig = { PingInterval: 120, ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0 };
      return sendJson(res, 200, { code: 0, msg: 'ok', data: { URL: URL_, ClientConfig } });
    }
    if (req.headers.authorization !== `Bearer ${TENANT_TOKEN}`) return sendJson(res, 401, { code: 99991663, msg: 'Invalid access token for authorization' });
    if (url.pathname === '/open-apis/bot/v3/info')
      return sendJson(res, 200, { code: 0, msg: 'ok', bot: { open_id: FEISHU_BOT_OPEN_ID, app_name: 'steerbot' } });
    if (req.method === 'POST' && /^\/open-apis\/im\/v1\/messages(\/[^/]+\/reply)?$/.test(url.pathname)) return im(res, url, body);
    if (req.method === 'POST' && url.pathname === '/open-apis/im/v1/images') return upload(res, 'image', parts);
    if (req.method === 'POST' && url.pathname === '/open-apis/im/v1/files') return upload(res, 'file', parts);
    const reacted = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/reactions(?:\/([^/]+))?$/.exec(url.pathname);
    if (reacted && ((req.method === 'POST' && !reacted[2]) || (req.method === 'DELETE' && reacted[2])))
      return reaction(res, req.method, decodeURIComponent(reacted[1] as string), reacted[2] && decodeURIComponent(reacted[2]), body);
    return sendJson(res, 404, { code: 404, msg: `no route ${req.method} ${url.pathname}` });
  }

  /** Defers the answer of `call` on `res` when a hold is armed for it and the call succeeded (its work is done by then). */
  function holdable(call: string, res: ServerResponse): void {
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    res.end = ((...args: unknown[]) => {
      if (res.statusCode >= 300 || !holds.hold(call, res, () => end(...args))) end(...args);
      return res;
    }) as typeof res.end;
  }

  const server = createServer((req, res) => {
    holdable(`${req.method} ${new URL(req.url ?? '/', 'http://fake').pathname}`, res);
    handle(req, res).catch((err: unknown) => sendJson(res, 500, { code: 500, msg: String(err) }));
  });
  server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, onSocket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
