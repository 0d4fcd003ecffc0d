/**
 * What stops a process's event loop, for the e2e bench: the loop's delay
 * histogram (`monitorEventLoopDelay`), every GC pause (`PerformanceObserver`
 * on `gc` entries, with its kind) and every stall (a 10 ms interval timer
 * that fired late), with wall-clock times so that slow messages can be
 * matched with what was going on in each process while they were in flight.
 */
import { constants, monitorEventLoopDelay, type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';

/**
 * A pause: start (ms since the epoch), duration (ms), what it was (`stall`, or the GC's kind) and, for a stall, the
 * process's CPU time (all threads) over it: close to the duration for work that blocked the loop, far below it
 * when the process was waiting for a core (the machine's load).
 */
export type Pause = [number, number, string, number?];

/** The pauses of one process over a window. */
export interface Pauses {
  /** Event-loop delay percentiles, ms. */
  loop: { p50: number; p99: number; max: number };
  /** GC pauses: how many, their total and the longest, ms. */
  gc: { count: number; totalMs: number; maxMs: number; byKind: Record<string, { count: number; totalMs: number; maxMs: number }> };
  /** Stalls of the event loop ≥ `STALL_MS` and GC pauses ≥ `LONG_GC_MS`, in time order. */
  long: Pause[];
}

const STALL_MS = 30;
const LONG_GC_MS = 10;
const TICK_MS = 10;

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'gc major',
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'gc minor',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'gc incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'gc weakcb',
};

const nowMs = () => performance.timeOrigin + performance.now();

/** Starts watching this process's pauses; `take()` returns those since the last take and starts a new window. */
export function watchPauses(): { take(): Pauses } {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  let long: Pause[] = [];
  let gcs: Array<[number, string]> = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[(e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1] ?? 'gc';
      gcs.push([e.duration, kind]);
      if (e.duration >= LONG_GC_MS) long.push([performance.timeOrigin + e.startTime, e.duration, kind]);
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  let last = nowMs();
  let lastCpu = process.cpuUsage();
  setInterval(() => {
    const t = nowMs();
    const cpu = process.cpuUsage(); // one call a tick: the watch should not cost what it measures
    if (t - last - TICK_MS >= STALL_MS) {
      long.push([last + TICK_MS, t - last - TICK_MS, 'stall', (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000]);
    }
    last = t;
    lastCpu = cpu;
  }, TICK_MS).unref();
  return {
    take() {
      const byKind: Pauses['gc']['byKind'] = {};
      for (const [ms, kind] of gcs) {
        const k = (byKind[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
        k.count++;
        k.totalMs += ms;
        k.maxMs = Math.max(k.maxMs, ms);
      }
      const out: Pauses = {
        loop: { p50: loop.percentile(50) / 1e6, p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
        gc: {
          count: gcs.length,
          totalMs: gcs.reduce((s, [ms]) => s + ms, 0),
          maxMs: gcs.reduce((m, [ms]) => Math.max(m, ms), 0),
          byKind,
        },
        long: long.sort((a, b) => a[0] - b[0]),
      };
      loop.reset();
      long = [];
      gcs = [];
      return out;
    },
  };
}

/** One line per process: the loop's delay, GC, and the long pauses. */
export function describePauses(name: string, p: Pauses, from: number): string[] {
  const f = (n: number) => n.toFixed(1);
  const kinds = Object.entries(p.gc.byKind)
    .map(([k, v]) => `${k} ${v.count}× max ${f(v.maxMs)} ms`)
    .join(', ');
  const stalls = p.long.filter(([at, , k]) => k === 'stall' && at >= from);
  const stallMs = stalls.reduce((s, [, ms]) => s + ms, 0);
  const stallCpu = stalls.reduce((s, [, , , cpu]) => s + (cpu ?? 0), 0);
  return [
    `   ${name}: event-loop delay p50 ${f(p.loop.p50)} p99 ${f(p.loop.p99)} max ${f(p.loop.max)} ms; GC ${p.gc.count} pauses, ${f(p.gc.totalMs)} ms in all (${kinds})`,
    `   ${name}: stalls ≥ ${STALL_MS} ms while measuring: ${stalls.length}, ${f(stallMs)} ms, process CPU over them ${f(stallCpu)} ms (${stallMs ? ((stallCpu / stallMs) * 100).toFixed(0) : 0} %: the rest is waiting for a core)`,
    `   ${name}: longest pauses (s since measuring started: ms kind [cpu ms]): ${
      p.long
        .filter(([at]) => at >= from)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 12)
        .map(([at, ms, k, cpu]) => `${((at - from) / 1000).toFixed(2)}: ${f(ms)} ${k}${cpu === undefined ? '' : ` [${f(cpu)}]`}`)
        .join(', ') || 'none'
    }`,
  ];
}

/**
 * How many of the slow messages (sent → received longer than `slowMs`) were in flight during a long pause of any
 * process: a message slowed by a stall or a GC, against one slowed by a wait of its own.
 */
export function slowDuringPauses(samples: Array<[number, number]>, pauses: Pause[], slowMs: number): { slow: number; duringPause: number } {
  const slow = samples.filter(([a, b]) => b - a > slowMs);
  const during = slow.filter(([a, b]) => pauses.some(([at, ms]) => at < b && at + ms > a && ms >= STALL_MS));
  return { slow: slow.length, duringPause: during.length };
}
