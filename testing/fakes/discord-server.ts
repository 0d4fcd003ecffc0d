/**
 * A fake Discord for tests: REST (node:http, under `/api/v10`) and the
 * gateway WebSocket (ws) on one port. The real discord.js client reads the
 * gateway URL from `GET /gateway/bot`, so pointing its `rest.api` here is all
 * it takes.
 *
 * Gateway: HELLO → IDENTIFY → READY (+ GUILD_CREATE per guild), heartbeat
 * ACKs, dispatches with sequence numbers, and RESUME → replay of missed
 * events → RESUMED. Several clients may be connected with the same token
 * (several hosts): each has its own session and gets every dispatch, as on
 * Discord. Tests can drop the connection (and force a replay of
 * events the client already saw), inject 429s and failures on REST routes,
 * hold a call's answer back after doing it (`holdAnswer`), and read every
 * REST call. Creating a message honours `nonce` + `enforce_nonce` as
 * Discord does (the same author's message with that nonce, for a few
 * minutes, is returned instead of a new one). REST also answers channel,
 * guild and guild member lookups (owner, roles and their permissions: admin
 * checks).
 */
import { EventEmitter } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { AnswerHolds, type HeldAnswer } from './held-answers.js';
import { multipartBoundary, parseMultipart } from './multipart.js';

/** Starts a fake Discord on a random local port (same as `FakeDiscord.start`). */
export function startFakeDiscord(opts: FakeDiscordOptions): Promise<FakeDiscord> {
  return FakeDiscord.start(opts);
}

/** A Discord user as the API sends it. */
export interface FakeUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: string;
  avatar: null;
  bot?: boolean;
}

/** One REST call the fake received. */
export interface RestCall {
  method: string;
  /** Path below `/api/v10`, e.g. `/channels/1/messages`. */
  path: string;
  /** Parsed JSON body, or undefined. */
  body: any;
  /** The `Authorization` header as received. */
  authorization: string | undefined;
  /** Status the fake answered with. */
  status: number;
}

/** A guild the bot is in, with its channels and active threads. */
export interface FakeGuild {
  id: string;
  name?: string;
  /** Guild text channels (type 0). */
  channels: Array<{ id: string; name?: string }>;
  /** Public threads (type 11) under one of `channels`. */
  threads?: Array<{ id: string; parentId: string; name?: string }>;
  /** Id of the bot's managed role in this guild (tagged with the bot's id), if it has one. */
  botRoleId?: string;
  /** Owner of the guild. Default `100000000000000999`. */
  ownerId?: string;
  /** More roles, with their permission bits (decimal strings, as Discord sends them). */
  roles?: Array<{ id: string; permissions: string; name?: string }>;
  /** Members `GET /guilds/{id}/members/{user}` knows, user id → role ids; others are 404 Unknown Member. */
  members?: Record<string, string[]>;
}

/** What `messageCreate` builds a MESSAGE_CREATE from. */
export interface MessageInput {
  channelId: string;
  /** Absent: a DM. */
  guildId?: string;
  author: FakeUser;
  content: string;
  id?: string;
  /** Users mentioned (the bot, to address it in a guild). */
  mentions?: FakeUser[];
  /** Role ids mentioned. */
  mentionRoles?: string[];
  /** A reply: the message answered. */
  replyTo?: { id: string; content: string; author: FakeUser };
  attachments?: Array<{ id?: string; filename: string; url: string; content_type?: string; size: number }>;
  /** Message type (0 default, 19 reply, 7 member join, ...). Default 0, or 19 with `replyTo`. */
  type?: number;
  /** Channel type sent along (1 DM, 0 guild text, 11 public thread). Default: 1 without a guild, else 0. */
  channelType?: number;
}

/** Options of `FakeDiscord.start`. */
export interface FakeDiscordOptions {
  /** The token the fake accepts (REST `Authorization: Bot <token>`, gateway IDENTIFY/RESUME). */
  token: string;
  /** The bot user. Default id `100000000000000001`, username `steerbot`. */
  bot?: { id: string; username: string };
  /** Heartbeat interval sent in HELLO, in ms. Default 41 250 (Discord's). */
  heartbeatIntervalMs?: number;
  /**
   * How long `enforce_nonce` finds a message by its nonce, in ms. Discord says
   * "the past few minutes" without a number. Default 120 000.
   */
  nonceWindowMs?: number;
}

