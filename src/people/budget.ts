/**
 * Spending budgets: tokens (input + output, as providers report them) per
 * day and per month, and runs per hour, for each identity (a person, across
 * their linked accounts) and each conversation. Fixed UTC windows: a day
 * budget resets at 00:00 UTC, a month budget on the 1st, an hour budget on
 * the hour.
 *
 * Counters live in one hash per subject (`<p>:{i:<identity>}:usage`,
 * `<p>:{c:<conversation>}:usage`) with a TTL past the month's end: a Cluster
 * keeps each subject's counters in one slot, and purging a person deletes one
 * key. Purging a conversation leaves its counters (they hold no one's
 * words): else `/purge` would reset its budget. A check is one script per
 * subject (`usage-admit-1.lua`: compare and, in the same step, count the
 * starting run or the refusal's notice), so runs starting at once cannot
 * both take the hour's last run; charging tokens is one script per subject
 * (`usage-add-1.lua`). Token budgets are soft by up to
 * one step: a run is checked before it starts and before each model step, and
 * the step that crosses a limit is still answered. Pictures are not soft: one
 * is admitted and counted by the same script before it is paid for.
 */

import { assertConversationId, conversationKeys } from '../redis/keys.js';
import type { RedisClient } from '../scripts/index.js';
import { runScript } from '../scripts/index.js';
import { metrics } from '../telemetry/metrics.js';
import { assertIdentityId } from './identity.js';

/** Limits of one subject; an unset limit is no limit. */
export interface BudgetLimits {
  /** Most tokens (input + output) per UTC day. */
  tokensPerDay?: number | undefined;
  /** Most tokens (input + output) per UTC month. */
  tokensPerMonth?: number | undefined;
  /** Most runs started per hour (on the hour, UTC). */
  runsPerHour?: number | undefined;
  /** Most pictures made per UTC day (`generate_image`). */
  imagesPerDay?: number | undefined;
}

/** The `budgets` settings: limits per identity and per conversation. */
export interface BudgetSettings {
  /** Per person (their identity: linked accounts share it). Default: none. */
  identity?: BudgetLimits | undefined;
  /** Per conversation, everyone in it together. Default: none. */
  conversation?: BudgetLimits | undefined;
}

/** Whose counter: a person or a conversation. */
export type BudgetScope = 'identity' | 'conversation';
/** Which limit. */
export type BudgetLimit = keyof BudgetLimits;

/** Who a run spends for. */
export interface BudgetSubjects {
  /** The identity of the person the run answers; undefined when unknown (no identity budget applies). */
  identity?: string | undefined;
  conversationId: string;
}

/** How a run's budgets are checked. */
export interface BudgetCheckOptions {
  /**
   * Nobody is told of a refusal (a subagent's run, which has no chat): it
   * counts no notice, so the person still hears of the spent budget from
   * the next refusal in their conversation. Default false.
   */
  quiet?: boolean | undefined;
}

/** A spent budget. */
export interface BudgetRefusal {
  scope: BudgetScope;
  limit: BudgetLimit;
  /** When the limit's window ends, ms since the epoch. */
  resetsAt: number;
  /** True the first time this window's refusal is reported for the subject: the person is told once per window. */
  firstNotice: boolean;
}

/** Usage of one subject in the current windows. */
export interface BudgetUsage {
  tokensToday: number;
  tokensThisMonth: number;
  runsThisHour: number;
}

/** The current UTC windows at `now` (ms) and when each ends. */
export interface BudgetWindows {
  day: string;
  month: string;
  hour: string;
  dayEnds: number;
  monthEnds: number;
  hourEnds: number;
}

/** The usage hash of an identity. */
export function identityUsageKey(prefix: string, identity: string): string {
  assertIdentityId(identity);
  return `${prefix}:{i:${identity}}:usage`;
}

