/**
 * The compaction circuit breaker as conversation state stores it (written by
 * the runner's compactor, shown by the host's `/status`): one schema for both.
 */
import { z } from 'zod';

const breakerSchema = z.object({
  schema_version: z.literal(1),
  /** Consecutive compactions that left the estimate over the threshold. */
  ineffective: z.number().int().nonnegative(),
  open: z.boolean(),
  /** ms since the epoch. */
  updated_at: z.number().int().nonnegative(),
});

/** The circuit breaker of one conversation. */
export interface BreakerState {
  open: boolean;
  /** Consecutive ineffective compactions so far. */
  ineffective: number;
}

/** A stored breaker value; an absent or unreadable one is a closed breaker. */
export function parseBreaker(value: unknown): BreakerState {
  const parsed = breakerSchema.safeParse(value);
  return parsed.success ? { open: parsed.data.open, ineffective: parsed.data.ineffective } : { open: false, ineffective: 0 };
}

/** The value to store for `b`, written at `at` (ms since the epoch). */
export function breakerValue(b: BreakerState, at: number): z.infer<typeof breakerSchema> {
  return { schema_version: 1, ineffective: b.ineffective, open: b.open, updated_at: at };
}