interface RouteFault {
  method: string;
  path: RegExp;
  remaining: number;
  /** Do what the route does first, then answer with the fault (a response lost after the fact). */
  commit: boolean;
  status: number;
  headers: Record<string, string>;
  body: (call: RestCall) => unknown;
}

/** One gateway session: a client that identified; it outlives its socket so it can resume. */
interface Session {
  id: string;
  socket: WebSocket | undefined;
  /** True while its socket identified or resumed: dispatches go out. */
  live: boolean;
  seq: number;
  log: Array<{ op: 0; t: string; s: number; d: unknown }>;
  /** Replay from this sequence number on the next RESUME, even events the client already got. */
  forcedReplayFrom: number | undefined;
}

/** A message the fake Discord holds. */
export interface StoredMessage {
  id: string;
  channel_id: string;
  content: string;
  edits: number;
  nonce?: string;
  /** Who created it (the bot: messages are created with its token). */
  authorId: string;
  /** When it was created, ms since the epoch (`enforce_nonce` looks back a few minutes). */
  createdAt: number;
  /** Message components (button rows) as sent; an edit with `components` replaces them. */
  components?: any[];
  /** Files uploaded with the message (multipart `files[n]` parts), in order. */
  files?: UploadedFile[];
  /**
   * Whether Discord would embed previews of its links (fetching them at once): false while its flags hold
   * `SUPPRESS_EMBEDS` (4), which the create, an edit or a click's update (type 7) sets or clears; one without `flags` keeps them.
   */
  embeds: boolean;
  /** Who its current text mentions by Discord's rules for its `allowed_mentions` (`mentionsOf`). */
  mentions: string[];
}

/** The `SUPPRESS_EMBEDS` message flag. */
const SUPPRESS_EMBEDS = 4;

/**
 * Who `content` mentions, as Discord reads it with `allowed`, the
 * `allowed_mentions` sent along (absent: everything in the text is parsed):
 * `@everyone` (also for `@here`), `user:<id>`, `role:<id>`.
 */
export function mentionsOf(content: string, allowed: { parse?: string[]; users?: string[]; roles?: string[] } | undefined): string[] {
  const parse = allowed === undefined ? ['everyone', 'users', 'roles'] : (allowed.parse ?? []);
  const out: string[] = [];
  if (parse.includes('everyone') && /@(everyone|here)\b/.test(content)) out.push('@everyone');
  for (const [, kind, id] of content.matchAll(/<@(!|&)?(\d+)>/g)) {
    const role = kind === '&';
    const listed = role ? allowed?.roles : allowed?.users;
    if (parse.includes(role ? 'roles' : 'users') || listed?.includes(id!)) out.push(`${role ? 'role' : 'user'}:${id}`);
  }
  return out;
}

/** The flags after a create, edit or update carrying `body`: its `flags` when it has them, else `before`. */
const embedsAfter = (body: any, before: boolean): boolean => (body?.flags === undefined ? before : (Number(body.flags) & SUPPRESS_EMBEDS) === 0);

/** A file uploaded with a message. */
export interface UploadedFile {
  filename: string;
  contentType: string | undefined;
  data: Buffer;
}

/** Largest upload the fake takes (25 MiB, a server without boosts). */
const MAX_UPLOAD_BYTES = 25 * 1024 * 1024;

/** A response to an interaction (`POST /interactions/:id/:token/callback`): type 4 a reply, 7 an update of the message. */
export interface InteractionResponse {
  interactionId: string;
  type: number;
  data: any;
}

const DISCORD_EPOCH = 1420070400000n;
let snowflakeCounter = 0n;

