/**
 * A local fake of the Telegram Bot API, for end-to-end tests of the real
 * grammY client (`apiRoot` pointed here). It speaks `POST /bot<token>/<method>`
 * for getMe, getUpdates (long poll, offset confirmation, one poller at a time
 * like Telegram: a second getUpdates ends the first with 409), sendMessage,
 * editMessageText, sendChatAction, setMyCommands, setWebhook, deleteWebhook,
 * getWebhookInfo, getChatMember, setMessageReaction, and sendPhoto / sendDocument
 * (multipart uploads, as grammY sends an `InputFile`, up to 50 MB); it records every call and can fail the next calls of a
 * method with a scripted error (429 `retry_after`, 400 can't parse entities),
 * or do one and hold its answer back (`holdAnswer`).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AnswerHolds, type HeldAnswer } from './held-answers.js';
import { multipartBoundary, parseMultipart } from './multipart.js';

/** A test bot token: the shape Telegram issues (and that steerbot's redaction knows). */
export const FAKE_TOKEN = '7012345678:AAHfakeTokenForTestsOnly_0123456789abcdEF';

/** One API call the fake received. */
export interface ApiCall {
  method: string;
  /** The token in the URL. */
  token: string;
  /** The JSON body (or `{}`). */
  payload: Record<string, any>;
  /** What the fake answered: `ok` or the error code. */
  outcome: 'ok' | number;
  /** When the request reached the fake, ms since the epoch (`Date.now()`; a call is answered right after, long polls excepted). */
  at: number;
}

/** An error the fake answers with, in Telegram's shape. */
export interface ScriptedFailure {
  error_code: number;
  description: string;
  parameters?: { retry_after?: number; migrate_to_chat_id?: number };
}

/** A message the bot sent, with its current text (after edits). */
export interface SentMessage {
  chatId: number;
  messageId: number;
  /** Text as the user sees it (HTML tags removed when `parse_mode` was HTML). */
  text: string;
  /** The text exactly as sent (or as last edited), before parsing. */
  raw: string;
  /** `parse_mode` of the send (or of the last edit). */
  parseMode: string | undefined;
  threadId: number | undefined;
  replyTo: number | undefined;
  /** Every later text of the message, oldest first. */
  edits: string[];
  /** Inline keyboard buttons (`reply_markup.inline_keyboard`, rows flattened); an edit without a markup removes them. */
  buttons?: Array<{ text: string; data: string }>;
  /**
   * Whether Telegram would preview the links in it (fetching them at once): false only when the send (or
   * the last edit) carried `link_preview_options.is_disabled`; an edit without it previews again, as Telegram does.
   */
  previews: boolean;
}

/** A file the bot sent with sendPhoto, sendDocument or sendVoice. */
export interface SentFile {
  method: 'sendPhoto' | 'sendDocument' | 'sendVoice';
  chatId: number;
  messageId: number;
  /** The upload's file name. */
  name: string;
  bytes: Buffer;
  caption: string | undefined;
  threadId: number | undefined;
}

/** Largest upload the fake takes, like the Bot API (50 MB; photos 10 MB). */
const MAX_UPLOAD_BYTES = 50 * 1000 * 1000;
const MAX_PHOTO_BYTES = 10 * 1000 * 1000;

/** Options of `startFakeTelegram`. */
export interface FakeTelegramOptions {
  /** The one token the fake accepts; others get 401. Default `FAKE_TOKEN`. */
  token?: string;
  /** What getMe answers. Default id 7012345678, username `steer_test_bot`. */
  bot?: { id: number; username: string; first_name?: string };
}

