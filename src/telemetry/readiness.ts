/**
 * Readiness: what `/readyz` asks before it answers 200. Each part of a
 * process that can be up but useless (Redis unreachable, the runner's
 * worker closed, the Discord gateway session gone, Telegram polling
 * failing) contributes a probe; `/healthz` stays a plain liveness check.
 */

/** One part's answer. */
export interface ReadyState {
  /** True when this part can do its work now. */
  ready: boolean;
  /** Short, secret-free reason (shown in the 503 body), e.g. `gateway reconnecting`. */
  detail?: string;
}

/** One part of the process that `/readyz` checks. */
export interface ReadinessProbe {
  /** Name in the 503 body, e.g. `redis`, `runner.worker`, `channel:discord`. */
  name: string;
  /** Must not throw; must answer quickly (it runs on every `/readyz`). */
  check(): ReadyState | Promise<ReadyState>;
}

/** What `/readyz` answers: `notReady` maps each failing part to its detail. */
export interface ReadinessReport {
  ok: boolean;
  /** One line naming every part that is not ready (absent when ready). */
  error?: string;
  notReady?: Record<string, string>;
}

/** Runs every probe (a throwing one counts as not ready) and reports the parts that are not ready. */
export async function readinessReport(probes: readonly ReadinessProbe[]): Promise<ReadinessReport> {
  const states = await Promise.all(
    probes.map(async (p): Promise<[string, ReadyState]> => {
      try {
        return [p.name, await p.check()];
      } catch (err) {
        return [p.name, { ready: false, detail: `check failed: ${(err as Error)?.name ?? 'error'}` }];
      }
    }),
  );
  const failing = states.filter(([, s]) => !s.ready);
  if (failing.length === 0) return { ok: true };
  const notReady = Object.fromEntries(failing.map(([name, s]) => [name, s.detail ?? 'not ready']));
  return { ok: false, error: failing.map(([name, s]) => `${name} ${s.detail ?? 'not ready'}`).join('; '), notReady };
}
