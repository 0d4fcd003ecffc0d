/**
 * A local fake Matrix homeserver (the client-server API endpoints the
 * channel uses), for end-to-end tests (`homeserverUrl` pointed here). It
 * keeps rooms and one event stream: `GET /sync` answers the events after
 * its `since` (`s<position>`), holding the request up to its `timeout`
 * when there are none; `PUT /rooms/{room}/send/{type}/{txnId}` is
 * idempotent per access token and transaction id, as the spec says (a
 * repeat answers the first event's id and adds nothing); the bot's own
 * events come back in its `/sync`, as on a real server. It also serves
 * `join`, `typing`, `redact`, `joined_members` and the power levels, checks the bearer
 * token, records every call, keeps the bot's polls (MSC3381, refusing a
 * malformed one as a homeserver would not, so a test sees it) and posts a
 * person's poll response into the stream, and can fail the next calls of a kind (429
 * `M_LIMIT_EXCEEDED` with `retry_after_ms`, 500), uploads included. Its
 * media repository (`media`: uploads, the media config, authenticated
 * downloads) is in `matrix-media.ts`.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../wait.js';
import { readBody } from './http-io.js';
import { MatrixMediaStore, mediaRoute } from './matrix-media.js';

/** Test credentials and ids. */
export const MATRIX_TEST = {
  accessToken: 'syt_ZmFrZWJvdA_fakeMatrixAccessToken0123',
  userId: '@steerbot:fake.test',
} as const;
/** A test person. */
export const MATRIX_ALICE = '@alice:fake.test';
/** Another test person. */
export const MATRIX_BOB = '@bob:fake.test';

/** The kinds of call the fake serves. */
export type MatrixCallKind = 'sync' | 'send' | 'join' | 'typing' | 'redact' | 'members' | 'power-levels' | 'upload' | 'media-config' | 'download';

/** One call the fake received. */
export interface MatrixCall {
  kind: MatrixCallKind;
  /** The room it named, when it named one. */
  roomId?: string;
  /** Query parameters (`/sync`: `since`, `timeout`). */
  query: Record<string, string>;
  /** The JSON body, when there was one. */
  body?: Record<string, any>;
  /** The transaction id of a send or redaction. */
  txnId?: string;
  /** HTTP status the fake answered. */
  status: number;
  /** A send whose transaction id was seen before: answered with the first event, nothing added. */
  repeat?: boolean;
}

/** An event in the fake's stream. */
export interface MatrixEvent {
  type: string;
  event_id: string;
  sender: string;
  origin_server_ts: number;
  content: Record<string, any>;
  /** A state event's key (the bot's own join: its user id). */
  state_key?: string;
}

/**
 * Whether an event with `content`, sent by a user with the power to notify
 * the room, notifies everyone in it, by the spec's push rules: with
 * `m.mentions` (intentional mentions) only when it says `room: true`; without
 * it, by the legacy rule that finds `@room` in the body.
 */
export function notifiesRoom(content: Record<string, any>): boolean {
  const mentions = content['m.mentions'];
  if (mentions !== undefined) return mentions?.room === true;
  return typeof content.body === 'string' && content.body.includes('@room');
}

/**
 * Whether a client that reads bundled previews (MSC4095) may preview the
 * links of an event with `content`: not when it bundles an empty list
 * (`com.beeper.linkpreviews`, or the stable `m.url_previews`), the sender's
 * "no previews"; otherwise it asks its homeserver, which fetches them.
 */
export function previewsLinks(content: Record<string, any>): boolean {
  const bundle = content['com.beeper.linkpreviews'] ?? content['m.url_previews'];
  return !(Array.isArray(bundle) && bundle.length === 0);
}

/** A failure the fake answers with. */
export interface MatrixFailure {
  status: number;
  /** `errcode` of the body. Default `M_UNKNOWN`. */
  errcode?: string;
  /** `retry_after_ms` of the body (a 429). */
  retryAfterMs?: number;
  /** Only a send of this event type fails (e.g. `org.matrix.msc3381.poll.start`); other sends pass it by. */
  eventType?: string;
}