/** A running fake server. */
export interface FakeTelegram {
  /** Give this to grammY as `apiRoot` (no trailing slash). */
  apiRoot: string;
  token: string;
  bot: { id: number; username: string; first_name: string };
  /** Every call, in arrival order. */
  calls: ApiCall[];
  /** Messages the bot sent, in order. */
  sent: SentMessage[];
  /** Files the bot sent (sendPhoto, sendDocument), in order. */
  sentFiles: SentFile[];
  /** The registered webhook, if any. */
  webhook: { url: string; secret_token?: string } | undefined;
  /** Commands set with setMyCommands. */
  commands: Array<{ command: string; description: string }>;
  /** How many getUpdates calls were ended early by a newer one (two pollers). */
  conflicts: number;
  /**
   * Chat members getChatMember answers with, by `<chat id>:<user id>`: `creator`,
   * `administrator`, `member`, … Anyone not listed is a `member`.
   */
  chatMembers: Map<string, string>;
  /** answerCallbackQuery calls: the query id and the text shown to the user. */
  callbackAnswers: Array<{ id: string; text: string | undefined }>;
  /** The bot's reaction on each message, by `<chat id>:<message id>`, as setMessageReaction left it (an empty list: none). */
  reactions: Map<string, string[]>;
  /**
   * Serves a file: `getFile` with `file_id` answers its `file_path`, and
   * `GET <apiRoot>/file/bot<token>/<file_path>` its bytes. Returns the path.
   */
  addFile(fileId: string, data: Uint8Array, opts?: { path?: string; mime?: string }): string;
  /** Downloads of served files, by file path, in order. */
  fileDownloads: string[];
  /** From now on, holds the bytes of each file download until `releaseOne` (arrival order), counting the bytes held at once. */
  holdDownloads(): HeldDownloads;
  /** Queues an update for getUpdates; assigns `update_id` when missing. Returns the update. */
  pushUpdate(update: Record<string, unknown>): Record<string, any>;
  /** Queues several updates at once, so a waiting long poll receives them in one batch. */
  pushUpdates(updates: Array<Record<string, unknown>>): Array<Record<string, any>>;
  /** The next `times` calls of `method` fail with `failure`. */
  failNext(method: string, failure: ScriptedFailure, times?: number): void;
  /** Does the next successful call of `method` (`sendMessage`: the message is stored) and holds its answer until `release()`. */
  holdAnswer(method: string): HeldAnswer;
  /** Calls of one method. */
  callsOf(method: string): ApiCall[];
  /** Resolves with the calls of `method` once there are at least `n`; rejects after `timeoutMs` (default 5000). */
  waitForCalls(method: string, n: number, timeoutMs?: number): Promise<ApiCall[]>;
  /** Resolves once `check` returns a value other than undefined / false (re-checked on every call); rejects after `timeoutMs` (default 5000). */
  waitUntil<T>(check: () => T | undefined | false, timeoutMs?: number, what?: string): Promise<T>;
  /** Ends long polls, drops connections, stops listening. */
  close(): Promise<void>;
}

interface Poll {
  offset: number;
  limit: number;
  allowed: string[] | undefined;
  res: ServerResponse;
  call: ApiCall;
  timer: NodeJS.Timeout;
}

const ALLOWED_TAGS = new Set(['b', 'strong', 'i', 'em', 'u', 'ins', 's', 'strike', 'del', 'code', 'pre', 'a', 'blockquote', 'tg-spoiler', 'span']);

