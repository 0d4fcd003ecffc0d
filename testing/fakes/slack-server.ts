/**
 * A local fake of Slack, for end-to-end tests of the real clients
 * (`@slack/web-api` with `slackApiUrl` pointed here, `@slack/socket-mode`
 * connecting to its WebSocket). It speaks the Web API (`POST /api/<method>`,
 * form or JSON bodies) for auth.test, apps.connections.open, chat.postMessage
 * and chat.update (message metadata kept), conversations.history and
 * conversations.replies (the bot's messages and those `postAs` posted as
 * someone else, paged, metadata with `include_all_metadata`),
 * chat.postEphemeral, users.info (the bot's workspace's members, or
 * the user objects given in `users`: Slack Connect members), and the file upload flow
 * (files.getUploadURLExternal, a POST of the bytes to the upload URL,
 * files.completeUploadExternal: `uploads`); serves shared files at `/files/…` to
 * the bot token only; and runs Socket Mode:
 * `hello` on connect, envelopes pushed with `deliver` and their acks
 * recorded. It records every call and can fail the next calls of a method
 * (429 with `Retry-After`, or a platform error), or do one and hold its
 * answer back (`holdAnswer`). Builders make Events API bodies, button
 * clicks and their signed headers.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER, slackSignature } from '../../plugins/slack/signature.js';
import { AnswerHolds, type HeldAnswer } from './held-answers.js';

/** Test tokens and ids, in the shapes Slack issues. */
export const SLACK_BOT_TOKEN = 'xoxb-1111-2222-fakeBotTokenForTests';
export const SLACK_APP_TOKEN = 'xapp-1-A111-3333-fakeAppTokenForTests';
export const SLACK_SIGNING_SECRET = 'fakeSigningSecret0123456789abcdef';
/** The bot's user id (what `auth.test` answers; mentions are `<@SLACK_BOT_USER>`). */
export const SLACK_BOT_USER = 'UBOT0001';

/** One Web API call the fake received. */
export interface SlackApiCall {
  method: string;
  /** The bearer token. */
  token: string;
  payload: Record<string, any>;
  /** What the fake answered: `ok`, a platform error code, or an HTTP status. */
  outcome: string | number;
}

/** A message the bot posted, with its current text (after edits). */
export interface SlackPostedMessage {
  channel: string;
  ts: string;
  threadTs: string | undefined;
  text: string;
  blocks: any[] | undefined;
  /** Message metadata (`{ event_type, event_payload }`), as posted or last updated. */
  metadata: { event_type: string; event_payload: Record<string, unknown> } | undefined;
  /** Every later text, oldest first. */
  edits: string[];
  /** Who posted it when it was not the bot (`postAs`): a person's user id, and the bot id of their app if one posted it. */
  author?: { user: string; botId?: string };
  /**
   * What Slack unfurls in it (fetching those links at once), by the post's `unfurl_links` and `unfurl_media`
   * and Slack's defaults for an app's message when absent: text links not, media yes. `chat.update` takes neither.
   */
  unfurls?: { links: boolean; media: boolean };
}

/**
 * Who a Slack text notifies: its special mentions `<!channel>`, `<!here>`,
 * `<!everyone>`, `<!subteam^…>` (a user group) and `<@U…>` (a person),
 * each as written, in order. Escaped text (`&lt;!channel&gt;`) notifies no one.
 */
export function slackPingsIn(text: string): string[] {
  return [...text.matchAll(/<(!(?:channel|here|everyone)|!subteam\^[A-Z0-9]+|@[UW][A-Z0-9]+)(?:\|[^>]*)?>/g)].map((m) => `<${m[1]}>`);
}

/** A boolean Web API argument as the fake reads it (a JSON boolean, or `true` / `1` in a form); undefined when absent. */
const flag = (v: unknown): boolean | undefined => (v === undefined ? undefined : v === true || v === 'true' || v === '1');

/** A scripted failure: an HTTP status (429 with `retryAfter` seconds) or a platform error (`{ ok: false, error }`). */
export type SlackFailure = { status: number; retryAfter?: number } | { error: string };