/** Options of `FakeMatrix.message`. */
export interface MatrixMessageOptions {
  /** Default: a fresh one. */
  eventId?: string;
  /** Default `m.text`. */
  msgtype?: string;
  /** `m.relates_to` of the content. */
  relatesTo?: Record<string, unknown>;
  /** More fields of the content (whatever a client puts there). */
  content?: Record<string, unknown>;
}

/** The unstable poll events Element sends and shows (MSC3381). */
const POLL_START = 'org.matrix.msc3381.poll.start';
const POLL_RESPONSE = 'org.matrix.msc3381.poll.response';
const POLL_END = 'org.matrix.msc3381.poll.end';
const TEXT = 'org.matrix.msc1767.text';

/** A poll the bot started, as a client shows it. */
export interface MatrixPoll {
  eventId: string;
  roomId: string;
  question: string;
  kind: string;
  maxSelections: number;
  answers: Array<{ id: string; label: string }>;
  /** The text of the bot's `poll.end` of it, once it ended the poll. */
  ended?: string;
}

/** Options of `FakeMatrix.pollResponse`. */
export interface MatrixPollResponseOptions {
  /** Default: a fresh one. */
  eventId?: string;
  /** Default `org.matrix.msc3381.poll.response`. */
  type?: string;
  /** `m.relates_to` of the content. Default: an `m.reference` to the poll. */
  relatesTo?: Record<string, unknown>;
  /** More fields of the content (an edit's `m.new_content`). */
  content?: Record<string, unknown>;
}

/** Why a poll start is malformed (MSC3381: a question, a kind, 1 to 20 answers with unique ids, `max_selections` at least 1); undefined when it is not. */
function pollProblem(content: Record<string, any>): string | undefined {
  const poll = content[POLL_START];
  if (typeof poll !== 'object' || poll === null) return `${POLL_START} required`;
  if (typeof poll.question?.[TEXT] !== 'string' || poll.question[TEXT] === '') return 'question text required';
  if (typeof poll.kind !== 'string' || !Number.isInteger(poll.max_selections) || poll.max_selections < 1) return 'kind and max_selections required';
  const answers: unknown[] = Array.isArray(poll.answers) ? poll.answers : [];
  const ids = answers.map((a: any) => a?.id);
  if (answers.length < 1 || answers.length > 20) return '1 to 20 answers';
  if (answers.some((a: any) => typeof a?.id !== 'string' || typeof a[TEXT] !== 'string') || new Set(ids).size !== ids.length)
    return 'answers need unique ids and text';
  return undefined;
}

interface Room {
  members: Set<string>;
  invited: Map<string, string>;
  /** Content of the room's `m.room.power_levels`. */
  powerLevels: Record<string, any>;
}

interface StreamEntry {
  pos: number;
  roomId: string;
  event?: MatrixEvent;
  /** An invite of the bot, by this sender. */
  inviteFrom?: string;
  /** Stripped state the inviting server sent with it, shown before the invite itself (as Synapse orders `invite_state`). */
  inviteState?: Array<Record<string, unknown>>;
}

/** Options of `startFakeMatrix`. */
export interface FakeMatrixOptions {
  /** The bearer token it accepts. Default `MATRIX_TEST.accessToken`. */
  accessToken?: string;
  /** The bot's user id. Default `MATRIX_TEST.userId`. */
  userId?: string;
}

const newEventId = () => `$${randomBytes(24).toString('base64url')}`;

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** A running fake homeserver. */
export class FakeMatrix {
  /** Give this as `homeserverUrl`. */
  url = '';
  readonly accessToken: string;
  readonly userId: string;
  /** Every call, in order. */
  readonly calls: MatrixCall[] = [];
  /** Events the bot sent (messages, edits, reactions), in order, each once. */
  readonly sent: Array<MatrixEvent & { roomId: string; txnId: string }> = [];
  /** Rooms a typing notification was shown in. */
  readonly typing: string[] = [];
  /** Event ids the bot redacted. */
  readonly redacted = new Set<string>();
  /** The media repository: `uploads`, `uploadLimit` (the media config's `m.upload.size`), `add` a person's file. */
  readonly media = new MatrixMediaStore('fake.test');
  private readonly rooms = new Map<string, Room>();
  private readonly stream: StreamEntry[] = [];
  private readonly txns = new Map<string, string>();
  private readonly failures: Partial<Record<MatrixCallKind, MatrixFailure[]>> = {};
  private readonly waiters = new Set<() => void>();
  private readonly server = createServer((req, res) => void this.serve(req, res));

