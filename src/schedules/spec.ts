/**
 * What a schedule is and how its times are read: a one-shot (`at` an ISO
 * time, or `in` a duration) or a recurring one (`cron` with a time zone, or
 * `every` a duration). Parsing is pure and strict: bad input throws
 * InvalidInputError naming the field, and nothing is written.
 */
import { CronExpressionParser } from 'cron-parser';
import { InvalidInputError } from '../errors.js';

/** When a schedule fires. */
export type ScheduleWhen =
  /** Once, at `at` (epoch ms). */
  | { kind: 'once'; at: number }
  /** On a cron line (5 fields, or 6 with seconds first) in an IANA time zone. */
  | { kind: 'cron'; cron: string; tz: string }
  /** Every `everyMs` milliseconds, the first one interval after creation. */
  | { kind: 'every'; everyMs: number };

/** What a fire missed during downtime does: `skip` it, or `run-once` (several missed ticks still make one fire). */
export type MissedFires = 'skip' | 'run-once';

/** The input a fire becomes: a `schedule` (a reminder, a report) or a `heartbeat` (may end silently; skipped while the conversation is busy). */
export type ScheduleOrigin = 'schedule' | 'heartbeat';

/** A stored schedule. */
export interface Schedule {
  /** Unique across conversations: `s` and 12 base-36 characters. */
  id: string;
  conversationId: string;
  when: ScheduleWhen;
  /** What the agent is asked at each fire, e.g. "remind the user to call Anna". */
  prompt: string;
  missed: MissedFires;
  origin: ScheduleOrigin;
  /** Epoch ms. */
  createdAt: number;
  /** Who created it: `agent`, `operator`, `config`. */
  createdBy: string;
  /**
   * The identity its fires are charged to (budgets, memory, purge): the person
   * whose run or command made it, or a heartbeat's configured `owner`. Absent:
   * the operator (only the conversation's budget applies, no person's memory).
   */
  owner?: string;
  /**
   * Made in a group chat: its fires are group inputs, so their runs get no
   * personal memory unless the profile opts in (docs/people.md#in-groups).
   */
  group?: true;
}

/** A schedule as a tool, a command or the console asks for it. Exactly one of `at`, `in`, `cron`, `every`. */
export interface ScheduleRequest {
  /** ISO 8601 time with an offset or `Z`, e.g. `2026-12-03T09:00:00+01:00`. */
  at?: string | undefined;
  /** A duration from now: `90s`, `10m`, `1h30m`, `2d`, or ISO 8601 `PT1H30M`. */
  in?: string | undefined;
  /** A cron line, e.g. `0 8 * * 1-5`. */
  cron?: string | undefined;
  /** IANA time zone of `cron`. Default `UTC`. */
  tz?: string | undefined;
  /** A repeat interval, same forms as `in`. */
  every?: string | undefined;
  prompt: string;
  /** Default `skip` for recurring schedules, `run-once` for one-shots (a missed reminder is still wanted). */
  missed?: MissedFires | undefined;
}

/** Limits on a conversation's schedules. */
export interface ScheduleLimits {
  /** Most schedules per conversation (heartbeats included). Default 20. */
  maxPerConversation: number;
  /**
   * Shortest interval between two fires of a recurring schedule, in seconds,
   * and the soonest a one-shot made by an unattended run may be. Default 60.
   */
  minIntervalSeconds: number;
  /** Furthest a one-shot may be, in days. Default 366. */
  maxAheadDays: number;
  /** Longest prompt, in characters. Default 4000. */
  maxPromptChars: number;
}

/** Default limits. */
export const DEFAULT_SCHEDULE_LIMITS: ScheduleLimits = { maxPerConversation: 20, minIntervalSeconds: 60, maxAheadDays: 366, maxPromptChars: 4000 };

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const SHORT_DURATION_RE = /^(?:\d+(?:\.\d+)?\s*[smhdw]\s*)+$/i;
const SHORT_PART_RE = /(\d+(?:\.\d+)?)\s*([smhdw])/gi;
const ISO_DURATION_RE = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/i;
// An ISO time must say its offset: "09:00" alone is a different instant on every server.
const ISO_TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:?\d{2})$/i;