/** A file the fake serves (see `addFile`). */
export interface SlackFakeFile {
  id: string;
  name: string;
  mimetype: string;
  size: number;
  url_private: string;
  url_private_download: string;
}

/** A file the bot uploaded and shared (`files.completeUploadExternal`). */
export interface SlackUploadedFile {
  id: string;
  filename: string;
  title: string | undefined;
  bytes: Buffer;
  channel: string;
  threadTs: string | undefined;
  initialComment: string | undefined;
}

/** Options of `startFakeSlack`. */
export interface FakeSlackOptions {
  /** Users `users.info` says are admins of the bot's workspace (`T0001`). Default none. */
  admins?: string[];
  /** The Enterprise Grid org (`E…`) `auth.test` and the bot's workspace's users name. Default none: a workspace of its own. */
  enterpriseId?: string;
  /**
   * What `users.info` answers for these user ids (the `user` object, `id` added),
   * instead of a member of the bot's workspace: a Slack Connect member of
   * another organization, say. Default none.
   */
  users?: Record<string, Record<string, unknown>>;
}

/** The bot's workspace. */
const TEAM_ID = 'T0001';

const parseBody = (raw: string, type: string | undefined): Record<string, any> => {
  if (raw.length === 0) return {};
  if (type?.includes('json')) return JSON.parse(raw) as Record<string, any>;
  const out: Record<string, any> = {};
  for (const [k, v] of new URLSearchParams(raw)) out[k] = /^[[{]/.test(v) ? JSON.parse(v) : v;
  return out;
};

/** A running fake Slack. */
export class FakeSlack {
  readonly calls: SlackApiCall[] = [];
  readonly messages: SlackPostedMessage[] = [];
  readonly ephemerals: Array<{ channel: string; user: string; text: string }> = [];
  /** The bot's reactions (emoji names), by `<channel>:<message ts>`. */
  readonly reactions = new Map<string, Set<string>>();
  /** Envelope ids the Socket Mode client acknowledged, in order. */
  readonly acks: string[] = [];
  /** Socket Mode connections opened so far. */
  connections = 0;
  /** Files the bot uploaded and shared, in order. */
  readonly uploads: SlackUploadedFile[] = [];
  /** Upload URLs handed out and not completed yet, by file id: the declared length and the bytes POSTed. */
  private readonly pendingUploads = new Map<string, { filename: string; length: number; bytes?: Buffer }>();
  private readonly failures = new Map<string, SlackFailure[]>();
  private readonly holds = new AnswerHolds();
  private readonly files = new Map<string, { file: SlackFakeFile; content: Buffer }>();
  private readonly sockets = new Set<WebSocket>();
  private readonly admins: Set<string>;
  private readonly enterpriseId: string | undefined;
  private readonly users: Record<string, Record<string, unknown>>;
  private n = 0;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly server = createServer((req, res) => this.onRequest(req, res));
  private pinger: NodeJS.Timeout | undefined;
  private base = '';

  constructor(opts: FakeSlackOptions = {}) {
    this.admins = new Set(opts.admins ?? []);
    this.enterpriseId = opts.enterpriseId;
    this.users = opts.users ?? {};
  }

  /** Base URL of the Web API, ending in `/` (the plugin's `apiUrl`). */
  get apiUrl(): string {
    return `${this.base}/api/`;
  }

  /** Origin of the fake (for `filesOrigins`). */
  get origin(): string {
    return this.base;
  }

  /** Starts listening on a random local port. */
  async listen(): Promise<void> {
    this.server.on('upgrade', (req, socket, head) => {
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws));
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    // Slack pings its clients; the client reconnects when pings stop.
    this.pinger = setInterval(() => {
      for (const ws of this.sockets) ws.ping();
    }, 2000);
  }

  /** A fresh Slack message timestamp (`<seconds>.<micros>`: now, as Slack's are), unique and increasing in this fake. */
  nextTs(): string {
    this.n++;
    return `${Math.floor(Date.now() / 1000)}.${String(this.n).padStart(6, '0')}`;
  }

  /** Answers the next calls of `method` with these failures, in order (then normally). */
  failNext(method: string, ...failures: SlackFailure[]): void {
    this.failures.set(method, [...(this.failures.get(method) ?? []), ...failures]);
  }

  /** Does the next successful call of `method` (`chat.postMessage`: the message is stored) and holds its answer until `release()`. */
  holdAnswer(method: string): HeldAnswer {
    return this.holds.arm((call) => call === method);
  }

  /**
   * Posts a message as someone other than the bot (a person with a user
   * token, or another app installed in the workspace): it shows in the
   * history under its own author, with any metadata it was posted with, and
   * the bot may not update it (`cant_update_message`).
   */
  postAs(
    author: NonNullable<SlackPostedMessage['author']>,
    channel: string,
    threadTs: string | undefined,
    text: string,
    metadata?: SlackPostedMessage['metadata'],
  ): SlackPostedMessage {
    const m: SlackPostedMessage = { channel, ts: this.nextTs(), threadTs, text, blocks: undefined, metadata, edits: [], author };
    this.messages.push(m);
    return m;
  }

  /** Calls of one method. */
  callsOf(method: string): SlackApiCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** Current texts of the messages the bot posted in `channel` (edits applied), in order. */
  textsIn(channel: string): string[] {
    return this.messages.filter((m) => m.channel === channel).map((m) => m.text);
  }

  /** Serves a file (to the bot token only) and returns its Slack file object, as a message's `files` entry. */
  addFile(name: string, mimetype: string, content: Buffer): SlackFakeFile {
    const id = `F${String(++this.n).padStart(8, '0')}`;
    const url = `${this.base}/files/${id}/${encodeURIComponent(name)}`;
    const file = { id, name, mimetype, size: content.length, url_private: url, url_private_download: `${url}?download=1` };
    this.files.set(id, { file, content });
    return file;
  }

  /**
   * Pushes one Socket Mode envelope to the newest open connection: `events_api`
   * with an Events API body (`eventCallback`), or `interactive` with a click
   * (`blockActions`). Returns its envelope id.
   */
  deliver(type: 'events_api' | 'interactive', payload: unknown, retryAttempt = 0): string {
    const ws = [...this.sockets].at(-1);
    if (!ws) throw new Error('no Socket Mode connection');
    const envelopeId = `env-${++this.n}`;
    ws.send(
      JSON.stringify({
        envelope_id: envelopeId,
        type,
        payload,
        accepts_response_payload: false,
        retry_attempt: retryAttempt,
        retry_reason: retryAttempt ? 'timeout' : '',
      }),
    );
    return envelopeId;
  }

  /** Closes every Socket Mode connection the way Slack does before it recycles one (`disconnect`, then close). */
  dropConnections(): void {
    for (const ws of this.sockets) {
      ws.send(JSON.stringify({ type: 'disconnect', reason: 'refresh_requested' }));
      ws.close();
    }
  }

  /** Number of open Socket Mode connections. */
  openSockets(): number {
    return [...this.sockets].filter((ws) => ws.readyState === WebSocket.OPEN).length;
  }

  async close(): Promise<void> {
    clearInterval(this.pinger);
    for (const ws of this.sockets) ws.terminate();
    this.wss.close();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private onSocket(ws: WebSocket): void {
    this.connections++;
    this.sockets.add(ws);
    ws.on('close', () => this.sockets.delete(ws));
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { envelope_id?: string };
      if (msg.envelope_id) this.acks.push(msg.envelope_id);
    });
    ws.send(JSON.stringify({ type: 'hello', num_connections: this.sockets.size, connection_info: { app_id: 'A111' } }));
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', this.base);
      const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      if (url.pathname.startsWith('/files/')) return this.serveFile(url, token, res);
      if (url.pathname.startsWith('/upload/')) return this.receiveUpload(url, Buffer.concat(chunks), res);
      const method = url.pathname.replace(/^\/api\//, '');
      const payload = parseBody(Buffer.concat(chunks).toString('utf8'), req.headers['content-type']);
      const record: SlackApiCall = { method, token, payload, outcome: 'ok' };
      this.calls.push(record);
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      const failure = this.failures.get(method)?.shift();
      if (failure && 'status' in failure) {
        record.outcome = failure.status;
        return send(failure.status, { ok: false, error: 'ratelimited' }, failure.retryAfter !== undefined ? { 'retry-after': String(failure.retryAfter) } : {});
      }
      if (failure) {
        record.outcome = failure.error;
        return send(200, { ok: false, error: failure.error });
      }
      const answer = this.answer(method, token, payload);
      if (answer.ok === false) record.outcome = String(answer.error);
      else if (this.holds.hold(method, res, () => send(200, answer))) return;
      send(200, answer);
    });
  }

  /**
   * One page of the messages as `conversations.history` (newest first,
   * top level only) and `conversations.replies` (oldest first) answer it:
   * only those after `oldest` (exclusive), at most `limit` (default 100),
   * from the `cursor` on; metadata only with `include_all_metadata`.
   */
  private page(list: SlackPostedMessage[], p: Record<string, any>): Record<string, unknown> {
    const oldest = p.oldest === undefined ? -Infinity : Number(p.oldest);
    const inRange = list.filter((m) => Number(m.ts) > oldest);
    const from = p.cursor ? Number(Buffer.from(String(p.cursor), 'base64url').toString()) : 0;
    const limit = Math.max(1, Number(p.limit ?? 100));
    const withMetadata = p.include_all_metadata === true || p.include_all_metadata === 'true';
    const messages = inRange.slice(from, from + limit).map((m) => ({
      type: 'message',
      user: m.author?.user ?? SLACK_BOT_USER,
      ...(m.author ? m.author.botId !== undefined && { bot_id: m.author.botId } : { bot_id: 'BBOT0001' }),
      ts: m.ts,
      text: m.text,
      ...(m.threadTs !== undefined && { thread_ts: m.threadTs }),
      ...(m.blocks !== undefined && { blocks: m.blocks }),
      ...(withMetadata && m.metadata !== undefined && { metadata: m.metadata }),
    }));
    const more = from + limit < inRange.length;
    return { ok: true, messages, has_more: more, response_metadata: { next_cursor: more ? Buffer.from(String(from + limit)).toString('base64url') : '' } };
  }

  private serveFile(url: URL, token: string, res: ServerResponse): void {
    const entry = this.files.get(url.pathname.split('/')[2] ?? '');
    if (!entry || token !== SLACK_BOT_TOKEN) {
      res.writeHead(entry ? 403 : 404).end();
      return;
    }
    res.writeHead(200, { 'content-type': entry.file.mimetype, 'content-length': String(entry.content.length) }).end(entry.content);
  }

  /** The POST of a file's bytes to its one-time upload URL (no token: the URL is the credential). */
  private receiveUpload(url: URL, bytes: Buffer, res: ServerResponse): void {
    const pending = this.pendingUploads.get(url.pathname.split('/')[2] ?? '');
    if (!pending || pending.bytes) {
      res.writeHead(404).end();
      return;
    }
    if (bytes.length !== pending.length) {
      res.writeHead(400).end(`expected ${pending.length} bytes`);
      return;
    }
    pending.bytes = bytes;
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`OK - ${bytes.length}`);
  }

  /** files.completeUploadExternal: shares each uploaded file in the channel (and thread). */
  private completeUpload(p: Record<string, any>): Record<string, unknown> {
    const files: Array<{ id: string; title?: string }> = Array.isArray(p.files) ? p.files : [];
    if (files.length === 0 || !p.channel_id) return { ok: false, error: 'invalid_arguments' };
    const done = files.map((f) => ({ f, pending: this.pendingUploads.get(f.id) }));
    if (done.some((d) => !d.pending?.bytes)) return { ok: false, error: 'upload_incomplete' };
    for (const { f, pending } of done) {
      this.pendingUploads.delete(f.id);
      this.uploads.push({
        id: f.id,
        filename: pending!.filename,
        title: f.title,
        bytes: pending!.bytes!,
        channel: String(p.channel_id),
        threadTs: p.thread_ts === undefined ? undefined : String(p.thread_ts),
        initialComment: p.initial_comment === undefined ? undefined : String(p.initial_comment),
      });
    }
    return { ok: true, files: files.map((f) => ({ id: f.id, title: f.title })) };
  }

  /** The `users.info` user object: one given in `users`, else a member of the bot's workspace. */
  private userInfo(id: string): Record<string, unknown> {
    const given = this.users[id];
    if (given) return { id, ...given };
    const org = this.enterpriseId;
    return {
      id,
      team_id: TEAM_ID,
      is_admin: this.admins.has(id),
      is_owner: false,
      is_stranger: false,
      ...(org && { enterprise_user: { id, enterprise_id: org, teams: [TEAM_ID], is_admin: false, is_owner: false } }),
    };
  }

  private answer(method: string, token: string, p: Record<string, any>): Record<string, unknown> {
    if (method === 'apps.connections.open') {
      return token === SLACK_APP_TOKEN ? { ok: true, url: `${this.base.replace('http', 'ws')}/socket` } : { ok: false, error: 'invalid_auth' };
    }
    if (token !== SLACK_BOT_TOKEN) return { ok: false, error: 'invalid_auth' };
    switch (method) {
      case 'auth.test':
        return {
          ok: true,
          user_id: SLACK_BOT_USER,
          bot_id: 'BBOT0001',
          user: 'steerbot',
          team_id: TEAM_ID,
          team: 'Fake',
          ...(this.enterpriseId && { enterprise_id: this.enterpriseId }),
        };
      case 'chat.postMessage': {
        const m: SlackPostedMessage = {
          channel: p.channel,
          ts: this.nextTs(),
          threadTs: p.thread_ts,
          text: p.text ?? '',
          blocks: p.blocks,
          metadata: p.metadata,
          edits: [],
          unfurls: { links: flag(p.unfurl_links) ?? false, media: flag(p.unfurl_media) ?? true },
        };
        this.messages.push(m);
        return { ok: true, channel: m.channel, ts: m.ts, message: { text: m.text, ts: m.ts } };
      }
      case 'chat.update': {
        const m = this.messages.find((x) => x.channel === p.channel && x.ts === p.ts);
        if (!m) return { ok: false, error: 'message_not_found' };
        if (m.author) return { ok: false, error: 'cant_update_message' };
        m.text = p.text ?? m.text;
        m.edits.push(m.text);
        if (p.blocks !== undefined) m.blocks = p.blocks;
        // Metadata changes only when the update carries it.
        if (p.metadata !== undefined) m.metadata = p.metadata;
        return { ok: true, channel: m.channel, ts: m.ts };
      }
      case 'conversations.history':
        return this.page(this.messages.filter((m) => m.channel === p.channel && (m.threadTs === undefined || m.threadTs === m.ts)).reverse(), p);
      case 'conversations.replies':
        return this.page(
          this.messages.filter((m) => m.channel === p.channel && (m.threadTs === p.ts || m.ts === p.ts)),
          p,
        );
      case 'chat.postEphemeral':
        this.ephemerals.push({ channel: p.channel, user: p.user, text: p.text });
        return { ok: true, message_ts: this.nextTs() };
      case 'files.getUploadURLExternal': {
        const length = Number(p.length);
        if (!p.filename || !Number.isInteger(length) || length <= 0) return { ok: false, error: 'invalid_arguments' };
        const id = `F${String(++this.n).padStart(8, '0')}`;
        this.pendingUploads.set(id, { filename: String(p.filename), length });
        return { ok: true, upload_url: `${this.base}/upload/${id}`, file_id: id };
      }
      case 'files.completeUploadExternal':
        return this.completeUpload(p);
      case 'users.info':
        return { ok: true, user: this.userInfo(String(p.user)) };
      case 'reactions.add':
      case 'reactions.remove': {
        if (!p.channel || !p.timestamp || !p.name) return { ok: false, error: 'invalid_arguments' };
        const key = `${p.channel}:${p.timestamp}`;
        const own = this.reactions.get(key) ?? new Set<string>();
        this.reactions.set(key, own);
        if (method === 'reactions.add') {
          if (own.has(p.name)) return { ok: false, error: 'already_reacted' };
          own.add(p.name);
        } else if (!own.delete(p.name)) return { ok: false, error: 'no_reaction' };
        return { ok: true };
      }
      default:
        return { ok: false, error: 'unknown_method' };
    }
  }
}