  constructor(o: FakeMatrixOptions = {}) {
    this.accessToken = o.accessToken ?? MATRIX_TEST.accessToken;
    this.userId = o.userId ?? MATRIX_TEST.userId;
  }

  /** Listens on a random local port. */
  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /**
   * Makes a room with these members (add `userId` for one the bot is in); returns its id. `hashId`: an id as
   * room version 12 makes them, the hash of the create event with no server (`!<43 characters>`).
   */
  createRoom(members: readonly string[], opts: { hashId?: boolean } = {}): string {
    const roomId = opts.hashId ? `!${randomBytes(32).toString('base64url')}` : `!${randomBytes(9).toString('base64url')}:fake.test`;
    this.rooms.set(roomId, { members: new Set(members), invited: new Map(), powerLevels: { users: {}, users_default: 0, redact: 50 } });
    return roomId;
  }

  /** A room the bot and `person` are in (a one-to-one chat). */
  directRoom(person: string = MATRIX_ALICE): string {
    return this.createRoom([this.userId, person]);
  }

  /**
   * Invites the bot to a new room `from` made (with `others` joined too); returns its id. `strippedState`: what
   * the inviting server put in the invite's room state (its own server's say, unchecked), shown before the invite.
   */
  invite(from: string, others: readonly string[] = [], strippedState?: Array<Record<string, unknown>>): string {
    const roomId = this.createRoom([from, ...others]);
    this.room(roomId).invited.set(this.userId, from);
    this.append({ roomId, inviteFrom: from, ...(strippedState && { inviteState: strippedState }) });
    return roomId;
  }

  /** Sets `userId`'s power level in `roomId` (100: admin, 50: moderator). */
  setPowerLevel(roomId: string, userId: string, level: number): void {
    this.room(roomId).powerLevels.users[userId] = level;
  }

  /** Whether the bot joined `roomId`. */
  joined(roomId: string): boolean {
    return this.room(roomId).members.has(this.userId);
  }

  /** `sender` posts a text message in `roomId`; returns the event (give it to `redeliver` to send it again). */
  message(roomId: string, sender: string, text: string, o: MatrixMessageOptions = {}): MatrixEvent {
    const content: Record<string, any> = { ...o.content, msgtype: o.msgtype ?? 'm.text', body: text };
    if (o.relatesTo) content['m.relates_to'] = o.relatesTo;
    const event: MatrixEvent = { type: 'm.room.message', event_id: o.eventId ?? newEventId(), sender, origin_server_ts: Date.now(), content };
    this.append({ roomId, event });
    return event;
  }

  /** The bot's polls in `roomId`, in order, each with the text of its end once ended. */
  polls(roomId: string): MatrixPoll[] {
    const ends = new Map(
      this.sent.filter((e) => e.roomId === roomId && e.type === POLL_END).map((e) => [e.content['m.relates_to']?.event_id, String(e.content[TEXT] ?? '')]),
    );
    return this.sent
      .filter((e) => e.roomId === roomId && e.type === POLL_START)
      .map((e) => {
        const poll = e.content[POLL_START];
        const ended = ends.get(e.event_id);
        return {
          eventId: e.event_id,
          roomId,
          question: poll.question[TEXT],
          kind: poll.kind,
          maxSelections: poll.max_selections,
          answers: poll.answers.map((a: any) => ({ id: a.id, label: a[TEXT] })),
          ...(ended !== undefined && { ended }),
        };
      });
  }

