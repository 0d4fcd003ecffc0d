import { Gauge } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidInputError, pluginMetrics } from '../../src/plugin/kit.js';
import { metrics } from '../../src/telemetry/metrics.js';

describe('pluginMetrics', () => {
  // The registry is the process's: the unit lane shares it between files, and the docs test lists what it holds.
  afterAll(() => {
    for (const m of metrics.registry.getMetricsAsArray()) {
      const { name } = m as unknown as { name: string };
      if (name.includes(`_${process.pid}_`)) metrics.registry.removeSingleMetric(name);
    }
  });

  it("adds a plugin's counter to the process's registry as steerbot_<plugin>_<name>, served with steerbot's own", async () => {
    const plugin = `test-plugin-${process.pid}`;
    pluginMetrics(plugin).counter('things_total', 'Things a test plugin did, by kind.', ['kind']).inc({ kind: 'a' }, 2);
    const { body } = await metrics.scrape();
    expect(body).toContain(`steerbot_test_plugin_${process.pid}_things_total{kind="a"} 2`);
  });

  it('returns the metric already registered under a name (a second instance of the plugin)', () => {
    const plugin = `twice-${process.pid}`;
    expect(pluginMetrics(plugin).counter('calls_total', 'Counted by two instances.')).toBe(pluginMetrics(plugin).counter('calls_total', 'again'));
  });

  it('refuses a name without its unit, a counter not ending in _total, and a name registered as another kind of metric', () => {
    const m = pluginMetrics(`refuse-${process.pid}`);
    expect(() => m.counter('things', 'no unit')).toThrow(InvalidInputError);
    expect(() => m.counter('wait_seconds', 'a counter in seconds')).toThrow(/_total for a counter/);
    expect(() => m.gauge('Bad-Name_bytes', 'not lowercase')).toThrow(InvalidInputError);
    const taken = `steerbot_kind_${process.pid}_queue_bytes`;
    new Gauge({ name: taken, help: 'A gauge.', registers: [metrics.registry] });
    expect(() => pluginMetrics(`kind-${process.pid}`).histogram('queue_bytes', 'a histogram', [1, 2])).toThrow(/another kind/);
  });
});