/** The usage hash of a conversation. */
export function conversationUsageKey(prefix: string, conversationId: string): string {
  return `${conversationKeys(prefix, conversationId).base}usage`;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** The UTC windows at `now`. */
export function budgetWindows(now: number): BudgetWindows {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const day = `${y}-${pad(m + 1)}-${pad(d.getUTCDate())}`;
  return {
    day,
    month: `${y}-${pad(m + 1)}`,
    hour: `${day}T${pad(d.getUTCHours())}`,
    dayEnds: Date.UTC(y, m, d.getUTCDate() + 1),
    monthEnds: Date.UTC(y, m + 1, 1),
    hourEnds: Date.UTC(y, m, d.getUTCDate(), d.getUTCHours() + 1),
  };
}

/** What `Budgets` needs. */
export interface BudgetsOptions {
  client: RedisClient;
  prefix: string;
  settings: BudgetSettings;
  /** The clock, ms since the epoch. Default `Date.now`. */
  now?: () => number;
}

const hasLimits = (l: BudgetLimits | undefined): l is BudgetLimits =>
  l !== undefined && (l.tokensPerDay !== undefined || l.tokensPerMonth !== undefined || l.runsPerHour !== undefined || l.imagesPerDay !== undefined);

/** One subject a run spends for, with its limits. */
interface Target {
  scope: BudgetScope;
  key: string;
  limits: BudgetLimits;
}

/** Checks and counts spending. Writes only counters; never throws on a spent budget (it returns the refusal). */
export class Budgets {
  private readonly now: () => number;

  constructor(private readonly o: BudgetsOptions) {
    this.now = o.now ?? Date.now;
  }

  /** True when any limit is set. */
  get enabled(): boolean {
    return hasLimits(this.o.settings.identity) || hasLimits(this.o.settings.conversation);
  }

  /**
   * Before a run starts: a refusal when a token budget is spent or the hour's
   * runs are used up; otherwise counts the run and returns undefined.
   *
   * Each subject is checked and counted atomically by its own script (the
   * identity's and the conversation's hashes are in different Cluster slots,
   * so one script cannot hold both). The identity goes first and the
   * conversation only when the identity admitted: a run the conversation then
   * refuses stays counted in the person's hour. Counters so err only toward
   * refusing, never past a limit; undoing the count instead would be a second
   * write another starting run could see in between.
   */
  async admit(subjects: BudgetSubjects, opts: BudgetCheckOptions = {}): Promise<BudgetRefusal | undefined> {
    const w = budgetWindows(this.now());
    for (const t of this.targets(subjects)) {
      const refusal = await this.verdict(t, w, 'run', opts.quiet);
      if (refusal) return refusal;
    }
    return undefined;
  }

  /**
   * Before a picture is made: a refusal when a token budget is spent or the
   * day's pictures are used up; otherwise counts the picture. Subjects in
   * order as in `admit`. A refusal here never counts a notice: the run goes
   * on, and the person hears of a spent token budget from the next step.
   */
  async admitImage(subjects: BudgetSubjects): Promise<BudgetRefusal | undefined> {
    const w = budgetWindows(this.now());
    for (const t of this.targets(subjects)) {
      const refusal = await this.verdict(t, w, 'image');
      if (refusal) return refusal;
    }
    return undefined;
  }

  /**
   * Before a model step: a refusal when a token budget is spent. Every
   * subject at once (one round trip); the identity's refusal is the one
   * returned when both refuse, though each refusing subject counts its notice.
   */
  async check(subjects: BudgetSubjects, opts: BudgetCheckOptions = {}): Promise<BudgetRefusal | undefined> {
    const w = budgetWindows(this.now());
    const refusals = await Promise.all(this.targets(subjects).map((t) => this.verdict(t, w, undefined, opts.quiet)));
    return refusals.find((r) => r !== undefined);
  }

  /** Counts `tokens` (input + output of one step) for every subject that has a limit. */
  async charge(subjects: BudgetSubjects, tokens: number): Promise<void> {
    if (!(tokens > 0)) return;
    const w = budgetWindows(this.now());
    const n = Math.round(tokens);
    const targets = this.targets(subjects);
    await Promise.all(
      targets.map((t) =>
        this.add(t.key, w, [
          [`t:${w.day}`, n],
          [`t:${w.month}`, n],
        ]),
      ),
    );
    for (const t of targets) metrics.budgetTokens.inc({ scope: t.scope }, n);
  }

  /** The per-identity limits, or undefined when none is set (then identity usage is not counted). */
  get identityLimits(): BudgetLimits | undefined {
    return hasLimits(this.o.settings.identity) ? this.o.settings.identity : undefined;
  }

  /** The current UTC windows and when each ends. */
  windows(): BudgetWindows {
    return budgetWindows(this.now());
  }

  /** Usage of an identity in the current windows (zeros when nothing was counted). */
  usage(identity: string): Promise<BudgetUsage> {
    return this.read(identityUsageKey(this.o.prefix, identity), budgetWindows(this.now()));
  }

  /** Deletes an identity's counters (purge of a person). */
  async purge(identity: string): Promise<void> {
    await this.o.client.del(identityUsageKey(this.o.prefix, identity));
  }

  /**
   * Forgets that a conversation's refusals of the current windows were told
   * (after `/purge`, so the chat that starts over hears of a spent budget
   * again); its counters stay until their windows end. Nothing when no
   * conversation limit is set.
   */
  async forgetNotices(conversationId: string): Promise<void> {
    if (!hasLimits(this.o.settings.conversation)) return;
    const w = budgetWindows(this.now());
    await this.o.client.hdel(conversationUsageKey(this.o.prefix, conversationId), `n:${w.day}`, `n:${w.month}`, `n:${w.hour}`);
  }

  private targets(s: BudgetSubjects): Target[] {
    const out: Target[] = [];
    const { identity, conversation } = this.o.settings;
    if (hasLimits(identity) && s.identity !== undefined) out.push({ scope: 'identity', key: identityUsageKey(this.o.prefix, s.identity), limits: identity });
    if (hasLimits(conversation)) {
      assertConversationId(s.conversationId);
      out.push({ scope: 'conversation', key: conversationUsageKey(this.o.prefix, s.conversationId), limits: conversation });
    }
    return out;
  }

  /** One subject's verdict in one script: undefined when admitted (a starting run or a picture counted), else the refusal (a run's notice counted unless `quiet`). */
  private async verdict(t: Target, w: BudgetWindows, counting?: 'run' | 'image', quiet = false): Promise<BudgetRefusal | undefined> {
    const { tokensPerMonth, tokensPerDay, runsPerHour, imagesPerDay } = t.limits;
    const reply = await runScript(
      this.o.client,
      'usage-admit',
      [t.key],
      [this.ttl(w), w.day, w.month, w.hour, tokensPerMonth ?? '', tokensPerDay ?? '', runsPerHour ?? '', counting ?? '', imagesPerDay ?? '', quiet ? '1' : ''],
    );
    if (reply[0] === 'ok') return undefined;
    const limit = String(reply[1]) as BudgetLimit;
    metrics.budgetRefusals.inc({ scope: t.scope, limit });
    // One notice per subject and window: the first refusal of the window says so.
    return { scope: t.scope, limit, resetsAt: resetsAt(limit, w), firstNotice: Number(reply[2]) === 1 };
  }

  private async read(key: string, w: BudgetWindows): Promise<BudgetUsage> {
    const [day, month, hour] = await this.o.client.hmget(key, `t:${w.day}`, `t:${w.month}`, `r:${w.hour}`);
    return { tokensToday: Number(day ?? 0), tokensThisMonth: Number(month ?? 0), runsThisHour: Number(hour ?? 0) };
  }

  private async add(key: string, w: BudgetWindows, increments: Array<[string, number]>): Promise<number[]> {
    const reply = await runScript(this.o.client, 'usage-add', [key], [this.ttl(w), w.day, w.month, w.hour, ...increments.flat()]);
    return reply.slice(1).map(Number);
  }

  /** Seconds a usage hash lives after a write: every field is dead once the month is over; a day of slack for clock skew between processes. */
  private ttl(w: BudgetWindows): number {
    return Math.ceil((w.monthEnds - this.now()) / 1000) + 86_400;
  }
}

/** When `limit`'s window ends. */
function resetsAt(limit: BudgetLimit, w: BudgetWindows): number {
  if (limit === 'tokensPerMonth') return w.monthEnds;
  return limit === 'tokensPerDay' || limit === 'imagesPerDay' ? w.dayEnds : w.hourEnds;
}

const LIMIT_WORDS: Record<BudgetLimit, string> = {
  tokensPerDay: "today's usage allowance",
  tokensPerMonth: "this month's usage allowance",
  runsPerHour: 'the number of requests allowed per hour',
  imagesPerDay: "today's pictures",
};

/**
 * The message a person gets when a budget is spent: what is spent, when it
 * resets, and that their message is kept. `scheduled`: a schedule's fire (or
 * a heartbeat) started the run, charged to the person who set it up; the
 * notice says the task was not run.
 */
export function budgetNotice(r: Pick<BudgetRefusal, 'scope' | 'limit' | 'resetsAt'>, now: number, opts: { scheduled?: boolean } = {}): string {
  const at = new Date(r.resetsAt).toISOString().replace('T', ' ').slice(0, 16);
  const resets = `It resets at ${at} UTC (in ${duration(r.resetsAt - now)}).`;
  if (opts.scheduled) {
    const whose = r.scope === 'identity' ? 'the person who set it up has' : 'this chat has';
    return `The scheduled task was not run: ${whose} used up ${LIMIT_WORDS[r.limit]}. ${resets}`;
  }
  const whose = r.scope === 'identity' ? 'You have used up' : 'This chat has used up';
  return `${whose} ${LIMIT_WORDS[r.limit]}. ${resets} Your message is kept: send a message after that to get an answer, or see /status.`;
}

/** `3 h 20 min`, `12 min`, `2 d 4 h`. */
function duration(ms: number): string {
  const min = Math.max(1, Math.ceil(ms / 60_000));
  const d = Math.floor(min / 1440);
  const h = Math.floor((min % 1440) / 60);
  const m = min % 60;
  if (d > 0) return h > 0 ? `${d} d ${h} h` : `${d} d`;
  if (h > 0) return m > 0 ? `${h} h ${m} min` : `${h} h`;
  return `${m} min`;
}