  /** `sender` responds to poll `pollId` in `roomId` choosing `answerIds` (as Element does); returns the event (give it to `redeliver` to send it again). */
  pollResponse(roomId: string, sender: string, pollId: string, answerIds: readonly string[], o: MatrixPollResponseOptions = {}): MatrixEvent {
    const type = o.type ?? POLL_RESPONSE;
    const choice = type === POLL_RESPONSE ? { [POLL_RESPONSE]: { answers: answerIds } } : { 'm.selections': answerIds };
    const content = { ...choice, ...o.content, 'm.relates_to': o.relatesTo ?? { rel_type: 'm.reference', event_id: pollId } };
    const event: MatrixEvent = { type, event_id: o.eventId ?? newEventId(), sender, origin_server_ts: Date.now(), content };
    this.append({ roomId, event });
    return event;
  }

  /** Puts an event in the stream again (a server handing an event over twice). */
  redeliver(roomId: string, event: MatrixEvent): void {
    this.append({ roomId, event });
  }

  /** The stream position a `/sync` now resumes from (`next_batch`). */
  position(): string {
    return `s${this.stream.length}`;
  }

  /** Current texts of the bot's messages in `roomId` (edits applied), in order. */
  texts(roomId: string): string[] {
    const messages = this.sent.filter((e) => e.roomId === roomId && e.type === 'm.room.message');
    const edits = new Map<string, string>();
    for (const e of messages) {
      const rel = e.content['m.relates_to'];
      if (rel?.rel_type === 'm.replace') edits.set(rel.event_id, e.content['m.new_content'].body);
    }
    return messages.filter((e) => e.content['m.relates_to']?.rel_type !== 'm.replace').map((e) => edits.get(e.event_id) ?? e.content.body);
  }

  /** The bot's reactions in `roomId` not redacted: `<target event id> <key>`. */
  reactions(roomId: string): string[] {
    return this.sent
      .filter((e) => e.roomId === roomId && e.type === 'm.reaction' && !this.redacted.has(e.event_id))
      .map((e) => `${e.content['m.relates_to'].event_id} ${e.content['m.relates_to'].key}`);
  }

  /** The next `n` calls of `kind` fail with `failure`. */
  failNext(kind: MatrixCallKind, failure: MatrixFailure, n = 1): void {
    for (let i = 0; i < n; i++) (this.failures[kind] ??= []).push(failure);
  }

  /** Waits until `check` returns a value (not undefined or false). */
  waitUntil<T>(check: () => T | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
    return waitFor(() => check(), timeoutMs, what);
  }

