/**
 * A local fake of the WhatsApp Cloud API (the Graph API endpoints the
 * channel uses), for end-to-end tests (`graphApiUrl` pointed here). It
 * speaks `POST /<version>/<phone number id>/messages` (text, interactive
 * reply buttons, image and document messages naming uploaded media, read
 * receipts with the typing indicator), `POST /<version>/<phone number
 * id>/media` (multipart media uploads, kept in `uploads`), `GET
 * /<version>/<media id>` (media metadata) and the media download URL it
 * names; it checks the bearer token, records every call and can fail the
 * next calls with a scripted Graph error (a rate limit with `Retry-After`,
 * 131047 when the 24-hour window closed), or do a send and hold its answer
 * back (`holdAnswer`). It also builds webhook deliveries and POSTs them to
 * the app signed with the app secret, as Meta does.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../wait.js';
import { AnswerHolds, type HeldAnswer } from './held-answers.js';
import { readBody, sendJson } from './http-io.js';
import { multipartBoundary, parseMultipart } from './multipart.js';
import { postJson } from './signed-post.js';

/** Test credentials the fake accepts by default. */
export const WHATSAPP_TEST = {
  accessToken: 'EAAGfakeWhatsAppAccessToken0123456789',
  appSecret: 'fake-app-secret-0123456789abcdef',
  verifyToken: 'fake-verify-token',
  phoneNumberId: '106540352242922',
  graphApiVersion: 'v23.0',
} as const;

/** One Graph API call the fake received. */
export interface GraphCall {
  /** `send` (a message), `read` (a read receipt), `upload` (a media upload), `media` (metadata), `download` (media bytes). */
  kind: 'send' | 'read' | 'upload' | 'media' | 'download';
  path: string;
  body: Record<string, any>;
  /** HTTP status the fake answered. */
  status: number;
}

/** A message the bot sent. */
export interface WhatsAppSentMessage {
  id: string;
  to: string;
  type: 'text' | 'interactive' | 'image' | 'document' | 'audio';
  /** The text body (an interactive message's body text, a file's caption). */
  text: string;
  /** An image, document or audio message's media: its id, the uploaded bytes, and a document's file name. */
  media?: { id: string; data: Buffer; mimeType: string; filename?: string };
  /** Reply buttons of an interactive message. */
  buttons?: Array<{ id: string; title: string }>;
  /** `context.message_id`: the message it replies to. */
  replyTo?: string;
  /** A text message's `preview_url`: whether WhatsApp previews (fetches) its first link. WhatsApp's default: false. */
  previewUrl?: boolean;
}

/** A Graph error the fake answers with. */
export interface GraphFailure {
  /** HTTP status. */
  status: number;
  /** Graph error code (131047 window closed, 130429 rate limit, …). */
  code: number;
  message?: string;
  /** `Retry-After` header, in seconds. */
  retryAfterSeconds?: number;
}

/** Options of `startFakeWhatsApp`. */
export interface FakeWhatsAppOptions {
  accessToken?: string;
  appSecret?: string;
  phoneNumberId?: string;
}

/** A running fake. */
export interface FakeWhatsApp {
  /** Give this as `graphApiUrl`. */
  graphUrl: string;
  accessToken: string;
  appSecret: string;
  phoneNumberId: string;
  calls: GraphCall[];
  /** Messages the bot sent, in order. */
  sent: WhatsAppSentMessage[];
  /** Read receipts: the message marked read, and whether the typing indicator was asked for. */
  reads: Array<{ messageId: string; typing: boolean }>;
  /** The bot's reaction on each message, by message id (a reaction message replaces the last; an empty emoji removes it). */
  reactions: Map<string, string>;
  /** Serves `data` as media `id` (`GET /<version>/<id>` and its download URL). */
  addMedia(id: string, data: Buffer, mimeType: string): void;
  /** Media the bot uploaded, in order. */
  uploads: Array<{ id: string; data: Buffer; mimeType: string; filename: string | undefined }>;
  /** The next `n` calls of `kind` fail with `failure`, after `after` more that succeed (default 0). */
  failNext(kind: 'send' | 'read' | 'upload' | 'media', failure: GraphFailure, n?: number, after?: number): void;
  /** Does the next successful message send (it is stored) and holds its answer until `release()`. */
  holdAnswer(kind: 'send'): HeldAnswer;
  /** Waits until `check` returns a value (not undefined or false). */
  waitUntil<T>(check: () => T | undefined | false, timeoutMs?: number, what?: string): Promise<T>;
  close(): Promise<void>;
}