/** A fresh snowflake id (time-ordered, unique in the process). */
export function snowflake(): string {
  snowflakeCounter = (snowflakeCounter + 1n) & 0xfffn;
  return (((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | (1n << 17n) | snowflakeCounter).toString();
}

/** A user payload. */
export function user(id: string, username: string, opts: { globalName?: string; bot?: boolean } = {}): FakeUser {
  return { id, username, global_name: opts.globalName ?? null, discriminator: '0', avatar: null, ...(opts.bot !== undefined && { bot: opts.bot }) };
}

/** The fake Discord. Events: `rest` (RestCall), `identify` (payload d), `resume` (payload d), `replayed` (the events replayed), `resumed`, `unknown-route` (string). */
export class FakeDiscord extends EventEmitter {
  readonly bot: FakeUser;
  /** Every REST call, in order. */
  readonly calls: RestCall[] = [];
  /** Routes the fake does not implement (`GET /path`), to find out what a client calls. */
  readonly unknownRoutes: string[] = [];
  /** IDENTIFY payloads received (`d`). */
  readonly identifies: any[] = [];
  /** RESUME payloads received (`d`). */
  readonly resumes: any[] = [];
  /** Request paths of every gateway connection (shows whether the resume URL was used). */
  readonly connections: string[] = [];
  /** Messages created through REST, by id. */
  readonly messages = new Map<string, StoredMessage>();
  /** The sequence number each heartbeat carried: the newest event the client had received. */
  readonly heartbeats: Array<number | null> = [];
  /** Every MESSAGE_CREATE payload by channel id, in order: what `GET /channels/:id/messages` reads. */
  readonly history = new Map<string, Array<Record<string, any>>>();
  /** Responses to interactions (button clicks), in order. */
  readonly interactionResponses: InteractionResponse[] = [];
  /** The bot's own reactions, by `<channel id>:<message id>` (PUT and DELETE `…/reactions/<emoji>/@me`). */
  readonly reactions = new Map<string, Set<string>>();

  private readonly server: Server;
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly guilds: FakeGuild[] = [];
  private readonly faults: RouteFault[] = [];
  private readonly holds: Array<{ method: string; path: RegExp; arrive(): void; released: Promise<void> }> = [];
  private readonly answerHolds = new AnswerHolds();
  private readonly sessions = new Map<string, Session>();
  private port = 0;

  private constructor(private readonly opts: FakeDiscordOptions) {
    super();
    this.bot = user(opts.bot?.id ?? '100000000000000001', opts.bot?.username ?? 'steerbot', { bot: true });
    this.server = createServer((req, res) => void this.onRequest(req, res));
    this.server.on('upgrade', (req, sock, head) => {
      this.wss.handleUpgrade(req, sock, head, (ws) => this.onConnection(ws, req.url ?? '/'));
    });
  }

  /** Starts the fake on a free port of 127.0.0.1. */
  static async start(opts: FakeDiscordOptions): Promise<FakeDiscord> {
    const fake = new FakeDiscord(opts);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.port = (fake.server.address() as AddressInfo).port;
    return fake;
  }

  /** REST base for discord.js `rest.api` (and the plugin's `apiBase`). */
  get apiBase(): string {
    return `http://127.0.0.1:${this.port}/api`;
  }

  /** The gateway URL `GET /gateway/bot` returns. */
  get gatewayUrl(): string {
    return `ws://127.0.0.1:${this.port}`;
  }

  /** Sessions whose socket is connected and identified or resumed. */
  get liveSessions(): number {
    return [...this.sessions.values()].filter((x) => x.live).length;
  }

  // ---- test API: guilds and dispatches ----

  /** Adds a guild: in READY (as unavailable) + GUILD_CREATE when the client identifies, or dispatched now if it already has. */
  addGuild(guild: FakeGuild): void {
    this.guilds.push(guild);
    if (this.sessions.size > 0) this.dispatch('GUILD_CREATE', this.guildPayload(guild));
  }

  /**
   * Dispatches an event (op 0) to every session with its next sequence
   * number; kept for replays (a session that is disconnected gets it when it
   * resumes). Returns its sequence number in the newest session.
   */
  dispatch(t: string, d: unknown): number {
    let seq = 0;
    for (const session of this.sessions.values()) seq = this.dispatchTo(session, t, d);
    return seq;
  }

  /** Interactions dispatched and not yet answered, by id. */
  private readonly interactions = new Map<string, { token: string; messageId: string }>();

  /**
   * Dispatches an INTERACTION_CREATE: `user` clicked the button `customId`
   * under the bot's message `messageId` (created through REST). Returns the
   * interaction id; its response lands in `interactionResponses`.
   */
  buttonClick(input: { messageId: string; customId: string; user: FakeUser; guildId?: string }): string {
    const stored = this.messages.get(input.messageId);
    if (!stored) throw new Error(`no message ${input.messageId}`);
    const id = snowflake();
    const token = `itoken-${id}`;
    this.interactions.set(id, { token, messageId: input.messageId });
    const message = { ...this.messagePayload(stored, {}), components: stored.components ?? [] };
    this.dispatch('INTERACTION_CREATE', {
      id,
      application_id: this.bot.id,
      type: 3,
      token,
      version: 1,
      channel_id: stored.channel_id,
      channel: { id: stored.channel_id, type: input.guildId ? 0 : 1 },
      ...(input.guildId
        ? { guild_id: input.guildId, member: { user: input.user, roles: [], joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0 } }
        : { user: input.user }),
      data: { custom_id: input.customId, component_type: 2 },
      message,
      app_permissions: '0',
      locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: {},
      context: input.guildId ? 0 : 1,
    });
    return id;
  }

  /** Builds and dispatches a MESSAGE_CREATE; returns the payload and its sequence number. */
  messageCreate(input: MessageInput): { seq: number; message: Record<string, any> } {
    const id = input.id ?? snowflake();
    const message: Record<string, any> = {
      ...baseMessage(id, input.channelId, input.author, input.content),
      mentions: input.mentions ?? [],
      mention_roles: input.mentionRoles ?? [],
      attachments: (input.attachments ?? []).map((a) => ({ id: a.id ?? snowflake(), proxy_url: a.url, ...a })),
      type: input.type ?? (input.replyTo ? 19 : 0),
      channel_type: input.channelType ?? (input.guildId ? 0 : 1),
    };
    if (input.guildId) message.guild_id = input.guildId;
    if (input.replyTo) {
      message.message_reference = { type: 0, message_id: input.replyTo.id, channel_id: input.channelId, ...(input.guildId && { guild_id: input.guildId }) };
      message.referenced_message = baseMessage(input.replyTo.id, input.channelId, input.replyTo.author, input.replyTo.content);
    }
    const channelHistory = this.history.get(input.channelId) ?? [];
    channelHistory.push(message);
    this.history.set(input.channelId, channelHistory);
    return { seq: this.dispatch('MESSAGE_CREATE', message), message };
  }

  /**
   * Forgets every session and closes its connection: the client's resume is
   * refused (op 9), so it identifies again and gets a new session without the
   * events in between, as when Discord drops a session.
   */
  expireSessions(): void {
    const sockets = [...this.sessions.values()].flatMap((s) => (s.socket ? [s.socket] : []));
    this.sessions.clear();
    for (const ws of sockets) ws.close(4000, 'fake: session expired');
  }

  /**
   * Closes every gateway connection with `code` (4000: the client resumes).
   * With `replayFrom`, the next RESUME replays every event from that sequence
   * number on, including ones the client already received (Discord may do so).
   */
  dropConnection(opts: { code?: number; replayFrom?: number } = {}): void {
    for (const session of this.sessions.values()) {
      if (!session.socket) continue;
      session.forcedReplayFrom = opts.replayFrom;
      session.live = false;
      session.socket.close(opts.code ?? 4000, 'fake: dropped');
      session.socket = undefined;
    }
  }

  /** Resolves with the next event `name` the fake emits; rejects after `timeoutMs`. */
  async next<T = unknown>(name: string, timeoutMs = 10_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off(name, on);
        reject(new Error(`fake discord: no ${name} within ${timeoutMs} ms`));
      }, timeoutMs);
      const on = (v: T) => {
        clearTimeout(timer);
        resolve(v);
      };
      this.once(name, on);
    });
  }

  // ---- test API: REST ----

  /** Answers the next `count` calls matching `method` + `path` with 429 and `retryAfterSec` (header and body). */
  rateLimit(method: string, path: RegExp, opts: { retryAfterSec: number; global?: boolean; count?: number }): void {
    this.faults.push({
      method,
      path,
      remaining: opts.count ?? 1,
      commit: false,
      status: 429,
      headers: {
        'retry-after': String(opts.retryAfterSec),
        'x-ratelimit-scope': opts.global ? 'global' : 'user',
        ...(opts.global && { 'x-ratelimit-global': 'true' }),
      },
      body: () => ({ message: 'You are being rate limited.', retry_after: opts.retryAfterSec, global: opts.global ?? false }),
    });
  }

  /**
   * Answers the next `count` calls matching `method` + `path` with `status`
   * and `body` (a function sees the call). With `commit`, the call takes
   * effect first (a message is created) and only the response is the failure.
   */
  fail(
    method: string,
    path: RegExp,
    opts: { status: number; body: Record<string, unknown> | ((call: RestCall) => Record<string, unknown>); count?: number; commit?: boolean },
  ): void {
    const body = opts.body;
    this.faults.push({
      method,
      path,
      remaining: opts.count ?? 1,
      commit: opts.commit ?? false,
      status: opts.status,
      headers: {},
      body: typeof body === 'function' ? body : () => body,
    });
  }

  /**
   * Holds the calls matching `method` + `path` until the returned function is
   * called; `arrived` resolves when the first one comes in.
   */
  hold(method: string, path: RegExp): { arrived: Promise<void>; release(): void } {
    let arrive!: () => void;
    let release!: () => void;
    const arrived = new Promise<void>((r) => (arrive = r));
    const released = new Promise<void>((r) => (release = r));
    this.holds.push({ method, path, arrive, released });
    return { arrived, release };
  }

  /**
   * Does the next successful call matching `method` + `path` (a message is
   * created) and holds its answer until `release()`: unlike `hold`, the
   * platform has done the call when `done` resolves.
   */
  holdAnswer(method: string, path: RegExp): HeldAnswer {
    return this.answerHolds.arm((call) => call.startsWith(`${method} `) && path.test(call.slice(method.length + 1)));
  }

  /** REST calls matching `method` and `path`. */
  callsTo(method: string, path: RegExp): RestCall[] {
    return this.calls.filter((c) => c.method === method && path.test(c.path));
  }

  /** Resolves once `n` calls match `method` + `path`; rejects after `timeoutMs`. */
  async waitForCalls(method: string, path: RegExp, n = 1, timeoutMs = 10_000): Promise<RestCall[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.callsTo(method, path);
      if (found.length >= n) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`fake discord: expected ${n} ${method} ${path} calls within ${timeoutMs} ms, got ${found.length}`);
      await this.next('rest', left).catch(() => undefined);
    }
  }

  /** Closes every connection and the server. */
  async close(): Promise<void> {
    for (const session of this.sessions.values()) session.live = false;
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- gateway ----

  private onConnection(ws: WebSocket, path: string): void {
    this.connections.push(path);
    ws.on('message', (raw) => this.onGatewayMessage(ws, raw.toString()));
    ws.on('close', (code) => {
      for (const session of this.sessions.values()) {
        if (session.socket !== ws) continue;
        session.socket = undefined;
        session.live = false;
        // A client closing with 1000/1001 ends its session (Discord will not let it resume).
        if (code === 1000 || code === 1001) this.sessions.delete(session.id);
      }
    });
    this.send(ws, { op: 10, d: { heartbeat_interval: this.opts.heartbeatIntervalMs ?? 41_250 }, s: null, t: null });
  }

  private onGatewayMessage(ws: WebSocket, raw: string): void {
    let payload: { op: number; d: any };
    try {
      payload = JSON.parse(raw);
    } catch {
      ws.close(4002, 'decode error');
      return;
    }
    switch (payload.op) {
      case 1:
        this.heartbeats.push(typeof payload.d === 'number' ? payload.d : null);
        this.send(ws, { op: 11, d: null, s: null, t: null });
        return;
      case 2:
        return this.onIdentify(ws, payload.d);
      case 6:
        return this.onResume(ws, payload.d);
      default:
        return;
    }
  }

  private onIdentify(ws: WebSocket, d: any): void {
    this.identifies.push(d);
    if (d?.token !== this.opts.token) {
      ws.close(4004, 'Authentication failed.');
      return;
    }
    const session: Session = { id: `session-${snowflake()}`, socket: ws, live: true, seq: 0, log: [], forcedReplayFrom: undefined };
    this.sessions.set(session.id, session);
    this.emit('identify', d);
    this.dispatchTo(session, 'READY', {
      v: 10,
      user: { ...this.bot, verified: true, mfa_enabled: false, flags: 0 },
      guilds: this.guilds.map((g) => ({ id: g.id, unavailable: true })),
      session_id: session.id,
      resume_gateway_url: `${this.gatewayUrl}/resume`,
      shard: [0, 1],
      application: { id: this.bot.id, flags: 0 },
    });
    for (const g of this.guilds) this.dispatchTo(session, 'GUILD_CREATE', this.guildPayload(g));
  }

  private onResume(ws: WebSocket, d: any): void {
    this.resumes.push(d);
    if (d?.token !== this.opts.token) {
      ws.close(4004, 'Authentication failed.');
      return;
    }
    const session = this.sessions.get(String(d?.session_id));
    if (!session) {
      this.send(ws, { op: 9, d: false, s: null, t: null });
      return;
    }
    this.emit('resume', d);
    session.socket = ws;
    const from = Math.min(Number(d.seq ?? 0) + 1, session.forcedReplayFrom ?? Number.POSITIVE_INFINITY);
    session.forcedReplayFrom = undefined;
    const replay = session.log.filter((event) => event.s >= from);
    for (const event of replay) this.send(ws, event);
    this.emit('replayed', replay);
    session.live = true;
    this.dispatchTo(session, 'RESUMED', {});
    this.emit('resumed');
  }

  private dispatchTo(session: Session, t: string, d: unknown): number {
    const event = { op: 0 as const, t, s: ++session.seq, d };
    session.log.push(event);
    if (session.live && session.socket) this.send(session.socket, event);
    return event.s;
  }

  private send(ws: WebSocket, payload: unknown): void {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(payload));
  }

  private guildPayload(g: FakeGuild): Record<string, unknown> {
    const textChannel = (c: { id: string; name?: string }, position: number) => ({
      id: c.id,
      type: 0,
      guild_id: g.id,
      name: c.name ?? `channel-${position}`,
      position,
      permission_overwrites: [],
      parent_id: null,
      topic: null,
      nsfw: false,
      last_message_id: null,
      rate_limit_per_user: 0,
    });
    return {
      id: g.id,
      name: g.name ?? 'guild',
      icon: null,
      owner_id: g.ownerId ?? '100000000000000999',
      afk_timeout: 300,
      verification_level: 0,
      default_message_notifications: 0,
      explicit_content_filter: 0,
      roles: [
        { id: g.id, name: '@everyone', permissions: '1024', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 },
        ...(g.botRoleId
          ? [
              {
                id: g.botRoleId,
                name: this.bot.username,
                permissions: '3072',
                position: 1,
                color: 0,
                hoist: false,
                managed: true,
                mentionable: true,
                flags: 0,
                tags: { bot_id: this.bot.id },
              },
            ]
          : []),
        ...(g.roles ?? []).map((r, i) => ({
          id: r.id,
          name: r.name ?? `role-${i}`,
          permissions: r.permissions,
          position: i + 2,
          color: 0,
          hoist: false,
          managed: false,
          mentionable: false,
          flags: 0,
        })),
      ],
      emojis: [],
      stickers: [],
      features: [],
      mfa_level: 0,
      system_channel_flags: 0,
      premium_tier: 0,
      preferred_locale: 'en-US',
      nsfw_level: 0,
      joined_at: new Date().toISOString(),
      large: false,
      unavailable: false,
      member_count: 2,
      voice_states: [],
      members: [],
      presences: [],
      stage_instances: [],
      guild_scheduled_events: [],
      soundboard_sounds: [],
      channels: g.channels.map(textChannel),
      threads: (g.threads ?? []).map((t) => ({
        id: t.id,
        type: 11,
        guild_id: g.id,
        parent_id: t.parentId,
        owner_id: '100000000000000999',
        name: t.name ?? 'thread',
        last_message_id: null,
        rate_limit_per_user: 0,
        message_count: 0,
        member_count: 1,
        thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: new Date().toISOString(), locked: false },
      })),
    };
  }

  // ---- REST ----

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const boundary = multipartBoundary(req.headers['content-type']);
    const raw = boundary ? '' : Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = boundary ? multipartBody(Buffer.concat(chunks), boundary) : raw ? JSON.parse(raw) : undefined;
    } catch {
      body = raw;
    }
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname.replace(/^\/api(\/v\d+)?/, '');
    const call: RestCall = { method, path, body, authorization: req.headers.authorization, status: 0 };
    const respond = (status: number, payload?: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { ...(payload !== undefined && { 'content-type': 'application/json' }), ...headers });
      res.end(payload === undefined ? undefined : JSON.stringify(payload));
    };
    const answer = (status: number, payload?: unknown, headers: Record<string, string> = {}) => {
      call.status = status;
      this.calls.push(call);
      const held = status < 300 && this.answerHolds.hold(`${method} ${path}`, res, () => respond(status, payload, headers));
      if (!held) respond(status, payload, headers);
      this.emit('rest', call);
    };

    // Interaction responses are authorized by the interaction's token in the path, not the bot token.
    if (!path.startsWith('/interactions/') && req.headers.authorization !== `Bot ${this.opts.token}`)
      return answer(401, { message: '401: Unauthorized', code: 0 });
    const held = this.holds.find((h) => h.method === method && h.path.test(path));
    if (held) {
      held.arrive();
      await held.released;
    }
    const fault = this.faults.find((f) => f.remaining > 0 && f.method === method && f.path.test(path));
    if (fault) {
      fault.remaining--;
      if (fault.commit) this.route(method, path, body, () => undefined, url.searchParams);
      return answer(fault.status, fault.body(call), fault.headers);
    }
    this.route(method, path, body, answer, url.searchParams);
  }

  private route(method: string, path: string, body: any, answer: (status: number, payload?: unknown) => void, query: URLSearchParams): void {
    let m: RegExpExecArray | null;
    if (method === 'GET' && path === '/gateway/bot') {
      return answer(200, { url: this.gatewayUrl, shards: 1, session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 } });
    }
    if (method === 'GET' && path === '/gateway') return answer(200, { url: this.gatewayUrl });
    if (method === 'GET' && path === '/users/@me') return answer(200, this.bot);
    if ((m = /^\/channels\/(\d+)\/typing$/.exec(path)) && method === 'POST') return answer(204);
    if ((m = /^\/channels\/(\d+)\/messages\/(\d+)\/reactions\/([^/]+)\/@me$/.exec(path)) && (method === 'PUT' || method === 'DELETE')) {
      const key = `${m[1]}:${m[2]}`;
      const own = this.reactions.get(key) ?? new Set<string>();
      const emoji = decodeURIComponent(m[3]!);
      if (method === 'PUT') own.add(emoji);
      else own.delete(emoji);
      this.reactions.set(key, own);
      return answer(204);
    }
    if ((m = /^\/interactions\/(\d+)\/([^/]+)\/callback$/.exec(path)) && method === 'POST') {
      const pending = this.interactions.get(m[1]!);
      if (!pending || pending.token !== m[2]) return answer(404, { message: 'Unknown interaction', code: 10062 });
      this.interactions.delete(m[1]!);
      this.interactionResponses.push({ interactionId: m[1]!, type: Number(body?.type), data: body?.data });
      if (Number(body?.type) === 7) {
        const stored = this.messages.get(pending.messageId);
        if (stored) {
          if (typeof body.data?.content === 'string') stored.content = body.data.content;
          if (Array.isArray(body.data?.components)) stored.components = body.data.components;
          stored.embeds = embedsAfter(body.data, stored.embeds);
          stored.mentions = mentionsOf(stored.content, body.data?.allowed_mentions);
          stored.edits++;
        }
      }
      return answer(204);
    }
    if ((m = /^\/channels\/(\d+)\/messages$/.exec(path)) && method === 'GET') {
      // Discord: newest first, at most `limit` (1-100, default 50), optionally only before / after an id.
      const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 50)));
      const after = query.get('after');
      const before = query.get('before');
      const bySnowflake = (a: Record<string, any>, b: Record<string, any>) => (BigInt(a.id) < BigInt(b.id) ? 1 : -1);
      const all = [...(this.history.get(m[1]!) ?? [])]
        .filter((x) => (after === null || BigInt(x.id) > BigInt(after)) && (before === null || BigInt(x.id) < BigInt(before)))
        .sort(bySnowflake);
      return answer(200, all.slice(0, limit));
    }
    if ((m = /^\/channels\/(\d+)\/messages$/.exec(path)) && method === 'POST') {
      const files: UploadedFile[] = Array.isArray(body?.files) ? body.files : [];
      if (files.some((f) => f.data.byteLength > MAX_UPLOAD_BYTES)) return answer(413, { message: 'Request entity too large', code: 40005 });
      // Discord: a message with a file may have no content.
      const invalid = files.length > 0 && (body.content ?? '') === '' ? undefined : checkContent(body?.content);
      if (invalid) return answer(400, invalid);
      if (body.nonce !== undefined && String(body.nonce).length > 25) return answer(400, { message: 'Invalid Form Body', code: 50035 });
      if (body.enforce_nonce === true && body.nonce !== undefined) {
        // Discord: a message the same author created with this nonce in the past few minutes is returned, nothing new is created.
        const since = Date.now() - (this.opts.nonceWindowMs ?? 120_000);
        const earlier = [...this.messages.values()].find(
          (x) => x.channel_id === m![1] && x.nonce === String(body.nonce) && x.authorId === this.bot.id && x.createdAt >= since,
        );
        if (earlier) return answer(200, this.messagePayload(earlier, body));
      }
      const stored: StoredMessage = {
        id: snowflake(),
        channel_id: m[1]!,
        content: body.content ?? '',
        edits: 0,
        authorId: this.bot.id,
        ...(files.length > 0 && { files }),
        createdAt: Date.now(),
        ...(body.nonce !== undefined && { nonce: String(body.nonce) }),
        ...(Array.isArray(body.components) && { components: body.components }),
        embeds: embedsAfter(body, true),
        mentions: mentionsOf(body.content ?? '', body.allowed_mentions),
      };
      this.messages.set(stored.id, stored);
      return answer(200, this.messagePayload(stored, body));
    }
    if ((m = /^\/channels\/(\d+)\/messages\/(\d+)$/.exec(path)) && method === 'PATCH') {
      const stored = this.messages.get(m[2]!);
      if (!stored || stored.channel_id !== m[1]) return answer(404, { message: 'Unknown Message', code: 10008 });
      const invalid = checkContent(body?.content);
      if (invalid) return answer(400, invalid);
      stored.content = body.content;
      if (Array.isArray(body.components)) stored.components = body.components;
      stored.embeds = embedsAfter(body, stored.embeds);
      stored.mentions = mentionsOf(stored.content, body.allowed_mentions);
      stored.edits++;
      return answer(200, this.messagePayload(stored, body));
    }
    if ((m = /^\/channels\/(\d+)$/.exec(path)) && method === 'GET') {
      for (const g of this.guilds) {
        const c = g.channels.find((x) => x.id === m![1]);
        if (c) return answer(200, { id: c.id, type: 0, guild_id: g.id, name: c.name ?? 'channel' });
        const t = g.threads?.find((x) => x.id === m![1]);
        if (t) return answer(200, { id: t.id, type: 11, guild_id: g.id, parent_id: t.parentId, name: t.name ?? 'thread' });
      }
      // Any other id is taken as a DM with no one in particular.
      return answer(200, { id: m[1], type: 1, recipients: [], last_message_id: null });
    }
    if ((m = /^\/guilds\/(\d+)$/.exec(path)) && method === 'GET') {
      const g = this.guilds.find((x) => x.id === m![1]);
      if (!g) return answer(404, { message: 'Unknown Guild', code: 10004 });
      const { channels: _c, threads: _t, members: _m, voice_states: _v, presences: _p, ...guild } = this.guildPayload(g);
      return answer(200, guild);
    }
    if ((m = /^\/guilds\/(\d+)\/members\/(\d+)$/.exec(path)) && method === 'GET') {
      const g = this.guilds.find((x) => x.id === m![1]);
      if (!g) return answer(404, { message: 'Unknown Guild', code: 10004 });
      const roles = g.members?.[m[2]!];
      if (!roles) return answer(404, { message: 'Unknown Member', code: 10007 });
      return answer(200, { user: user(m[2]!, `user-${m[2]}`), roles, joined_at: new Date().toISOString(), deaf: false, mute: false, flags: 0 });
    }
    this.unknownRoutes.push(`${method} ${path}`);
    this.emit('unknown-route', `${method} ${path}`);
    return answer(404, { message: '404: Not Found', code: 0 });
  }

  private messagePayload(stored: StoredMessage, body: any): Record<string, unknown> {
    return {
      ...baseMessage(stored.id, stored.channel_id, this.bot, stored.content),
      edited_timestamp: stored.edits > 0 ? new Date().toISOString() : null,
      type: body?.message_reference ? 19 : 0,
      ...(stored.nonce !== undefined && { nonce: stored.nonce }),
      ...(body?.message_reference && { message_reference: body.message_reference }),
      ...(stored.components && { components: stored.components }),
    };
  }
}