  /** Stops the server (held `/sync` requests are cut off). */
  async close(): Promise<void> {
    for (const wake of this.waiters) wake();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private room(roomId: string): Room {
    const room = this.rooms.get(roomId);
    if (!room) throw new Error(`no room ${roomId}`);
    return room;
  }

  private append(entry: Omit<StreamEntry, 'pos'>): void {
    this.stream.push({ ...entry, pos: this.stream.length + 1 });
    for (const wake of this.waiters) wake();
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const bytes = await readBody(req);
    if (req.headers.authorization !== `Bearer ${this.accessToken}`)
      return reply(res, 401, { errcode: 'M_UNKNOWN_TOKEN', error: 'Invalid access token passed.' });
    const media = mediaRoute(req.method ?? 'GET', url.pathname);
    if (media) return this.serveMedia(media, url, req, res, bytes);
    const raw = bytes.toString('utf8');
    const route = this.route(req.method ?? 'GET', url.pathname);
    if (!route) return reply(res, 404, { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' });
    let body: Record<string, any> | undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return reply(res, 400, { errcode: 'M_NOT_JSON', error: 'Content not JSON.' });
    }
    const call: MatrixCall = {
      kind: route.kind,
      query: Object.fromEntries(url.searchParams),
      status: 200,
      ...(route.roomId && { roomId: route.roomId }),
      ...(body && { body }),
    };
    if (route.txnId) call.txnId = route.txnId;
    this.calls.push(call);
    if (this.failed(call, res, 'type' in route ? route.type : undefined)) return;
    const [status, answer] = route.kind === 'sync' ? await this.sync(call, req) : this.handle(route, call, body ?? {});
    call.status = status;
    reply(res, status, answer);
  }

  /** Answers the call with the next injected failure of its kind (of a send, its event type's); whether there was one. */
  private failed(call: MatrixCall, res: ServerResponse, eventType?: string): boolean {
    const queued = this.failures[call.kind];
    if (queued?.[0]?.eventType !== undefined && queued[0].eventType !== eventType) return false;
    const failure = queued?.shift();
    if (!failure) return false;
    call.status = failure.status;
    reply(res, failure.status, {
      errcode: failure.errcode ?? 'M_UNKNOWN',
      error: `error ${failure.status}`,
      ...(failure.retryAfterMs !== undefined && { retry_after_ms: failure.retryAfterMs }),
    });
    return true;
  }

  private serveMedia(route: ReturnType<typeof mediaRoute> & object, url: URL, req: IncomingMessage, res: ServerResponse, bytes: Buffer): void {
    const call: MatrixCall = { kind: route.kind, query: Object.fromEntries(url.searchParams), status: 200 };
    this.calls.push(call);
    if (this.failed(call, res)) return;
    const answer = this.media.answer(route, call.query, req.headers, bytes);
    call.status = answer.status;
    if ('json' in answer) return reply(res, answer.status, answer.json);
    res.writeHead(200, { 'content-type': answer.file.contentType, 'content-length': String(answer.file.data.length) });
    res.end(answer.file.data);
  }

  private route(method: string, pathname: string): { kind: MatrixCallKind; roomId?: string; type?: string; txnId?: string; target?: string } | undefined {
    const p = pathname.replace(/^\/_matrix\/client\/v3\//, '');
    if (p === pathname) return undefined;
    const parts = p.split('/').map(decodeURIComponent);
    if (method === 'GET' && p === 'sync') return { kind: 'sync' };
    if (method === 'POST' && parts[0] === 'join' && parts.length === 2) return { kind: 'join', roomId: parts[1]! };
    if (parts[0] !== 'rooms' || parts.length < 3) return undefined;
    const roomId = parts[1]!;
    if (method === 'PUT' && parts[2] === 'send' && parts.length === 5) return { kind: 'send', roomId, type: parts[3]!, txnId: parts[4]! };
    if (method === 'PUT' && parts[2] === 'typing' && parts.length === 4) return { kind: 'typing', roomId, target: parts[3]! };
    if (method === 'PUT' && parts[2] === 'redact' && parts.length === 5) return { kind: 'redact', roomId, target: parts[3]!, txnId: parts[4]! };
    if (method === 'GET' && parts[2] === 'joined_members' && parts.length === 3) return { kind: 'members', roomId };
    if (method === 'GET' && parts[2] === 'state' && parts[3] === 'm.room.power_levels' && (parts[4] ?? '') === '') return { kind: 'power-levels', roomId };
    return undefined;
  }

  private handle(route: NonNullable<ReturnType<FakeMatrix['route']>>, call: MatrixCall, body: Record<string, any>): [number, unknown] {
    const room = route.roomId === undefined ? undefined : this.rooms.get(route.roomId);
    if (!room || !route.roomId) return [404, { errcode: 'M_NOT_FOUND', error: 'Unknown room' }];
    if (route.kind === 'join') {
      if (!room.invited.has(this.userId) && !room.members.has(this.userId))
        return [403, { errcode: 'M_FORBIDDEN', error: 'You are not invited to this room.' }];
      room.invited.delete(this.userId);
      room.members.add(this.userId);
      const event: MatrixEvent = {
        type: 'm.room.member',
        event_id: newEventId(),
        sender: this.userId,
        state_key: this.userId,
        origin_server_ts: Date.now(),
        content: { membership: 'join' },
      };
      this.append({ roomId: route.roomId, event });
      return [200, { room_id: route.roomId }];
    }
    if (!room.members.has(this.userId)) return [403, { errcode: 'M_FORBIDDEN', error: 'User not in room' }];
    if (route.kind === 'members') return [200, { joined: Object.fromEntries([...room.members].map((m) => [m, {}])) }];
    if (route.kind === 'power-levels') return [200, room.powerLevels];
    if (route.kind === 'typing') {
      if (route.target !== this.userId) return [403, { errcode: 'M_FORBIDDEN', error: 'Cannot set another user typing' }];
      this.typing.push(route.roomId);
      return [200, {}];
    }
    if (route.kind === 'redact') {
      this.redacted.add(route.target!);
      return [200, { event_id: this.transaction(route.txnId!, () => newEventId()) }];
    }
    return this.send(route.roomId, route.type!, route.txnId!, body, call);
  }

  /** The event of a transaction id: the first one made for it, else a new one. */
  private transaction(txnId: string, make: () => string): string {
    const known = this.txns.get(txnId);
    if (known) return known;
    const id = make();
    this.txns.set(txnId, id);
    return id;
  }

  private send(roomId: string, type: string, txnId: string, content: Record<string, any>, call: MatrixCall): [number, unknown] {
    if (type === 'm.room.message' && (typeof content.body !== 'string' || typeof content.msgtype !== 'string'))
      return [400, { errcode: 'M_BAD_JSON', error: 'body and msgtype required' }];
    const problem = type === POLL_START ? pollProblem(content) : undefined;
    if (problem) return [400, { errcode: 'M_BAD_JSON', error: problem }];
    if (Buffer.byteLength(JSON.stringify(content)) > 60_000) return [413, { errcode: 'M_TOO_LARGE', error: 'event too large' }];
    if (this.txns.has(txnId)) {
      call.repeat = true;
      return [200, { event_id: this.txns.get(txnId) }];
    }
    const event: MatrixEvent = { type, event_id: this.transaction(txnId, newEventId), sender: this.userId, origin_server_ts: Date.now(), content };
    this.sent.push({ ...event, roomId, txnId });
    this.append({ roomId, event });
    return [200, { event_id: event.event_id }];
  }

  /** Answers a `/sync`: the entries after `since`, held up to `timeout` ms when there are none. */
  private async sync(call: MatrixCall, req: IncomingMessage): Promise<[number, unknown]> {
    const since = call.query.since === undefined ? 0 : Number(call.query.since.slice(1));
    if (!Number.isInteger(since) || since < 0 || since > this.stream.length) return [400, { errcode: 'M_INVALID_PARAM', error: 'bad since' }];
    const timeout = Math.min(Number(call.query.timeout ?? 0) || 0, 60_000);
    if (this.stream.length === since && timeout > 0) await this.hold(timeout, req);
    return [200, this.answer(since)];
  }

  private hold(timeoutMs: number, req: IncomingMessage): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
      req.socket.once('close', done);
    });
  }

