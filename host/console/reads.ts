/**
 * What the console reads, every read bounded: a page of the recent-activity
 * index, one status script per listed conversation, a page of a record
 * (XREVRANGE with COUNT), one run's hash and its outbox entries. Filters
 * ("stuck", a channel) look at most `FILTER_WINDOW` of the most recent
 * conversations, and say so.
 */
import { type ChannelPlugin, channelResolver } from '../../src/channel.js';
import { parseJsonOrUndefined } from '../../src/json.js';
import type { Dispatch } from '../../src/protocol/dispatch.js';
import type { RunQueue } from '../../src/protocol/run-queue.js';
import { parseBreaker } from '../../src/record/breaker.js';
import type { SeqEntry } from '../../src/record/entries.js';
import { parseEntry } from '../../src/record/read.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { conversationKeys } from '../../src/redis/keys.js';
import { recentKey } from './activity.js';

/** Most recent conversations a filtered list looks at. */
export const FILTER_WINDOW = 500;
/** Newest record entries searched for a run's attempts. */
const RUN_WINDOW = 500;
/** Record entries read to find a conversation's last error. */
const LAST_ERROR_WINDOW = 30;
/** An outbox entry not acknowledged this long after the run ended counts as stuck, in ms. */
const UNDELIVERED_AFTER_MS = 60_000;
/** Outbox hashes larger than this are not read for the stuck check (counted as unknown). */
const OUTBOX_READ_CAP = 1000;

/** What the console needs to read. */
export interface ConsoleReadDeps {
  redis: RedisClient;
  prefix: string;
  dispatch: Dispatch;
  queue: RunQueue;
  /** The host's channels: a conversation's channel is found among them, and asked for its `conversationProblems`. Default: none. */
  channels?: readonly ChannelPlugin[];
  now?: () => number;
}

/** One row of the conversations list. */
export interface ConversationRow {
  id: string;
  channel: string;
  lastActivityMs: number;
  activeRunId?: string;
  runState?: string;
  stop?: string;
  attempt: number;
  owner?: string;
  leaseUntilMs: number;
  steeringDepth: number;
  pendingDepth: number;
  policy: string;
  policyOverride?: string;
  breakerOpen: boolean;
  lastError?: string;
  /** Why it counts as stuck; empty when it does not. */
  stuck: string[];
}

/** One run's details. */
export interface RunDetail {
  /** The run hash: state, token, attempt, owner, lease_until, created_at, started_at, stop, outcome, reason, ended_at. */
  run: Record<string, string>;
  /** Its `run.started` entries (attempt, owner, fencing token). */
  attempts: SeqEntry[];
  /** Its `run.ended` entry, when in the window. */
  ended: SeqEntry[];
  /** Outbox entries of its replies: delivery key and record (`not-dispatched` / `possibly-dispatched` / `acknowledged`). */
  outbox: Array<{ key: string; record: unknown }>;
  traceId?: string;
}

/** Filters of the list. */
export interface ListFilter {
  channel?: string;
  stuck?: boolean;
  offset: number;
  limit: number;
}

const outboxStates = (values: string[]) => {
  let undelivered = 0;
  for (const v of values) {
    try {
      if ((JSON.parse(v) as { status?: string }).status !== 'acknowledged') undelivered++;
    } catch {
      undelivered++;
    }
  }
  return undelivered;
};

/** Reads the console's data. */
export class ConsoleReads {
  private readonly now: () => number;
  private readonly channels: ReadonlyMap<string, ChannelPlugin>;
  private readonly channelOfId: (conversationId: string) => string | undefined;

  constructor(private readonly d: ConsoleReadDeps) {
    this.now = d.now ?? Date.now;
    this.channels = new Map((d.channels ?? []).map((c) => [c.id, c]));
    this.channelOfId = channelResolver(this.channels.keys());
  }

  /** A conversation's channel: a started channel's id, else (a channel no longer configured) the id's first segment. */
  private channelOf(conversationId: string): string {
    return this.channelOfId(conversationId) ?? conversationId.split(':', 1)[0]!;
  }

  /** A page of conversations, most recent first; `scanned` says how many index entries a filter looked at. */
  async list(f: ListFilter): Promise<{ rows: ConversationRow[]; scanned: number; filtered: boolean; total: number }> {
    const key = recentKey(this.d.prefix);
    const filtered = f.stuck === true || f.channel !== undefined;
    if (!filtered) {
      const [total, ids] = await Promise.all([this.d.redis.zcard(key), this.d.redis.zrevrange(key, f.offset, f.offset + f.limit - 1, 'WITHSCORES')]);
      return { rows: await Promise.all(pairs(ids).map(([id, score]) => this.row(id, Number(score)))), scanned: ids.length / 2, filtered, total };
    }
    const [total, newest] = await Promise.all([this.d.redis.zcard(key), this.d.redis.zrevrange(key, 0, FILTER_WINDOW - 1, 'WITHSCORES')]);
    const window = pairs(newest).filter(([id]) => f.channel === undefined || this.channelOf(id) === f.channel);
    const rows = await Promise.all(window.map(([id, score]) => this.row(id, Number(score))));
    const matching = rows.filter((r) => !f.stuck || r.stuck.length > 0);
    return { rows: matching.slice(f.offset, f.offset + f.limit), scanned: window.length, filtered, total };
  }