/** Parses `90s`, `10m`, `1h30m`, `2d`, `1w` or ISO 8601 `PT1H30M` into ms. Throws InvalidInputError. */
export function parseDuration(text: string, field = 'duration'): number {
  const t = text.trim();
  let ms = Number.NaN;
  if (SHORT_DURATION_RE.test(t)) {
    ms = 0;
    for (const m of t.matchAll(SHORT_PART_RE)) ms += Number(m[1]) * UNIT_MS[m[2]!.toLowerCase()]!;
  } else {
    const m = ISO_DURATION_RE.exec(t);
    if (m && t.length > 1 && !t.toUpperCase().endsWith('T')) {
      const [w, d, h, min, s] = m.slice(1).map((v) => Number(v ?? 0)) as [number, number, number, number, number];
      ms = w * UNIT_MS.w! + d * UNIT_MS.d! + h * UNIT_MS.h! + min * UNIT_MS.m! + s * 1000;
    }
  }
  if (!Number.isFinite(ms) || ms <= 0) throw new InvalidInputError(`${field}: expected a duration like 90s, 10m, 1h30m, 2d or PT1H30M, got "${text}"`);
  return Math.round(ms);
}

/** Throws InvalidInputError unless `tz` is an IANA time zone this runtime knows. */
export function assertTimeZone(tz: string): void {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
  } catch {
    throw new InvalidInputError(`tz: unknown time zone "${tz}" (expected an IANA name such as Europe/Paris)`);
  }
}

/** The next `n` fire times (epoch ms) of a cron line after `from`. Throws InvalidInputError on a bad line. */
export function cronNext(cron: string, tz: string, from: number, n: number): number[] {
  let it: ReturnType<typeof CronExpressionParser.parse>;
  try {
    it = CronExpressionParser.parse(cron, { tz, currentDate: new Date(from), strict: false });
  } catch (err) {
    throw new InvalidInputError(`cron: "${cron}" is not a cron line (${err instanceof Error ? err.message : String(err)})`);
  }
  const out: number[] = [];
  for (let i = 0; i < n && it.hasNext(); i++) out.push(it.next().getTime());
  return out;
}

/** The next `n` fire times (epoch ms) of `when` after `from`; `every` counts from `anchor` (its creation), as BullMQ does. */
export function nextFires(when: ScheduleWhen, from: number, n: number, anchor = from): number[] {
  switch (when.kind) {
    case 'once':
      return when.at > from ? [when.at] : [];
    case 'cron':
      return cronNext(when.cron, when.tz, from, n);
    case 'every': {
      const first = anchor + Math.max(1, Math.ceil((from + 1 - anchor) / when.everyMs)) * when.everyMs;
      return Array.from({ length: n }, (_, i) => first + i * when.everyMs);
    }
  }
}

/** How a request is read besides the limits. */
export interface ParseOptions {
  /**
   * Made by a run no person's message started (a fire, a heartbeat, an
   * event): a one-shot must be at least `minIntervalSeconds` ahead, so
   * scheduled runs that make the next one-shot cannot loop faster than a
   * recurring schedule may fire.
   */
  unattended?: boolean | undefined;
}

/** Exactly one of the request's time fields, parsed and checked against the limits. */
function parseWhen(r: ScheduleRequest, limits: ScheduleLimits, now: number, opts: ParseOptions): ScheduleWhen {
  const given = (['at', 'in', 'cron', 'every'] as const).filter((f) => r[f] !== undefined && r[f] !== '');
  if (given.length !== 1) throw new InvalidInputError(`give exactly one of at, in, cron, every (got ${given.length ? given.join(', ') : 'none'})`);
  if (r.tz !== undefined && given[0] !== 'cron') throw new InvalidInputError('tz: only a cron schedule takes a time zone (an ISO time carries its offset)');
  const minMs = limits.minIntervalSeconds * 1000;
  switch (given[0]) {
    case 'at':
    case 'in':
      return parseOnce(r, given[0], limits, now, opts);
    case 'every': {
      const everyMs = parseDuration(r.every!, 'every');
      if (everyMs < minMs)
        throw new InvalidInputError(`every: ${everyMs / 1000} s is shorter than the shortest interval allowed, ${limits.minIntervalSeconds} s`);
      return { kind: 'every', everyMs };
    }
    default: {
      const tz = r.tz ?? 'UTC';
      assertTimeZone(tz);
      const cron = r.cron!.trim().replace(/\s+/g, ' ');
      const times = cronNext(cron, tz, now, 20);
      if (times.length === 0) throw new InvalidInputError(`cron: "${cron}" never fires`);
      for (let i = 1; i < times.length; i++) {
        const gap = times[i]! - times[i - 1]!;
        if (gap < minMs)
          throw new InvalidInputError(`cron: "${cron}" fires ${gap / 1000} s apart; the shortest interval allowed is ${limits.minIntervalSeconds} s`);
      }
      return { kind: 'cron', cron, tz };
    }
  }
}

