/**
 * Metrics a plugin registers, on the process's one registry (the one
 * `/metrics` serves), named `steerbot_<plugin>_<name>` (the plugin id with
 * `-` as `_`; `name` ends in its unit: `_total`, `_seconds`, `_bytes`).
 * Label values must come from a small, fixed set (a configured server name,
 * an outcome), never a user, conversation or message id: every distinct
 * value is a series kept for the life of the process.
 */
import { Counter, Gauge, Histogram, type Metric } from 'prom-client';
import { InvalidInputError } from '../errors.js';
import { metrics } from './metrics.js';

const NAME_RE = /^[a-z][a-z0-9_]{0,63}$/;
const UNIT_RE = /_(total|seconds|bytes|ratio|count|info)$/;

/** The metric factory of one plugin (`pluginMetrics`). Asking twice for one name returns the metric made first. */
export interface PluginMetrics {
  /** A counter `steerbot_<plugin>_<name>`; `name` ends in `_total`. */
  counter<L extends string = string>(name: string, help: string, labelNames?: readonly L[]): Counter<L>;
  /** A gauge `steerbot_<plugin>_<name>`. */
  gauge<L extends string = string>(name: string, help: string, labelNames?: readonly L[]): Gauge<L>;
  /** A histogram `steerbot_<plugin>_<name>`, with `buckets` in the unit of its name. */
  histogram<L extends string = string>(name: string, help: string, buckets: readonly number[], labelNames?: readonly L[]): Histogram<L>;
}

/**
 * The metrics of plugin `pluginId`. Throws InvalidInputError for a name that
 * is not `[a-z][a-z0-9_]*` ending in a unit (`_total` for a counter), or one
 * already taken by a metric of another kind.
 */
export function pluginMetrics(pluginId: string): PluginMetrics {
  const prefix = `steerbot_${pluginId.replace(/-/g, '_')}_`;
  const full = (name: string, counter: boolean) => {
    if (!NAME_RE.test(name) || !UNIT_RE.test(name) || (counter && !name.endsWith('_total'))) {
      throw new InvalidInputError(
        `metric name ${JSON.stringify(name)}: expected [a-z][a-z0-9_]* ending in its unit${counter ? ' (_total for a counter)' : ''}`,
      );
    }
    return `${prefix}${name}`;
  };
  const existing = <T>(name: string, kind: new (...a: never[]) => T): T | undefined => {
    const m: Metric | undefined = metrics.registry.getSingleMetric(name);
    if (m === undefined) return undefined;
    if (!(m instanceof kind)) throw new InvalidInputError(`metric ${name} is already registered as another kind`);
    return m as T;
  };
  const registers = [metrics.registry];
  return {
    counter<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []) {
      const n = full(name, true);
      return existing<Counter<L>>(n, Counter) ?? new Counter<L>({ name: n, help, labelNames, registers });
    },
    gauge<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []) {
      const n = full(name, false);
      return existing<Gauge<L>>(n, Gauge) ?? new Gauge<L>({ name: n, help, labelNames, registers });
    },
    histogram<L extends string = string>(name: string, help: string, buckets: readonly number[], labelNames: readonly L[] = []) {
      const n = full(name, false);
      return existing<Histogram<L>>(n, Histogram) ?? new Histogram<L>({ name: n, help, labelNames, buckets: [...buckets], registers });
    },
  };
}
