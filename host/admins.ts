/**
 * Who may use the control commands that affect everyone in a group chat
 * (those marked `admin` in their table, host/commands/):
 * the channel's configured admins, else whoever the platform names an admin
 * of the chat (`ChannelOutbound.isAdmin`), asked at most once per
 * conversation and user per `ttlMs`.
 */
import type { ChannelOutbound } from '../src/channel.js';

/** The answer: `unknown` when the platform could not be asked (the error is in `error`). */
export type AdminVerdict = { kind: 'admin' } | { kind: 'not-admin' } | { kind: 'unknown'; error: unknown };

/** Options of `createAdminCheck`. */
export interface AdminCheckOptions {
  /** How long a platform answer is reused, in ms. Default 60 000. */
  ttlMs?: number;
  /** Most answers kept; the oldest go first. Default 10 000. */
  maxEntries?: number;
  /** Clock, ms. Default `Date.now`. */
  now?: () => number;
}

/** Decides whether a sender may run an admin command in a conversation. */
export interface AdminCheck {
  /** `configured`: the channel's `admins` ids. Never throws: a failed platform call is `unknown` (and not cached). */
  check(outbound: ChannelOutbound | undefined, configured: readonly string[] | undefined, conversationId: string, userId: string): Promise<AdminVerdict>;
}

/** Creates the check with its in-memory cache (per process: a few seconds of staleness across hosts is fine). */
export function createAdminCheck(opts: AdminCheckOptions = {}): AdminCheck {
  const ttlMs = opts.ttlMs ?? 60_000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const now = opts.now ?? Date.now;
  // Insertion order is age order: a refreshed entry is deleted and set again.
  const cache = new Map<string, { admin: boolean; until: number }>();

  return {
    async check(outbound, configured, conversationId, userId) {
      if (configured?.includes(userId)) return { kind: 'admin' };
      if (!outbound?.isAdmin) return { kind: 'not-admin' };
      const key = `${conversationId}\u0000${userId}`;
      const hit = cache.get(key);
      if (hit && hit.until > now()) return { kind: hit.admin ? 'admin' : 'not-admin' };
      let admin: boolean;
      try {
        admin = await outbound.isAdmin(conversationId, userId);
      } catch (error) {
        return { kind: 'unknown', error };
      }
      cache.delete(key);
      cache.set(key, { admin, until: now() + ttlMs });
      while (cache.size > maxEntries) cache.delete(cache.keys().next().value as string);
      return { kind: admin ? 'admin' : 'not-admin' };
    },
  };
}
