/**
 * Heartbeats from the configuration: "every N minutes while idle, run this
 * prompt; say nothing unless there is something to say". A heartbeat is a
 * schedule of origin `heartbeat` with an id derived from the conversation and
 * its settings, so ensuring it again (every runner start, every host) is a
 * no-op, and a changed setting makes a new one; the heartbeat of the old
 * setting, or of a removed one, is stale and is cancelled (when the new one is
 * made, else at its next fire).
 */
import { channelResolver } from '../channel.js';
import type { Logger } from '../logger.js';
import { type Schedules, scheduleIdFor } from './schedules.js';
import type { Schedule } from './spec.js';

/** One heartbeat setting (`schedules.heartbeats.<channel or conversation id>`). */
export interface HeartbeatSettings {
  /** Minutes between heartbeats. */
  everyMinutes: number;
  /** What the agent is asked. */
  prompt: string;
  /** The identity its runs are charged to (budgets, memory), e.g. `telegram:1001`. Absent: the operator (only the conversation's budget applies). */
  owner?: string | undefined;
}

// Conversations whose heartbeat this process already ensured; cleared when full, so it stays bounded.
const MAX_REMEMBERED = 10_000;

/** The schedule id of a conversation's heartbeat with these settings. */
export function heartbeatId(conversationId: string, hb: HeartbeatSettings): string {
  // A heartbeat without an owner keeps the id it had before owners existed.
  return scheduleIdFor(`heartbeat\n${conversationId}\n${hb.everyMinutes}\n${hb.prompt}${hb.owner === undefined ? '' : `\n${hb.owner}`}`);
}

/** Keeps the configured heartbeats in place. */
export class HeartbeatKeeper {
  private readonly channelOf: (conversationId: string) => string | undefined;
  private readonly ensured = new Set<string>();
  // When this process took its configuration. During a rolling deploy a heartbeat made later may come from a
  // newer configuration than this process's: only heartbeats made before it are judged stale, so the newest wins.
  private readonly since = Date.now();

  constructor(
    private readonly schedules: Schedules,
    private readonly settings: Readonly<Record<string, HeartbeatSettings>>,
    channelIds: Iterable<string>,
    private readonly logger?: Logger,
  ) {
    this.channelOf = channelResolver([...channelIds].filter((id) => id in settings));
  }

  /** The heartbeat that applies to a conversation: its own setting, else its channel's. */
  settingFor(conversationId: string): HeartbeatSettings | undefined {
    const own = this.settings[conversationId];
    if (own) return own;
    const channel = this.channelOf(conversationId);
    return channel === undefined ? undefined : this.settings[channel];
  }

  /** The id of the conversation's heartbeat under this configuration; undefined when it has none. */
  currentId(conversationId: string): string | undefined {
    const hb = this.settingFor(conversationId);
    return hb && heartbeatId(conversationId, hb);
  }

  /**
   * Whether a schedule is a heartbeat this configuration no longer has (its
   * setting changed or was removed), made before this process started.
   */
  isStale(s: Pick<Schedule, 'id' | 'conversationId' | 'origin' | 'createdAt'>): boolean {
    return s.origin === 'heartbeat' && s.createdAt <= this.since && s.id !== this.currentId(s.conversationId);
  }

  /** Ensures the heartbeats set per conversation (at start-up). Failures are logged, never thrown. */
  async ensureConfigured(channelIds: Iterable<string>): Promise<void> {
    const channels = new Set(channelIds);
    await Promise.all(
      Object.keys(this.settings)
        .filter((id) => !channels.has(id))
        .map((id) => this.ensure(id)),
    );
  }

  /** Ensures the heartbeat of a conversation that just got a message (a channel-wide heartbeat). Never throws. */
  async ensure(conversationId: string): Promise<void> {
    const hb = this.settingFor(conversationId);
    if (!hb || this.ensured.has(conversationId)) return;
    const id = heartbeatId(conversationId, hb);
    try {
      if (!(await this.schedules.get(conversationId, id))) {
        // Before creating: the old heartbeat is stale anyway, and its place may be the one under the cap the new one needs.
        await this.cancelStale(conversationId);
        await this.schedules.create(
          conversationId,
          { every: `${hb.everyMinutes}m`, prompt: hb.prompt },
          { createdBy: 'config', owner: hb.owner, origin: 'heartbeat', id },
        );
        this.logger?.info({ conversationId, scheduleId: id, everyMinutes: hb.everyMinutes }, 'heartbeat created');
      }
      if (this.ensured.size >= MAX_REMEMBERED) this.ensured.clear();
      this.ensured.add(conversationId);
    } catch (err) {
      this.logger?.warn({ err, conversationId }, 'heartbeat not created');
    }
  }

  /** Cancels the conversation's stale heartbeats (a setting changed since they were made). */
  private async cancelStale(conversationId: string): Promise<void> {
    const stale = (await this.schedules.list(conversationId, 0)).filter((s) => this.isStale(s));
    for (const s of stale) {
      if (await this.schedules.cancel(conversationId, s.id)) this.logger?.info({ conversationId, scheduleId: s.id }, 'stale heartbeat cancelled');
    }
  }
}