const graphError = (f: GraphFailure) => ({
  error: { message: f.message ?? `error ${f.code}`, type: 'OAuthException', code: f.code, fbtrace_id: 'AfakeTrace' },
});

/** Starts the fake on a random local port. */
export async function startFakeWhatsApp(opts: FakeWhatsAppOptions = {}): Promise<FakeWhatsApp> {
  const token = opts.accessToken ?? WHATSAPP_TEST.accessToken;
  const phoneNumberId = opts.phoneNumberId ?? WHATSAPP_TEST.phoneNumberId;
  const media = new Map<string, { data: Buffer; mimeType: string }>();
  const failures: Record<string, Array<GraphFailure | undefined>> = { send: [], read: [], upload: [], media: [] };
  const holds = new AnswerHolds();
  let base = '';

  const fake: FakeWhatsApp = {
    graphUrl: '',
    accessToken: token,
    appSecret: opts.appSecret ?? WHATSAPP_TEST.appSecret,
    phoneNumberId,
    calls: [],
    sent: [],
    reads: [],
    reactions: new Map(),
    uploads: [],
    addMedia: (id, data, mimeType) => media.set(id, { data, mimeType }),
    failNext(kind, failure, n = 1, after = 0) {
      for (let i = 0; i < after; i++) failures[kind]!.push(undefined);
      for (let i = 0; i < n; i++) failures[kind]!.push(failure);
    },
    holdAnswer: (kind) => holds.arm((call) => call === kind),
    waitUntil: (check, timeoutMs = 5000, what = 'condition') => waitFor(() => check(), timeoutMs, what),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const record = (kind: GraphCall['kind'], path: string, body: Record<string, any>, status: number) => fake.calls.push({ kind, path, body, status });

  /** Answers a scripted failure of `kind`, if one is queued. */
  const failed = (kind: string, res: ServerResponse, path: string, body: Record<string, any>, callKind: GraphCall['kind']): boolean => {
    const f = failures[kind]!.shift();
    if (!f) return false;
    record(callKind, path, body, f.status);
    sendJson(res, f.status, graphError(f), f.retryAfterSeconds !== undefined ? { 'retry-after': String(f.retryAfterSeconds) } : {});
    return true;
  };

  const onMessages = (path: string, body: Record<string, any>, res: ServerResponse) => {
    if (body.status === 'read') {
      if (failed('read', res, path, body, 'read')) return;
      fake.reads.push({ messageId: String(body.message_id), typing: body.typing_indicator?.type === 'text' });
      record('read', path, body, 200);
      return sendJson(res, 200, { success: true });
    }
    if (failed('send', res, path, body, 'send')) return;
    if (body.messaging_product !== 'whatsapp' || typeof body.to !== 'string') {
      record('send', path, body, 400);
      return sendJson(res, 400, graphError({ status: 400, code: 100, message: 'Invalid parameter' }));
    }
    if (body.type === 'reaction') {
      if (typeof body.reaction?.message_id !== 'string' || typeof body.reaction?.emoji !== 'string') {
        record('send', path, body, 400);
        return sendJson(res, 400, graphError({ status: 400, code: 100, message: 'Invalid parameter' }));
      }
      fake.reactions.set(body.reaction.message_id, body.reaction.emoji);
      record('send', path, body, 200);
      return sendJson(res, 200, {
        messaging_product: 'whatsapp',
        contacts: [{ input: body.to, wa_id: body.to }],
        messages: [{ id: `wamid.${randomBytes(12).toString('hex')}` }],
      });
    }
    const id = `wamid.${randomBytes(12).toString('hex')}`;
    const interactive = body.type === 'interactive';
    const file = body.type === 'image' || body.type === 'document' || body.type === 'audio' ? body[body.type] : undefined;
    const uploaded = file ? media.get(String(file.id)) : undefined;
    if (file && !uploaded) {
      record('send', path, body, 400);
      return sendJson(res, 400, graphError({ status: 400, code: 131053, message: 'Media upload error: unknown media id' }));
    }
    const msg: WhatsAppSentMessage = {
      id,
      to: body.to,
      type: file ? body.type : interactive ? 'interactive' : 'text',
      text: file ? String(file.caption ?? '') : interactive ? String(body.interactive?.body?.text ?? '') : String(body.text?.body ?? ''),
      ...(uploaded && { media: { id: String(file.id), data: uploaded.data, mimeType: uploaded.mimeType, ...(file.filename && { filename: file.filename }) } }),
      ...(interactive && { buttons: (body.interactive?.action?.buttons ?? []).map((b: any) => ({ id: b.reply.id, title: b.reply.title })) }),
      ...(body.context?.message_id && { replyTo: body.context.message_id }),
      ...(body.type === 'text' && { previewUrl: body.text?.preview_url === true }),
    };
    fake.sent.push(msg);
    record('send', path, body, 200);
    const answer = () => sendJson(res, 200, { messaging_product: 'whatsapp', contacts: [{ input: body.to, wa_id: body.to }], messages: [{ id }] });
    if (!holds.hold('send', res, answer)) answer();
  };

  /** A multipart media upload: `messaging_product`, `type` and the `file` part; answers the new media id. */
  const onUpload = (path: string, raw: Buffer, contentType: string | undefined, res: ServerResponse) => {
    if (failed('upload', res, path, {}, 'upload')) return;
    const boundary = multipartBoundary(contentType);
    const parts = boundary ? parseMultipart(raw, boundary) : [];
    const field = (name: string) => parts.find((p) => p.name === name && p.filename === undefined)?.data.toString('utf8');
    const file = parts.find((p) => p.name === 'file' && p.filename !== undefined);
    const type = field('type');
    if (field('messaging_product') !== 'whatsapp' || !file || !type) {
      record('upload', path, {}, 400);
      return sendJson(res, 400, graphError({ status: 400, code: 100, message: 'Invalid parameter' }));
    }
    const id = String(1_000_000_000_000 + fake.uploads.length + media.size);
    media.set(id, { data: file.data, mimeType: type });
    fake.uploads.push({ id, data: file.data, mimeType: type, filename: file.filename });
    record('upload', path, { type, filename: file.filename }, 200);
    sendJson(res, 200, { id });
  };

  const onMedia = (path: string, id: string, res: ServerResponse) => {
    if (failed('media', res, path, {}, 'media')) return;
    const m = media.get(id);
    record('media', path, {}, m ? 200 : 404);
    if (!m) return sendJson(res, 404, graphError({ status: 404, code: 100, message: 'Unsupported get request' }));
    sendJson(res, 200, {
      messaging_product: 'whatsapp',
      url: `${base}/download/${encodeURIComponent(id)}`,
      mime_type: m.mimeType,
      file_size: m.data.byteLength,
      id,
    });
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const bytes = await readBody(req);
    const raw = bytes.toString('utf8');
    if (req.headers.authorization !== `Bearer ${token}`) {
      return sendJson(res, 401, graphError({ status: 401, code: 190, message: 'Invalid OAuth access token' }));
    }
    const download = /^\/download\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && download) {
      const m = media.get(decodeURIComponent(download[1]!));
      record('download', url.pathname, {}, m ? 200 : 404);
      if (!m) return sendJson(res, 404, {});
      res.writeHead(200, { 'content-type': m.mimeType, 'content-length': m.data.byteLength });
      return res.end(m.data);
    }
    const messages = /^\/(v\d+\.\d+)\/(\d+)\/messages$/.exec(url.pathname);
    if (req.method === 'POST' && messages && messages[2] === phoneNumberId) {
      let body: Record<string, any>;
      try {
        body = JSON.parse(raw);
      } catch {
        return sendJson(res, 400, graphError({ status: 400, code: 100, message: 'body is not JSON' }));
      }
      return onMessages(url.pathname, body, res);
    }
    const upload = /^\/(v\d+\.\d+)\/(\d+)\/media$/.exec(url.pathname);
    if (req.method === 'POST' && upload && upload[2] === phoneNumberId) return onUpload(url.pathname, bytes, req.headers['content-type'], res);
    const mediaGet = /^\/(v\d+\.\d+)\/([A-Za-z0-9_.-]+)$/.exec(url.pathname);
    if (req.method === 'GET' && mediaGet) return onMedia(url.pathname, mediaGet[2]!, res);
    sendJson(res, 404, graphError({ status: 404, code: 100, message: `unknown path ${url.pathname}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.graphUrl = base;
  return fake;
}

// ---- webhook deliveries, as Meta sends them ----

/** A test user (a WhatsApp id is the phone number, digits only). */
export const WA_ALICE = { waId: '15550001111', name: 'Alice Liddell' } as const;

/** Wraps a change value in a delivery for `phoneNumberId`. */
export function delivery(value: Record<string, unknown>, phoneNumberId: string = WHATSAPP_TEST.phoneNumberId): Record<string, unknown> {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            field: 'messages',
            value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550783881', phone_number_id: phoneNumberId }, ...value },
          },
        ],
      },
    ],
  };
}

/** Options of `messageDelivery`. */
export interface WaMessageOptions {
  /** The message id (`wamid`). Default: a fresh one. */
  id?: string;
  from?: { waId: string; name: string };
  /** A text message's body. */
  text?: string;
  /** A media message instead: its type and media id. */
  media?: { type: 'image' | 'audio' | 'video' | 'document' | 'sticker'; id: string; mimeType: string; caption?: string; filename?: string; voice?: boolean };
  /** A click on a reply button instead: the button's id and title. */
  buttonReply?: { id: string; title: string };
  /** Sent in this group (Cloud API groups): the message carries its `group_id`. */
  groupId?: string;
  phoneNumberId?: string;
}

/** A fresh message id in WhatsApp's shape. */
export const wamid = (): string => `wamid.${randomBytes(16).toString('base64url')}`;

/** A delivery of one inbound message (text by default; media or a button click by option). */
export function messageDelivery(o: WaMessageOptions = {}): Record<string, unknown> {
  const from = o.from ?? WA_ALICE;
  const message: Record<string, unknown> = { from: from.waId, id: o.id ?? wamid(), timestamp: String(Math.floor(Date.now() / 1000)) };
  if (o.groupId !== undefined) message.group_id = o.groupId;
  if (o.buttonReply) Object.assign(message, { type: 'interactive', interactive: { type: 'button_reply', button_reply: o.buttonReply } });
  else if (o.media) {
    const { type, id, mimeType, caption, filename, voice } = o.media;
    Object.assign(message, {
      type,
      [type]: { id, mime_type: mimeType, sha256: 'fake', ...(caption && { caption }), ...(filename && { filename }), ...(voice && { voice }) },
    });
  } else Object.assign(message, { type: 'text', text: { body: o.text ?? 'hello' } });
  return delivery({ contacts: [{ profile: { name: from.name }, wa_id: from.waId }], messages: [message] }, o.phoneNumberId);
}

/** A delivery of one status callback of a message the bot sent. */
export function statusDelivery(o: {
  messageId: string;
  status: 'sent' | 'delivered' | 'read' | 'failed';
  recipient?: string;
  error?: { code: number; title: string };
}): Record<string, unknown> {
  return delivery({
    statuses: [
      {
        id: o.messageId,
        status: o.status,
        timestamp: String(Math.floor(Date.now() / 1000)),
        recipient_id: o.recipient ?? WA_ALICE.waId,
        ...(o.error && { errors: [o.error] }),
      },
    ],
  });
}

/** `X-Hub-Signature-256` of `body` under `appSecret`. */
export function signDelivery(appSecret: string, body: string): string {
  return `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;
}

/** POSTs `payload` to the app's webhook `url`, signed with `appSecret` (override `headers` to test others). Resolves with the status and JSON body. */
export async function postDelivery(
  url: string,
  payload: unknown,
  appSecret: string = WHATSAPP_TEST.appSecret,
  headers?: Record<string, string>,
): Promise<{ status: number; body: any }> {
  return postJson(url, payload, (body) => headers ?? { 'x-hub-signature-256': signDelivery(appSecret, body) });
}
