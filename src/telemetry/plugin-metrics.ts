/**
 * Metrics a plugin registers: on the process's one registry (served as
 * `GET /metrics` with steerbot's own), under steerbot's naming convention.
 */
import { Counter } from 'prom-client';
import { InvalidInputError } from '../errors.js';
import { metrics } from './metrics.js';

/** A counter a plugin counts something with. */
export interface PluginCounterOptions<L extends string> {
  /** `steerbot_<what>_total` (lowercase, digits and `_`): one prefix for every metric a process serves. */
  name: string;
  /** What it counts, for the exposition's `# HELP` line. */
  help: string;
  /** Label names; keep their values few (a server name, an outcome), never a user or conversation id. Default none. */
  labelNames?: readonly L[];
}

const COUNTER_NAME = /^steerbot_[a-z][a-z0-9_]*_total$/;

/**
 * Registers a counter on the process's metrics registry. Registering a name
 * again (a second instance of the plugin) returns the counter already there.
 * @throws InvalidInputError when the name breaks the convention, or when the name is registered as another kind of metric.
 */
export function registerCounter<L extends string = string>(o: PluginCounterOptions<L>): Counter<L> {
  if (!COUNTER_NAME.test(o.name)) throw new InvalidInputError(`metric name ${o.name}: expected steerbot_<what>_total (lowercase, digits, _)`);
  const existing = metrics.registry.getSingleMetric(o.name);
  if (existing) {
    if (!(existing instanceof Counter)) throw new InvalidInputError(`metric ${o.name} is registered already, as another kind`);
    return existing as Counter<L>;
  }
  return metrics.counter(o.name, o.help, o.labelNames ?? []);
}