/** Starts a fake Slack on a random local port. */
export async function startFakeSlack(opts: FakeSlackOptions = {}): Promise<FakeSlack> {
  const fake = new FakeSlack(opts);
  await fake.listen();
  return fake;
}

/** What `messageEvent` builds a message from. */
export interface SlackMessageInput {
  channel: string;
  ts: string;
  user?: string;
  text: string;
  /** `im` (a DM, the default), `channel`, `group`, `mpim`. */
  channelType?: 'im' | 'channel' | 'group' | 'mpim';
  threadTs?: string;
  /** `app_mention` instead of `message`. */
  type?: 'message' | 'app_mention';
  subtype?: string;
  botId?: string;
  files?: SlackFakeFile[];
  /** Event id of the envelope. Default: a fresh one (Slack gives each delivery of one event the same id, each event its own). */
  eventId?: string;
}

let eventN = 0;

/** An Events API `event_callback` body carrying one message event. */
export function eventCallback(m: SlackMessageInput): Record<string, unknown> {
  const event = {
    type: m.type ?? 'message',
    channel: m.channel,
    ts: m.ts,
    event_ts: m.ts,
    text: m.text,
    ...(m.user !== undefined && { user: m.user }),
    ...(m.type !== 'app_mention' && { channel_type: m.channelType ?? 'im' }),
    ...(m.threadTs !== undefined && { thread_ts: m.threadTs }),
    ...(m.subtype !== undefined && { subtype: m.subtype }),
    ...(m.botId !== undefined && { bot_id: m.botId }),
    ...(m.files !== undefined && { files: m.files }),
  };
  return {
    token: 'deprecated-verification-token',
    team_id: TEAM_ID,
    api_app_id: 'A111',
    type: 'event_callback',
    event_id: m.eventId ?? `Ev${String(++eventN).padStart(8, '0')}`,
    event_time: Math.floor(Number(m.ts)),
    event,
  };
}