/** Parses Telegram HTML like the Bot API: known tags, balanced, entities escaped. Returns the visible text or the error. */
export function parseTelegramHtml(html: string): { text: string } | { error: string } {
  const stack: string[] = [];
  let text = '';
  let i = 0;
  while (i < html.length) {
    const c = html[i]!;
    if (c === '<') {
      const end = html.indexOf('>', i);
      if (end < 0) return { error: `Unclosed start tag at byte offset ${i}` };
      const m = /^<(\/?)([a-z-]+)(?:\s[^>]*)?>$/i.exec(html.slice(i, end + 1));
      if (!m || !ALLOWED_TAGS.has(m[2]!.toLowerCase())) return { error: `Unsupported start tag "${html.slice(i + 1, end)}" at byte offset ${i}` };
      const tag = m[2]!.toLowerCase();
      if (m[1]) {
        if (stack.pop() !== tag) return { error: `Unmatched end tag at byte offset ${i}, expected "</${stack.at(-1) ?? ''}>", found "</${tag}>"` };
      } else {
        stack.push(tag);
      }
      i = end + 1;
    } else if (c === '&') {
      const m = /^&(lt|gt|amp|quot|#\d+|#x[0-9a-f]+);/i.exec(html.slice(i, i + 12));
      if (!m) return { error: `Unsupported HTML entity at byte offset ${i}` };
      text += { lt: '<', gt: '>', amp: '&', quot: '"' }[m[1]!.toLowerCase()] ?? '?';
      i += m[0].length;
    } else if (c === '>') {
      // Telegram tolerates a bare `>`.
      text += c;
      i++;
    } else {
      text += c;
      i++;
    }
  }
  if (stack.length > 0) return { error: `Can't find end tag corresponding to start tag "${stack.at(-1)}"` };
  return { text };
}

/** A text's formatting for "not modified" checks: HTML with its entity references decoded (tags kept), plain text as is. */
function markupOf(raw: string, parseMode: string | undefined): string {
  if (parseMode !== 'HTML') return raw;
  return raw.replace(/&(lt|gt|amp|quot);/gi, (_, name: string) => ({ lt: '<', gt: '>', amp: '&', quot: '"' })[name.toLowerCase()]!);
}

/** Reactions the fake accepts (a part of Telegram's list). */
/** Whether Telegram previews the links of a sendMessage / editMessageText: unless `link_preview_options.is_disabled` says not to. */
const previewsOf = (p: Record<string, any>): boolean => p.link_preview_options?.is_disabled !== true;

const TELEGRAM_REACTIONS = new Set(['👍', '👎', '❤', '🔥', '👀', '👌', '😢', '🤔', '🎉', '🙏']);

/** File downloads held back (`holdDownloads`). */
export interface HeldDownloads {
  /** Downloads held now. */
  readonly waiting: number;
  /** Most bytes of files the server held at once, requested and not yet handed out in full. */
  readonly peakBytes: number;
  /** Sends the oldest held download's bytes; false when none is held. */
  releaseOne(): boolean;
}

/** Starts the fake on 127.0.0.1 with a free port. */
export async function startFakeTelegram(opts: FakeTelegramOptions = {}): Promise<FakeTelegram> {
  const token = opts.token ?? FAKE_TOKEN;
  const bot = { first_name: 'Steer Test', ...(opts.bot ?? { id: 7012345678, username: 'steer_test_bot' }) };
  const calls: ApiCall[] = [];
  const sent: SentMessage[] = [];
  const updates: Array<Record<string, any>> = [];
  const failures = new Map<string, ScriptedFailure[]>();
  const listeners = new Set<() => void>();
  let poll: Poll | undefined;
  let nextUpdateId = 100_000;
  let nextMessageId = 1;
  const files = new Map<string, { path: string; data: Uint8Array; mime: string }>();
  const holds = new AnswerHolds();
  let downloads: DownloadHold | undefined;

  const notify = () => {
    for (const l of [...listeners]) l();
  };

  const fake: FakeTelegram = {
    apiRoot: '',
    token,
    bot,
    calls,
    sent,
    sentFiles: [],
    webhook: undefined,
    commands: [],
    conflicts: 0,
    chatMembers: new Map(),
    callbackAnswers: [],
    reactions: new Map(),
    fileDownloads: [],
    holdDownloads() {
      downloads = new DownloadHold();
      return downloads;
    },
    addFile(fileId, data, o = {}) {
      const path = o.path ?? `files/${fileId}`;
      files.set(fileId, { path, data, mime: o.mime ?? 'application/octet-stream' });
      return path;
    },
    pushUpdate(update) {
      return fake.pushUpdates([update])[0]!;
    },
    pushUpdates(list) {
      const added = list.map((update) => {
        const u: Record<string, any> = { ...update };
        if (typeof u.update_id !== 'number') u.update_id = nextUpdateId++;
        else nextUpdateId = Math.max(nextUpdateId, u.update_id + 1);
        updates.push(u);
        return u;
      });
      updates.sort((a, b) => a.update_id - b.update_id);
      if (poll) answerPoll(poll);
      return added;
    },
    failNext(method, failure, times = 1) {
      const list = failures.get(method) ?? [];
      for (let i = 0; i < times; i++) list.push(failure);
      failures.set(method, list);
    },
    holdAnswer: (method) => holds.arm((call) => call === method),
    callsOf(method) {
      return calls.filter((c) => c.method === method);
    },
    waitForCalls(method, n, timeoutMs = 5000) {
      return fake.waitUntil(
        () => {
          const of = fake.callsOf(method);
          return of.length >= n && of;
        },
        timeoutMs,
        `${n} ${method} call(s)`,
      );
    },
    waitUntil<T>(check: () => T | undefined | false, timeoutMs = 5000, what = 'condition'): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const tryNow = () => {
          const v = check();
          if (v === undefined || v === false) return false;
          cleanup();
          resolve(v);
          return true;
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`fake telegram: ${what} not met within ${timeoutMs} ms; calls: ${calls.map((c) => c.method).join(', ')}`));
        }, timeoutMs);
        const listener = () => void tryNow();
        const cleanup = () => {
          clearTimeout(timer);
          listeners.delete(listener);
        };
        listeners.add(listener);
        tryNow();
      });
    },
    async close() {
      if (poll) finishPoll(poll, []);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const pendingFor = (p: Pick<Poll, 'offset' | 'limit' | 'allowed'>) =>
    updates
      .filter((u) => u.update_id >= p.offset)
      .filter((u) => !p.allowed || p.allowed.length === 0 || p.allowed.some((k) => k in u))
      .slice(0, p.limit);

  function finishPoll(p: Poll, result: unknown[]) {
    clearTimeout(p.timer);
    if (poll === p) poll = undefined;
    if (!p.res.writableEnded) send(p.res, 200, { ok: true, result });
  }

  function answerPoll(p: Poll) {
    const ready = pendingFor(p);
    if (ready.length > 0) finishPoll(p, ready);
  }

  function send(res: ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  function fail(res: ServerResponse, call: ApiCall, f: ScriptedFailure) {
    call.outcome = f.error_code;
    send(res, f.error_code, { ok: false, error_code: f.error_code, description: f.description, ...(f.parameters && { parameters: f.parameters }) });
  }

  const badRequest = (description: string): ScriptedFailure => ({ error_code: 400, description: `Bad Request: ${description}` });

  /** The text a client sees (entities parsed out), or why Telegram refuses it. */
  function visibleText(raw: string, parseMode: unknown): string | ScriptedFailure {
    let text = raw;
    if (parseMode === 'HTML') {
      const parsed = parseTelegramHtml(raw);
      if ('error' in parsed) return badRequest(`can't parse entities: ${parsed.error}`);
      text = parsed.text;
    } else if (parseMode !== undefined) {
      return badRequest(`unsupported parse_mode in this fake: ${String(parseMode)}`);
    }
    return text.trim().length === 0 ? badRequest('message text is empty') : text;
  }

  function sendMessage(p: Record<string, any>): ScriptedFailure | Record<string, unknown> {
    const chatId = Number(p.chat_id);
    if (!Number.isFinite(chatId)) return badRequest('chat not found');
    const raw = typeof p.text === 'string' ? p.text : '';
    const text = visibleText(raw, p.parse_mode);
    if (typeof text !== 'string') return text;
    if (text.length > 4096) return badRequest('message is too long');
    const buttons = buttonsOf(p.reply_markup);
    const message = {
      chatId,
      messageId: nextMessageId++,
      text,
      raw,
      parseMode: p.parse_mode,
      threadId: p.message_thread_id,
      replyTo: p.reply_parameters?.message_id,
      edits: [],
      ...(buttons && { buttons }),
      previews: previewsOf(p),
    } satisfies SentMessage;
    sent.push(message);
    return {
      message_id: message.messageId,
      date: Math.floor(Date.now() / 1000),
      chat: { id: chatId, type: chatId > 0 ? 'private' : 'supergroup' },
      from: { id: bot.id, is_bot: true, first_name: bot.first_name, username: bot.username },
      text,
      ...(message.threadId !== undefined && { message_thread_id: message.threadId, is_topic_message: true }),
    };
  }

  function editMessageText(p: Record<string, any>): ScriptedFailure | Record<string, unknown> {
    const m = sent.find((s) => s.chatId === Number(p.chat_id) && s.messageId === Number(p.message_id));
    if (!m) return badRequest('message to edit not found');
    const raw = String(p.text ?? '');
    // Parsed like sendMessage: an edit can carry formatting too.
    const text = visibleText(raw, p.parse_mode);
    if (typeof text !== 'string') return text;
    if (text.length > 4096) return badRequest('MESSAGE_TOO_LONG');
    // Like Telegram: the same visible text with the same formatting is no change.
    if (text === m.text && markupOf(raw, p.parse_mode) === markupOf(m.raw, m.parseMode)) {
      return badRequest(
        'message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
      );
    }
    m.text = text;
    m.raw = raw;
    m.parseMode = p.parse_mode;
    m.previews = previewsOf(p);
    m.edits.push(text);
    // Like Telegram: an edit without `reply_markup` removes the inline keyboard.
    const buttons = buttonsOf(p.reply_markup);
    if (buttons) m.buttons = buttons;
    else delete m.buttons;
    return { message_id: m.messageId, chat: { id: m.chatId, type: m.chatId > 0 ? 'private' : 'supergroup' }, text, date: 0, edit_date: 0 };
  }

  /** sendPhoto / sendDocument: the file arrives as an `attach://` part; the message is a file message. */
  function sendFile(method: SentFile['method'], p: Record<string, any>): ScriptedFailure | Record<string, unknown> {
    const chatId = Number(p.chat_id);
    if (!Number.isFinite(chatId)) return badRequest('chat not found');
    const file = p[{ sendPhoto: 'photo', sendDocument: 'document', sendVoice: 'voice' }[method]] as { filename: string; data: Buffer } | undefined;
    if (!file || typeof file !== 'object') return badRequest('there is no file in the request');
    if (file.data.byteLength > (method === 'sendPhoto' ? MAX_PHOTO_BYTES : MAX_UPLOAD_BYTES))
      return { error_code: 413, description: 'Request Entity Too Large' };
    const messageId = nextMessageId++;
    const caption = typeof p.caption === 'string' ? p.caption : undefined;
    const threadId = p.message_thread_id === undefined ? undefined : Number(p.message_thread_id);
    fake.sentFiles.push({ method, chatId, messageId, name: file.filename, bytes: file.data, caption, threadId });
    return {
      message_id: messageId,
      date: Math.floor(Date.now() / 1000),
      chat: { id: chatId, type: chatId > 0 ? 'private' : 'supergroup' },
      ...(caption && { caption }),
    };
  }

  function getUpdates(p: Record<string, any>, res: ServerResponse, call: ApiCall): void {
    if (fake.webhook) {
      return fail(res, call, {
        error_code: 409,
        description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
      });
    }
    if (poll) {
      // Like Telegram: the newer request wins, the older one ends with 409.
      fake.conflicts++;
      const old = poll;
      poll = undefined;
      clearTimeout(old.timer);
      fail(old.res, old.call, {
        error_code: 409,
        description: 'Conflict: terminated by other getUpdates request; make sure that only one bot instance is running',
      });
    }
    const offset = typeof p.offset === 'number' ? p.offset : 0;
    // An offset confirms every update before it: Telegram forgets them.
    if (offset > 0) for (let i = updates.length - 1; i >= 0; i--) if (updates[i]!.update_id < offset) updates.splice(i, 1);
    const limit = Math.min(100, Math.max(1, typeof p.limit === 'number' ? p.limit : 100));
    const allowed = Array.isArray(p.allowed_updates) ? (p.allowed_updates as string[]) : undefined;
    const ready = pendingFor({ offset, limit, allowed });
    const timeoutSec = typeof p.timeout === 'number' ? p.timeout : 0;
    if (ready.length > 0 || timeoutSec <= 0) return send(res, 200, { ok: true, result: ready });
    const waiting: Poll = { offset, limit, allowed, res, call, timer: setTimeout(() => finishPoll(waiting, []), timeoutSec * 1000) };
    poll = waiting;
    // A client that aborts its long poll is no longer a poller.
    res.on('close', () => {
      if (poll === waiting) {
        clearTimeout(waiting.timer);
        poll = undefined;
      }
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const arrivedAt = Date.now();
    const download = /^\/file\/bot([^/]+)\/(.+)$/.exec((req.url ?? '').split('?')[0] ?? '');
    if (download) {
      const file = decodeURIComponent(download[1]!) === token ? [...files.values()].find((f) => f.path === decodeURIComponent(download[2]!)) : undefined;
      if (!file) return send(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
      fake.fileDownloads.push(file.path);
      const serve = () => {
        res.writeHead(200, { 'content-type': file.mime, 'content-length': file.data.byteLength });
        res.end(Buffer.from(file.data));
      };
      if (downloads) downloads.hold(file.data.byteLength, serve, res);
      else serve();
      notify();
      return;
    }
    const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec((req.url ?? '').split('?')[0] ?? '');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (!m) return send(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
    const raw = Buffer.concat(chunks);
    const boundary = multipartBoundary(req.headers['content-type']);
    const body = boundary ? '' : raw.toString('utf8');
    let payload: Record<string, any> = boundary ? multipartPayload(raw, boundary) : {};
    if (body.length > 0) {
      try {
        payload = JSON.parse(body) as Record<string, any>;
      } catch {
        return send(res, 400, { ok: false, error_code: 400, description: 'Bad Request: this fake only reads JSON bodies' });
      }
    }
    const call: ApiCall = { method: m[2]!, token: decodeURIComponent(m[1]!), payload, outcome: 'ok', at: arrivedAt };
    calls.push(call);
    try {
      if (call.token !== token) return fail(res, call, { error_code: 401, description: 'Unauthorized' });
      const scripted = failures.get(call.method)?.shift();
      if (scripted) return fail(res, call, scripted);
      const result = dispatch(call, res);
      if (result === undefined) return; // answered later (long poll)
      if ('error_code' in result && 'description' in result) return fail(res, call, result as ScriptedFailure);
      const answer = () => send(res, 200, { ok: true, result: 'value' in result ? result.value : result });
      if (!holds.hold(call.method, res, answer)) answer();
    } finally {
      notify();
    }
  }

  function dispatch(call: ApiCall, res: ServerResponse): ScriptedFailure | Record<string, unknown> | undefined {
    const p = call.payload;
    switch (call.method) {
      case 'getMe':
        return {
          id: bot.id,
          is_bot: true,
          first_name: bot.first_name,
          username: bot.username,
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
        };
      case 'getUpdates':
        getUpdates(p, res, call);
        return undefined;
      case 'sendMessage':
        return sendMessage(p);
      case 'editMessageText':
        return editMessageText(p);
      case 'sendPhoto':
      case 'sendDocument':
      case 'sendVoice':
        return sendFile(call.method, p);
      case 'sendChatAction':
        return { value: true };
      case 'setMessageReaction': {
        const reaction: unknown[] = Array.isArray(p.reaction) ? p.reaction : [];
        const emoji = reaction.map((r) => (r as { type?: string; emoji?: string }).emoji);
        if (!Number.isInteger(Number(p.chat_id)) || !Number.isInteger(Number(p.message_id))) return badRequest('chat and message ids are required');
        // Telegram takes reactions from its own list only; these are the ones tests use.
        if (emoji.some((e) => e === undefined || !TELEGRAM_REACTIONS.has(e))) return badRequest('REACTION_INVALID');
        fake.reactions.set(`${Number(p.chat_id)}:${Number(p.message_id)}`, emoji as string[]);
        return { value: true };
      }
      case 'answerCallbackQuery':
        if (typeof p.callback_query_id !== 'string') return badRequest('query id is required');
        fake.callbackAnswers.push({ id: p.callback_query_id, text: typeof p.text === 'string' ? p.text : undefined });
        return { value: true };
      case 'setMyCommands':
        fake.commands = Array.isArray(p.commands) ? p.commands : [];
        return { value: true };
      case 'setWebhook':
        fake.webhook = { url: String(p.url), ...(p.secret_token !== undefined && { secret_token: String(p.secret_token) }) };
        return { value: true };
      case 'deleteWebhook':
        fake.webhook = undefined;
        if (p.drop_pending_updates === true) updates.splice(0);
        return { value: true };
      case 'getChatMember': {
        const status = fake.chatMembers.get(`${Number(p.chat_id)}:${Number(p.user_id)}`) ?? 'member';
        return { status, user: { id: Number(p.user_id), is_bot: false, first_name: 'Member' }, ...(status === 'administrator' && { can_be_edited: false }) };
      }
      case 'getFile': {
        const file = files.get(String(p.file_id));
        if (!file) return { error_code: 400, description: 'Bad Request: invalid file_id' };
        return { file_id: String(p.file_id), file_unique_id: `u-${String(p.file_id)}`, file_size: file.data.byteLength, file_path: file.path };
      }
      case 'getWebhookInfo':
        return { url: fake.webhook?.url ?? '', has_custom_certificate: false, pending_update_count: updates.length };
      default:
        return { error_code: 404, description: 'Not Found: method not found' };
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { ok: false, error_code: 500, description: `fake server failure: ${String(err)}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.apiRoot = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** The fields of a multipart Bot API call, JSON fields parsed, and each `attach://<id>` field replaced by its file part. */
function multipartPayload(body: Buffer, boundary: string): Record<string, any> {
  const parts = parseMultipart(body, boundary);
  const files = new Map(parts.filter((p) => p.filename !== undefined).map((p) => [p.name, { filename: p.filename!, data: p.data }]));
  const payload: Record<string, any> = {};
  for (const part of parts) {
    if (part.filename !== undefined) continue;
    const value = part.data.toString('utf8');
    const attached = /^attach:\/\/(.+)$/.exec(value);
    if (attached) payload[part.name] = files.get(attached[1]!);
    else if (/^[[{]/.test(value)) payload[part.name] = JSON.parse(value);
    else payload[part.name] = value;
  }
  return payload;
}

// ---- update builders ---------------------------------------------------------

/** A user as Telegram sends it. */
export interface TgUser {
  id: number;
  is_bot?: boolean;
  first_name: string;
  last_name?: string;
  username?: string;
}

/** A private-chat user used by default. */
export const ALICE: TgUser = { id: 1001, is_bot: false, first_name: 'Alice', last_name: 'Liddell', username: 'alice' };

let messageIds = 5000;
let builderUpdateIds = 1;

/** Options of `messageUpdate`. */
export interface MessageUpdateOptions {
  /** Default: a fresh id (unique within the test process). */
  updateId?: number;
  /** Chat id; negative for groups. Default: the sender's id (private chat). */
  chatId?: number;
  chatType?: 'private' | 'group' | 'supergroup';
  from?: TgUser;
  text?: string;
  caption?: string;
  entities?: Array<{ type: string; offset: number; length: number; user?: TgUser }>;
  /** Forum topic id: sets `message_thread_id` and `is_topic_message`. */
  topicId?: number;
  replyTo?: { message_id: number; from?: TgUser; text?: string };
  messageId?: number;
  /** Extra message fields (photo, document, …). */
  extra?: Record<string, unknown>;
}

/** The buttons of an inline keyboard markup (object or JSON text), rows flattened; undefined without one. */
function buttonsOf(markup: unknown): Array<{ text: string; data: string }> | undefined {
  const m = (typeof markup === 'string' ? JSON.parse(markup) : markup) as
    | { inline_keyboard?: Array<Array<{ text: string; callback_data?: string }>> }
    | undefined;
  if (!m?.inline_keyboard) return undefined;
  return m.inline_keyboard.flat().map((b) => ({ text: b.text, data: b.callback_data ?? '' }));
}

let callbackIds = 1;

/** Builds an Update with a `callback_query`: `from` clicked the button with `data` under the bot's message `message`. */
export function callbackQueryUpdate(o: {
  data: string;
  message: Pick<SentMessage, 'chatId' | 'messageId' | 'text' | 'threadId'>;
  from?: TgUser;
  updateId?: number;
}): Record<string, any> {
  const from = o.from ?? ALICE;
  const chat =
    o.message.chatId > 0
      ? { id: o.message.chatId, type: 'private', first_name: from.first_name }
      : { id: o.message.chatId, type: 'supergroup', title: 'Test group' };
  return {
    update_id: o.updateId ?? builderUpdateIds++,
    callback_query: {
      id: `cb-${callbackIds++}`,
      from,
      chat_instance: `ci-${o.message.chatId}`,
      data: o.data,
      message: {
        message_id: o.message.messageId,
        date: 0,
        chat,
        text: o.message.text,
        ...(o.message.threadId !== undefined && { message_thread_id: o.message.threadId, is_topic_message: true }),
      },
    },
  };
}

/** Builds an Update with a `message` (for webhook posts and `pushUpdate`). */
export function messageUpdate(o: MessageUpdateOptions): Record<string, any> {
  const from = o.from ?? ALICE;
  const chatId = o.chatId ?? from.id;
  const chatType = o.chatType ?? (chatId > 0 ? 'private' : 'supergroup');
  const chat =
    chatType === 'private'
      ? { id: chatId, type: chatType, first_name: from.first_name }
      : { id: chatId, type: chatType, title: 'Test group', ...(o.topicId !== undefined && { is_forum: true }) };
  const message: Record<string, unknown> = {
    message_id: o.messageId ?? messageIds++,
    date: Math.floor(Date.now() / 1000),
    from,
    chat,
    ...(o.text !== undefined && { text: o.text }),
    ...(o.caption !== undefined && { caption: o.caption }),
    ...(o.entities && { entities: o.entities }),
    ...(o.topicId !== undefined && { message_thread_id: o.topicId, is_topic_message: true }),
    ...(o.replyTo && { reply_to_message: { date: 0, chat, ...o.replyTo } }),
    ...o.extra,
  };
  return { update_id: o.updateId ?? builderUpdateIds++, message };
}

/** File downloads held until released, their bytes counted from the request until the response is sent in full or dropped. */
class DownloadHold implements HeldDownloads {
  private readonly held: Array<() => void> = [];
  private bytes = 0;
  peakBytes = 0;

  get waiting(): number {
    return this.held.length;
  }

  hold(size: number, serve: () => void, res: ServerResponse): void {
    this.bytes += size;
    this.peakBytes = Math.max(this.peakBytes, this.bytes);
    res.once('close', () => {
      this.bytes -= size;
    });
    this.held.push(serve);
  }

  releaseOne(): boolean {
    const serve = this.held.shift();
    serve?.();
    return serve !== undefined;
  }
}