/** The fields every Discord message object carries, unedited, without mentions or attachments. */
function baseMessage(id: string, channelId: string, author: unknown, content: unknown): Record<string, any> {
  return {
    id,
    channel_id: channelId,
    author,
    content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    embeds: [],
    pinned: false,
    type: 0,
  };
}

/** Discord's content checks: 50006 for empty, 50035 (form body) over 2000 characters. */
/** A multipart create-message body as JSON: `payload_json` with its `files[n]` parts under `files`. */
function multipartBody(raw: Buffer, boundary: string): Record<string, unknown> {
  const parts = parseMultipart(raw, boundary);
  const json = parts.find((p) => p.name === 'payload_json');
  const files = parts
    .filter((p) => /^files\[\d+\]$/.test(p.name))
    .map((p) => ({ filename: p.filename ?? '', contentType: p.contentType, data: p.data }) satisfies UploadedFile);
  return { ...(json ? (JSON.parse(json.data.toString('utf8')) as Record<string, unknown>) : {}), files };
}

function checkContent(content: unknown): Record<string, unknown> | undefined {
  if (typeof content !== 'string' || content.length === 0) return { message: 'Cannot send an empty message', code: 50006 };
  if (content.length > 2000) {
    return {
      message: 'Invalid Form Body',
      code: 50035,
      errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' }] } },
    };
  }
  return undefined;
}