/** A `block_actions` payload: `user` clicked the button whose value is `value` under the bot's message `message`. */
export function blockActions(message: SlackPostedMessage, value: string, user: string, actionTs = `${Date.now() / 1000}`): Record<string, unknown> {
  return {
    type: 'block_actions',
    user: { id: user, username: user.toLowerCase(), team_id: TEAM_ID },
    team: { id: TEAM_ID },
    channel: { id: message.channel },
    container: { type: 'message', message_ts: message.ts, channel_id: message.channel, ...(message.threadTs && { thread_ts: message.threadTs }) },
    message: { ts: message.ts, text: message.text, ...(message.threadTs && { thread_ts: message.threadTs }) },
    trigger_id: `trig-${actionTs}`,
    actions: [{ type: 'button', action_id: 'steerbot_0', block_id: 'b1', value, action_ts: actionTs }],
  };
}

/** Headers of a signed Events API or interactivity request (`nowSeconds`: the request time; default now). */
export function signedSlackHeaders(body: string, secret = SLACK_SIGNING_SECRET, nowSeconds = Math.floor(Date.now() / 1000)): Record<string, string> {
  return { [SLACK_TIMESTAMP_HEADER]: String(nowSeconds), [SLACK_SIGNATURE_HEADER]: slackSignature(secret, nowSeconds, body) };
}
