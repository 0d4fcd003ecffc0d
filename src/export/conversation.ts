/**
 * What one conversation's export reads: its record (a page a round trip, up
 * to the seq it had when the export began), a summary of its runs, its state,
 * budget counters, schedules, tool approvals and artifacts. Each part is read
 * when the writer reaches it; the runs summary and who wrote are gathered
 * while the record goes by, so the record is read once and never held.
 */
import { RecordError } from '../errors.js';
import { parseJsonOrUndefined } from '../json.js';
import { conversationUsageKey } from '../people/budget.js';
import type { RecordEntry, SeqEntry } from '../record/entries.js';
import { parseEntry } from '../record/read.js';
import type { RedisClient } from '../redis/connection.js';
import { CONVERSATION_KEY_SUFFIXES, type ConversationKeys, conversationKeys, PURGE_ONLY_KEY_SUFFIXES } from '../redis/keys.js';
import { arrayOfPages, type Member, type Streamed } from './json-stream.js';

/** What the readers share. */
export interface ExportReader {
  redis: RedisClient;
  prefix: string;
  /** Record entries read per round trip (and written per piece). */
  pageSize: number;
}

/** What is stored for a conversation. */
export type Stored = 'stored' | 'purged' | 'not_found';

/** Whether anything is stored for the conversation, or a purge left only its tombstone. */
export async function storedState(redis: RedisClient, k: ConversationKeys): Promise<Stored> {
  const keys = [...CONVERSATION_KEY_SUFFIXES, ...PURGE_ONLY_KEY_SUFFIXES].map((s) => `${k.base}${s}`);
  // One slot (the conversation's hash tag): one multi-key EXISTS.
  if ((await redis.exists(...keys)) > 0) return 'stored';
  return (await redis.exists(k.tombstone)) > 0 ? 'purged' : 'not_found';
}

/**
 * The user id of the person who wrote `e`, when a person did: undefined for
 * the bot, an event, a schedule's fire, a heartbeat, or the operator (the
 * console's commands carry update keys `console:…`).
 */
export function humanSender(e: RecordEntry): string | undefined {
  switch (e.kind) {
    case 'message.received':
      return e.origin ? undefined : e.sender.id;
    case 'message.refused':
      return e.message.origin ? undefined : e.message.sender.id;
    case 'command.received':
      return e.updateKey.startsWith('console:') ? undefined : e.sender.id;
    case 'conversation.reset':
      return e.sender && !e.updateKey?.startsWith('console:') ? e.sender.id : undefined;
    default:
      return undefined;
  }
}

const inGroup = (e: RecordEntry) => (e.kind === 'message.received' && e.group === true) || (e.kind === 'message.refused' && e.message.group === true);

/** Who wrote in a conversation, as its record says, in constant memory. */
export class Writers {
  /** A message was sent in a group chat. */
  group = false;
  /** The first person who wrote (a user id). */
  first: string | undefined;
  /** A second person wrote. */
  several = false;
  /** Someone not in `own` wrote. */
  strangers = false;

  /** `own`: the user ids of one person (the export of a person); without it nobody is a stranger. */
  constructor(private readonly own?: ReadonlySet<string>) {}

  /** `e` undefined: an entry of a newer release, whose writer this build cannot tell: it may be a stranger's. */
  seen(e: RecordEntry | undefined): void {
    if (e === undefined) {
      if (this.own) this.strangers = true;
      return;
    }
    if (inGroup(e)) this.group = true;
    const id = humanSender(e);
    if (id === undefined) return;
    if (this.first === undefined) this.first = id;
    else if (id !== this.first) this.several = true;
    if (this.own && !this.own.has(id)) this.strangers = true;
  }
}

/** One run as the export summarises it. */
export interface RunSummary {
  run: string;
  /** How it came about (`ingest`, `successor`, `compact`), while its run hash lives. */
  cause?: string;
  /** `queued` / `running` / `ended`, while its run hash lives. */
  state?: string;
  startedAt?: number;
  endedAt?: number;
  attempts: number;
  outcome?: string;
  reason?: string;
  /** Model steps recorded, and the tokens their providers reported. */
  steps: number;
  inputTokens: number;
  outputTokens: number;
}

/** The runs summary, gathered from the record as it goes by (one small object per run, not per entry). */
class RunsSummary {
  private readonly runs = new Map<string, RunSummary>();

