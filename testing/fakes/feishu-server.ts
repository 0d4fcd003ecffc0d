/**
 * A local fake of the Feishu / Lark open platform (what the channel uses),
 * for end-to-end tests (`domain` pointed here, the real SDK talking to it):
 * the tenant access token (`/open-apis/auth/v3/tenant_access_token/internal`),
 * the bot's info, `POST /open-apis/im/v1/messages` and `…/:message_id/reply`
 * (bearer checked, idempotent per `uuid`, recorded, scripted 429 / 500), and
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

/** The tenant access token the fake issues. */
const TENANT_TOKEN = 't-fake-feishu-tenant-access-token-0123';
/** The long connection's service id (the SDK sends it back in pings). */
const SERVICE_ID = 7;

/** A message the bot sent. */
export interface FeishuSentMessage {
  id: string;
  chatId: string;
  /** `text` or `interactive` (a card). */
  msgType: string;
  /** The text (a card's first element's). */
  text: string;
  /** A card's buttons: label and value. */
  buttons: Array<{ label: string; value: Record<string, any> }>;
  /** The message it replied to, when sent with `reply`. */
  replyTo?: string;
  inThread?: boolean;
  uuid?: string;
}

/** One IM call: its kind and the status the fake answered. */
export interface FeishuCall {
  kind: 'send' | 'reply';
  status: number;
  uuid?: string;
}

/** A failure the fake answers with: HTTP status, platform code, and `x-ogw-ratelimit-reset` in seconds. */
export interface FeishuFailure {
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
  /** Tenant access tokens handed out. */
  tokensIssued: number;
  /** The next `n` IM calls (send and reply) fail with `failure`. */
  failNext(failure: FeishuFailure, n?: number): void;
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

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** The text and buttons of a message's `content`. */
function contentOf(msgType: string, content: string): Pick<FeishuSentMessage, 'text' | 'buttons'> {
  const c = JSON.parse(content);
  if (msgType === 'text') return { text: String(c.text ?? ''), buttons: [] };
  const elements: any[] = c.elements ?? [];
  const text = String(elements.find((e) => e.tag === 'div')?.text?.content ?? '');
  const actions: any[] = elements.find((e) => e.tag === 'action')?.actions ?? [];
  return { text, buttons: actions.map((a) => ({ label: String(a.text?.content ?? ''), value: a.value ?? {} })) };
}

/** Starts the fake on a random local port. */
export async function startFakeFeishu(opts: FakeFeishuOptions = {}): Promise<FakeFeishu> {
  const appId = opts.appId ?? FEISHU_TEST.appId;
  const appSecret = opts.appSecret ?? FEISHU_TEST.appSecret;
  const sent: FeishuSentMessage[] = [];
  const calls: FeishuCall[] = [];
  const failures: FeishuFailure[] = [];
  const chatOfMessage = new Map<string, string>();
  const byUuid = new Map<string, string>();
  const sockets = new Set<WebSocket>();
  const acks = new Map<string, (ack: FeishuAck) => void>();
  const wss = new WebSocketServer({ noServer: true });
  let seq = 0;
  const fake: FakeFeishu = {
    url: '',
    sent,
    calls,
    tokensIssued: 0,
    failNext: (failure, n = 1) => {
      for (let i = 0; i < n; i++) failures.push(failure);
    },
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

  async function im(res: ServerResponse, url: URL, body: any): Promise<void> {
    const reply = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/reply$/.exec(url.pathname);
    const kind = reply ? 'reply' : 'send';
    const failure = failures.shift();
    if (failure) {
      calls.push({ kind, status: failure.status, uuid: body.uuid });
      const headers: Record<string, string> = failure.resetSeconds === undefined ? {} : { 'x-ogw-ratelimit-reset': String(failure.resetSeconds) };
      return send(res, failure.status, { code: failure.code ?? (failure.status === 429 ? 99991400 : 1), msg: 'scripted failure' }, headers);
    }
    const chatId = reply
      ? chatOfMessage.get(decodeURIComponent(reply[1] as string))
      : url.searchParams.get('receive_id_type') === 'chat_id'
        ? body.receive_id
        : undefined;
    if (typeof chatId !== 'string' || typeof body.content !== 'string' || !['text', 'interactive'].includes(body.msg_type)) {
      calls.push({ kind, status: 400, uuid: body.uuid });
      return send(res, 400, { code: 230001, msg: 'invalid receive_id, message_id or content' });
    }
    calls.push({ kind, status: 200, uuid: body.uuid });
    const known = typeof body.uuid === 'string' ? byUuid.get(body.uuid) : undefined;
    if (known) return send(res, 200, { code: 0, msg: 'success', data: { message_id: known, chat_id: chatId } });
    const id = feishuId('om_');
    chatOfMessage.set(id, chatId);
    if (typeof body.uuid === 'string') byUuid.set(body.uuid, id);
    sent.push({
      id,
      chatId,
      msgType: body.msg_type,
      ...contentOf(body.msg_type, body.content),
      ...(reply && { replyTo: decodeURIComponent(reply[1] as string), inThread: body.reply_in_thread === true }),
      ...(typeof body.uuid === 'string' && { uuid: body.uuid }),
    });
    return send(res, 200, { code: 0, msg: 'success', data: { message_id: id, chat_id: chatId, msg_type: body.msg_type } });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const body = raw ? JSON.parse(raw) : {};
    if (url.pathname === '/open-apis/auth/v3/tenant_access_token/internal') {
      if (body.app_id !== appId || body.app_secret !== appSecret) return send(res, 400, { code: 10014, msg: 'app secret invalid' });
      fake.tokensIssued++;
      return send(res, 200, { code: 0, msg: 'ok', tenant_access_token: TENANT_TOKEN, expire: 7200 });
    }
    if (url.pathname === '/callback/ws/endpoint') {
      if (body.AppID !== appId || body.AppSecret !== appSecret) return send(res, 200, { code: 514, msg: 'auth failed', data: {} });
      const URL_ = `${fake.url.replace(/^http/, 'ws')}/ws/v2?fpid=1&device_id=fake-device&service_id=${SERVICE_ID}&ticket=${randomUUID()}`;
      const ClientConfig = { PingInterval: 120, ReconnectCount: -1, ReconnectInterval: 1, ReconnectNonce: 0 };
      return send(res, 200, { code: 0, msg: 'ok', data: { URL: URL_, ClientConfig } });
    }
    if (req.headers.authorization !== `Bearer ${TENANT_TOKEN}`) return send(res, 401, { code: 99991663, msg: 'Invalid access token for authorization' });
    if (url.pathname === '/open-apis/bot/v3/info') return send(res, 200, { code: 0, msg: 'ok', bot: { open_id: FEISHU_BOT_OPEN_ID, app_name: 'steerbot' } });
    if (req.method === 'POST' && /^\/open-apis\/im\/v1\/messages(\/[^/]+\/reply)?$/.test(url.pathname)) return im(res, url, body);
    return send(res, 404, { code: 404, msg: `no route ${req.method} ${url.pathname}` });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => send(res, 500, { code: 500, msg: String(err) }));
  });
  server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, onSocket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