  /** One conversation's row. */
  async row(id: string, lastActivityMs: number): Promise<ConversationRow> {
    const k = conversationKeys(this.d.prefix, id);
    const [s, tail, outboxLen] = await Promise.all([
      this.d.dispatch.status(id),
      this.d.redis.xrevrange(k.log, '+', '-', 'COUNT', LAST_ERROR_WINDOW),
      this.d.redis.hlen(k.outbox),
    ]);
    const lastError = lastErrorOf(tail as Array<[string, string[]]>);
    const now = this.now();
    const stuck: string[] = [];
    if (s.runState === 'running' && s.leaseUntilMs < now) stuck.push('running past its lease');
    if (s.activeRunId && s.runState === 'queued' && !(await this.d.queue.queue.getJob(s.activeRunId))) stuck.push('queued without a job');
    if (!s.activeRunId && outboxLen > 0 && outboxLen <= OUTBOX_READ_CAP && lastActivityMs < now - UNDELIVERED_AFTER_MS) {
      const n = outboxStates(await this.d.redis.hvals(k.outbox));
      if (n > 0) stuck.push(`${n} undelivered outbox ${n === 1 ? 'entry' : 'entries'}`);
    }
    const channel = this.channelOf(id);
    const problems = this.channels.get(channel)?.conversationProblems;
    if (problems) stuck.push(...(await problems(id).catch(() => ['channel check failed'])));
    return {
      id,
      channel,
      lastActivityMs,
      ...(s.activeRunId && { activeRunId: s.activeRunId }),
      ...(s.runState && { runState: s.runState }),
      ...(s.stop && { stop: s.stop }),
      attempt: s.attempt,
      ...(s.owner && { owner: s.owner }),
      leaseUntilMs: s.leaseUntilMs,
      steeringDepth: s.steeringDepth,
      pendingDepth: s.pendingDepth,
      policy: s.policyOverride ?? s.effectivePolicy ?? this.d.dispatch.options.defaultPolicy,
      ...(s.policyOverride && { policyOverride: s.policyOverride }),
      breakerOpen: parseBreaker(parseJsonOrUndefined(s.compactionBreaker)).open,
      ...(lastError && { lastError }),
      stuck,
    };
  }

  /** A page of the record, newest first: entries before seq `before` (default: the end), at most `count`. */
  async entries(id: string, opts: { before?: number; after?: number; count: number }): Promise<SeqEntry[]> {
    const log = conversationKeys(this.d.prefix, id).log;
    if (opts.after !== undefined) {
      const rows = (await this.d.redis.xrange(log, `(${opts.after}-0`, '+', 'COUNT', opts.count)) as Array<[string, string[]]>;
      return rows.flatMap(toEntry);
    }
    const end = opts.before === undefined ? '+' : `(${opts.before}-0`;
    const rows = (await this.d.redis.xrevrange(log, end, '-', 'COUNT', opts.count)) as Array<[string, string[]]>;
    return rows.flatMap(toEntry).reverse();
  }

  /**
   * One run: its hash (state, fencing token, owner, lease), its attempts
   * (`run.started` entries) and end, its outbox entries (delivery keys start
   * with the run id) and its trace id (the `trace` of the first message it
   * answered). Attempts are looked for in the newest `RUN_WINDOW` record entries.
   */
  async run(id: string, runId: string): Promise<RunDetail | undefined> {
    const k = conversationKeys(this.d.prefix, id);
    const run = await this.d.redis.hgetall(k.run(runId));
    if (Object.keys(run).length === 0) return undefined;
    const outbox: Array<{ key: string; record: unknown }> = [];
    // HSCAN with MATCH reads the outbox in bounded steps.
    let cursor = '0';
    let steps = 0;
    do {
      const [next, flat] = await this.d.redis.hscan(k.outbox, cursor, 'MATCH', `${runId}:*`, 'COUNT', 200);
      cursor = next;
      for (const [key, value] of pairs(flat)) outbox.push({ key, record: parseJsonOrUndefined(value) ?? value });
    } while (cursor !== '0' && ++steps < 50);
    const tail = (await this.entries(id, { count: RUN_WINDOW })).filter((e) => 'run' in e && e.run === runId);
    const attempts = tail.filter((e) => e.kind === 'run.started');
    const started = attempts.find((e) => e.kind === 'run.started' && (e.inputs?.length ?? 0) > 0);
    const firstInput = started?.kind === 'run.started' ? started.inputs?.[0] : undefined;
    let traceId: string | undefined;
    if (firstInput !== undefined) {
      const rows = (await this.d.redis.xrange(k.log, `${firstInput}-0`, `${firstInput}-0`)) as Array<[string, string[]]>;
      const entry = rows[0] ? toEntry(rows[0])[0] : undefined;
      if (entry?.kind === 'message.received' && entry.trace) traceId = entry.trace.split('-')[1];
    }
    return { run, attempts, ended: tail.filter((e) => e.kind === 'run.ended'), outbox, ...(traceId && { traceId }) };
  }

  /** BullMQ job counts per state. */
  async queueCounts(): Promise<Record<string, number>> {
    return this.d.queue.queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed');
  }
}

/** The entry of one stream row: none when a newer release wrote it (the console shows what this build can read). */
function toEntry([id, fields]: [string, string[]]): SeqEntry[] {
  const seq = Number(id.slice(0, id.indexOf('-')));
  const entry = parseEntry(seq, fields[fields.indexOf('e') + 1] ?? '');
  return entry ? [entry] : [];
}

/** The reason of the newest `run.ended` among `rows` (newest first), when that run failed. */
function lastErrorOf(rows: Array<[string, string[]]>): string | undefined {
  for (const [, fields] of rows) {
    const raw = fields[fields.indexOf('e') + 1] ?? '';
    if (!raw.includes('"run.ended"')) continue;
    const e = parseJsonOrUndefined(raw) as { outcome?: string; reason?: string } | undefined;
    return e?.outcome === 'failed' ? (e.reason ?? 'failed') : undefined;
  }
  return undefined;
}

function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}