/** A one-shot's time (`at` or `in`), checked against the limits. */
function parseOnce(r: ScheduleRequest, field: 'at' | 'in', limits: ScheduleLimits, now: number, opts: ParseOptions): ScheduleWhen {
  let at: number;
  if (field === 'in') at = now + parseDuration(r.in!, 'in');
  else {
    if (!ISO_TIME_RE.test(r.at!.trim())) throw new InvalidInputError(`at: expected an ISO time with an offset, e.g. 2026-12-03T09:00:00+01:00, got "${r.at}"`);
    at = Date.parse(r.at!.trim());
    if (!Number.isFinite(at)) throw new InvalidInputError(`at: "${r.at}" is not a valid time`);
    if (at <= now) throw new InvalidInputError(`at: ${new Date(at).toISOString()} is in the past (now is ${new Date(now).toISOString()})`);
  }
  if (at - now > limits.maxAheadDays * 86_400_000) throw new InvalidInputError(`${field}: more than ${limits.maxAheadDays} days ahead`);
  if (opts.unattended && at - now < limits.minIntervalSeconds * 1000)
    throw new InvalidInputError(
      `${field}: ${formatDuration(at - now)} ahead is too soon: a run no person started (a scheduled task, a heartbeat, an event) may set a one-shot no sooner than ${formatDuration(limits.minIntervalSeconds * 1000)} ahead`,
    );
  return { kind: 'once', at };
}

/**
 * Validates a request into the parts of a schedule (everything but id,
 * conversation, origin and creator). Throws InvalidInputError naming the field.
 */
export function parseScheduleRequest(
  r: ScheduleRequest,
  limits: ScheduleLimits,
  now: number,
  opts: ParseOptions = {},
): Pick<Schedule, 'when' | 'prompt' | 'missed'> {
  const prompt = typeof r.prompt === 'string' ? r.prompt.trim() : '';
  if (prompt.length === 0) throw new InvalidInputError('prompt: empty (say what should happen at the fire)');
  if (prompt.length > limits.maxPromptChars) throw new InvalidInputError(`prompt: longer than ${limits.maxPromptChars} characters`);
  if (r.missed !== undefined && r.missed !== 'skip' && r.missed !== 'run-once') throw new InvalidInputError('missed: expected skip or run-once');
  const when = parseWhen(r, limits, now, opts);
  return { when, prompt, missed: r.missed ?? (when.kind === 'once' ? 'run-once' : 'skip') };
}

/** One line describing when a schedule fires, e.g. `every 30 min`, `cron 0 8 * * 1-5 (Europe/Paris)`, `once at 2026-…Z`. */
export function describeWhen(when: ScheduleWhen): string {
  switch (when.kind) {
    case 'once':
      return `once at ${new Date(when.at).toISOString()}`;
    case 'cron':
      return `cron ${when.cron} (${when.tz})`;
    case 'every':
      return `every ${formatDuration(when.everyMs)}`;
  }
}

/** `90 s`, `30 min`, `2 h`, `1 d 2 h`: a short human duration. */
export function formatDuration(ms: number): string {
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  for (const [unit, s] of [
    ['d', 86_400],
    ['h', 3600],
    ['min', 60],
    ['s', 1],
  ] as const) {
    const n = Math.floor(rest / s);
    if (n > 0) parts.push(`${n} ${unit}`);
    rest -= n * s;
  }
  return parts.join(' ') || '0 s';
}