  seen(e: SeqEntry): void {
    if (e.kind === 'run.started') {
      const s = this.of(e.run);
      s.attempts = Math.max(s.attempts, e.attempt);
      s.startedAt ??= e.at;
    } else if (e.kind === 'run.ended') {
      const s = this.of(e.run);
      s.outcome = e.outcome;
      if (e.reason !== undefined) s.reason = e.reason;
      s.endedAt = e.at;
    } else if (e.kind === 'model.step') {
      const s = this.of(e.run);
      s.steps++;
      s.inputTokens += e.usage?.inputTokens ?? 0;
      s.outputTokens += e.usage?.outputTokens ?? 0;
    }
  }

  /**
   * The summaries, in the order the record first names them, completed from
   * the run hashes that still live: runs not ended (their state) and runs
   * the record no longer names (trimmed by retention, or never started).
   */
  async list(redis: RedisClient, k: ConversationKeys): Promise<RunSummary[]> {
    const indexed = await redis.zrange(k.runs, '0', '-1');
    const ask = [...new Set([...[...this.runs.values()].filter((s) => s.outcome === undefined).map((s) => s.run), ...indexed])];
    const fields = ['state', 'cause', 'attempt', 'started_at', 'ended_at', 'outcome', 'reason'] as const;
    const pipeline = redis.pipeline();
    for (const id of ask) pipeline.hmget(k.run(id), ...fields);
    const replies = ask.length > 0 ? ((await pipeline.exec()) ?? []) : [];
    ask.forEach((id, i) => {
      const [err, values] = replies[i] ?? [];
      if (err || !Array.isArray(values) || values[0] === null) return;
      const [state, cause, attempt, startedAt, endedAt, outcome, reason] = values as Array<string | null>;
      const s = this.of(id);
      if (state) s.state = state;
      if (cause) s.cause = cause;
      s.attempts = Math.max(s.attempts, Number(attempt ?? 0));
      if (startedAt && s.startedAt === undefined) s.startedAt = Number(startedAt);
      if (endedAt && s.endedAt === undefined) s.endedAt = Number(endedAt);
      if (outcome && s.outcome === undefined) s.outcome = outcome;
      if (reason && s.reason === undefined) s.reason = reason;
    });
    return [...this.runs.values()];
  }

  private of(run: string): RunSummary {
    let s = this.runs.get(run);
    if (!s) {
      s = { run, attempts: 0, steps: 0, inputTokens: 0, outputTokens: 0 };
      this.runs.set(run, s);
    }
    return s;
  }
}

/** A budget counters hash by window: tokens per day and month, runs per hour, refusal notices per window. */
export function usageView(raw: Record<string, string>): Record<'tokens' | 'runs' | 'notices', Record<string, number>> {
  const out = { tokens: {} as Record<string, number>, runs: {} as Record<string, number>, notices: {} as Record<string, number> };
  const byPrefix: Record<string, Record<string, number>> = { t: out.tokens, r: out.runs, n: out.notices };
  for (const [field, value] of Object.entries(raw)) {
    const into = byPrefix[field.slice(0, 1)];
    if (into && field[1] === ':') into[field.slice(2)] = Number(value);
  }
  return out;
}

/** A hash of JSON values as `{ id, …value }` items, by `order` (a value that is not a JSON object is kept as `value`). */
function jsonItems(raw: Record<string, string>, order: (a: Record<string, unknown>, b: Record<string, unknown>) => number): Array<Record<string, unknown>> {
  return Object.entries(raw)
    .map(([id, json]) => {
      const v = parseJsonOrUndefined(json);
      return v !== null && typeof v === 'object' && !Array.isArray(v) ? { id, ...(v as Record<string, unknown>) } : { id, value: v ?? json };
    })
    .sort(order);
}

const byCreation = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  Number(a.createdAt ?? 0) - Number(b.createdAt ?? 0) || String(a.id).localeCompare(String(b.id));

/**
 * One conversation's parts. `own` (the export of a person): the person's
 * user ids on the conversation's channel; entries of other people then count
 * as strangers' (`writers.strangers`).
 */
export class ConversationParts {
  readonly keys: ConversationKeys;
  readonly writers: Writers;
  private readonly runs = new RunsSummary();

  private constructor(
    private readonly r: ExportReader,
    readonly id: string,
    /** The record's last seq when the export began: entries appended meanwhile are left for the next export. */
    private readonly lastSeq: number,
    own: ReadonlySet<string> | undefined,
    /** Sees each entry read, once per export (with the runs summary): the features' `ConversationPart.seen`. */
    private readonly seen: (entry: SeqEntry) => void,
  ) {
    this.keys = conversationKeys(r.prefix, id);
    this.writers = new Writers(own);
  }