  /**
   * The entries after `since`; a room the bot joined after `since` comes
   * with its history before the join too, as a homeserver sends a newly
   * joined room's recent timeline.
   */
  private answer(since: number): Record<string, unknown> {
    const join: Record<string, any> = {};
    const invite: Record<string, any> = {};
    const joinedSince = new Set(
      this.stream
        .slice(since)
        .filter((e) => e.event?.type === 'm.room.member' && e.event.sender === this.userId)
        .map((e) => e.roomId),
    );
    const entries = this.stream.filter((e) => e.pos > since || (joinedSince.has(e.roomId) && e.event !== undefined));
    for (const entry of entries) {
      const room = this.room(entry.roomId);
      if (entry.inviteFrom !== undefined) {
        if (room.invited.has(this.userId)) {
          invite[entry.roomId] = {
            invite_state: {
              events: [
                ...(entry.inviteState ?? []),
                { type: 'm.room.member', state_key: this.userId, sender: entry.inviteFrom, content: { membership: 'invite' } },
              ],
            },
          };
        }
        continue;
      }
      if (!room.members.has(this.userId) || !entry.event) continue;
      join[entry.roomId] ??= { summary: { 'm.joined_member_count': room.members.size }, timeline: { events: [], limited: false } };
      join[entry.roomId].timeline.events.push(entry.event);
    }
    return { next_batch: `s${this.stream.length}`, rooms: { join, invite, leave: {} } };
  }
}

/** Starts a fake homeserver on a random local port. */
export function startFakeMatrix(o: FakeMatrixOptions = {}): Promise<FakeMatrix> {
  return new FakeMatrix(o).listen();
}
