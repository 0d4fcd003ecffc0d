import { Gauge } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { InvalidInputError, registerCounter } from '../../src/channel.js';
import { metrics } from '../../src/telemetry/metrics.js';

describe('registerCounter', () => {
  it("adds a plugin's counter to the process's registry, served with steerbot's own", async () => {
    const name = `steerbot_plugin_test_${process.pid}_total`;
    registerCounter({ name, help: 'Things a test plugin did, by kind.', labelNames: ['kind'] }).inc({ kind: 'a' }, 2);
    const { body } = await metrics.scrape();
    expect(body).toContain(`${name}{kind="a"} 2`);
  });

  it('returns the counter already registered under a name (a second instance of the plugin)', () => {
    const o = { name: `steerbot_plugin_twice_${process.pid}_total`, help: 'Counted by two instances.' };
    expect(registerCounter(o)).toBe(registerCounter(o));
  });

  it('refuses a name outside the convention, and a name registered as another kind of metric', () => {
    expect(() => registerCounter({ name: 'my_plugin_things', help: 'no prefix' })).toThrow(InvalidInputError);
    expect(() => registerCounter({ name: 'steerbot_things', help: 'no _total' })).toThrow(/steerbot_<what>_total/);
    const gauge = `steerbot_gauge_${process.pid}_total`;
    new Gauge({ name: gauge, help: 'A gauge under a counter-like name.', registers: [metrics.registry] });
    expect(() => registerCounter({ name: gauge, help: 'a counter' })).toThrow(/another kind/);
  });
});