  /**
   * The parts of conversation `id` as it stands now; `seen` sees each entry
   * as the record is read, once per export. Throws InvalidInputError for a bad id.
   */
  static async open(r: ExportReader, id: string, own?: ReadonlySet<string>, seen: (entry: SeqEntry) => void = () => undefined): Promise<ConversationParts> {
    const log = conversationKeys(r.prefix, id).log;
    const [last] = (await r.redis.xrevrange(log, '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    return new ConversationParts(r, id, last ? seqOf(last[0]) : 0, own, seen);
  }

  /**
   * Reads the record (up to the same seq as `record` will) without writing
   * it: who wrote (`writers`) is known once it ends. Yields after each page,
   * so a writer that went away stops the read there.
   */
  async *survey(): AsyncGenerator<void> {
    for await (const _page of this.pages(() => false, false, true)) yield;
  }

  /** The record, every entry (`keep` chooses which are written; every one is read and counted). */
  record(keep: Keep = () => true): Streamed {
    return arrayOfPages(this.pages(keep));
  }

  /** The members of the conversation as a whole, after its record: runs, state, counters, schedules, approvals, artifacts. */
  members(): Member[] {
    const { redis } = this.r;
    return [
      ['runs', () => this.runs.list(redis, this.keys)],
      ['state', async () => Object.fromEntries(Object.entries(await redis.hgetall(this.keys.state)).map(([k, v]) => [k, parseJsonOrUndefined(v) ?? v]))],
      ['usage', async () => usageView(await redis.hgetall(conversationUsageKey(this.r.prefix, this.id)))],
      ['schedules', async () => jsonItems(await redis.hgetall(this.keys.schedules), byCreation)],
      ['approvals', async () => jsonItems(await redis.hgetall(this.keys.approvals), byCreation)],
      ['artifacts', () => arrayOfPages(this.artifactPages())],
    ];
  }

  /**
   * Pages of the record up to `lastSeq`, oldest first, one round trip each.
   * Every entry is validated (fail-closed: a broken one throws RecordError
   * and the export stops rather than leave it out) and written as stored,
   * with its seq, when `keep` says so. `summarise`: count runs and show the entry to `seen` (once per export).
   * `empty`: yield a page that keeps nothing too (a survey's step).
   */
  private async *pages(keep: Keep, summarise = true, empty = false): AsyncGenerator<unknown[]> {
    if (this.lastSeq === 0) return;
    let from = '-';
    for (;;) {
      const rows = (await this.r.redis.xrange(this.keys.log, from, `${this.lastSeq}-0`, 'COUNT', this.r.pageSize)) as Array<[string, string[]]>;
      const page: unknown[] = [];
      for (const [id, fields] of rows) {
        const seq = seqOf(id);
        const body = fields[fields.indexOf('e') + 1];
        if (fields.indexOf('e') < 0 || body === undefined) throw new RecordError(`record entry ${seq} has no body`);
        // Undefined: a kind or version of a newer release. It is stored, so it is written (as stored) where everything is.
        const entry = parseEntry(seq, body);
        if (entry && summarise) {
          this.runs.seen(entry);
          this.seen(entry);
        }
        this.writers.seen(entry);
        if (keep(entry)) page.push({ seq, ...(JSON.parse(body) as object) });
      }
      if (page.length > 0 || empty) yield page;
      if (rows.length < this.r.pageSize) return;
      from = `(${rows[rows.length - 1]![0]}`;
    }
  }

  /** The artifacts (large tool results), a HSCAN step at a time: one may be large. */
  private async *artifactPages(): AsyncGenerator<Array<{ id: string; text: string }>> {
    let cursor = '0';
    do {
      const [next, flat] = await this.r.redis.hscan(this.keys.artifacts, cursor, 'COUNT', 20);
      cursor = next;
      const page: Array<{ id: string; text: string }> = [];
      for (let i = 0; i + 1 < flat.length; i += 2) page.push({ id: flat[i]!, text: flat[i + 1]! });
      yield page;
    } while (cursor !== '0');
  }
}

const seqOf = (streamId: string) => Number(streamId.slice(0, streamId.indexOf('-')));

/** Which entries are written: `entry` is undefined for one of a newer release (this build cannot read it). */
type Keep = (entry: SeqEntry | undefined) => boolean;
